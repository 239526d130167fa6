//! No input may make the reader panic, hang or misread: a hand-built valid
//! trace reads back exactly, and random bytes, bit flips and truncations of
//! it give an error or warnings, never a panic.

use locksuit_format::*;
use proptest::prelude::*;

fn bytes_of<T: Pod>(v: &T) -> Vec<u8> {
    // SAFETY: T is Pod (repr(C) integers, no padding), so all bytes are initialised.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
        .to_vec()
}

fn zeroed<T: Pod>() -> T {
    read_pod(&vec![0u8; std::mem::size_of::<T>()]).unwrap()
}

fn hdr(kind: RecordKind, size: usize, aux: u32) -> RecordHeader {
    RecordHeader {
        kind: kind as u16,
        size: size as u16,
        aux,
    }
}

/// Writes `records` into block `index` of `buf` as lane 0, block `seq`.
fn put_block(buf: &mut [u8], index: usize, seq: u32, records: &[Vec<u8>]) {
    put_block_of(buf, BLOCK_LANE, index, seq, records);
}

fn put_block_of(buf: &mut [u8], kind: u32, index: usize, seq: u32, records: &[Vec<u8>]) {
    let payload: Vec<u8> = records.concat();
    let block = BlockHeader {
        kind,
        lane: 0,
        seq,
        used: payload.len() as u32,
    };
    let at = index * BLOCK_SIZE;
    buf[at..at + BLOCK_HEADER_SIZE].copy_from_slice(&bytes_of(&block));
    buf[at + BLOCK_HEADER_SIZE..at + BLOCK_HEADER_SIZE + payload.len()].copy_from_slice(&payload);
}

/// A release of the sample's lock at its line by its thread, at `time`.
fn release_event(time: u64) -> EventRecord {
    EventRecord {
        hdr: hdr(
            RecordKind::Event,
            std::mem::size_of::<EventRecord>(),
            EVENT_RELEASED,
        ),
        lock_id: 1,
        site_id: 9,
        tid: 43,
        time,
        ..Default::default()
    }
}

/// A valid four-block trace: one thread, one lock, one site with a
/// two-frame chain, two counters split across two blocks (written in
/// reverse block order, which the reader must undo), and an event block
/// with three events.
fn sample_trace() -> Vec<u8> {
    let mut buf = vec![0u8; 4 * BLOCK_SIZE];
    let mut h: FileHeader = zeroed();
    h.magic = MAGIC;
    h.version = FORMAT_VERSION;
    h.byte_order = BYTE_ORDER_MARK;
    h.header_size = std::mem::size_of::<FileHeader>() as u32;
    h.block_size = BLOCK_SIZE as u32;
    h.max_blocks = 100;
    h.blocks_reserved = 4;
    h.blocks_backed = 4;
    h.pid = 42;
    h.flags = FLAG_COMPLETE;
    h.exe_len = 4;
    h.exe[..4].copy_from_slice(b"/app");
    buf[..std::mem::size_of::<FileHeader>()].copy_from_slice(&bytes_of(&h));

    let thread = ThreadRecord {
        hdr: hdr(RecordKind::Thread, std::mem::size_of::<ThreadRecord>(), 0),
        tid: 43,
        ..Default::default()
    };
    let lock = LockRecord {
        hdr: hdr(RecordKind::Lock, std::mem::size_of::<LockRecord>(), 0),
        id: 1,
        kind: ObjectKind::Mutex as u32,
        origin: ORIGIN_INIT,
        address: 0xdead0,
        ..Default::default()
    };
    let site = SiteRecord {
        hdr: hdr(RecordKind::Site, site_record_size(2), 2),
        id: 9,
        module_epoch: 0,
    };
    let mut site_bytes = bytes_of(&site);
    site_bytes.extend_from_slice(&0x401234u64.to_le_bytes());
    site_bytes.extend_from_slice(&0x401500u64.to_le_bytes());
    let counter = |engagements| CounterRecord {
        hdr: hdr(
            RecordKind::Counter,
            std::mem::size_of::<CounterRecord>(),
            MODE_EXCLUSIVE,
        ),
        lock_id: 1,
        site_id: 9,
        engagements,
        ..Default::default()
    };
    // Block 2 holds the lane's first block (seq 0), block 1 its second.
    put_block(
        &mut buf,
        2,
        0,
        &[
            bytes_of(&thread),
            bytes_of(&lock),
            site_bytes,
            bytes_of(&counter(10)),
        ],
    );
    put_block(&mut buf, 1, 1, &[bytes_of(&counter(5))]);
    put_block_of(
        &mut buf,
        BLOCK_EVENTS,
        3,
        0,
        &[
            bytes_of(&release_event(100)),
            bytes_of(&release_event(200)),
            bytes_of(&release_event(300)),
        ],
    );
    buf
}

/// Reads, and walks the events both ways (they are decoded only then), so
/// damage inside them is exercised too.
fn read(bytes: &[u8]) -> Result<Trace, TraceError> {
    let trace = read_trace_bytes(std::path::Path::new("test.trace"), bytes)?;
    let in_lanes = trace.events.iter().count();
    let mut merged = 0;
    trace.events.for_each_merged(|_| merged += 1);
    assert_eq!(in_lanes, merged, "both walks see the same events");
    Ok(trace)
}

#[test]
fn valid_trace_reads_back_exactly() {
    let t = read(&sample_trace()).expect("valid");
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    assert_eq!(t.header.pid, 42);
    assert_eq!(t.header.exe, "/app");
    assert!(t.header.complete());
    assert_eq!(t.threads.len(), 1);
    assert_eq!(t.locks.len(), 1);
    assert_eq!(t.sites.len(), 1);
    assert_eq!(t.sites[0].frames, vec![0x401234, 0x401500]);
    let engagements: Vec<u64> = t
        .counters
        .iter()
        .map(|(thread, c)| {
            assert_eq!(*thread, 0, "counters after the thread record belong to it");
            c.engagements
        })
        .collect();
    assert_eq!(
        engagements,
        vec![10, 5],
        "lane blocks are read in seq order"
    );
    let times: Vec<u64> = t.events.iter().map(|e| e.time).collect();
    assert_eq!(times, vec![100, 200, 300]);
    assert_eq!(
        t.events.for_each_merged(|_| {}),
        0,
        "no damaged event block"
    );
}

#[test]
fn newer_version_and_foreign_byte_order_are_refused() {
    let mut b = sample_trace();
    b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let e = read(&b).unwrap_err().to_string();
    assert!(e.contains("newer"), "{e}");
    let mut b = sample_trace();
    b[12..16].copy_from_slice(&BYTE_ORDER_MARK.to_be_bytes());
    assert!(read(&b).unwrap_err().to_string().contains("byte order"));
}

#[test]
fn truncation_inside_the_blocks_is_an_error() {
    let b = sample_trace();
    for len in [
        0,
        7,
        16,
        100,
        BLOCK_SIZE,
        2 * BLOCK_SIZE + 1,
        3 * BLOCK_SIZE - 1,
        4 * BLOCK_SIZE - 1,
    ] {
        assert!(read(&b[..len]).is_err(), "length {len} accepted");
    }
}

#[test]
fn corrupt_record_sizes_become_warnings() {
    let mut b = sample_trace();
    // The first record of block 2 claims an impossible size.
    let at = 2 * BLOCK_SIZE + BLOCK_HEADER_SIZE + 2;
    b[at..at + 2].copy_from_slice(&7u16.to_le_bytes());
    let t = read(&b).expect("still readable");
    assert!(!t.warnings.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..70_000)) {
        let _ = read(&bytes);
    }

    #[test]
    fn random_bytes_after_a_valid_header_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..(3 * BLOCK_SIZE))) {
        let mut b = sample_trace();
        let n = tail.len();
        b[BLOCK_SIZE..BLOCK_SIZE + n].copy_from_slice(&tail);
        let _ = read(&b);
    }

    #[test]
    fn bit_flips_never_panic(flips in proptest::collection::vec((0usize..4 * BLOCK_SIZE, 0u8..8), 1..40)) {
        let mut b = sample_trace();
        for (at, bit) in flips {
            b[at] ^= 1 << bit;
        }
        let _ = read(&b);
    }

    #[test]
    fn truncation_anywhere_never_panics(len in 0usize..4 * BLOCK_SIZE) {
        let b = sample_trace();
        prop_assert!(read(&b[..len]).is_err());
    }
}

#[test]
fn a_damaged_event_is_counted_and_the_rest_of_its_block_skipped() {
    let mut b = sample_trace();
    // The second event of block 3 claims an impossible size.
    let at = 3 * BLOCK_SIZE + BLOCK_HEADER_SIZE + std::mem::size_of::<EventRecord>() + 2;
    b[at..at + 2].copy_from_slice(&7u16.to_le_bytes());
    let t = read(&b).expect("still readable");
    let times: Vec<u64> = t.events.iter().map(|e| e.time).collect();
    assert_eq!(times, vec![100]);
    assert_eq!(t.events.for_each_merged(|_| {}), 1, "one damaged block");
}

/// A trace still being written: the file was mapped before the writer
/// backed its last blocks (the header counts more than the mapping holds).
/// It is read up to the whole blocks in hand, with a warning, not refused.
#[test]
fn an_unfinished_trace_is_read_up_to_what_the_file_held() {
    let mut b = sample_trace();
    let flags_at = std::mem::offset_of!(FileHeader, flags);
    b[flags_at..flags_at + 4].copy_from_slice(&0u32.to_le_bytes());
    // Blocks 0..3 in hand (header and both lane blocks, half of the event block).
    let t = read(&b[..3 * BLOCK_SIZE + BLOCK_SIZE / 2]).expect("an unfinished trace is read");
    assert!(!t.header.complete());
    assert_eq!(t.threads.len(), 1);
    assert_eq!(t.locks.len(), 1);
    assert_eq!(t.counters.len(), 2, "both lane blocks were in hand");
    assert_eq!(t.events.iter().count(), 0, "the event block was not");
    assert!(
        t.warnings
            .iter()
            .any(|w| w.contains("still writing") && w.contains("counts 4 blocks, 3 were")),
        "{:?}",
        t.warnings
    );
    // With all four blocks in hand there is nothing to warn about.
    let t = read(&b).expect("whole");
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    assert_eq!(t.events.iter().count(), 3);
    // Cut inside the header block: still not a trace.
    assert!(read(&b[..100]).is_err());
}

/// The sample as its process still writes it: not complete, and a second
/// event block for the lane (one event), so the first is finished.
fn live_trace() -> Vec<u8> {
    let mut buf = sample_trace();
    buf.resize(5 * BLOCK_SIZE, 0);
    set_header(&mut buf, |h| {
        h.flags = 0;
        h.blocks_reserved = 5;
        h.blocks_backed = 5;
    });
    put_block_of(
        &mut buf,
        BLOCK_EVENTS,
        4,
        1,
        &[bytes_of(&release_event(400))],
    );
    buf
}

fn read_indexed(bytes: &[u8], index: &mut BlockIndex) -> Trace {
    let source: TraceBytes = std::sync::Arc::new(bytes.to_vec());
    read_trace_indexed(
        std::path::Path::new("live.trace"),
        source,
        &mut || {},
        index,
    )
    .unwrap()
}

fn event_times(t: &Trace) -> Vec<u64> {
    t.events.iter().map(|e| e.time).collect()
}

fn set_header(buf: &mut [u8], change: impl FnOnce(&mut FileHeader)) {
    let mut h: FileHeader = read_pod(buf).unwrap();
    change(&mut h);
    buf[..std::mem::size_of::<FileHeader>()].copy_from_slice(&bytes_of(&h));
}

#[test]
fn a_trace_read_again_rereads_only_what_may_have_changed() {
    let mut b = live_trace();
    let mut index = BlockIndex::default();
    let first = read_indexed(&b, &mut index);
    assert_eq!(event_times(&first), [100, 200, 300, 400]);
    assert_eq!(index.remembered(), 4);

    // The program goes on: an event added to the lane's last event block,
    // and a counter updated in place in a record block.
    let used_at = 4 * BLOCK_SIZE + core::mem::offset_of!(BlockHeader, used);
    let size = std::mem::size_of::<EventRecord>();
    let at = 4 * BLOCK_SIZE + BLOCK_HEADER_SIZE + size;
    b[at..at + size].copy_from_slice(&bytes_of(&release_event(500)));
    b[used_at..used_at + 4].copy_from_slice(&(2 * size as u32).to_le_bytes());
    let counter_at = 2 * BLOCK_SIZE
        + BLOCK_HEADER_SIZE
        + std::mem::size_of::<ThreadRecord>()
        + std::mem::size_of::<LockRecord>()
        + site_record_size(2)
        + core::mem::offset_of!(CounterRecord, engagements);
    b[counter_at..counter_at + 8].copy_from_slice(&11u64.to_le_bytes());
    // The finished event block's header damaged: a read that looked at it
    // again would skip the block.
    b[3 * BLOCK_SIZE..3 * BLOCK_SIZE + 4].copy_from_slice(&77u32.to_le_bytes());

    let again = read_indexed(&b, &mut index);
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(event_times(&again), [100, 200, 300, 400, 500]);
    assert_eq!(again.events.stored(), 5, "counted from the blocks' sizes");
    let engagements: Vec<u64> = again.counters.iter().map(|(_, c)| c.engagements).collect();
    assert_eq!(engagements, [11, 5], "record blocks are read again");

    // A new event block, and the next after it in the lane, each written
    // at once: merged in after the blocks the index knew, in the lane's order.
    let mut grown = b.clone();
    grown.resize(7 * BLOCK_SIZE, 0);
    set_header(&mut grown, |h| {
        h.blocks_reserved = 7;
        h.blocks_backed = 7;
    });
    put_block_of(
        &mut grown,
        BLOCK_EVENTS,
        6,
        2,
        &[bytes_of(&release_event(600))],
    );
    put_block_of(
        &mut grown,
        BLOCK_EVENTS,
        5,
        3,
        &[bytes_of(&release_event(700))],
    );
    let grown = read_indexed(&grown, &mut index.clone());
    assert_eq!(event_times(&grown), [100, 200, 300, 400, 500, 600, 700]);

    // The file cut since (the header still counts five blocks): what the
    // index knew beyond its end is not read.
    let cut = read_indexed(&b[..4 * BLOCK_SIZE], &mut index.clone());
    assert_eq!(event_times(&cut), [100, 200, 300]);

    // What a fresh read sees: the damage, and only the last block's events.
    let fresh = read_indexed(&b, &mut BlockIndex::default());
    assert!(
        fresh
            .warnings
            .iter()
            .any(|w| w.contains("unknown block kind 77")),
        "{:?}",
        fresh.warnings
    );
    assert_eq!(event_times(&fresh), [400, 500]);

    // Another trace (another pid) given the same index: nothing is kept.
    let mut other = b.clone();
    set_header(&mut other, |h| h.pid = 7);
    assert_eq!(event_times(&read_indexed(&other, &mut index)), [400, 500]);

    // Under the flight recorder blocks are reused: nothing is kept either.
    let mut index = BlockIndex::default();
    let mut flight = live_trace();
    read_indexed(&flight, &mut index);
    flight[3 * BLOCK_SIZE..3 * BLOCK_SIZE + 4].copy_from_slice(&77u32.to_le_bytes());
    set_header(&mut flight, |h| h.flags |= FLAG_EVENTS_OVERWRITTEN);
    assert_eq!(event_times(&read_indexed(&flight, &mut index)), [400]);
    assert_eq!(index.remembered(), 0);
}

/// A follower says how far it has read each lane; the blocks before that
/// are left out of later reads (their headers are not looked at again),
/// so a read of a long trace costs what was added since, and the index
/// holds the record blocks and what is not read yet.
#[test]
fn blocks_a_follower_has_read_are_not_read_again() {
    let mut b = live_trace();
    let mut index = BlockIndex::default();
    let first = read_indexed(&b, &mut index);
    let mut positions = locksuit_format::events::LanePositions::new();
    let mut seen = Vec::new();
    first
        .events
        .for_each_merged_after(&mut positions, |e| seen.push(e.time));
    assert_eq!(seen, [100, 200, 300, 400]);
    assert_eq!(
        positions.get(&0).map(|p| p.0),
        Some(4 * BLOCK_SIZE + BLOCK_HEADER_SIZE),
        "stopped in the lane's last block"
    );
    index.forget_read(&positions);
    assert_eq!(
        index.remembered(),
        3,
        "the two record blocks and the lane's last event block"
    );

    // The finished event block damaged whole: a read that looked at it
    // would warn about its kind.
    b[3 * BLOCK_SIZE..4 * BLOCK_SIZE].fill(0xff);
    // The program goes on: one more event in block 4, and a block 5.
    let size = std::mem::size_of::<EventRecord>();
    let at = 4 * BLOCK_SIZE + BLOCK_HEADER_SIZE + size;
    b[at..at + size].copy_from_slice(&bytes_of(&release_event(500)));
    let used_at = 4 * BLOCK_SIZE + core::mem::offset_of!(BlockHeader, used);
    b[used_at..used_at + 4].copy_from_slice(&(2 * size as u32).to_le_bytes());
    b.resize(6 * BLOCK_SIZE, 0);
    set_header(&mut b, |h| {
        h.blocks_reserved = 6;
        h.blocks_backed = 6;
    });
    put_block_of(&mut b, BLOCK_EVENTS, 5, 2, &[bytes_of(&release_event(600))]);

    let again = read_indexed(&b, &mut index);
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(
        event_times(&again),
        [400, 500, 600],
        "the blocks not read yet"
    );
    let mut fresh = Vec::new();
    again
        .events
        .for_each_merged_after(&mut positions, |e| fresh.push(e.time));
    assert_eq!(fresh, [500, 600], "from where the follower stopped");
    index.forget_read(&positions);
    assert_eq!(
        index.remembered(),
        3,
        "block 4 is read now: block 5 is kept"
    );

    // A fresh read still has every block (and sees the damage).
    let whole = read_indexed(&b, &mut BlockIndex::default());
    assert!(
        whole
            .warnings
            .iter()
            .any(|w| w.contains("unknown block kind")),
        "{:?}",
        whole.warnings
    );
}

/// What reading a long live trace again costs, by how the follower reads:
/// `cargo test --release -p locksuit-format --test reader_robustness
/// read_again_speed -- --ignored --nocapture` (figures in
/// docs/merged-stream.md).
#[test]
#[ignore]
fn read_again_speed() {
    const BLOCKS: usize = 20_000;
    let mut b = live_trace();
    b.resize((BLOCKS + 5) * BLOCK_SIZE, 0);
    set_header(&mut b, |h| {
        h.blocks_reserved = (BLOCKS + 5) as u32;
        h.blocks_backed = (BLOCKS + 5) as u32;
        h.max_blocks = (BLOCKS + 100) as u32;
    });
    for i in 0..BLOCKS {
        let event = release_event(500 + i as u64);
        put_block_of(
            &mut b,
            BLOCK_EVENTS,
            5 + i,
            2 + i as u32,
            &[bytes_of(&event)],
        );
    }
    let source: TraceBytes = std::sync::Arc::new(b);
    let read = |index: &mut BlockIndex| {
        read_trace_indexed(
            std::path::Path::new("live.trace"),
            source.clone(),
            &mut || {},
            index,
        )
        .unwrap()
    };
    for forget in [false, true] {
        let mut index = BlockIndex::default();
        let mut positions = locksuit_format::events::LanePositions::new();
        let first = read(&mut index);
        first.events.for_each_merged_after(&mut positions, |_| {});
        if forget {
            index.forget_read(&positions);
        }
        let runs = 200;
        let start = std::time::Instant::now();
        for _ in 0..runs {
            let again = read(&mut index);
            let mut n = 0;
            again
                .events
                .for_each_merged_after(&mut positions, |_| n += 1);
            assert_eq!(n, 0);
            if forget {
                index.forget_read(&positions);
            }
        }
        eprintln!(
            "{} event blocks, read again {}: {:.1} µs a read",
            BLOCKS + 2,
            if forget {
                "forgetting what was read"
            } else {
                "keeping every block"
            },
            start.elapsed().as_secs_f64() * 1e6 / runs as f64
        );
    }
}
