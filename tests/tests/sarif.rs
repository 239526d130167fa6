//! Findings as SARIF 2.1.0, validated against the SARIF 2.1.0 JSON schema
//! (vendored in tests/schemas, with its licence) with the jsonschema
//! crate, and checked by Microsoft's SARIF multitool (its `validate`
//! command: the schema, the specification's rules and GitHub code
//! scanning's ingestion rules, `--rule-kind "Sarif;Gh"`), which `.ci/run`
//! fetches from the npm registry into target/tools. Ground truth
//! from tests/c/knob.c at 30 contended acquisitions: a high-contention
//! finding on `knob_lock` at contend(); built stripped, the same finding
//! in code without lines.

use locksuit_tests::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn multitool() -> Option<PathBuf> {
    std::env::var_os("LOCKSUIT_SARIF_MULTITOOL")
        .map(PathBuf::from)
        .or_else(|| {
            Some(workspace_root().join("target/tools/sarif-multitool/package/Sarif.Multitool"))
        })
        .filter(|p| p.exists())
}

#[test]
fn findings_are_valid_sarif_with_lines_and_code_flows() {
    let bin = build_c("knob");
    let dir = fresh_dir("sarif");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("KNOB_CONTENDED", "30")]);
    assert_success(&out, "knob");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let finding = arr(p, "findings")
        .iter()
        .find(|f| f["kind"] == "high-contention")
        .unwrap_or_else(|| panic!("{}", p["findings"]));
    let site = finding["sites"][0].as_str().unwrap();
    let line: u64 = site.rsplit(':').next().unwrap().parse().unwrap();
    let sarif_file = dir.join("findings.sarif");
    let out = run_locksuit(&[
        "report",
        "--format",
        "sarif",
        "-o",
        sarif_file.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif_file).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    let results = arr(run, "results");
    assert_eq!(results.len(), arr(p, "findings").len());
    let r = results
        .iter()
        .find(|r| r["ruleId"] == "high-contention")
        .unwrap();
    let rules = arr(&run["tool"]["driver"], "rules");
    assert_eq!(
        rules[u64_of(r, "ruleIndex") as usize]["id"],
        "high-contention"
    );
    let region = &r["locations"][0]["physicalLocation"];
    assert!(
        str_of(&region["artifactLocation"], "uri").ends_with("knob.c"),
        "{r}"
    );
    assert_eq!(u64_of(&region["region"], "startLine"), line);
    let flow: Vec<&str> = arr(&r["codeFlows"][0]["threadFlows"][0], "locations")
        .iter()
        .filter_map(|l| l["location"]["message"]["text"].as_str())
        .collect();
    assert_eq!(flow.last(), Some(&"contend"), "{flow:?}");
    assert!(flow.contains(&"main"), "{flow:?}");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("tests/schemas/sarif-2.1.0-rtm.5.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft4::new(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // And the schema does catch what is wrong.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = "severe".into();
    assert!(!validator.is_valid(&broken));
    for rule in rules {
        assert!(!str_of(&rule["help"], "text").is_empty(), "{rule}");
        assert!(!str_of(&rule["help"], "markdown").is_empty(), "{rule}");
        let uri = str_of(rule, "helpUri");
        assert!(
            uri.contains("://") && uri.ends_with("report-schema.md#kinds"),
            "{uri}"
        );
    }
    validate_with_multitool(&sarif_file, &dir);
    // GitHub's rules do run: a rule without help is an error.
    let mut helpless = sarif.clone();
    helpless["runs"][0]["tool"]["driver"]["rules"][0]
        .as_object_mut()
        .unwrap()
        .remove("help");
    let helpless_file = dir.join("helpless.sarif");
    std::fs::write(&helpless_file, helpless.to_string()).unwrap();
    let errors = multitool_errors(&helpless_file, &dir);
    assert!(
        errors
            .as_ref()
            .is_none_or(|e| e.iter().any(|e| e.contains("GH2012"))),
        "{errors:#?}"
    );
}

/// Microsoft's SARIF multitool with GitHub's ingestion rules as well as
/// SARIF's: no errors (warnings are advice).
fn validate_with_multitool(sarif_file: &Path, dir: &Path) {
    if let Some(errors) = multitool_errors(sarif_file, dir) {
        assert!(errors.is_empty(), "{errors:#?}");
    }
}

/// The errors the multitool finds in `sarif_file`, or None (saying so)
/// when it is not installed.
fn multitool_errors(sarif_file: &Path, dir: &Path) -> Option<Vec<String>> {
    let Some(tool) = multitool() else {
        eprintln!("the SARIF multitool is not installed: validation skipped (.ci/run fetches it)");
        return None;
    };
    let stem = sarif_file.file_stem().unwrap().to_string_lossy();
    let checked = dir.join(format!("validation-of-{stem}.sarif"));
    let out = Command::new(&tool)
        .arg("validate")
        .arg(sarif_file)
        .arg("-o")
        .arg(&checked)
        // Last: a list option takes the words that follow it.
        .args(["--rule-kind", "Sarif;Gh"])
        .output()
        .unwrap();
    let text = stdout_str(&out);
    assert!(text.contains("Analysis completed successfully"), "{text}");
    let errors: Vec<String> = text
        .lines()
        .filter(|l| l.contains("): error "))
        .map(str::to_string)
        .collect();
    assert!(out.status.success(), "{}", describe(&out));
    Some(errors)
}

/// The SARIF of one run of `program` into a fresh directory.
fn sarif_of(program: &Path, tag: &str) -> (PathBuf, Value) {
    let dir = fresh_dir(tag);
    let out = run_under_shim_env(program, &[] as &[&str], &dir, &[("KNOB_CONTENDED", "30")]);
    assert_success(&out, "knob");
    let file = dir.join("findings.sarif");
    let out = run_locksuit(&[
        "report",
        "--format",
        "sarif",
        "-o",
        file.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let sarif = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    (file, sarif)
}

/// Each result's rule and fingerprint, checked distinct: two results with
/// one fingerprint would be one alert.
fn fingerprints(sarif: &Value) -> BTreeSet<(String, String)> {
    let results = arr(&sarif["runs"][0], "results");
    let all: BTreeSet<(String, String)> = results
        .iter()
        .map(|r| {
            let print = str_of(&r["partialFingerprints"], "locksuitFinding/v1");
            (str_of(r, "ruleId").to_string(), print.to_string())
        })
        .collect();
    assert_eq!(all.len(), results.len(), "{all:#?}");
    all
}

/// The findings knob.c always gives (others, such as its pipe writes
/// blocking under the lock, come and go with the machine's load) have the
/// same fingerprints in both runs.
fn assert_same_fingerprints(one: &Value, two: &Value) {
    let (one, two) = (fingerprints(one), fingerprints(two));
    for kind in ["high-contention", "long-hold"] {
        let of = |all: &BTreeSet<(String, String)>| -> Vec<String> {
            all.iter()
                .filter(|f| f.0 == kind)
                .map(|f| f.1.clone())
                .collect()
        };
        assert!(!of(&one).is_empty(), "no {kind}: {one:#?}");
        assert_eq!(of(&one), of(&two), "{kind}");
    }
    // No run-time address: every hex number is an offset in a module.
    for print in one.iter().chain(&two) {
        for (at, _) in print.1.match_indices("0x") {
            assert!(print.1[..at].ends_with('+'), "{print:?}");
        }
    }
}

/// In a stripped program a finding has no line: it is placed on the
/// program's file at the address in it, GitHub's rules accept it, and two
/// runs (other pids, other load addresses) give it the same fingerprint.
#[test]
fn findings_in_stripped_code_have_a_module_location_and_stable_fingerprints() {
    let dir = fresh_dir("sarif-stripped");
    let (bin, _, _) = build_c_stripped("knob", &dir);
    let (file, sarif) = sarif_of(&bin, "sarif-stripped-1");
    let results = arr(&sarif["runs"][0], "results");
    let r = results
        .iter()
        .find(|r| r["ruleId"] == "high-contention")
        .unwrap_or_else(|| panic!("{sarif}"));
    let physical = &r["locations"][0]["physicalLocation"];
    let uri = str_of(&physical["artifactLocation"], "uri");
    assert!(uri.ends_with("/knob"), "{r}");
    assert!(
        physical["region"]["startLine"].is_null(),
        "no line to give: {r}"
    );
    let offset = u64_of(&physical["address"], "relativeAddress");
    let named = str_of(
        &r["locations"][0]["logicalLocations"][0],
        "fullyQualifiedName",
    );
    assert_eq!(named, format!("knob+{offset:#x}"), "{r}");
    validate_with_multitool(&file, &dir);
    let (_, again) = sarif_of(&bin, "sarif-stripped-2");
    assert_same_fingerprints(&sarif, &again);
    // With lines, too: the same across runs.
    let built = build_c("knob");
    let (_, one) = sarif_of(&built, "sarif-lines-1");
    let (_, two) = sarif_of(&built, "sarif-lines-2");
    assert_same_fingerprints(&one, &two);
}
