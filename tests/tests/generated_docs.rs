//! The man pages and completion scripts checked in under `docs/man` and
//! `docs/completions` are what `locksuit generate` makes from the binary's
//! own clap definitions: a changed option or help text must come with its
//! regenerated pages (the command to run is in the failure message). Also
//! `generate`'s usage errors: one line and exit 2, as every command's.

use locksuit_tests::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The shells whose scripts are checked in, and the names they are under.
const SHELLS: [(&str, &str); 3] = [
    ("bash", "locksuit.bash"),
    ("zsh", "_locksuit"),
    ("fish", "locksuit.fish"),
];

fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Every file in `generated` is in `checked_in` with the same bytes, and
/// `checked_in` holds no file the binary no longer makes.
fn assert_same(checked_in: &Path, generated: &Path, regenerate: &str) {
    let want = files_in(generated);
    let have = files_in(checked_in);
    let mut problems = Vec::new();
    for (name, bytes) in &want {
        match have.get(name) {
            None => problems.push(format!("{name}: missing")),
            Some(old) if old != bytes => {
                let line = String::from_utf8_lossy(old)
                    .lines()
                    .zip(String::from_utf8_lossy(bytes).lines())
                    .position(|(a, b)| a != b)
                    .map_or("its length".to_string(), |n| format!("line {}", n + 1));
                problems.push(format!(
                    "{name}: differs from the binary's, first at {line}"
                ));
            }
            Some(_) => {}
        }
    }
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        problems.push(format!("{name}: no longer generated"));
    }
    assert!(
        problems.is_empty(),
        "{} is out of date with target/release/locksuit:\n  {}\nregenerate with: {regenerate}",
        checked_in.display(),
        problems.join("\n  ")
    );
}

#[test]
fn checked_in_man_pages_match_the_binary() {
    let dir = fresh_dir("generated-man");
    let out = run_locksuit(&["generate", "man", dir.to_str().unwrap()]);
    assert_success(&out, "locksuit generate man");
    let pages = files_in(&dir);
    for page in ["locksuit.1", "locksuit-report.1", "locksuit-run.1"] {
        assert!(pages.contains_key(page), "no {page} in {:?}", pages.keys());
    }
    assert_same(
        &workspace_root().join("docs/man"),
        &dir,
        "target/release/locksuit generate man docs/man",
    );
}

#[test]
fn checked_in_completions_match_the_binary() {
    let dir = fresh_dir("generated-completions");
    for (shell, file) in SHELLS {
        let out = run_locksuit(&[
            "generate",
            "completions",
            shell,
            "--dir",
            dir.to_str().unwrap(),
        ]);
        assert_success(&out, &format!("locksuit generate completions {shell}"));
        // Printed and written are the same script.
        let printed = run_locksuit(&["generate", "completions", shell]);
        assert_success(&printed, shell);
        assert_eq!(
            printed.stdout,
            std::fs::read(dir.join(file)).unwrap(),
            "{shell}"
        );
    }
    assert_same(
        &workspace_root().join("docs/completions"),
        &dir,
        "for s in bash zsh fish; do target/release/locksuit generate completions $s --dir docs/completions; done",
    );
}

#[test]
fn generate_refuses_a_bad_shell_or_directory_with_status_2() {
    let out = run_locksuit(&["generate", "completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with("locksuit: error:") && first.contains("tcsh"),
        "{err}"
    );
    // Nothing to generate: its own usage error, not the top level's.
    let out = run_locksuit(&["generate"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("man DIR") && err.contains("locksuit generate --help"),
        "{err}"
    );
    // A directory that cannot be made: a regular file stands in its path.
    let dir = fresh_dir("generated-bad-dir");
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    let out = run_locksuit(&["generate", "man", file.join("man1").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("locksuit: ") && err.contains("man1"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", describe(&out));
}
