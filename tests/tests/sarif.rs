//! Findings as SARIF 2.1.0, validated against the SARIF 2.1.0 JSON schema
//! (vendored in tests/schemas, with its licence) with the jsonschema
//! crate, and checked by Microsoft's SARIF multitool (its `validate`
//! command: the schema and the specification's rules), which `.ci/run`
//! fetches from the npm registry into target/tools. Ground truth
//! from tests/c/knob.c at 30 contended acquisitions: a high-contention
//! finding on `knob_lock` at contend().

use locksuit_tests::*;
use serde_json::Value;
use std::path::PathBuf;
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
    let Some(tool) = multitool() else {
        eprintln!("the SARIF multitool is not installed: validation skipped (.ci/run fetches it)");
        return;
    };
    let checked = dir.join("validation.sarif");
    let out = Command::new(&tool)
        .arg("validate")
        .arg(&sarif_file)
        .arg("-o")
        .arg(&checked)
        .output()
        .unwrap();
    let text = stdout_str(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(text.contains("Analysis completed successfully"), "{text}");
    let errors: Vec<&str> = text.lines().filter(|l| l.contains("): error ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
