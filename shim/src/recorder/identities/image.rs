//! What identifies a loaded image: its GNU build id, read from the image in
//! memory (the file on disk may already have been rebuilt), and its file's
//! size and mtime. The analyzer compares them with the file it would
//! symbolize against.

use crate::sys;
use core::ffi::CStr;
use locksuit_format::BUILD_ID_MAX;

/// `NT_GNU_BUILD_ID`, in a note named "GNU".
const NT_GNU_BUILD_ID: u32 = 3;

/// The identity recorded with a module.
#[derive(Clone, Copy, Default)]
pub struct Identity {
    pub build_id: [u8; BUILD_ID_MAX],
    pub build_id_len: u32,
    pub file_size: u64,
    pub file_mtime_ns: u64,
}

/// The program headers of the image mapped at `map_start`, read from its
/// ELF header, or `None` if the mapping does not start with one (then no
/// build id is read).
///
/// # Safety
/// `map_start` must be the start of a loaded image's first mapping (the
/// loader maps its first page readable: it holds the ELF header).
pub unsafe fn program_headers(map_start: u64) -> Option<&'static [libc::Elf64_Phdr]> {
    // SAFETY: per the contract, the first page is mapped and readable.
    let ehdr = unsafe { &*(map_start as *const libc::Elf64_Ehdr) };
    let size = core::mem::size_of::<libc::Elf64_Phdr>();
    let table_end = (ehdr.e_phoff as usize).saturating_add(ehdr.e_phnum as usize * size);
    let is_elf64 = ehdr.e_ident[..4] == *b"\x7fELF" && ehdr.e_ident[4] == 2;
    // Only a table inside the first page, which is surely mapped.
    if !is_elf64 || ehdr.e_phentsize as usize != size || table_end > 4096 {
        return None;
    }
    // SAFETY: checked to lie inside the first page, suitably sized.
    Some(unsafe {
        core::slice::from_raw_parts(
            (map_start + ehdr.e_phoff) as *const libc::Elf64_Phdr,
            ehdr.e_phnum as usize,
        )
    })
}

/// The GNU build id in the image's notes, if it has one.
///
/// # Safety
/// `phdrs` must be the program headers of an image loaded at `bias`.
pub unsafe fn build_id(bias: u64, phdrs: &[libc::Elf64_Phdr]) -> ([u8; BUILD_ID_MAX], u32) {
    let mut out = [0u8; BUILD_ID_MAX];
    for note in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
        let (start, len) = (note.p_vaddr, note.p_filesz);
        // Read a note only where a readable loaded segment covers it.
        let mapped = phdrs.iter().any(|l| {
            l.p_type == libc::PT_LOAD
                && l.p_flags & libc::PF_R != 0
                && l.p_vaddr <= start
                && start.saturating_add(len) <= l.p_vaddr.saturating_add(l.p_filesz)
        });
        if !mapped {
            continue;
        }
        // SAFETY: inside a readable loaded segment of the image (above).
        let notes =
            unsafe { core::slice::from_raw_parts((bias + start) as *const u8, len as usize) };
        if let Some(id) = find_build_id(notes) {
            let n = id.len().min(BUILD_ID_MAX);
            out[..n].copy_from_slice(&id[..n]);
            return (out, n as u32);
        }
    }
    (out, 0)
}

/// Walks ELF notes (4-byte aligned) for the GNU build id.
fn find_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let align = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let name_len = u32_at(notes, 0)? as usize;
        let desc_len = u32_at(notes, 4)? as usize;
        let kind = u32_at(notes, 8)?;
        let name_end = 12usize.checked_add(align(name_len))?;
        let desc_end = name_end.checked_add(align(desc_len))?;
        let name = notes.get(12..12 + name_len)?;
        let desc = notes.get(name_end..name_end + desc_len)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return Some(desc);
        }
        notes = notes.get(desc_end..)?;
    }
    None
}

/// The module's identity: `build_id` from the loaded image, size and mtime
/// of the file at `path` (empty: the main program, found through
/// /proc/self/exe, which names the file that was loaded even if replaced).
pub fn identify(path: &CStr, build_id: ([u8; BUILD_ID_MAX], u32)) -> Identity {
    let stat_path = if path.is_empty() {
        c"/proc/self/exe"
    } else {
        path
    };
    let stat = sys::stat(stat_path).filter(|st| st.regular);
    Identity {
        build_id: build_id.0,
        build_id_len: build_id.1,
        file_size: stat.map_or(0, |st| st.size),
        file_mtime_ns: stat.map_or(0, |st| st.mtime_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_gnu_build_id_among_other_notes() {
        let mut notes = Vec::new();
        let mut note = |name: &[u8], kind: u32, desc: &[u8]| {
            notes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&kind.to_ne_bytes());
            notes.extend_from_slice(name);
            notes.resize(notes.len().next_multiple_of(4), 0);
            notes.extend_from_slice(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        };
        note(b"GNU\0", 1, &[9; 16]); // NT_GNU_ABI_TAG
        note(b"GNU\0", NT_GNU_BUILD_ID, &[7; 20]);
        assert_eq!(find_build_id(&notes), Some(&[7u8; 20][..]));
        assert_eq!(find_build_id(&notes[..20]), None);
    }

    #[test]
    fn this_test_binary_has_a_build_id_in_memory() {
        let mut found: u32 = 0;
        // SAFETY: dl_iterate_phdr hands the callback valid headers.
        unsafe extern "C" fn visit(
            info: *mut libc::dl_phdr_info,
            _: usize,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: valid for the call, as dl_iterate_phdr promises.
            let info = unsafe { &*info };
            // SAFETY: dlpi_phdr points to dlpi_phnum headers of a loaded image.
            let phdrs =
                unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
            // SAFETY: the headers of an image loaded at dlpi_addr.
            let (_, len) = unsafe { build_id(info.dlpi_addr, phdrs) };
            // SAFETY: `data` is the counter passed below.
            unsafe { *data.cast::<u32>() = len };
            1 // the first object is the program itself
        }
        // SAFETY: the callback only reads what it is given.
        unsafe { libc::dl_iterate_phdr(Some(visit), (&mut found as *mut u32).cast()) };
        assert!(found >= 16, "build id of {found} bytes");
    }
}
