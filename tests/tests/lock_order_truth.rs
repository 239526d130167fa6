//! Lock-order findings against ground truth the program prints itself
//! (tests/c/order_truth.c): for each scenario, the cycles of the
//! `potential-deadlock` findings of its report (one finding lists every
//! cycle through the same lines) and the `family-order-inversion`
//! findings, each as its kind and the set of addresses of its locks, are
//! exactly the program's `expect` lines, no more and no fewer.

use locksuit_tests::*;
use std::collections::{BTreeMap, BTreeSet};

const POTENTIAL: &str = "potential-deadlock";
const INVERSION: &str = "family-order-inversion";

/// A finding as the ground truth states it: its kind and its locks.
type Judged = (String, BTreeSet<u64>);

/// What `order_truth SCENARIO` printed: the names of its locks by address,
/// and the findings it expects, sorted.
fn ground_truth(stdout: &str) -> (BTreeMap<u64, String>, Vec<Judged>) {
    let mut names = BTreeMap::new();
    let mut expected = Vec::new();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["lock", name, addr] => {
                names.insert(parse_addr(addr), name.to_string());
            }
            ["expect", kind, addrs @ ..] => {
                assert!(
                    [POTENTIAL, INVERSION].contains(kind) && !addrs.is_empty(),
                    "bad expectation: {line}"
                );
                expected.push((
                    kind.to_string(),
                    addrs.iter().map(|a| parse_addr(a)).collect(),
                ));
            }
            _ => {}
        }
    }
    expected.sort();
    (names, expected)
}

/// `kind {name, name, …}` for messages (an address where no name is known).
fn render(judged: &[Judged], names: &BTreeMap<u64, String>) -> String {
    if judged.is_empty() {
        return "  (none)".to_string();
    }
    judged
        .iter()
        .map(|(kind, addrs)| {
            let locks: Vec<String> = addrs
                .iter()
                .map(|a| names.get(a).cloned().unwrap_or_else(|| format!("{a:#x}")))
                .collect();
            format!("  {kind} {{{}}}", locks.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `order_truth SCENARIO` under the shim and checks its report's
/// lock-order findings against what it printed.
fn check(scenario: &str) {
    let bin = build_c("order_truth");
    let dir = fresh_dir(&format!("order_truth_{scenario}"));
    let out = run_under_shim(&bin, &[scenario], &dir);
    assert_success(&out, scenario);
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout.lines().next(),
        Some(format!("scenario {scenario}").as_str()),
        "{}",
        describe(&out)
    );
    let (names, expected) = ground_truth(&stdout);

    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let address_of: BTreeMap<&str, u64> = locks(p)
        .iter()
        .map(|l| (str_of(l, "id"), parse_addr(str_of(l, "address"))))
        .collect();
    let lock_address = |f: &Value, id: &Value| -> u64 {
        id.as_str()
            .and_then(|id| address_of.get(id).copied())
            .unwrap_or_else(|| panic!("{scenario}: lock {id} of no known address in {}", short(f)))
    };

    let mut found: Vec<Judged> = Vec::new();
    let mut messages = Vec::new();
    for f in findings(p) {
        let kind = str_of(f, "kind");
        let message = str_of(f, "message");
        if kind != POTENTIAL && kind != INVERSION {
            assert!(
                !kind.contains("deadlock") && !message.to_lowercase().contains("deadlock"),
                "{scenario}: only a {POTENTIAL} finding may name a deadlock here: {}",
                short(f)
            );
            continue;
        }
        messages.push(format!("  {kind}: {message}"));
        let addresses = |ids: &Vec<Value>| -> BTreeSet<u64> {
            ids.iter().map(|id| lock_address(f, id)).collect()
        };
        if kind == POTENTIAL {
            // One finding for the cycles through the same lines: each of
            // its `cycles` is one cycle of the ground truth, and `locks`
            // is all of theirs.
            let cycles = arr(f, "cycles");
            let mut all = BTreeSet::new();
            for cycle in cycles {
                let addrs = addresses(cycle.as_array().expect("a cycle is a list of locks"));
                all.extend(addrs.iter().copied());
                found.push((kind.to_string(), addrs));
            }
            assert_eq!(all, addresses(arr(f, "locks")), "{scenario}: {}", short(f));
        } else {
            found.push((kind.to_string(), addresses(arr(f, "locks"))));
        }
    }
    found.sort();
    assert!(
        found == expected,
        "{scenario}: lock-order findings differ from the program's ground truth\n\
         expected:\n{}\nreported:\n{}\nmessages:\n{}",
        render(&expected, &names),
        render(&found, &names),
        if messages.is_empty() {
            "  (none)".to_string()
        } else {
            messages.join("\n")
        }
    );

    for f in findings(p) {
        match f["kind"].as_str() {
            Some(POTENTIAL) => check_cycle(scenario, f),
            Some(INVERSION) => {
                // The weak kind: a family without one order, not a cycle.
                let message = str_of(f, "message").to_lowercase();
                assert!(
                    !message.starts_with("potential deadlock") && !message.starts_with("deadlock"),
                    "{scenario}: a {INVERSION} must not claim a deadlock: {}",
                    short(f)
                );
            }
            _ => {}
        }
    }
}

/// A potential deadlock's `cycle` is one simple cycle over exactly the
/// locks of the first of its `cycles`: each edge waits for the lock the
/// next one holds.
fn check_cycle(scenario: &str, f: &Value) {
    let cycle = arr(f, "cycle");
    let lock_set: BTreeSet<&str> = arr(f, "cycles")[0]
        .as_array()
        .expect("a cycle is a list of locks")
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    let holds: Vec<&str> = cycle.iter().map(|s| str_of(s, "holds")).collect();
    assert_eq!(
        holds.len(),
        lock_set.len(),
        "{scenario}: one edge per lock: {}",
        short(f)
    );
    assert_eq!(
        holds.iter().copied().collect::<BTreeSet<_>>(),
        lock_set,
        "{scenario}: {}",
        short(f)
    );
    for (i, step) in cycle.iter().enumerate() {
        assert_eq!(
            step["waits_for"].as_str(),
            Some(holds[(i + 1) % holds.len()]),
            "{scenario}: edge {i} waits for what the next one holds: {}",
            short(f)
        );
        assert!(
            step["count"].as_u64().is_some_and(|n| n >= 1),
            "{scenario}: {}",
            short(step)
        );
    }
}

/// Even and odd elements of one array are two families, always taken in
/// ascending address order: nothing, not a cycle between the families.
#[test]
fn global_order() {
    check("global-order");
}

/// Disjoint pairs of one family nested in both address orders at one pair
/// of lines: the weak kind over all four, no potential deadlock.
#[test]
fn disjoint_pairs() {
    check("disjoint-pairs");
}

/// The same pairs nested at different lines: nothing.
#[test]
fn disjoint_pairs_lines() {
    check("disjoint-pairs-lines");
}

/// A ring of locks of one family: one potential deadlock over exactly them.
#[test]
fn cycle_2() {
    check("cycle-2");
}

#[test]
fn cycle_5() {
    check("cycle-5");
}

#[test]
fn cycle_30() {
    check("cycle-30");
}

/// A ring of 30 locks of no family: listed in full too.
#[test]
fn cycle_30_solo() {
    check("cycle-30-solo");
}

/// Two real cycles, two closed only by trylocks, all in one family.
#[test]
fn peer_stress() {
    check("peer-stress");
}

#[test]
fn trylock_closes() {
    check("trylock-closes");
}

/// A lock got by a trylock still waits when the next one is locked.
#[test]
fn behind_trylock() {
    check("behind-trylock");
}

#[test]
fn rwlocks_read_only() {
    check("rwlocks-read-only");
}

#[test]
fn rwlocks_written() {
    check("rwlocks-written");
}

#[test]
fn rwlocks_prefer_writer() {
    check("rwlocks-prefer-writer");
}

#[test]
fn rwlocks_read_write() {
    check("rwlocks-read-write");
}

#[test]
fn gated_and_not() {
    check("gated-and-not");
}

#[test]
fn object_global() {
    check("object-global");
}

#[test]
fn gated() {
    check("gated");
}

/// Hand over hand down a tree: no cycle, but one family in both address
/// orders at one pair of lines (the weak kind).
#[test]
fn tree() {
    check("tree");
}
