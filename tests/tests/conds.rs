//! Exact condition-variable counts: signals that each found a waiter, timed
//! waits that all time out, broadcasts to nobody, and the mutex's
//! re-acquisitions by the waits.

use locksuit_tests::*;

const H: u64 = 12;
const T: u64 = 20;
const B: u64 = 9;

fn ids(v: &Value, field: &str) -> Vec<String> {
    arr(v, field)
        .iter()
        .map(|x| {
            x.as_str()
                .unwrap_or_else(|| panic!("{field}: not a string in {}", short(v)))
                .to_string()
        })
        .collect()
}

#[test]
fn cond_counts() {
    let bin = build_c("conds");
    let dir = fresh_dir("conds");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "conds under the shim");
    let stdout = stdout_str(&out);
    // The program's own counts: every wait returned only because of its
    // signal (no spurious wake-up), every timed wait timed out.
    assert_eq!(stdout_value(&stdout, "consumer-waits"), H.to_string());
    assert_eq!(stdout_value(&stdout, "timeouts"), T.to_string());
    assert_eq!(stdout_value(&stdout, "signals"), H.to_string());
    assert_eq!(stdout_value(&stdout, "broadcasts"), B.to_string());

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));

    let m = lock_by_address(p, &stdout_value(&stdout, "mutex"));
    let m_id = id_of(m).to_string();

    // --- handshake: H waits, H signals, each signal found the waiter ---------
    let hs = cond_by_address(p, &stdout_value(&stdout, "handshake"));
    assert_eq!(u64_of(hs, "waits"), H, "handshake waits: {}", short(hs));
    assert_eq!(
        u64_of(hs, "timeouts"),
        0,
        "handshake timeouts: {}",
        short(hs)
    );
    assert_eq!(u64_of(hs, "signals"), H, "handshake signals: {}", short(hs));
    assert_eq!(
        u64_of(hs, "broadcasts"),
        0,
        "handshake broadcasts: {}",
        short(hs)
    );
    assert_eq!(
        u64_of(hs, "notifies_with_waiters"),
        H,
        "every handshake signal found the consumer waiting: {}",
        short(hs)
    );
    assert_eq!(
        ids(hs, "mutexes"),
        vec![m_id.clone()],
        "handshake waits used M"
    );
    // From the event stream: every wait was woken by a signal, none
    // spuriously; the wake-up latency of each is measured; one thread (the
    // producer) woke one other (the consumer), H times.
    assert_eq!(u64_of(hs, "notified"), H, "{}", short(hs));
    assert_eq!(u64_of(hs, "spurious"), 0, "{}", short(hs));
    assert_eq!(u64_of(&hs["notify_latency"], "count"), H, "{}", short(hs));
    let pairs = arr(hs, "notifiers");
    assert_eq!(pairs.len(), 1, "one notifier/waiter pair: {pairs:?}");
    assert_eq!(u64_of(&pairs[0], "count"), H);
    assert_ne!(pairs[0]["notifier_tid"], pairs[0]["waiter_tid"]);

    // --- timeout: T timed waits, all timed out, nothing notified it ----------
    let to = cond_by_address(p, &stdout_value(&stdout, "timeout"));
    assert_eq!(u64_of(to, "waits"), T, "timed waits: {}", short(to));
    assert_eq!(
        u64_of(to, "timeouts"),
        T,
        "every timed wait timed out: {}",
        short(to)
    );
    assert_eq!(u64_of(to, "signals"), 0, "{}", short(to));
    assert_eq!(u64_of(to, "notified"), 0, "{}", short(to));
    assert!(to["notify_latency"].is_null(), "{}", short(to));
    assert_eq!(u64_of(to, "broadcasts"), 0, "{}", short(to));
    assert_eq!(u64_of(to, "notifies_with_waiters"), 0, "{}", short(to));
    assert_eq!(
        u64_of(to, "threads"),
        1,
        "only main waited on it: {}",
        short(to)
    );
    assert_eq!(ids(to, "mutexes"), vec![m_id.clone()], "timed waits used M");
    let to_wait = u64_of(to, "wait_ns");
    assert!(
        to_wait >= T * 1_000_000,
        "{T} timed waits of >= 1 ms each: wait_ns {to_wait}"
    );

    // --- nobody: B broadcasts, nobody ever waited ------------------------------
    let nb = cond_by_address(p, &stdout_value(&stdout, "nobody"));
    assert_eq!(u64_of(nb, "waits"), 0, "{}", short(nb));
    assert_eq!(u64_of(nb, "timeouts"), 0, "{}", short(nb));
    assert_eq!(u64_of(nb, "signals"), 0, "{}", short(nb));
    assert_eq!(
        u64_of(nb, "broadcasts"),
        B,
        "broadcasts to nobody: {}",
        short(nb)
    );
    assert_eq!(
        u64_of(nb, "notifies_with_waiters"),
        0,
        "no broadcast found a waiter: {}",
        short(nb)
    );
    assert_eq!(u64_of(nb, "threads"), 1, "only main used it: {}", short(nb));
    assert!(
        arr(nb, "mutexes").is_empty(),
        "nobody waited, so no mutex: {}",
        short(nb)
    );

    assert_eq!(conds(p).len(), 3, "three conds: {}", short(&p["conds"]));

    // --- the mutex ----------------------------------------------------------------
    assert_eq!(
        u64_of(m, "cond_reacquires"),
        H + T,
        "one re-acquisition per returned wait on M: {}",
        short(m)
    );
    assert_eq!(
        u64_of(m, "acquisitions"),
        H + H + 1 + H + T,
        "consumer locks + producer locks + the lock before the timed waits + \
         one re-acquisition per wait: {}",
        short(m)
    );
    assert_eq!(u64_of(m, "threads"), 2, "consumer and main: {}", short(m));
}
