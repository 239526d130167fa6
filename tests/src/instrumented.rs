//! Programs built with `locksuit cc` (clang-19, which `.ci/run` installs)
//! for the data-level tests, and what their reports say per line.

use crate::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// The shim's setting that records every engagement's accesses (the
/// default samples them), for the tests that count them exactly.
pub const EVERY_ENGAGEMENT: (&str, &str) = ("LOCKSUIT_DATA_SAMPLE", "all");

/// tests/c/NAME.c built with `locksuit cc`, or None when no clang is there
/// (the test then says so and passes: `.ci/run` installs clang-19).
pub fn instrumented(name: &str) -> Option<PathBuf> {
    instrumented_with("cc", &format!("{name}.c"))
}

/// Whether clang is there; if not, says that the test is skipped.
pub fn has_clang() -> bool {
    let has = ["clang-19", "clang"].iter().any(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !has {
        eprintln!(
            "clang is not installed: the data-level tests are skipped (.ci/run installs clang-19)"
        );
    }
    has
}

/// tests/c/SOURCE built with `locksuit DRIVER` (`cc` or `c++`), once per
/// test run: tests running at once share the build (one writing the file
/// while another runs it would fail).
pub fn instrumented_with(driver: &str, source: &str) -> Option<PathBuf> {
    static BUILT: std::sync::Mutex<Vec<(String, Option<PathBuf>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let key = format!("{driver} {source}");
    if let Some((_, out)) = built.iter().find(|(k, _)| *k == key) {
        return out.clone();
    }
    let out = build_instrumented(driver, source);
    built.push((key, out.clone()));
    out
}

fn build_instrumented(driver: &str, source: &str) -> Option<PathBuf> {
    if !has_clang() {
        return None;
    }
    let name = source.rsplit_once('.').map_or(source, |(n, _)| n);
    let out = workspace_root().join(format!("target/c-tests/{name}.cov"));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let src = c_dir().join(source);
    let built = run_locksuit(&[
        driver,
        "-g",
        "-O0",
        "-pthread",
        "-o",
        out.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert_eq!(built.status.code(), Some(0), "{}", describe(&built));
    Some(out)
}

/// The line of the report in `function` (its id starts `function@`).
pub fn site_in<'a>(p: &'a Value, function: &str) -> &'a Value {
    arr(p, "sites")
        .iter()
        .find(|s| str_of(s, "id").starts_with(&format!("{function}@")))
        .unwrap_or_else(|| panic!("no site in {function}: {}", p["sites"]))
}
