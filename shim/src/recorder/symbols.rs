//! Symbol names for a policy's `objects` and `sites` rules: the variable a
//! lock lies in and the functions of a call chain, read from the ELF
//! symbol tables of the loaded files (`.symtab`, else `.dynsym`). Used only
//! when a policy names objects or sites, on the first sight of each; the
//! files are mapped read-only once and kept (at most [`CACHED`]).

use super::modules;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// `st_info` symbol types.
pub const STT_OBJECT: u8 = 1;
pub const STT_FUNC: u8 = 2;

const CACHED: usize = 16;

struct Image {
    bias: AtomicU64,
    base: AtomicU64,
    /// Written last; 0 = the slot holds nothing (yet).
    len: AtomicUsize,
}

static IMAGES: [Image; CACHED] = [const {
    Image {
        bias: AtomicU64::new(0),
        base: AtomicU64::new(0),
        len: AtomicUsize::new(0),
    }
}; CACHED];
static CLAIMED: AtomicUsize = AtomicUsize::new(0);

/// Writes into `out` the name of the symbol of type `want` that contains
/// `addr`, and returns its length.
pub fn name_at(addr: u64, want: u8, out: &mut [u8]) -> Option<usize> {
    let (bias, path) = modules::locate(addr)?;
    let image = image_of(bias, path.to_bytes())?;
    lookup(image, addr.wrapping_sub(bias), want, out)
}

fn image_of(bias: u64, path: &[u8]) -> Option<&'static [u8]> {
    let n = CLAIMED.load(Ordering::Acquire).min(CACHED);
    for slot in &IMAGES[..n] {
        let len = slot.len.load(Ordering::Acquire);
        if len != 0 && slot.bias.load(Ordering::Relaxed) == bias {
            // SAFETY: a read-only mapping of `len` bytes that is never unmapped.
            return Some(unsafe {
                core::slice::from_raw_parts(slot.base.load(Ordering::Relaxed) as *const u8, len)
            });
        }
    }
    let (base, len) = map_file(path)?;
    let n = CLAIMED.fetch_add(1, Ordering::AcqRel);
    if n < CACHED {
        IMAGES[n].bias.store(bias, Ordering::Relaxed);
        IMAGES[n].base.store(base as u64, Ordering::Relaxed);
        IMAGES[n].len.store(len, Ordering::Release);
    }
    // Beyond the cache the mapping stays too: bounded by the modules a
    // program loads, and only while a policy names objects or sites.
    // SAFETY: as above.
    Some(unsafe { core::slice::from_raw_parts(base, len) })
}

/// Maps the file at `path` (the main program's when empty) read-only.
fn map_file(path: &[u8]) -> Option<(*const u8, usize)> {
    let _errno = crate::diag::ErrnoGuard::save();
    let mut name = super::path::PathBuf::new();
    name.push(if path.is_empty() {
        b"/proc/self/exe"
    } else {
        path
    });
    let fd = crate::sys::open(name.c_str(), libc::O_RDONLY | libc::O_CLOEXEC, 0).ok()?;
    let size = crate::sys::fstat(fd).filter(|s| s.regular).map(|s| s.size);
    let mapped = size.filter(|&s| s >= 64).and_then(|size| {
        let len = usize::try_from(size).ok()?;
        // SAFETY: a fresh private read-only mapping of a file we opened.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd,
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some((p as *const u8, len))
    });
    crate::sys::close(fd);
    mapped
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A section's (type, file offset, size, link).
fn section(elf: &[u8], shoff: usize, i: usize) -> Option<(u32, usize, usize, u32)> {
    let at = shoff.checked_add(i.checked_mul(64)?)?;
    Some((
        u32_at(elf, at + 4)?,
        usize::try_from(u64_at(elf, at + 24)?).ok()?,
        usize::try_from(u64_at(elf, at + 32)?).ok()?,
        u32_at(elf, at + 40)?,
    ))
}

/// Finds the symbol of type `want` containing file address `at` in the
/// ELF64 image `elf`; every offset is checked against the image.
fn lookup(elf: &[u8], at: u64, want: u8, out: &mut [u8]) -> Option<usize> {
    if elf.get(..5)? != b"\x7fELF\x02" || u16_at(elf, 58)? != 64 {
        return None;
    }
    let shoff = usize::try_from(u64_at(elf, 40)?).ok()?;
    let shnum = usize::from(u16_at(elf, 60)?);
    const SHT_SYMTAB: u32 = 2;
    const SHT_DYNSYM: u32 = 11;
    for table in [SHT_SYMTAB, SHT_DYNSYM] {
        for i in 0..shnum {
            let (kind, off, size, link) = section(elf, shoff, i)?;
            if kind != table {
                continue;
            }
            let (_, str_off, str_size, _) = section(elf, shoff, link as usize)?;
            let strings = elf.get(str_off..str_off.checked_add(str_size)?)?;
            let symbols = elf.get(off..off.checked_add(size)?)?;
            for sym in symbols.chunks_exact(24) {
                let info = sym[4];
                let shndx = u16_at(sym, 6)?;
                let (value, len) = (u64_at(sym, 8)?, u64_at(sym, 16)?);
                let inside =
                    at >= value && (at < value.saturating_add(len) || (len == 0 && at == value));
                if info & 0xf != want || shndx == 0 || !inside {
                    continue;
                }
                let name = strings.get(u32_at(sym, 0)? as usize..)?;
                let name = &name[..name.iter().position(|&c| c == 0)?];
                let n = name.len().min(out.len());
                out[..n].copy_from_slice(&name[..n]);
                return Some(n);
            }
        }
    }
    None
}
