//! The policy file's lines: `key = value`, `#` starts a comment. Parsed
//! without allocating; what a line says is checked here, applied in
//! `policy::load`.

/// Longest value of a list key (`processes`, `threads`, `objects`, `sites`).
pub const LIST_MAX: usize = 512;

/// The keys that take a list of comma-separated items.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ListKey {
    Processes,
    Threads,
    Objects,
    Sites,
}

/// The keys that take a whole number (a yes/no key is 1 or 0).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NumberKey {
    MinWaitUs,
    MinWaiters,
    SnapshotWaiters,
    SnapshotStep,
    SnapshotMax,
    SnapshotIntervalMs,
    SnapshotOnIdle,
    SampleEvery,
    SamplePeriodMs,
    Depth,
}

/// What a line said, or what is wrong with it.
pub enum Line<'a> {
    Empty,
    List(ListKey, &'a [u8]),
    Number(NumberKey, u64),
    Bad(&'static [u8]),
}

pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !first.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !last.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    s
}

fn number(value: &[u8]) -> Option<u64> {
    crate::text::decimal(value, 12)
}

fn yes_no(value: &[u8]) -> Option<u64> {
    match value {
        b"yes" | b"true" | b"on" | b"1" => Some(1),
        b"no" | b"false" | b"off" | b"0" => Some(0),
        _ => None,
    }
}

const LISTS: [(&[u8], ListKey); 4] = [
    (b"processes", ListKey::Processes),
    (b"threads", ListKey::Threads),
    (b"objects", ListKey::Objects),
    (b"sites", ListKey::Sites),
];

/// (key, what it is, the smallest value it takes, the message for a bad one)
const NUMBERS: [(&[u8], NumberKey, u64, &[u8]); 10] = [
    (
        b"min_wait_us",
        NumberKey::MinWaitUs,
        0,
        b"min_wait_us must be a whole number of microseconds",
    ),
    (
        b"min_waiters",
        NumberKey::MinWaiters,
        0,
        b"min_waiters must be a whole number of threads",
    ),
    (
        b"snapshot_waiters",
        NumberKey::SnapshotWaiters,
        1,
        b"snapshot_waiters must be a number of waiting threads, 1 or more",
    ),
    (
        b"snapshot_step",
        NumberKey::SnapshotStep,
        1,
        b"snapshot_step must be a number of waiting threads, 1 or more",
    ),
    (
        b"snapshot_max",
        NumberKey::SnapshotMax,
        0,
        b"snapshot_max must be a whole number of snapshots",
    ),
    (
        b"snapshot_interval_ms",
        NumberKey::SnapshotIntervalMs,
        0,
        b"snapshot_interval_ms must be a whole number of milliseconds",
    ),
    (
        b"snapshot_on_idle",
        NumberKey::SnapshotOnIdle,
        0,
        b"snapshot_on_idle must be yes or no",
    ),
    (
        b"sample_every",
        NumberKey::SampleEvery,
        1,
        b"sample_every must be a whole number, 1 or more",
    ),
    (
        b"sample_period_ms",
        NumberKey::SamplePeriodMs,
        1,
        b"sample_period_ms must be a whole number of milliseconds, 1 or more",
    ),
    (
        b"depth",
        NumberKey::Depth,
        1,
        b"depth must be a number of frames from 1 to 32",
    ),
];

pub fn parse_line(raw: &[u8]) -> Line<'_> {
    let line = match raw.iter().position(|&c| c == b'#') {
        Some(at) => &raw[..at],
        None => raw,
    };
    let line = trim(line);
    if line.is_empty() {
        return Line::Empty;
    }
    let Some(eq) = line.iter().position(|&c| c == b'=') else {
        return Line::Bad(b"expected 'key = value'");
    };
    let (key, value) = (trim(&line[..eq]), trim(&line[eq + 1..]));
    if let Some(&(_, list)) = LISTS.iter().find(|(name, _)| *name == key) {
        if value.is_empty() || value.len() > LIST_MAX {
            return Line::Bad(
                b"a list needs one or more items, comma-separated (at most 512 bytes)",
            );
        }
        if list == ListKey::Sites {
            if let Some(why) = bad_site(value) {
                return Line::Bad(why);
            }
        }
        return Line::List(list, value);
    }
    if let Some(&(_, which, least, why)) = NUMBERS.iter().find(|(name, ..)| *name == key) {
        let n = if which == NumberKey::SnapshotOnIdle {
            yes_no(value)
        } else {
            number(value)
        };
        return match n {
            Some(n) if n >= least && (which != NumberKey::Depth || n <= 32) => {
                Line::Number(which, n)
            }
            _ => Line::Bad(why),
        };
    }
    Line::Bad(
        b"unknown key (known: processes, threads, objects, sites, min_wait_us, min_waiters, \
snapshot_waiters, snapshot_step, snapshot_max, snapshot_interval_ms, snapshot_on_idle, \
sample_every, sample_period_ms, depth)",
    )
}

/// Sites are named by function, or by a range of addresses in the
/// program's executable file (`PROGRAM@0xLO-0xHI`, what `locksuit run
/// --policy` makes of a `FILE:LINE`). A `FILE:LINE` itself needs line tables the shim
/// does not read.
fn bad_site(value: &[u8]) -> Option<&'static [u8]> {
    let file_line = value.split(|&c| c == b',').map(trim).any(|item| {
        item.iter()
            .rposition(|&c| c == b':')
            .is_some_and(|at| at + 1 < item.len() && item[at + 1..].iter().all(u8::is_ascii_digit))
    });
    file_line.then_some(
        b"a FILE:LINE site is resolved by `locksuit run --policy`, before the program starts; \
with $LOCKSUIT_POLICY set by hand, name the function instead" as &[u8],
    )
}

/// A site item `PROGRAM@0xLO-0xHI`: a range of addresses in the file of
/// the executable named PROGRAM (a child that runs another program
/// matches none of them).
pub fn address_range(item: &[u8]) -> Option<(&[u8], u64, u64)> {
    let at = item.iter().position(|&c| c == b'@')?;
    let (program, range) = (&item[..at], &item[at + 1..]);
    let dash = range.iter().position(|&c| c == b'-')?;
    let (lo, hi) = (&range[..dash], &range[dash + 1..]);
    let lo = crate::text::hex(lo.strip_prefix(b"0x")?)?;
    let hi = crate::text::hex(hi.strip_prefix(b"0x")?)?;
    (!program.is_empty() && lo < hi).then_some((program, lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_parsed_or_refused() {
        assert!(matches!(parse_line(b"  # a comment"), Line::Empty));
        assert!(matches!(
            parse_line(b"processes = tiny, test_*"),
            Line::List(ListKey::Processes, b"tiny, test_*")
        ));
        assert!(matches!(
            parse_line(b"min_wait_us = 250 # short waits out"),
            Line::Number(NumberKey::MinWaitUs, 250)
        ));
        assert!(matches!(parse_line(b"min_wait_us = 2.5"), Line::Bad(_)));
        assert!(matches!(
            parse_line(b"threads = worker*"),
            Line::List(ListKey::Threads, b"worker*")
        ));
        assert!(matches!(
            parse_line(b"snapshot_on_idle = yes"),
            Line::Number(NumberKey::SnapshotOnIdle, 1)
        ));
        assert!(matches!(parse_line(b"snapshot_on_idle = 2"), Line::Bad(_)));
        assert!(matches!(parse_line(b"snapshot_step = 0"), Line::Bad(_)));
        assert!(matches!(parse_line(b"depth = 33"), Line::Bad(_)));
        assert!(matches!(
            parse_line(b"depth = 4"),
            Line::Number(NumberKey::Depth, 4)
        ));
        assert!(matches!(parse_line(b"sites = main.c:42"), Line::Bad(_)));
        assert!(matches!(
            parse_line(b"sites = knob@0x1189-0x11a0, worker"),
            Line::List(ListKey::Sites, _)
        ));
        assert_eq!(
            address_range(b"knob@0x1189-0x11a0"),
            Some((&b"knob"[..], 0x1189, 0x11a0))
        );
        assert_eq!(address_range(b"knob@0x11a0-0x1189"), None);
        assert_eq!(address_range(b"0x1189-0x11a0"), None);
        assert_eq!(address_range(b"worker"), None);
        assert!(matches!(
            parse_line(b"sites = worker*, std::*"),
            Line::List(ListKey::Sites, _)
        ));
        assert!(matches!(parse_line(b"waiters = 3"), Line::Bad(_)));
        assert!(matches!(parse_line(b"no equals"), Line::Bad(_)));
    }
}
