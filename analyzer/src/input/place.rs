//! Where an address lies inside a global or static variable, named by its
//! path through the variable's type: `&chop[4].m` (a member of an array
//! element), `&cfg.locks[2]`, `&grid[1][2]`, `&q.cond`. A reader who looks
//! the name up finds that very object; an index worked out from a lock's
//! size alone would name another one inside arrays of structs.
//!
//! [`Layouts`] holds one module's variables and the types they are made of
//! (read from its DWARF by `place_dwarf`), indexed by address: a lookup is
//! a binary search for the variable, then one step per member or element.

use std::fmt::Write;

/// An index into [`Layouts::types`].
pub type TypeId = u32;

/// The type every unknown or undescribed type resolves to.
pub const UNKNOWN: TypeId = 0;

/// How far a path may go into nested types: a damaged file must not make
/// a lookup long.
const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// Bytes with no named parts: base types, pointers, enums, and types
    /// the DWARF does not describe.
    Scalar,
    /// A lock's (or condition variable's, …) own type, `pthread_mutex_t`:
    /// a path stops at it rather than name glibc's internals.
    Lock,
    /// `count` elements (unknown for `T x[]`), each of the element's size.
    Array { element: TypeId, count: Option<u64> },
    /// A struct, class or union: members by offset (a union's all at 0, in
    /// declaration order).
    Record { members: Vec<Member> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Type {
    /// In bytes; 0 if unknown.
    pub size: u64,
    pub shape: Shape,
    /// A type of a lock library or a language's standard library (Rust's
    /// `std::sync::Mutex<T>`, `core::cell::UnsafeCell<T>`, C++'s
    /// `std::atomic<int>`): the steps inside it are the library's private
    /// fields, not the program's (see [`Place::object`]).
    pub library: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub offset: u64,
    /// `None` for an anonymous struct or union, or a C++ base class: their
    /// members are named as if they were the outer type's own.
    pub name: Option<Box<str>>,
    pub ty: TypeId,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// Its file address (the module's link-time address, before any bias).
    pub start: u64,
    pub size: u64,
    /// As the source names it: `chop`, `ns::table`, `bump::counted` (a
    /// static inside function `bump`, as gdb spells it).
    pub name: Box<str>,
    pub ty: TypeId,
}

/// One module's variables and their types.
#[derive(Debug)]
pub struct Layouts {
    pub(crate) types: Vec<Type>,
    /// By start address.
    vars: Vec<Variable>,
}

impl Default for Layouts {
    fn default() -> Self {
        Layouts {
            types: vec![Type {
                size: 0,
                shape: Shape::Scalar,
                library: false,
            }],
            vars: Vec::new(),
        }
    }
}

/// Where an address lies: a path and the bytes past its start.
#[derive(Clone, Debug, PartialEq)]
pub struct Place {
    /// `chop[4].m`; just the variable's name when its type is unknown.
    pub path: String,
    /// Bytes from where `path` starts to the address.
    pub offset: u64,
    /// Whether `path` is the object itself (at offset 0): always so for a
    /// path through a known type; for a bare variable only if it is no
    /// bigger than the object.
    pub exact: bool,
    /// `path` without the steps taken inside library types: the object
    /// the program's own source names (`B` for `B.inner`, a Rust `static
    /// B: Mutex<u32>`'s futex word; `X.a` for `X.data.value.value.a`, a
    /// `Mutex` member of a `LazyLock`'s value). Equal to `path` when no
    /// step was inside a library type or the types are unknown.
    pub object: String,
    /// The steps inside library types after `object`'s last one
    /// (`.inner.writer_notify`): where in the library's object the address
    /// lies; empty when none.
    pub inside: String,
}

impl Place {
    /// A place known only from a symbol table: `name`, `offset` bytes into
    /// a variable of `size` bytes, for an object of `object_size` (0:
    /// unknown). Never an index: a variable's type, and so the size of its
    /// elements, is not known from its size.
    pub fn of_symbol(name: String, offset: u64, size: u64, object_size: u64) -> Place {
        let exact = offset == 0 && (object_size == 0 || size <= object_size);
        Place {
            object: name.clone(),
            path: name,
            offset,
            exact,
            inside: String::new(),
        }
    }

    /// `&chop[4].m`, `&spins.s+0x2` (inside a scalar), `&table+0x1e0`.
    pub fn name(&self) -> String {
        if self.exact && self.offset == 0 {
            format!("&{}", self.path)
        } else {
            format!("&{}+{:#x}", self.path, self.offset)
        }
    }

    /// The program's own object at this place, as [`Place::name`] names a
    /// path: `&B` for `B.inner`. With `inside`'s last step that says which
    /// of the library object's words it is, when that is not one of the
    /// names a library gives its one word (`inner`, `futex`, `state`, …):
    /// `&RW/writer_notify` for a Rust `RwLock`'s second word,
    /// `&BARRIER/cvar` and `&BARRIER/lock` for a `Barrier`'s two.
    pub fn object_name(&self) -> String {
        let mut name = if self.exact && self.offset == 0 {
            format!("&{}", self.object)
        } else {
            format!("&{}+{:#x}", self.object, self.offset)
        };
        if let Some(word) = self.word() {
            name.push('/');
            name.push_str(word);
        }
        name
    }

    /// Which word of a library object the place is, if the steps inside it
    /// say more than "its word" (see [`Place::object_name`]).
    pub fn word(&self) -> Option<&str> {
        self.inside
            .split(['.', '['])
            .filter(|step| !step.is_empty() && !step.ends_with(']'))
            .rfind(|step| !ONE_WORD_NAMES.contains(step))
    }
}

/// The names libraries give the one word of a lock, or the field that
/// holds it: a step named so says nothing a reader needs (`B.inner`,
/// `M.inner.futex`, `RW.inner.state`, `C.inner`, `x._M_i`).
const ONE_WORD_NAMES: &[&str] = &[
    "inner", "futex", "state", "value", "v", "data", "raw", "_M_i", "__0",
];

/// A path being walked: every step in `full`; in `object` those taken in
/// the program's types, in `inside` those taken in library types since the
/// last step in the program's (see [`Place`]).
#[derive(Default)]
struct Steps {
    full: String,
    object: String,
    inside: String,
}

impl Steps {
    fn start(name: &str) -> Steps {
        Steps {
            full: name.to_string(),
            object: name.to_string(),
            inside: String::new(),
        }
    }

    fn push(&mut self, step: std::fmt::Arguments<'_>, in_library: bool) {
        let _ = self.full.write_fmt(step);
        if in_library {
            let _ = self.inside.write_fmt(step);
        } else {
            self.inside.clear();
            let _ = self.object.write_fmt(step);
        }
    }
}

/// How a walk ended, best last: on a lock's own type, on a type the
/// object's size fills exactly, on a smaller one, or elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Inside,
    Smaller,
    Fills,
    Lock,
}

impl Layouts {
    /// Adds a type, returning its id.
    pub(crate) fn push_type(&mut self, ty: Type) -> TypeId {
        self.types.push(ty);
        (self.types.len() - 1) as TypeId
    }

    pub(crate) fn type_of(&self, id: TypeId) -> &Type {
        self.types.get(id as usize).unwrap_or(&self.types[0])
    }

    /// Takes the variables (in any order) and indexes them by address.
    /// Two at one address (an alias): the one with the known, larger type.
    pub(crate) fn set_variables(&mut self, mut vars: Vec<Variable>) {
        vars.sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
        vars.dedup_by_key(|v| v.start);
        self.vars = vars;
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The variable holding file address `address`, and the offset into it.
    pub fn variable(&self, address: u64) -> Option<(&Variable, u64)> {
        let at = self.vars.partition_point(|v| v.start <= address);
        let var = self.vars.get(at.checked_sub(1)?)?;
        let offset = address - var.start;
        // A variable of unknown type and size holds nothing here: the
        // symbol table knows its extent.
        (offset < var.size).then_some((var, offset))
    }

    /// Where file address `address` lies, for an object (lock, condition
    /// variable) of `object_size` bytes (0: unknown): the variable's name
    /// and the members and elements down to the object.
    pub fn place(&self, address: u64, object_size: u64) -> Option<Place> {
        let (var, offset) = self.variable(address)?;
        let mut steps = Steps::start(&var.name);
        let (offset, _) = self.walk(var.ty, offset, object_size, &mut steps, true);
        Some(Place {
            path: steps.full,
            offset,
            exact: true,
            object: steps.object,
            inside: steps.inside,
        })
    }

    /// Appends to `path` the members and elements of type `ty` that hold
    /// `offset`, as far as they go; returns the offset left over and how
    /// the walk ended. It stops at a lock's own type, and at the start of a
    /// type no bigger than the object (`std::mutex`, a struct wrapping one
    /// mutex): its parts would name the lock's internals. `choose`: whether
    /// to weigh a union's members against each other (not while weighing
    /// one, so nested unions cost no more than a walk each).
    fn walk(
        &self,
        mut ty: TypeId,
        mut offset: u64,
        object_size: u64,
        path: &mut Steps,
        choose: bool,
    ) -> (u64, End) {
        for _ in 0..MAX_DEPTH {
            let t = self.type_of(ty);
            if let Shape::Lock = t.shape {
                return (offset, if offset == 0 { End::Lock } else { End::Inside });
            }
            if offset == 0 && t.size != 0 && t.size <= object_size {
                let end = if t.size == object_size {
                    End::Fills
                } else {
                    End::Smaller
                };
                return (0, end);
            }
            match &t.shape {
                Shape::Scalar | Shape::Lock => {
                    return (
                        offset,
                        if offset == 0 {
                            End::Smaller
                        } else {
                            End::Inside
                        },
                    );
                }
                Shape::Array { element, count } => {
                    let stride = self.type_of(*element).size;
                    if stride == 0 {
                        return (offset, End::Inside);
                    }
                    let index = offset / stride;
                    if count.is_some_and(|n| index >= n) {
                        return (offset, End::Inside);
                    }
                    // An element's index is the program's, even of an
                    // array inside a library's type.
                    path.push(format_args!("[{index}]"), false);
                    offset -= index * stride;
                    ty = *element;
                }
                Shape::Record { members } => {
                    let Some(member) = self.member_at(members, offset, object_size, choose) else {
                        return (offset, End::Inside);
                    };
                    if let Some(name) = &member.name {
                        path.push(format_args!(".{name}"), t.library);
                    }
                    offset -= member.offset;
                    ty = member.ty;
                }
            }
        }
        (offset, End::Inside)
    }

    /// The member of a record holding `offset`. Where several do (a
    /// union's members), each is walked and the one that leads to the
    /// object itself wins: the mutex of `union { pthread_mutex_t m; char
    /// pad[64]; }`; the first declared of equals.
    fn member_at<'a>(
        &self,
        members: &'a [Member],
        offset: u64,
        object_size: u64,
        choose: bool,
    ) -> Option<&'a Member> {
        // Members start in order: those at the greatest start at or before
        // `offset` are the ones that may hold it.
        let before = members.partition_point(|m| m.offset <= offset);
        let last = members.get(before.checked_sub(1)?)?.offset;
        let holds = |m: &&Member| {
            let t = self.type_of(m.ty);
            // An array of unknown length (a flexible array member) goes on.
            let unbounded = matches!(t.shape, Shape::Array { count: None, .. });
            offset - m.offset < t.size || unbounded
        };
        let mut held: Vec<&Member> = members[..before]
            .iter()
            .rev()
            .take_while(|m| m.offset == last)
            .filter(holds)
            .collect();
        held.reverse(); // declaration order
        if held.len() < 2 || !choose {
            return held.first().copied();
        }
        let score = |m: &Member| {
            let mut scratch = Steps::default();
            let (left, end) = self.walk(m.ty, offset - m.offset, object_size, &mut scratch, false);
            (left == 0, end)
        };
        let mut best = (held[0], score(held[0]));
        for &m in &held[1..] {
            let s = score(m);
            if s > best.1 {
                best = (m, s);
            }
        }
        Some(best.0)
    }
}

/// Whether a typedef names a lock's own type, whose parts a name should
/// not go into.
pub fn is_lock_type_name(name: &str) -> bool {
    matches!(
        name,
        "pthread_mutex_t"
            | "pthread_rwlock_t"
            | "pthread_spinlock_t"
            | "pthread_cond_t"
            | "pthread_barrier_t"
            | "sem_t"
            | "mtx_t"
            | "cnd_t"
            | "__gthread_mutex_t"
            | "__gthread_recursive_mutex_t"
            | "__gthread_cond_t"
    )
}

#[cfg(test)]
#[path = "place_tests.rs"]
mod tests;
