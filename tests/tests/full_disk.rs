//! A trace on a disk that fills (issue 33, item 6): the program runs on
//! and warns once, and the trace reports in place, with its dropped
//! counts, as a copy of it does. Needs a small tmpfs, so root; elsewhere
//! the test says it was skipped.

use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A 256 KiB tmpfs, unmounted when dropped.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(tag: &str) -> Option<SmallFs> {
        let dir = fresh_dir(tag);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a small tmpfs here (not root?)");
            return None;
        }
        Some(SmallFs(dir))
    }

    fn fill(&self) {
        // Whatever space is left, taken by a file of zeros.
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=4096"])
            .arg(format!("of={}", self.0.join("filler").display()))
            .output();
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn figures(p: &Value) -> (u64, u64, usize) {
    let acquisitions = locks(p).iter().map(|l| u64_of(l, "acquisitions")).sum();
    (acquisitions, u64_of(p, "dropped_events"), locks(p).len())
}

fn copy_of(trace: &Path, tag: &str) -> PathBuf {
    let copy = fresh_dir(tag).join("copy.trace");
    std::fs::copy(trace, &copy).unwrap();
    copy
}

#[test]
fn a_trace_on_a_full_disk_reports_in_place() {
    let Some(fs) = SmallFs::mount("full-disk-run") else {
        return;
    };
    let bin = build_c("many_writers");
    let env = [("LOCKSUIT_EVENTS", "all")];
    let plain = run_plain(&bin, &["16", "400"]);
    let out = run_under_shim_env(&bin, &["16", "400"], &fs.0, &env);
    assert_eq!(out.status.code(), plain.status.code(), "{}", describe(&out));
    assert_eq!(stdout_str(&out), stdout_str(&plain));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("cannot grow the trace file").count(),
        1,
        "warned once: {stderr}"
    );
    let trace = only_trace(&fs.0);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert!(u64_of(p, "dropped_events") > 0, "{}", short(p));
    // In place, on the full disk, as a copy elsewhere reads.
    let copy = report_json(&[&copy_of(&trace, "full-disk-copy")], None);
    assert_eq!(figures(p), figures(only_process(&copy)));
}

#[test]
fn a_trace_with_a_hole_on_a_full_disk_reports_in_place() {
    // A block reserved and never written (a growth that failed while
    // another thread grew the file past it) is a hole: through a mapping,
    // a full tmpfs answers a read of it with SIGBUS.
    let Some(fs) = SmallFs::mount("full-disk-hole") else {
        return;
    };
    let bin = build_c("many_locks");
    let dir = fresh_dir("full-disk-hole-src");
    let out = run_under_shim(&bin, &["100"], &dir);
    assert_success(&out, "many_locks");
    let mut bytes = std::fs::read(only_trace(&dir)).unwrap();
    let blocks = (bytes.len() / 16384) as u32;
    // blocks_reserved and blocks_backed, one more: the hole.
    let at = 28;
    for (i, word) in [blocks + 1, blocks + 1].iter().enumerate() {
        bytes[at + 4 * i..at + 4 * i + 4].copy_from_slice(&word.to_le_bytes());
    }
    let holed = fs.0.join("holed.trace");
    std::fs::write(&holed, &bytes).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&holed)
        .unwrap();
    f.set_len(u64::from(blocks + 1) * 16384).unwrap();
    drop(f);
    fs.fill();
    let out = run_locksuit(&["report", holed.to_str().unwrap(), "--format", "json"]);
    assert_success(&out, "report of a trace with a hole on a full disk");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let copy = report_json(&[&copy_of(&holed, "full-disk-hole-copy")], None);
    assert_eq!(figures(only_process(&report)), figures(only_process(&copy)));
}
