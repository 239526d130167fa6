//! Symbol names for a policy's `objects` and `sites` rules: the variable a
//! lock lies in and the functions of a call chain, read from the ELF
//! symbol tables of the loaded files (`.symtab`, else `.dynsym`). Used only
//! when a policy names objects or sites, on the first sight of each.
//!
//! The file is read with `pread` into small buffers, never mapped: a file
//! rewritten or truncated under the program then gives a failed read
//! (no name), not a SIGBUS in the host, and nothing is left mapped.

use crate::recorder::identities::modules;

/// `st_info` symbol types.
pub const STT_OBJECT: u8 = 1;
pub const STT_FUNC: u8 = 2;

/// Symbols read per `pread` (24 bytes each).
const CHUNK: usize = 64;

/// Writes into `out` the name of the symbol of type `want` that contains
/// `addr`, and returns its length.
pub fn name_at(addr: u64, want: u8, out: &mut [u8]) -> Option<usize> {
    let (bias, path) = modules::locate(addr)?;
    let _errno = crate::diag::ErrnoGuard::save();
    let mut name = crate::recorder::base::path::PathBuf::new();
    let path = path.to_bytes();
    name.push(if path.is_empty() {
        b"/proc/self/exe"
    } else {
        path
    });
    let fd = crate::sys::open(name.c_str(), libc::O_RDONLY | libc::O_CLOEXEC, 0).ok()?;
    let found = lookup(fd, addr.wrapping_sub(bias), want, out);
    crate::sys::close(fd);
    found
}

fn read_at(fd: i32, at: u64, buf: &mut [u8]) -> Option<()> {
    (crate::sys::pread(fd, buf, at).ok()? == buf.len()).then_some(())
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
fn section(fd: i32, shoff: u64, i: u64) -> Option<(u32, u64, u64, u32)> {
    let mut sh = [0u8; 64];
    read_at(fd, shoff.checked_add(i.checked_mul(64)?)?, &mut sh)?;
    Some((
        u32_at(&sh, 4)?,
        u64_at(&sh, 24)?,
        u64_at(&sh, 32)?,
        u32_at(&sh, 40)?,
    ))
}

/// Finds the symbol of type `want` containing file address `at` in the
/// ELF64 file `fd`.
fn lookup(fd: i32, at: u64, want: u8, out: &mut [u8]) -> Option<usize> {
    let mut ehdr = [0u8; 64];
    read_at(fd, 0, &mut ehdr)?;
    if ehdr[..5] != *b"\x7fELF\x02" || u16_at(&ehdr, 58)? != 64 {
        return None;
    }
    let shoff = u64_at(&ehdr, 40)?;
    let shnum = u64::from(u16_at(&ehdr, 60)?);
    const SHT_SYMTAB: u32 = 2;
    const SHT_DYNSYM: u32 = 11;
    for table in [SHT_SYMTAB, SHT_DYNSYM] {
        for i in 0..shnum {
            let (kind, off, size, link) = section(fd, shoff, i)?;
            if kind != table {
                continue;
            }
            let (_, strings, strings_size, _) = section(fd, shoff, u64::from(link))?;
            let count = size / 24;
            let mut chunk = [0u8; CHUNK * 24];
            let mut first = 0u64;
            while first < count {
                let n = (count - first).min(CHUNK as u64) as usize;
                read_at(fd, off + first * 24, &mut chunk[..n * 24])?;
                for sym in chunk[..n * 24].chunks_exact(24) {
                    let shndx = u16_at(sym, 6)?;
                    let (value, len) = (u64_at(sym, 8)?, u64_at(sym, 16)?);
                    let inside = at >= value
                        && (at < value.saturating_add(len) || (len == 0 && at == value));
                    if sym[4] & 0xf != want || shndx == 0 || !inside {
                        continue;
                    }
                    let name_at = u64::from(u32_at(sym, 0)?);
                    if name_at >= strings_size {
                        return None;
                    }
                    let room = (strings_size - name_at).min(out.len() as u64) as usize;
                    read_at(fd, strings + name_at, &mut out[..room])?;
                    return Some(out[..room].iter().position(|&c| c == 0).unwrap_or(room));
                }
                first += n as u64;
            }
        }
    }
    None
}
