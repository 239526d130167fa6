//! A module's function symbols with their extents, for code without DWARF.
//! An address is named by a symbol only if it lies inside that symbol's
//! extent: in a stripped binary, the nearest exported symbol below a static
//! function is another function, and naming the address after it would be
//! wrong (the report says `module+offset` instead).

use object::{Object, ObjectSymbol, SymbolKind};

/// Function and data symbols of one file, each sorted by start address.
#[derive(Default)]
pub struct SymbolTable {
    /// (start, end, name), by start.
    functions: Vec<(u64, u64, String)>,
    /// Variables (globals and statics), for naming the locks in them.
    data: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    /// The function symbols of the ELF file at `path` (the full symbol
    /// table where the file has one, else the dynamic one); empty if it
    /// cannot be read.
    pub fn load(path: &str) -> SymbolTable {
        let Ok(file) = std::fs::File::open(path) else {
            return SymbolTable::default();
        };
        // SAFETY: a read-only private mapping of a regular file, dropped
        // before returning; the names are copied out.
        let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
            return SymbolTable::default();
        };
        let Ok(object) = object::File::parse(&*map) else {
            return SymbolTable::default();
        };
        let of_kind = |kind: SymbolKind| {
            let mut found: Vec<(u64, u64, String)> = object
                .symbols()
                .chain(object.dynamic_symbols())
                .filter(|s| s.kind() == kind && s.is_definition() && s.size() > 0)
                .filter_map(|s| {
                    let name = s.name().ok()?;
                    Some((s.address(), s.address() + s.size(), name.to_string()))
                })
                .collect();
            found.sort();
            found.dedup_by_key(|f| f.0);
            found
        };
        SymbolTable {
            functions: of_kind(SymbolKind::Text),
            data: of_kind(SymbolKind::Data),
        }
    }

    /// The function whose extent holds `address` (a file address).
    pub fn lookup(&self, address: u64) -> Option<&str> {
        within(&self.functions, address).map(|(name, _, _)| name)
    }

    /// Where the function whose extent holds `address` begins.
    pub fn function_start(&self, address: u64) -> Option<u64> {
        within(&self.functions, address).map(|(_, offset, _)| address - offset)
    }

    /// The variable whose extent holds `address`: its name, the offset
    /// into it and its size.
    pub fn lookup_data(&self, address: u64) -> Option<(&str, u64, u64)> {
        within(&self.data, address)
    }
}

fn within(table: &[(u64, u64, String)], address: u64) -> Option<(&str, u64, u64)> {
    let at = table.partition_point(|f| f.0 <= address);
    let (start, end, name) = table.get(at.checked_sub(1)?)?;
    (*start <= address && address < *end).then(|| (name.as_str(), address - start, end - start))
}

/// A symbol's name as written in the source. Only mangled names are
/// demangled: a C variable `a` is no Itanium type code ("signed char").
pub(crate) fn demangle(name: &str) -> String {
    if name.starts_with("_Z") || name.starts_with("_R") {
        addr2line::demangle_auto(name.into(), None).into_owned()
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_past_a_symbols_extent_has_no_name() {
        let table = SymbolTable {
            functions: vec![
                (0x100, 0x120, "exported".into()),
                (0x200, 0x210, "next".into()),
            ],
            data: vec![(0x300, 0x328, "table".into())],
        };
        assert_eq!(table.lookup_data(0x310), Some(("table", 0x10, 0x28)));
        assert_eq!(table.lookup_data(0x328), None);
        assert_eq!(table.lookup(0x110), Some("exported"));
        assert_eq!(table.lookup(0x150), None, "past its end: not its code");
        assert_eq!(table.lookup(0x80), None);
        assert_eq!(table.lookup(0x20f), Some("next"));
        assert_eq!(table.lookup(0x210), None);
    }

    #[test]
    fn this_test_binary_names_its_own_functions() {
        let exe = std::env::current_exe().unwrap();
        let table = SymbolTable::load(exe.to_str().unwrap());
        assert!(!table.functions.is_empty());
    }
}
