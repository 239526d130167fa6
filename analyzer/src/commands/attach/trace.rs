//! An attached recording as a trace in the shared format, which `report`,
//! `export`, `flamegraph`, `diff` and `top` read as any other: the shim's
//! model of a futex word (shim/src/recorder/api/futex.rs) filled from what
//! the kernel saw.
//!
//! - Each thread is a lane. A futex word is a lock of kind `futex` (a
//!   `mutex` when `--locks` saw it as one, or a blocked thread's word named
//!   its owner). A wait is a contended engagement at the stack's chain, with
//!   an `EVENT_BLOCKED` (a timeout: `EVENT_TIMED_OUT`); a wake that woke
//!   threads is an `EVENT_RELEASED`, and of a futex word a post at its line. A word's sequence counts
//!   its wakes in time order, so a wait that a wake ended carries that
//!   wake's sequence, and the report names its waker.
//! - `--locks`: per thread, mutex and line, the acquisitions and holds, at
//!   the line (the caller's return address); a wait inside a probed call is
//!   counted there too (one site), as contended, not as another engagement.
//! - Threads blocked when attach began, and on the same word when it
//!   ended, wait still in their thread record, with the lock's holder,
//!   which holds it: the report explains a deadlock among them.
//! - The scheduler's figures: time on a CPU is the thread's CPU time,
//!   preempted time its runnable time; its switches, voluntary or not.

use super::bpf::OffReason;
use super::report::{Recording, Summary};
use locksuit_format::writer::{blank_header, TraceWriter};
use locksuit_format::*;
use std::collections::{BTreeMap, HashMap};

/// `-ETIMEDOUT`, a futex wait's return when its timeout passed.
const TIMED_OUT: i64 = -(libc::ETIMEDOUT as i64);

/// Times of the attached period, monotonic, and what the header says of
/// the process beyond the recording.
pub struct Period {
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    pub ppid: u32,
    pub cpus: u32,
}

/// The counters and events being gathered, per lane.
#[derive(Default)]
struct Gathered {
    locks: Vec<LockRecord>,
    lock_of: HashMap<u64, u32>,
    sites: Vec<(u32, Vec<u64>)>,
    site_of: HashMap<Vec<u64>, u32>,
    /// (lane, lock, site, mode) -> counter.
    counters: BTreeMap<(u32, u32, u32, u32), CounterRecord>,
    events: Vec<(u32, EventRecord)>,
}

impl Gathered {
    fn lock(&mut self, address: u64, kind: ObjectKind, created_ns: u64) -> u32 {
        if let Some(&id) = self.lock_of.get(&address) {
            return id;
        }
        let id = self.locks.len() as u32 + 1;
        self.locks.push(LockRecord {
            hdr: header(RecordKind::Lock, 0),
            id,
            kind: kind as u32,
            origin: ORIGIN_FIRST_USE,
            address,
            created_ns,
            ..Default::default()
        });
        self.lock_of.insert(address, id);
        id
    }

    fn site(&mut self, chain: &[u64]) -> u32 {
        let chain: Vec<u64> = chain.iter().copied().take(MAX_CHAIN_DEPTH).collect();
        if let Some(&id) = self.site_of.get(&chain) {
            return id;
        }
        let id = self.sites.len() as u32 + 1;
        self.sites.push((id, chain.clone()));
        self.site_of.insert(chain, id);
        id
    }

    fn counter(&mut self, lane: u32, lock: u32, site: u32, mode: u32) -> &mut CounterRecord {
        self.counters
            .entry((lane, lock, site, mode))
            .or_insert_with(|| CounterRecord {
                hdr: header(RecordKind::Counter, mode),
                lock_id: lock,
                site_id: site,
                ..Default::default()
            })
    }
}

fn header(kind: RecordKind, aux: u32) -> RecordHeader {
    RecordHeader {
        kind: kind as u16,
        size: 0,
        aux,
    }
}

fn event(kind: u32, (lock_id, site_id): (u32, u32), tid: u32) -> EventRecord {
    EventRecord {
        hdr: header(RecordKind::Event, kind),
        lock_id,
        site_id,
        tid,
        ..Default::default()
    }
}

/// Copies `text` into a fixed field, cut to fit (a NUL left at the end
/// where it is a name).
fn put(field: &mut [u8], text: &[u8]) -> usize {
    let n = text.len().min(field.len());
    field[..n].copy_from_slice(&text[..n]);
    n
}

/// The trace's bytes: `notes` are what it was made with and what it
/// cannot have (the report says them).
pub fn build(r: &Recording, s: &Summary, period: &Period, notes: &[&str]) -> Vec<u8> {
    let start = period.start_mono_ns;
    let mut g = Gathered::default();
    // Every thread seen: named, with events, blocked, or counted.
    let mut tids: Vec<u32> = r.names.keys().copied().collect();
    tids.extend(s.calls.iter().map(|c| c.tid));
    tids.extend(s.blocked.iter().map(|b| b.tid));
    tids.extend(r.off_cpu.iter().map(|o| o.tid));
    if let Some((lines, _)) = &r.locks {
        tids.extend(lines.iter().map(|l| l.tid));
    }
    tids.sort_unstable();
    tids.dedup();
    let lane_of: HashMap<u32, u32> = tids
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, i as u32))
        .collect();

    // Words known to be mutexes: probed by --locks, or a blocked thread's
    // word whose owner the mutex named.
    if let Some((lines, _)) = &r.locks {
        for line in lines {
            g.lock(line.mutex, ObjectKind::Mutex, start);
        }
    }
    for b in r.blocked.iter().filter(|b| b.holder.is_some()) {
        g.lock(b.uaddr, ObjectKind::Mutex, start);
    }
    let probed: std::collections::HashSet<u64> = r
        .locks
        .iter()
        .flat_map(|(lines, _)| lines.iter().map(|l| l.mutex))
        .collect();

    // A word's sequence at a time: the wakes that woke threads before it.
    let mut wakes: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in r.events.iter().filter(|e| !e.is_wait() && e.ret > 0) {
        wakes.entry(e.uaddr).or_default().push(e.enter_ns);
    }
    for times in wakes.values_mut() {
        times.sort_unstable();
    }
    let sequence_at = |uaddr: u64, t: u64| -> u32 {
        wakes
            .get(&uaddr)
            .map_or(0, |w| w.partition_point(|&at| at <= t) as u32)
    };
    for (e, call) in r.events.iter().zip(&s.calls) {
        let Some(&lane) = lane_of.get(&e.tid) else {
            continue;
        };
        // A word made a mutex above stays one; any other is a futex word.
        let mutex = probed.contains(&e.uaddr);
        let lock = g.lock(e.uaddr, ObjectKind::Futex, e.enter_ns);
        let kind = ObjectKind::from_u8(g.locks[lock as usize - 1].kind as u8);
        // A wait inside a probed mutex call is that call's, at its line.
        let counted_at_line = mutex && e.probed_ret != 0;
        let site = if counted_at_line {
            g.site(&[e.probed_ret])
        } else {
            g.site(&call.chain)
        };
        if e.is_wait() {
            let wait_ns = e.exit_ns.saturating_sub(e.enter_ns);
            let mut ev = event(EVENT_BLOCKED, (lock, site), e.tid);
            ev.time = e.enter_ns;
            ev.time2 = e.exit_ns;
            ev.seq = sequence_at(e.uaddr, e.enter_ns);
            ev.seq2 = sequence_at(e.uaddr, e.exit_ns);
            let c = g.counter(lane, lock, site, MODE_EXCLUSIVE);
            if e.ret == TIMED_OUT {
                c.timeouts += 1;
                ev.hdr.aux = EVENT_TIMED_OUT;
            } else {
                if !counted_at_line {
                    c.engagements += 1;
                }
                c.contended += 1;
                c.task_switches += 1;
                c.wait_ns += wait_ns;
            }
            g.events.push((lane, ev));
        } else if e.ret > 0 {
            // A futex word's wake is a post at its line, as the shim counts
            // it; a mutex's is its unlock, no engagement.
            if kind == Some(ObjectKind::Futex) {
                let c = g.counter(lane, lock, site, MODE_POST);
                c.engagements += 1;
                c.task_switches += 1;
            }
            let mut ev = event(EVENT_RELEASED, (lock, site), e.tid);
            ev.time = e.enter_ns;
            ev.seq2 = sequence_at(e.uaddr, e.enter_ns);
            ev.other = u32::try_from(e.ret).unwrap_or(u32::MAX);
            g.events.push((lane, ev));
        }
    }
    if let Some((lines, _)) = &r.locks {
        for line in lines {
            let Some(&lane) = lane_of.get(&line.tid) else {
                continue;
            };
            let lock = g.lock(line.mutex, ObjectKind::Mutex, start);
            let site = g.site(&[line.ret]);
            let c = g.counter(lane, lock, site, MODE_EXCLUSIVE);
            c.engagements += line.stats.acquisitions;
            c.hold_ns += line.stats.hold_ns;
            c.hold_samples += line.stats.holds;
        }
    }

    // Threads blocked since before attach and on the same word at its
    // end: waiting, with the holder, which holds the lock. (A wait that
    // began while attached and goes on is not claimed: its stack was not
    // read.)
    let mut waits: HashMap<u32, (u32, u32, u32)> = HashMap::new();
    let mut holds: HashMap<u32, Vec<u32>> = HashMap::new();
    for b in &s.blocked {
        let uaddr = u64::from_str_radix(b.uaddr.trim_start_matches("0x"), 16).unwrap_or(0);
        if !r.blocked_at_end.contains(&(b.tid, uaddr)) {
            continue;
        }
        let kind = if b.holder.is_some() {
            ObjectKind::Mutex
        } else {
            ObjectKind::Futex
        };
        let lock = g.lock(uaddr, kind, start);
        let site = g.site(&b.addresses);
        let holder = b.holder.unwrap_or(0);
        waits.insert(b.tid, (lock, site, holder));
        if holder != 0 {
            holds.entry(holder).or_default().push(lock);
        }
    }

    let mut h = blank_header();
    h.pid = r.pid;
    h.ppid = period.ppid;
    h.flags = FLAG_ATTACHED;
    h.hold_sample_period = 1;
    h.start_unix_ns = r
        .started
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    h.start_mono_ns = start;
    h.end_mono_ns = period.end_mono_ns;
    h.exe_len = put(&mut h.exe, r.exe.as_bytes()) as u32;
    h.cpus = period.cpus;
    let notes: String = notes.iter().map(|n| format!("{n}\n")).collect();
    h.shim_notes_len = put(&mut h.shim_notes, notes.as_bytes()) as u32;
    let mut w = TraceWriter::new(h);

    let off = |tid: u32, reason: OffReason| {
        r.off_cpu
            .iter()
            .find(|o| o.tid == tid && o.reason == reason)
            .map(|o| o.stats)
    };
    for &tid in &tids {
        let lane = lane_of[&tid];
        let mut t = ThreadRecord {
            hdr: header(RecordKind::Thread, 0),
            tid,
            start_ns: start,
            ..Default::default()
        };
        if tid == r.pid {
            t.flags |= THREAD_MAIN;
        }
        if let Some(name) = r.names.get(&tid) {
            put(&mut t.name[..THREAD_NAME_MAX - 1], name.as_bytes());
        }
        if r.off_cpu.iter().any(|o| o.tid == tid) {
            let preempted = off(tid, OffReason::Preempted).unwrap_or_default();
            t.flags |= THREAD_RUNNABLE_KNOWN | THREAD_SWITCHES_KNOWN;
            t.runnable_ns = preempted.total_ns;
            t.involuntary_switches = preempted.count;
            t.voluntary_switches = r
                .off_cpu
                .iter()
                .filter(|o| o.tid == tid && o.reason != OffReason::Preempted)
                .map(|o| o.stats.count)
                .sum();
        }
        if let Some(&cpu) = r.on_cpu.get(&tid) {
            t.flags |= THREAD_USAGE;
            t.cpu_ns = cpu;
        }
        if let Some(&(lock, site, holder)) = waits.get(&tid) {
            t.wait_kind = WAIT_LOCK;
            t.wait_object = lock;
            t.wait_site = site;
            t.wait_holder = holder;
            t.wait_since_ns = start;
        }
        for (slot, &lock) in holds
            .get(&tid)
            .into_iter()
            .flatten()
            .enumerate()
            .take(WAIT_HELD)
        {
            t.wait_held[slot] = lock;
        }
        // Ignored: a record always fits a block.
        let _ = w.record(lane, &t, &[]);
        if lane == 0 {
            write_identities(&mut w, r, &g);
        }
    }
    for (&(lane, ..), c) in &g.counters {
        let _ = w.record(lane, c, &[]);
    }
    g.events
        .sort_by_key(|(lane, e)| (*lane, e.time2.max(e.time)));
    for (lane, e) in &g.events {
        w.event(*lane, e);
    }
    w.finish()
}

/// The modules, locks and sites, in the first lane (any lane may hold them).
fn write_identities(w: &mut TraceWriter, r: &Recording, g: &Gathered) {
    for m in &r.modules {
        let path = &m.path.as_bytes()[..m.path.len().min(MODULE_PATH_MAX)];
        let mut rec = ModuleRecord {
            hdr: header(RecordKind::Module, path.len() as u32),
            bias: m.bias,
            start: m.start,
            end: m.end,
            epoch: m.epoch,
            file_size: m.file_size,
            file_mtime_ns: m.file_mtime_ns,
            ..Default::default()
        };
        rec.build_id_len = put(&mut rec.build_id, &m.build_id) as u32;
        let _ = w.record(0, &rec, path);
    }
    for l in &g.locks {
        let _ = w.record(0, l, &[]);
    }
    for (id, chain) in &g.sites {
        let rec = SiteRecord {
            hdr: header(RecordKind::Site, chain.len() as u32),
            id: *id,
            module_epoch: u32::MAX,
        };
        let frames: Vec<u8> = chain.iter().flat_map(|a| a.to_le_bytes()).collect();
        let _ = w.record(0, &rec, &frames);
    }
}
