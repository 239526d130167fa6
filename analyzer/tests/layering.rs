//! The analyzer reads top to bottom, one folder per stage (see `lib.rs`):
//! cli → commands → analysis | render → input → model → base → the format
//! crate. This test keeps it so: it reads the analyzer's sources, finds which
//! module uses which, and fails on any circle between modules and on any
//! use of a stage a module's stage may not use, naming the modules.
//!
//! What counts as a use: `tests/src/module_graph.rs`, shared with the
//! shim's layering test.

#[path = "../../tests/src/module_graph.rs"]
mod module_graph;
use module_graph::{circles, modules, uses, without_noise};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The stages from the top down, each with the stages below it that it
/// may use. `analysis` and `render` are siblings that must not see each
/// other: renderers read the model only.
const STAGES: &[(&str, &[&str])] = &[
    ("cli", &["commands", "base"]),
    (
        "commands",
        &["analysis", "render", "input", "model", "base"],
    ),
    ("analysis", &["input", "model", "base"]),
    ("render", &["model", "base"]),
    ("input", &["model", "base"]),
    ("model", &["base"]),
    ("base", &[]),
];

/// The stage of a module: the folder it is in.
fn stage(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// Every use that crosses stages the wrong way: `from uses to (why)`.
fn upward_uses(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let rank = |s: &str| STAGES.iter().position(|(name, _)| *name == s);
    let mut found = Vec::new();
    for (from, to) in graph {
        let Some(own) = rank(stage(from)) else {
            found.push(format!("{from} is in no stage (add its folder to STAGES)"));
            continue;
        };
        for target in to {
            let (here, there) = (stage(from), stage(target));
            if here == there {
                continue;
            }
            let (_, may_use) = STAGES[own];
            if may_use.contains(&there) {
                continue;
            }
            let why = match rank(there) {
                Some(r) if STAGES[r].1.contains(&here) => format!("{there} is above {here}"),
                Some(_) => format!("{here} may use only {}", may_use.join(", ")),
                None => format!("{there} is in no stage"),
            };
            found.push(format!("{from} uses {target} ({why})"));
        }
    }
    found
}

#[test]
fn the_stages_only_look_down() {
    for (i, (name, may_use)) in STAGES.iter().enumerate() {
        for used in *may_use {
            let below = STAGES[i + 1..].iter().any(|(n, _)| n == used);
            assert!(below, "{name} may use {used}, which is not below it");
        }
    }
}

#[test]
fn the_analyzer_has_no_import_circle_and_no_upward_use() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = uses(&modules(&src));
    // lib.rs only declares the stages.
    graph.remove("crate");
    assert!(graph.len() > 60, "found only {} modules", graph.len());
    // The checker itself sees what it must: known uses are found.
    assert!(graph["commands::run"].contains("commands::options"));
    assert!(graph["cli"].contains("commands::gate"));
    assert!(graph["analysis::deadlocks"].contains("analysis::lock_order"));
    let circles: Vec<String> = circles(&graph).iter().map(|c| c.join(" ↔ ")).collect();
    let upward = upward_uses(&graph);
    let mut problems = String::new();
    if !circles.is_empty() {
        problems += "modules that import each other in a circle:\n  ";
        problems += &circles.join("\n  ");
        problems += "\n";
    }
    if !upward.is_empty() {
        problems += "uses against the stages' order (see lib.rs):\n  ";
        problems += &upward.join("\n  ");
        problems += "\n";
    }
    assert!(problems.is_empty(), "{problems}");
}

fn graph_of(sources: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeMap<String, String> = sources
        .iter()
        .map(|(k, v)| (k.to_string(), without_noise(v)))
        .collect();
    uses(&modules)
}

#[test]
fn a_circle_is_found() {
    let graph = graph_of(&[
        ("input::a", "use crate::input::b::X;\n"),
        ("input::b", "fn f() { super::c::g() }\n"),
        ("input::c", "use crate::{input::a, model::Y};\n"),
        ("model", "// crate::input::a is only a comment here\n"),
    ]);
    assert_eq!(
        circles(&graph),
        vec![vec![
            "input::a".to_string(),
            "input::b".to_string(),
            "input::c".to_string()
        ]]
    );
}

#[test]
fn an_upward_or_sideways_use_is_found() {
    let graph = graph_of(&[
        ("analysis::x", "use crate::commands::y;\n"),
        ("commands::y", "use crate::analysis::x;\n"),
        ("render::z", "fn f() { crate::analysis::x::g() }\n"),
        (
            "input::w",
            "use crate::model::V;\n#[cfg(test)]\nmod tests {\n    use crate::cli::T;\n}\n",
        ),
        ("model", ""),
    ]);
    assert_eq!(
        upward_uses(&graph),
        vec![
            "analysis::x uses commands::y (commands is above analysis)".to_string(),
            "render::z uses analysis::x (render may use only model, base)".to_string(),
        ]
    );
}
