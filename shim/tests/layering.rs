//! The shim reads top to bottom, in stages: the exported hooks, the
//! intercept layer, the guard and the process's lifecycle, then the
//! recorder (its front, its API, features, identities, tables, the trace
//! file, time, its base helpers), the policy parser, and the crate's
//! bottom helpers. This test keeps it so: it reads the shim's sources,
//! finds which module uses which, and fails on any circle, naming the
//! modules in it, and on any use of a stage by one below it, naming both
//! modules (see [`STAGES`]).
//!
//! What counts as a use: `tests/src/module_graph.rs`, shared with the
//! analyzer's layering test.

#[path = "../../tests/src/module_graph.rs"]
mod module_graph;
use module_graph::{circles, modules, uses, without_noise};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The stages, top first: a module may use its own stage and those after
/// it, never one before. A module belongs to the stage with the longest
/// prefix of its path (`recorder::tables` holds `recorder::tables::lanes`;
/// `recorder` alone is only the recorder's front, `recorder/mod.rs`).
const STAGES: &[(&str, &[&str])] = &[
    ("the crate root", &["crate"]),
    ("the exported hooks", &["hooks"]),
    ("the intercept layer", &["intercept", "spawn"]),
    ("the guard", &["guard"]),
    ("the lifecycle", &["lifecycle"]),
    ("the bus-error handler", &["sigbus"]),
    ("the real functions", &["real"]),
    ("the recorder's front", &["recorder"]),
    ("the recorder's API", &["recorder::api"]),
    ("the recorder's features", &["recorder::features"]),
    ("identities", &["recorder::identities"]),
    ("tables", &["recorder::tables"]),
    ("the trace file", &["recorder::trace"]),
    ("time", &["recorder::time"]),
    ("the policy", &["policy"]),
    ("the recorder's base helpers", &["recorder::base"]),
    (
        "bottom helpers",
        &["callback", "config", "diag", "glibc", "text", "sys"],
    ),
];

/// The stage of `module`: the index in [`STAGES`] of its longest prefix.
fn stage_of(module: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (index, (_, prefixes)) in STAGES.iter().enumerate() {
        for prefix in *prefixes {
            let inside = module == *prefix
                || *prefix != "recorder"
                    && module.starts_with(prefix)
                    && module[prefix.len()..].starts_with("::");
            if inside && best.is_none_or(|(len, _)| prefix.len() > len) {
                best = Some((prefix.len(), index));
            }
        }
    }
    best.map(|(_, index)| index)
}

/// Every use of a stage by a module of a stage below it, as
/// `lower uses higher`; and every module no stage holds.
fn upward_uses(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for (from, to) in graph {
        let Some(low) = stage_of(from) else {
            found.push(format!("{from} is in no stage (add it to STAGES)"));
            continue;
        };
        for target in to {
            match stage_of(target) {
                Some(high) if high < low => found.push(format!(
                    "{from} uses {target} ({} is above {})",
                    STAGES[high].0, STAGES[low].0
                )),
                _ => {}
            }
        }
    }
    found
}

#[test]
fn the_shim_has_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = uses(&modules(&src));
    assert!(graph.len() > 30, "found only {} modules", graph.len());
    // The checker itself sees what it must: known uses are found.
    assert!(graph["recorder::tables::lanes"].contains("recorder::trace::file"));
    assert!(graph["recorder"].contains("recorder::tables::lanes"));
    assert!(graph["guard"].contains("lifecycle"));
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "modules that import each other in a circle: {}",
        found
            .iter()
            .map(|c| c.join(" ↔ "))
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[test]
fn no_stage_uses_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = uses(&modules(&src));
    assert!(graph.len() > 30, "found only {} modules", graph.len());
    // The stages are read as meant.
    assert_eq!(stage_of("recorder"), Some(7));
    assert_eq!(stage_of("recorder::tables::lanes"), Some(11));
    assert_eq!(stage_of("recorder::time::call_timer::rseq"), Some(13));
    assert_eq!(stage_of("sys::confined"), Some(16));
    let found = upward_uses(&graph);
    assert!(
        found.is_empty(),
        "uses of a higher stage by a lower one:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn an_upward_use_is_found() {
    let mut graph = BTreeMap::new();
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    graph.insert(
        "recorder::api::locks".to_string(),
        names(&["recorder::tables::held"]),
    );
    graph.insert(
        "recorder::tables::held".to_string(),
        names(&["recorder::features::snapshot", "recorder::base::mapped"]),
    );
    graph.insert("recorder::elsewhere".to_string(), names(&[]));
    assert_eq!(
        upward_uses(&graph),
        vec![
            "recorder::elsewhere is in no stage (add it to STAGES)".to_string(),
            "recorder::tables::held uses recorder::features::snapshot \
             (the recorder's features is above tables)"
                .to_string(),
        ]
    );
}

#[test]
fn a_circle_is_found() {
    let mut modules = BTreeMap::new();
    modules.insert("a".to_string(), "use crate::b::X;\n".to_string());
    modules.insert("b".to_string(), "fn f() { super::c::g() }\n".to_string());
    modules.insert("c".to_string(), "use crate::{a, d::Y};\n".to_string());
    modules.insert(
        "d".to_string(),
        "// crate::a is only a comment here\n".to_string(),
    );
    let modules: BTreeMap<String, String> = modules
        .into_iter()
        .map(|(k, v)| (k, without_noise(&v)))
        .collect();
    let found = circles(&uses(&modules));
    assert_eq!(
        found,
        vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]
    );
}
