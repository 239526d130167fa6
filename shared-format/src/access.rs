//! Data-level suitability (programs built with `locksuit cc`): what the
//! critical sections touched. The shim keeps, per 8-byte granule of memory
//! accessed while a lock was held, the threads that touched it and the
//! lines whose critical sections did; at process exit each granule becomes
//! an [`AccessRecord`].

use crate::layout::Pod;

/// Bytes of memory one granule covers.
pub const GRANULE_BYTES: u64 = 8;
/// Lines (engagement sites) a granule remembers; beyond, it is marked
/// `ACCESS_MORE_SITES`.
pub const ACCESS_SITES: usize = 4;
/// `AccessRecord::threads` bit for every thread from the 64th on: the
/// analyzer counts it as two threads (never "private").
pub const ACCESS_MANY_THREADS: u64 = 1 << 63;

/// `AccessRecord::flags`: some access was a store.
pub const ACCESS_WRITTEN: u32 = 1 << 0;
/// More lines touched it than `sites` holds.
pub const ACCESS_MORE_SITES: u32 = 1 << 1;
/// The granule lay in a heap block that was freed later (a block at the
/// same address afterwards is another resource, with a record of its own).
pub const ACCESS_FREED: u32 = 1 << 2;
/// Some thread stored to it while holding no lock, after it was first
/// touched under one: the lock did not keep its writers out.
pub const ACCESS_WRITTEN_UNLOCKED: u32 = 1 << 3;

/// One granule touched under a lock.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AccessRecord {
    pub hdr: crate::layout::RecordHeader,
    /// Its address (a multiple of `GRANULE_BYTES`).
    pub address: u64,
    /// A bit per thread that touched it under a lock (its registration
    /// order; `ACCESS_MANY_THREADS` for the 64th and later).
    pub threads: u64,
    /// The innermost lock held at its first access.
    pub lock: u32,
    pub flags: u32,
    /// The sites of the engagements whose critical sections touched it
    /// (the site that took the innermost held lock), and their accesses.
    pub sites: [u32; ACCESS_SITES],
    pub accesses: [u32; ACCESS_SITES],
    /// The heap block it lies in was allocated by the call returning here
    /// (0: not a heap block seen allocated), in module-map epoch
    /// `alloc_epoch`: the report names the data by that line.
    pub alloc_pc: u64,
    pub alloc_epoch: u32,
    pub _pad: u32,
}

/// Header of the data-level summary, written once at process exit before
/// the granules: which build, and what could not be kept.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AccessSummaryRecord {
    pub hdr: crate::layout::RecordHeader,
    /// Accesses seen under a lock, and those that found no room in the table.
    pub accesses: u64,
    pub dropped: u64,
    /// Granules written as `AccessRecord`s after this one.
    pub granules: u64,
}

/// Buckets of an engagement's ratio of suitable accesses: bucket `i` holds
/// ratios from `i / 10` up to `(i + 1) / 10`, bucket 10 exactly 1.
pub const RATIO_BUCKETS: usize = 11;

/// One site's engagements that touched data under its lock, by the share
/// of their accesses that were suitable when made (the data had been
/// touched by another thread under a lock by then), split by whether the
/// engagement made another thread wait for the lock (a task switch). One
/// per site, updated in place by every thread; a site may have a spare
/// empty one (two threads raced to write it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SiteRatiosRecord {
    pub hdr: crate::layout::RecordHeader,
    pub site_id: u32,
    pub _pad: u32,
    /// `[0]`: no thread waited meanwhile; `[1]`: some thread did.
    pub engagements: [[u32; RATIO_BUCKETS]; 2],
}

// SAFETY: plain integers, explicitly padded; every bit pattern is valid.
unsafe impl Pod for SiteRatiosRecord {}

// SAFETY: plain integers, explicitly padded; every bit pattern is valid.
unsafe impl Pod for AccessRecord {}
// SAFETY: as above.
unsafe impl Pod for AccessSummaryRecord {}

const _: () = {
    assert!(core::mem::size_of::<AccessRecord>() == 80);
    assert!(core::mem::size_of::<SiteRatiosRecord>() == 104);
    assert!(core::mem::size_of::<AccessSummaryRecord>() == 32);
};
