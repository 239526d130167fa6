//! What the report calls code and locks: never a wrong name.

use locksuit_tests::*;
use std::process::Command;

/// In a stripped binary, a static function's lock site is `module+offset`,
/// not the exported symbol that happens to precede it (which is what a
/// nearest-symbol lookup said: `_start`, or in Debian's python3.11,
/// `PyNumber_Subtract`). With its symbols, the same site is `bump`.
#[test]
fn a_stripped_static_function_is_not_named_after_its_neighbour() {
    let dir = fresh_dir("names_stripped");
    let src = c_dir().join("stripped.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    for stripped in [false, true] {
        let bin = dir.join(if stripped { "stripped" } else { "unstripped" });
        let out = Command::new(&cc)
            .args(["-O1", "-pthread", "-rdynamic", "-o"])
            .arg(&bin)
            .arg(&src)
            .args(if stripped { &[][..] } else { &["-g"][..] })
            .output()
            .unwrap();
        assert_success(&out, "compiling stripped.c");
        if stripped {
            let out = Command::new("strip").arg(&bin).output().unwrap();
            assert_success(&out, "strip");
        }
        let traces = dir.join(format!("traces-{stripped}"));
        std::fs::create_dir(&traces).unwrap();
        assert_success(&run_under_shim(&bin, &[] as &[&str], &traces), "run");
        let report = report_json(&[&only_trace(&traces)], None);
        let site = &sites(only_process(&report))[0];
        if stripped {
            assert!(
                site["function"].is_null(),
                "no name from a neighbouring symbol: {}",
                short(site)
            );
            let offset = site["call_chain"][0]["offset"].as_str().unwrap_or("");
            assert!(offset.starts_with("stripped+0x"), "{}", short(site));
        } else {
            assert_eq!(site["function"].as_str(), Some("bump"), "{}", short(site));
        }
    }
}

/// Two runs of the same program give the same lock, site and family names
/// (by variable, or by the line that made a lock; sites by function, file
/// and line), and the names say so.
#[test]
fn names_are_the_same_in_every_run() {
    let bin = build_c_source(&workspace_root().join("examples/sample.c"), "sample-names");
    let ids = |p: &Value, field: &str| -> Vec<String> {
        let mut v: Vec<String> = arr(p, field)
            .iter()
            .map(|x| str_of(x, "id").to_string())
            .collect();
        v.sort();
        v
    };
    let mut runs = Vec::new();
    for run in 0..2 {
        let dir = fresh_dir(&format!("names_stable_{run}"));
        assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "sample");
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report).clone();
        runs.push((ids(&p, "locks"), ids(&p, "sites"), ids(&p, "families")));
    }
    assert_eq!(runs[0], runs[1], "the same names in both runs");
    let (locks, sites, families) = &runs[0];
    assert!(locks.contains(&"&total_lock".to_string()), "{locks:?}");
    assert!(
        locks
            .iter()
            .filter(|l| l.starts_with("main@sample.c:"))
            .count()
            == 4,
        "the four worker locks, made at one line, numbered: {locks:?}"
    );
    assert!(
        sites
            .iter()
            .any(|s| s.starts_with("add_to_total@sample.c:")),
        "{sites:?}"
    );
    assert!(
        families.iter().any(|f| f.starts_with("main@sample.c:")),
        "{families:?}"
    );
}
