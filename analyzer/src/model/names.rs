//! Stable names: the ids a report gives locks, sites and families are the
//! same in every run of the same binary, so two reports can be compared.
//!
//! - A site is its first line in the program's own code:
//!   `function@file:line` (`module+0xoffset` without symbols).
//! - A lock in a global or static is named by its variable and its path in
//!   it, from the module's DWARF (see place.rs): `&total_lock`, `&table[3]`,
//!   `&chop[4].m`, `&cfg.locks[2]`, `&bump::counted` (a static inside
//!   function `bump`). Without DWARF, by the variable's symbol and the
//!   offset into it, `&state+0x8`: never an index worked out from a lock's
//!   size, which inside an array of structs names another lock.
//! - Any other lock (heap, stack) is named by the line that initialised it,
//!   or first used it when it was statically initialised: its family.
//!   Locks made at one line are numbered in the order they were made:
//!   `make_bucket@table.c:40#3`. A family of one has no number.
//! - A name taken twice (a lock destroyed and made again at one address)
//!   gets `#2`, `#3`, … on its later uses.
//!
//! Inside the model ids stay numbers (a million locks must not mean a
//! million strings); a process's [`Names`] turn them into text while it is
//! rendered (see [`with`]).

use serde::{Serialize, Serializer};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;

/// Report ids are numbers inside the model (a million locks must not mean a
/// million strings) and strings in the JSON: `L3`, `S7`, `F2`.
macro_rules! report_id {
    ($name:ident, $prefix:literal, $what:literal, $named:path) => {
        #[doc = concat!($what, ": printed by its stable name while its process's names are")]
        #[doc = concat!("current (see [`with`]), else as `", $prefix, "` and its index + 1.")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match $named(*self, f) {
                    Some(written) => written,
                    None => write!(f, concat!($prefix, "{}"), u64::from(self.0) + 1),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

report_id!(LockId, "L", "A lock of the report", write_lock);
report_id!(SiteId, "S", "A site (line) of the report", write_site);
report_id!(FamilyId, "F", "A family of locks", write_family);

/// The names of one process's locks, sites and families.
#[derive(Debug, Default)]
pub struct Names {
    strings: Vec<String>,
    /// Per lock: (base name, number in its family; 0 = none).
    locks: Vec<(u32, u32)>,
    sites: Vec<u32>,
    families: Vec<u32>,
}

thread_local! {
    static CURRENT: Cell<*const Names> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with `names` as the names ids print with (ids print as `L3`,
/// `S7`, `F2` outside of it).
pub fn with<R>(names: &Names, f: impl FnOnce() -> R) -> R {
    struct Restore(*const Names);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(names)));
    f()
}

/// Calls `f` with the current names, if any.
fn current<R>(f: impl FnOnce(&Names) -> Option<R>) -> Option<R> {
    let names = CURRENT.with(Cell::get);
    // SAFETY: set only by `with`, for the duration of a call that borrows
    // the names; reset when it returns (or unwinds).
    unsafe { names.as_ref() }.and_then(f)
}

/// Writes a lock's name, if names are current.
pub fn write_lock(id: LockId, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
    current(|n| {
        let &(base, number) = n.locks.get(id.index())?;
        let name = n.strings.get(base as usize)?;
        Some(if number == 0 {
            f.write_str(name)
        } else {
            write!(f, "{name}#{number}")
        })
    })
}

pub fn write_site(id: SiteId, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
    current(|n| {
        let name = n.strings.get(*n.sites.get(id.index())? as usize)?;
        Some(f.write_str(name))
    })
}

pub fn write_family(id: FamilyId, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
    current(|n| {
        let name = n.strings.get(*n.families.get(id.index())? as usize)?;
        Some(f.write_str(name))
    })
}

/// The size of a condition variable (glibc, 64-bit), as [`LockKind::size`].
pub const COND_SIZE: u64 = 48;

/// Builds names. `site_names[i]` is site i's name (see the module doc);
/// `lock_bases[i]` is lock i's base name (its variable, or the name of the
/// site that made it). Locks sharing a base name are numbered by id; names
/// used twice get `#2`, …
pub struct Builder {
    names: Names,
    index: HashMap<String, u32>,
}

/// Hands out names that are unique in one list: a name taken before comes
/// back as `name#2`, `name#3`, … in the order asked.
#[derive(Default)]
pub struct Unique {
    taken: HashMap<String, u32>,
}

impl Unique {
    pub fn take(&mut self, name: String) -> String {
        let n = self.taken.entry(name.clone()).or_default();
        *n += 1;
        if *n == 1 {
            name
        } else {
            format!("{name}#{n}")
        }
    }
}

impl Builder {
    pub fn new() -> Self {
        Builder {
            names: Names::default(),
            index: HashMap::new(),
        }
    }

    fn intern(&mut self, s: String) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.names.strings.len() as u32;
        self.index.insert(s.clone(), i);
        self.names.strings.push(s);
        i
    }

    /// Names every site; a name taken twice gets `#2`, … on the later ones.
    pub fn sites(&mut self, site_names: impl IntoIterator<Item = String>) {
        let mut unique = Unique::default();
        for name in site_names {
            let i = self.intern(unique.take(name));
            self.names.sites.push(i);
        }
    }

    /// The name given to site `id` (after [`Builder::sites`]).
    pub fn site_name(&self, id: SiteId) -> &str {
        self.names
            .sites
            .get(id.index())
            .and_then(|&i| self.names.strings.get(i as usize))
            .map_or("unknown", String::as_str)
    }

    /// Names every lock from its base name (in id order). `numbered(i)`:
    /// whether lock i's base names a family (numbered even if alone in it
    /// when the family has several locks).
    pub fn locks(&mut self, bases: Vec<(String, bool)>) {
        let mut count: HashMap<&str, u32> = HashMap::new();
        for (base, _) in &bases {
            *count.entry(base.as_str()).or_default() += 1;
        }
        let mut next: HashMap<String, u32> = HashMap::new();
        let mut out = Vec::with_capacity(bases.len());
        for (base, family) in &bases {
            let shared = count[base.as_str()] > 1;
            let n = next.entry(base.clone()).or_default();
            *n += 1;
            // A variable's name is plain the first time, `#2` after; a
            // family's members are all numbered once there are several.
            let number = if shared && (*family || *n > 1) { *n } else { 0 };
            out.push((base.clone(), number));
        }
        for (base, number) in out {
            let i = self.intern(base);
            self.names.locks.push((i, number));
        }
    }

    pub fn families(&mut self, family_names: impl IntoIterator<Item = String>) {
        let mut unique = Unique::default();
        for name in family_names {
            let i = self.intern(unique.take(name));
            self.names.families.push(i);
        }
    }

    pub fn finish(self) -> Names {
        self.names
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_numbered_and_reused_names_get_a_suffix() {
        let mut b = Builder::new();
        b.sites(["f@a.c:1".to_string(), "g@a.c:2".into(), "f@a.c:1".into()]);
        b.locks(vec![
            ("&total".into(), false),
            ("make@a.c:9".into(), true),
            ("make@a.c:9".into(), true),
            ("&total".into(), false),
            ("alone@a.c:3".into(), true),
        ]);
        b.families(["&total".to_string(), "make@a.c:9".into()]);
        let names = b.finish();
        struct Show<'a>(&'a Names, LockId);
        impl fmt::Display for Show<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                with(self.0, || write_lock(self.1, f).unwrap())
            }
        }
        let lock = |i: u32| Show(&names, LockId(i)).to_string();
        assert_eq!(lock(0), "&total");
        assert_eq!(lock(1), "make@a.c:9#1");
        assert_eq!(lock(2), "make@a.c:9#2");
        assert_eq!(lock(3), "&total#2", "made again at the same address");
        assert_eq!(lock(4), "alone@a.c:3");
        assert_eq!(
            names.strings[names.sites[2] as usize], "f@a.c:1#2",
            "two sites of one name stay apart"
        );
    }
}
