//! Findings as SARIF 2.1.0, so code-scanning UIs show them inline in a pull
//! request: one rule per finding kind, one result per finding with its
//! line (a path under the current directory is given relative to
//! `%SRCROOT%`, the directory locksuit ran in) and the call chain of that
//! line as a code flow. Each rule has help (text and markdown) and a
//! `helpUri` into the docs' list of finding kinds, as GitHub code scanning
//! requires; a finding in code without line information (a stripped
//! binary) is placed on its module's file with the address in it. The
//! fingerprint names what was found and where, never a pid, a run-time
//! address or a time, so one issue keeps one alert across runs.

use crate::model::{Finding, Frame, Process, Report, Site};
use serde_json::{json, Value};
use std::path::Path;

/// (kind, name, what it means, level)
const RULES: [(&str, &str, &str, &str); 17] = [
    ("deadlock", "ThreadsDeadlocked", "Threads that can never run again: a wait-for cycle, a thread relocking a mutex it holds, a lock whose holder exited, or nobody left to wake anyone.", "error"),
    ("potential-deadlock", "PotentialDeadlock", "Concrete locks taken in orders that form a cycle: they deadlock if the threads run at the same time.", "error"),
    ("misuse", "LockMisuse", "A lock used against its rules: unlocked while not held or by another thread, destroyed while held or waited on, a condition waited on with two mutexes or with one not held.", "error"),
    ("family-order-inversion", "FamilyOrderInversion", "Locks made at one line taken two at a time in both address orders at the same lines, with no cycle seen: a deadlock if a call ever takes one pair both ways.", "note"),
    ("unnecessary-lock", "UnnecessaryLock", "A lock one thread alone took in every recorded run of the program, or whose guarded data never left its thread: it protects nothing shared there.", "warning"),
    ("single-thread-lock", "SingleThreadLock", "A lock one thread alone took in this run: an observation, not a verdict; other runs may share it.", "note"),
    ("unsuitable-site", "UnsuitableSite", "A line whose locks are rarely shared between threads.", "note"),
    ("private-data-under-lock", "PrivateDataUnderLock", "A line whose critical sections touch only data no other thread touches, under a lock another line needs for shared data: split the lock.", "warning"),
    ("disjoint-data", "DisjointData", "Threads wait for a lock though their critical sections touch nothing in common: each guards its own data.", "warning"),
    ("read-only-sharing", "ReadOnlySharing", "The data under a lock is only read under it: a read-write lock, or no lock, would do.", "note"),
    ("false-sharing", "FalseSharing", "Data of different threads in one cache line: each write takes the line from the other threads' cores.", "note"),
    ("long-hold", "LongHold", "A lock held for a long stretch while another thread waited for it.", "warning"),
    ("starvation", "WaiterStarved", "One wait during which other threads took the lock many times: an unfair lock.", "warning"),
    ("high-contention", "HighContention", "A lock whose acquisitions often had to wait.", "warning"),
    ("asymmetric-contention", "AsymmetricContention", "Locks taken at one line whose contention differs widely.", "note"),
    ("over-synchronization", "OverSynchronization", "A lock taken very often that almost never contends.", "note"),
    ("blocking-under-lock", "BlockingUnderLock", "A thread slept, polled or did I/O holding a lock another thread wanted.", "warning"),
];

/// Where the finding kinds are documented: `docs/report-schema.md`, at the
/// URL the docs are published under (`LOCKSUIT_DOCS_URL` when the analyzer
/// is built), else in the source tree it was built from. SARIF wants an
/// absolute URI here.
fn docs_uri() -> String {
    match option_env!("LOCKSUIT_DOCS_URL") {
        Some(base) => format!("{}/docs/report-schema.md#kinds", base.trim_end_matches('/')),
        None => {
            let analyzer = Path::new(env!("CARGO_MANIFEST_DIR"));
            let tree = analyzer.parent().unwrap_or(analyzer);
            format!("file://{}/docs/report-schema.md#kinds", tree.display())
        }
    }
}

fn rule(kind: &str, name: &str, text: &str, level: &str, help_uri: &str) -> Value {
    let markdown = format!(
        "**{name}** (`{kind}`): {text}\n\nThe finding's message names the lock, the \
         threads and the lines; [the finding kinds]({help_uri}) say what each rests on."
    );
    json!({
        "id": kind,
        "name": name,
        "shortDescription": {"text": text},
        "fullDescription": {"text": text},
        "help": {"text": text, "markdown": markdown},
        "helpUri": help_uri,
        "defaultConfiguration": {"level": level},
    })
}

fn physical(
    path: Option<&str>,
    file: Option<&str>,
    line: Option<u32>,
    root: &Path,
) -> Option<Value> {
    let path = path.or(file)?;
    let artifact = match Path::new(path).strip_prefix(root) {
        Ok(relative) => json!({"uri": relative.to_string_lossy(), "uriBaseId": "%SRCROOT%"}),
        Err(_) if path.starts_with('/') => json!({"uri": format!("file://{path}")}),
        Err(_) => json!({"uri": path}),
    };
    let mut location = json!({"artifactLocation": artifact});
    if let Some(line) = line.filter(|&l| l > 0) {
        location["region"] = json!({"startLine": line});
    }
    Some(location)
}

fn frame_location(f: &Frame, root: &Path) -> Option<Value> {
    let physical = physical(f.path.as_deref(), f.file.as_deref(), f.line, root)?;
    let mut location = json!({"physicalLocation": physical});
    if let Some(function) = &f.function {
        location["message"] = json!({"text": function});
    }
    Some(json!({"location": location}))
}

/// The module and the address in it (the offset from its load address,
/// the same in every run whatever ASLR did) of the innermost frame that
/// has them: where code without line information is.
fn module_offset(chain: &[Frame]) -> Option<(&str, u64, &str)> {
    chain.iter().find_map(|f| {
        let module = f.module.as_deref()?;
        let named = f.offset.as_deref()?;
        let hex = named.rsplit_once("+0x")?.1;
        Some((module, u64::from_str_radix(hex, 16).ok()?, named))
    })
}

/// A finding's place in code without lines: the module's file, the
/// address in it, and the same as a logical location (`module+0xoffset`).
fn module_location(chain: &[Frame], root: &Path) -> Option<Value> {
    let (module, offset, named) = module_offset(chain)?;
    let mut physical = physical(Some(module), None, None, root)?;
    physical["address"] = json!({"relativeAddress": offset, "kind": "instruction",
        "fullyQualifiedName": named});
    Some(json!({
        "physicalLocation": physical,
        "logicalLocations": [{"fullyQualifiedName": named, "kind": "function"}],
    }))
}

fn site_of<'a>(p: &'a Process, f: &Finding) -> Option<&'a Site> {
    let id = *f.sites.first()?;
    p.sites.iter().find(|s| s.id == id)
}

/// What was found and where, in names that are the same in every run of
/// the program: the kind, the lock's or line's stable name and those of
/// every line it names (see `names.rs`; two findings of one kind on one
/// lock differ by them), and the line, or the module and offset of code
/// without lines.
fn fingerprint(p: &Process, f: &Finding, subject: &str) -> String {
    let mut sites: Vec<String> = f.sites.iter().map(ToString::to_string).collect();
    sites.extend(f.blocking_call.clone());
    let place = site_of(p, f).map(|site| match (&site.file, site.line) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        _ => module_offset(&site.call_chain)
            .map(|(_, _, named)| named.to_string())
            .unwrap_or_default(),
    });
    let place = place.unwrap_or_default();
    format!("{} {subject} {} {place}", f.kind, sites.join(","))
}

fn result(p: &Process, f: &Finding, rule_index: usize, root: &Path) -> Value {
    let subject = f
        .lock
        .map(|l| l.to_string())
        .or_else(|| f.sites.first().map(|s| s.to_string()))
        .unwrap_or_default();
    let mut r = json!({
        "ruleId": f.kind,
        "ruleIndex": rule_index,
        "level": RULES[rule_index].3,
        "message": {"text": f.message},
        "partialFingerprints": {"locksuitFinding/v1": fingerprint(p, f, &subject)},
        "properties": {"pid": p.pid, "exe": p.exe, "wait_ns": f.wait_ns, "engagements": f.engagements},
    });
    if let Some(site) = site_of(p, f) {
        let here = match (&site.file, site.line) {
            (Some(_), Some(_)) => {
                physical(site.path.as_deref(), site.file.as_deref(), site.line, root)
                    .map(|here| json!({"physicalLocation": here}))
            }
            _ => module_location(&site.call_chain, root),
        };
        if let Some(here) = here {
            r["locations"] = json!([here]);
        }
        // The call chain in execution order: the outermost frame first.
        let flow: Vec<Value> = site
            .call_chain
            .iter()
            .rev()
            .filter_map(|fr| frame_location(fr, root))
            .collect();
        if !flow.is_empty() {
            r["codeFlows"] = json!([{"threadFlows": [{"locations": flow}]}]);
        }
    }
    r
}

pub fn render(report: &Report) -> Value {
    let root = std::env::current_dir().unwrap_or_default();
    let help_uri = docs_uri();
    let rules: Vec<Value> = RULES
        .iter()
        .map(|(kind, name, text, level)| rule(kind, name, text, level, &help_uri))
        .collect();
    let mut results = Vec::new();
    for p in &report.processes {
        crate::model::names::with(&p.names, || {
            for f in &p.findings {
                if let Some(i) = RULES.iter().position(|r| r.0 == f.kind) {
                    results.push(result(p, f, i, &root));
                }
            }
        });
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "locksuit",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": format!("file://{}/", root.display())}},
            "results": results,
        }],
    })
}
