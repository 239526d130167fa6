//! Locks taken in a DT_NEEDED library's constructor, which runs before the
//! preloaded shim's constructor: the shim initialises itself on that first
//! hooked call, and every acquisition is recorded.

use locksuit_tests::*;

const K1: u64 = 25;
const K2: u64 = 40;
const LIB_SRC: &str = "early_ctor_lib.c";
const SRC: &str = "early_constructor.c";

#[test]
fn lock_in_library_constructor_before_shim_constructor() {
    let bin = build_c_linked("early_constructor", &["early_ctor_lib"]);
    let lib = build_c_shared("early_ctor_lib");
    let shim = shim_path();

    // The premise: the dynamic loader runs the library's constructor before
    // the shim's (LD_DEBUG=libs lists "calling init: <path>" in that order).
    let dbg_dir = fresh_dir("early_constructor_ld_debug");
    let dbg = run_under_shim_env(&bin, &[] as &[&str], &dbg_dir, &[("LD_DEBUG", "libs")]);
    assert_success(&dbg, "early_constructor with LD_DEBUG=libs");
    let log = String::from_utf8_lossy(&dbg.stderr).into_owned();
    let lib_name = lib.file_name().unwrap().to_string_lossy().into_owned();
    let shim_name = shim.file_name().unwrap().to_string_lossy().into_owned();
    let pos_of = |needle: &str| {
        log.lines()
            .position(|l| l.contains("calling init:") && l.contains(needle))
            .unwrap_or_else(|| panic!("no `calling init: …{needle}` in LD_DEBUG output:\n{log}"))
    };
    assert!(
        pos_of(&lib_name) < pos_of(&shim_name),
        "test premise: {lib_name}'s constructor must run before {shim_name}'s:\n{log}"
    );

    // Ground truth without the shim.
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "early_constructor without the shim");
    assert_eq!(
        stdout_value(&stdout_str(&plain), "ctor-uses"),
        K1.to_string()
    );

    let dir = fresh_dir("early_constructor");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "early_constructor under the shim");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "ctor-uses"), K1.to_string());
    assert_eq!(stdout_value(&stdout, "main-uses"), K2.to_string());
    assert_eq!(
        stdout_value(&stdout, "ctor-errno-kept"),
        "1",
        "errno survives the hooked call that initialises the shim"
    );

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true), "normal exit is complete");
    // The constructor's 100 calm pipe calls, made before the shim started,
    // did not decide how it judges blocking calls: the kernel is checked
    // at start.
    assert_eq!(str_of(p, "block_detection"), block_detection_here(), "{p}");
    let lock = lock_by_address(p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        K1 + K2,
        "{K1} acquisitions in the library constructor (before the shim's \
         constructor) + {K2} in main: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), 1, "only the main thread used it");
    assert_eq!(u64_of(lock, "contended"), 0, "one thread cannot contend");

    // Each of the two call sites is attributed its own engagements.
    let id = id_of(lock);
    let sites = sites_of_lock(p, id);
    let where_ = || sites.iter().map(|s| site_where(s)).collect::<Vec<_>>();
    assert_eq!(sites.len(), 2, "two sites engage the lock: {:?}", where_());
    for (function, file, line, n) in [
        (
            "early_ctor",
            LIB_SRC,
            line_of(LIB_SRC, "/* @ctor-lock */"),
            K1,
        ),
        ("main", SRC, line_of(SRC, "/* @main-lock */"), K2),
    ] {
        let site = sites
            .iter()
            .find(|s| site_is_at(s, function, file, line))
            .unwrap_or_else(|| {
                panic!("no site at {function} {file}:{line}; sites: {:?}", where_())
            });
        assert_eq!(u64_of(site, "engagements"), n, "{function} engagements");
    }
}
