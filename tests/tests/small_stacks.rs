//! Small stacks: a program whose threads run on small stacks (a thread made
//! with `pthread_attr_setstack` on `PTHREAD_STACK_MIN` bytes, a signal
//! handler on a `MINSIGSTKSZ` alternate stack) behaves the same with and
//! without the shim: it may fork, exit, be cancelled and lock in a handler
//! with 3 KiB of stack left. And every hook's own frames stay within the
//! budget the shim states (`HOOK_STACK_BUDGET`), measured on a painted
//! stack (`tests/c/small_stacks.c`).

use locksuit_tests::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;

/// Also the number of signals `small_stacks signal` sends itself.
const ROUNDS: u64 = 20;

fn program() -> PathBuf {
    // Bound at start: lazy binding's resolver needs more stack than the
    // calls themselves. Optimised, as a program would be built.
    build_c_with(
        &c_dir().join("small_stacks.c"),
        "small_stacks",
        &["-O2", "-Wl,-z,now"],
        &[],
    )
}

/// The budget the shim states, read from its source so the two agree.
fn stated_budget() -> usize {
    let src = workspace_root().join("shim/src/recorder/base/own_stack.rs");
    let text = std::fs::read_to_string(&src).expect("own_stack.rs is readable");
    let line = text
        .lines()
        .find(|l| l.starts_with("pub const HOOK_STACK_BUDGET: usize ="))
        .expect("own_stack.rs states HOOK_STACK_BUDGET");
    line.trim_end_matches(';')
        .rsplit('=')
        .next()
        .and_then(|n| n.trim().replace('_', "").parse().ok())
        .expect("HOOK_STACK_BUDGET is a number")
}

/// stdout with addresses masked (ASLR) and pids left out.
fn comparable(out: &Output) -> Vec<String> {
    stable_stdout(out)
        .into_iter()
        .filter(|l| !l.starts_with("pid "))
        .collect()
}

/// Runs `small_stacks ARGS` without and with the shim; asserts the same
/// exit status (an exit, not a signal), stdout and an empty stderr. Returns
/// the run under the shim and its trace directory.
fn same_with_and_without(args: &[&str]) -> (Output, PathBuf) {
    let bin = program();
    let plain = run_plain(&bin, args);
    let dir = fresh_dir(&format!("small_stacks_{}", args.join("_")));
    let shim = run_under_shim(&bin, args, &dir);
    assert!(
        plain.status.code().is_some(),
        "small_stacks {args:?} must run without the shim\n{}",
        describe(&plain)
    );
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "small_stacks {args:?}: same exit with and without the shim\nplain: {}\nshim: {}",
        describe(&plain),
        describe(&shim)
    );
    assert_eq!(
        comparable(&shim),
        comparable(&plain),
        "small_stacks {args:?}: same output with and without the shim\nplain: {}\nshim: {}",
        describe(&plain),
        describe(&shim)
    );
    assert!(
        plain.stderr.is_empty() && shim.stderr.is_empty(),
        "small_stacks {args:?}: nothing on stderr\nplain: {}\nshim: {}",
        describe(&plain),
        describe(&shim)
    );
    (shim, dir)
}

/// `OPERATION BYTES` lines of `small_stacks budget`.
fn depths(out: &Output) -> BTreeMap<String, usize> {
    stdout_str(out)
        .lines()
        .filter_map(|l| {
            let (name, n) = l.split_once(' ')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect()
}

#[test]
fn every_hook_stays_within_the_stated_stack_budget() {
    let bin = program();
    let plain = run_plain(&bin, &["budget"]);
    assert_success(&plain, "small_stacks budget without the shim");
    let dir = fresh_dir("small_stacks_budget");
    let shim = run_under_shim(&bin, &["budget"], &dir);
    assert_success(&shim, "small_stacks budget under the shim");
    let (plain_depths, shim_depths) = (depths(&plain), depths(&shim));
    let mut measured: Vec<&String> = plain_depths.keys().collect();
    measured.retain(|k| k.as_str() != "shim-tls");
    for op in [
        "lock",
        "trylock",
        "rwlock",
        "spin",
        "sem",
        "barrier",
        "init",
        "cond-signal",
        "cond-timedwait",
        "sleep",
        "pipe",
        "create",
        "contended",
        "fork",
        "thread",
        "fork-child-lock",
        "exit",
    ] {
        assert!(
            measured.iter().any(|m| m.as_str() == op),
            "{op} was measured: {}",
            describe(&plain)
        );
    }
    let budget = stated_budget();
    let mut over = Vec::new();
    for op in measured {
        let Some(&with) = shim_depths.get(op) else {
            panic!("{op} was measured under the shim too\n{}", describe(&shim));
        };
        let without = plain_depths[op];
        let own = with.saturating_sub(without);
        eprintln!("{op}: {without} bytes without the shim, {with} with it: {own} of its own");
        if own > budget {
            over.push(format!("{op}: {own} bytes ({without} -> {with})"));
        }
    }
    assert!(
        over.is_empty(),
        "the shim's own frames exceed its budget of {budget} bytes: {over:?}"
    );
    // The shim's thread-local state comes out of a stack given with
    // pthread_attr_setstack too (docs/limits.md): it must not grow unseen.
    let tls = shim_depths.get("shim-tls").copied().unwrap_or(0);
    assert!(tls > 0 && tls <= 4096, "the shim's TLS is {tls} bytes");
}

#[test]
fn a_fork_from_a_small_stack_leaves_the_child_as_without_the_shim() {
    for variant in ["_exit", "exit"] {
        let (out, dir) = same_with_and_without(&["fork", variant]);
        // A child that recorded nothing made no trace: only the parent's.
        let traces = traces_in(&dir);
        assert_eq!(traces.len(), 1, "fork {variant}: {traces:?}");
        let stdout = stdout_str(&out);
        let pid = stdout_value(&stdout, "pid");
        assert!(
            traces[0]
                .to_string_lossy()
                .ends_with(&format!(".{pid}.trace")),
            "the parent's trace: {traces:?}"
        );
    }
    // A child that takes a lock makes its own trace at that moment, as a
    // fork child of the parent, with the lock in it.
    let (out, dir) = same_with_and_without(&["fork", "lock"]);
    let stdout = stdout_str(&out);
    let parent_pid: u64 = stdout_value(&stdout, "pid").parse().unwrap();
    let lock = stdout_value(&stdout, "lock");
    let report = report_json(&[&dir], None);
    let procs = processes(&report);
    assert_eq!(procs.len(), 2, "parent and child: {}", short(&report));
    let child = procs
        .iter()
        .find(|p| u64_of(p, "pid") != parent_pid)
        .expect("the child's process");
    assert_eq!(child["fork_child"], Value::Bool(true), "{}", short(child));
    assert_eq!(u64_of(child, "ppid"), parent_pid, "{}", short(child));
    assert_eq!(child["complete"], Value::Bool(true), "{}", short(child));
    assert_eq!(
        u64_of(lock_by_address(child, &lock), "acquisitions"),
        1,
        "the child's one lock: {}",
        short(&child["locks"])
    );
}

#[test]
fn exit_from_a_small_stack_is_as_without_the_shim() {
    let (out, dir) = same_with_and_without(&["exit"]);
    assert_eq!(out.status.code(), Some(5));
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true), "{}", short(p));
}

#[test]
fn cancellation_on_a_small_stack_is_as_without_the_shim() {
    let (out, _dir) = same_with_and_without(&["cancel"]);
    let stdout = stdout_str(&out);
    for call in ["pthread_cond_wait", "sem_wait", "nanosleep"] {
        for how in ["at entry", "blocked"] {
            let line = format!("cancelled {how}; cleanup after {call}");
            assert!(stdout.contains(&line), "{line:?} in:\n{stdout}");
        }
    }
}

#[test]
fn a_handler_on_a_minimal_alternate_stack_posts_and_locks_as_without_the_shim() {
    let (out, dir) = same_with_and_without(&["signal"]);
    let stdout = stdout_str(&out);
    assert!(
        stdout.contains(&format!("handled {ROUNDS}, trylock busy 0")),
        "{stdout}"
    );
    // And the handler's calls were recorded, not only passed through.
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let sem = lock_by_address(p, &stdout_value(&stdout, "sem"));
    assert_eq!(u64_of(sem, "posts"), ROUNDS, "{}", short(sem));
    let lock = lock_by_address(p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        2 * ROUNDS,
        "a trylock and a lock per signal: {}",
        short(lock)
    );
}
