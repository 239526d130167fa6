//! Building the one-file Rust test programs of `tests/rust/`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::workspace_root;

/// Compiles `tests/rust/<name>.rs` with rustc (`-O -g`, `$RUSTC` or
/// `rustc`) into `target/c-tests/<name>`; returns the binary and the
/// source. Safe from parallel tests: each builds in a directory of its own
/// (rustc writes its object files beside the output), then renames.
pub fn build_rust(name: &str) -> (PathBuf, PathBuf) {
    static BUILDS: AtomicUsize = AtomicUsize::new(0);
    let source = workspace_root().join(format!("tests/rust/{name}.rs"));
    let bin = workspace_root().join(format!("target/c-tests/{name}"));
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let dir = bin.with_extension(format!(
        "build{}-{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join(name);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let built = Command::new(rustc)
        .args(["-O", "-g", "--edition", "2021", "-o"])
        .arg(&tmp)
        .arg(&source)
        .status()
        .expect("rustc");
    assert!(built.success(), "rustc {}", source.display());
    std::fs::rename(&tmp, &bin).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (bin, source)
}
