//! A module's global and static variables and their types, read from its
//! DWARF into [`Layouts`] (see place.rs) once per module file.
//!
//! Variables are the `DW_TAG_variable`s with a fixed address (`DW_OP_addr`
//! or `DW_OP_addrx`, a file address): at file level, in namespaces, and
//! inside functions (statics). Thread-local ones and those on the stack
//! have no fixed address and are left out. Only the types reachable from
//! those variables are read, each once.

use crate::input::place::{
    is_lock_type_name, Layouts, Member, Shape, Type, TypeId, Variable, UNKNOWN,
};
use gimli::{constants as dw, AttributeValue, DebuggingInformationEntry, EndianSlice, Operation};
use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

type R<'d> = EndianSlice<'d, gimli::RunTimeEndian>;
type Entry<'a, 'd> = DebuggingInformationEntry<'a, 'a, R<'d>>;

/// How deep types and scopes are followed: a damaged file must not
/// overflow the stack.
const MAX_DEPTH: usize = 48;

/// The variables and types described by the DWARF of the ELF file `file`
/// (none if it has no DWARF or cannot be read). The file is read the way
/// the symbolizer's `addr2line::Loader` reads it: its own sections,
/// compressed or not.
pub fn load(file: &std::fs::File) -> Layouts {
    // SAFETY: a read-only private mapping of a regular file, dropped before
    // returning; everything kept is copied out.
    let Ok(map) = (unsafe { memmap2::Mmap::map(file) }) else {
        return Layouts::default();
    };
    let Ok(object) = object::File::parse(&*map) else {
        return Layouts::default();
    };
    let endian = if object.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let sections = gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, gimli::Error> {
        Ok(object
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[])))
    });
    let Ok(sections) = sections else {
        return Layouts::default();
    };
    let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
    let mut units = Vec::new();
    let mut starts = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Some(start) = header.offset().as_debug_info_offset() else {
            continue;
        };
        if let Ok(unit) = dwarf.unit(header) {
            starts.push(start.0);
            units.push(unit);
        }
    }
    let dies = Dies {
        dwarf: &dwarf,
        units,
        starts,
    };
    let mut build = Build::default();
    let mut found = Vec::new();
    for u in 0..dies.units.len() {
        let Ok(mut tree) = dies.units[u].entries_tree(None) else {
            continue;
        };
        if let Ok(root) = tree.root() {
            let mut at = Scope {
                found: &mut found,
                function: None,
                library: false,
            };
            scope(&dies, &mut build, &mut at, (u, root), 0);
        }
    }
    // Types are read once every unit has said which are a library's.
    let vars = found
        .into_iter()
        .map(|(mut var, die)| {
            var.ty = die.map_or(UNKNOWN, |die| resolve(&dies, &mut build, die, 0));
            var.size = build.layouts.type_of(var.ty).size;
            var
        })
        .collect();
    build.layouts.set_variables(vars);
    build.layouts
}

/// Every unit of the file, to read any DIE by its offset in .debug_info.
struct Dies<'a, 'd> {
    dwarf: &'a gimli::Dwarf<R<'d>>,
    units: Vec<gimli::Unit<R<'d>>>,
    /// Each unit's offset in .debug_info, ascending.
    starts: Vec<usize>,
}

impl<'a, 'd> Dies<'a, 'd> {
    /// The unit holding the DIE at `die` (an offset in .debug_info) and the
    /// DIE.
    fn at(&self, die: usize) -> Option<(usize, Entry<'_, 'd>)> {
        let u = self.starts.partition_point(|&s| s <= die).checked_sub(1)?;
        let entry = self.units[u]
            .entry(gimli::UnitOffset(die - self.starts[u]))
            .ok()?;
        Some((u, entry))
    }

    /// Where a reference attribute of a DIE in unit `u` points.
    fn target(&self, u: usize, value: AttributeValue<R<'d>>) -> Option<usize> {
        match value {
            AttributeValue::UnitRef(offset) => self.starts[u].checked_add(offset.0),
            AttributeValue::DebugInfoRef(offset) => Some(offset.0),
            // Type units (`DW_FORM_ref_sig8`) and supplementary files are
            // not read: such a type is unknown.
            _ => None,
        }
    }

    /// Attribute `at` of a DIE, or of the declaration it completes
    /// (`DW_AT_specification`: a variable declared `extern` before its
    /// definition, a C++ static member) or of its abstract origin; with
    /// the unit its references are relative to.
    fn attr(
        &self,
        u: usize,
        entry: &Entry<'_, 'd>,
        at: dw::DwAt,
    ) -> Option<(usize, AttributeValue<R<'d>>)> {
        if let Ok(Some(value)) = entry.attr_value(at) {
            return Some((u, value));
        }
        let mut next = self.origin(u, entry)?;
        for _ in 0..4 {
            let (u, entry) = next;
            if let Ok(Some(value)) = entry.attr_value(at) {
                return Some((u, value));
            }
            next = self.origin(u, &entry)?;
        }
        None
    }

    /// The declaration a DIE completes, or its abstract origin.
    fn origin(&self, u: usize, entry: &Entry<'_, 'd>) -> Option<(usize, Entry<'_, 'd>)> {
        let origin = [dw::DW_AT_specification, dw::DW_AT_abstract_origin]
            .into_iter()
            .find_map(|o| entry.attr_value(o).ok().flatten())?;
        self.at(self.target(u, origin)?)
    }

    fn string(&self, u: usize, entry: &Entry<'_, 'd>, at: dw::DwAt) -> Option<String> {
        let (u, value) = self.attr(u, entry, at)?;
        let s = self.dwarf.attr_string(&self.units[u], value).ok()?;
        Some(s.to_string_lossy().into_owned())
    }

    /// The DIE a reference attribute (`DW_AT_type`) points to.
    fn reference(&self, u: usize, entry: &Entry<'_, 'd>, at: dw::DwAt) -> Option<usize> {
        let (u, value) = self.attr(u, entry, at)?;
        self.target(u, value)
    }
}

fn constant(entry: &Entry<'_, '_>, at: dw::DwAt) -> Option<u64> {
    entry.attr_value(at).ok().flatten()?.udata_value()
}

#[derive(Default)]
struct Build {
    layouts: Layouts,
    /// Types read so far, by their DIE's offset in .debug_info.
    seen: HashMap<usize, TypeId>,
    /// Struct, class and union DIEs in a library's namespace (see
    /// [`is_library_namespace`]), by offset in .debug_info.
    library: HashSet<usize>,
}

/// Namespaces whose types are a library's, not the program's: a path
/// through them names the library's private fields (see `Type::library`).
/// Rust's standard crates and lock crates, C++'s standard library and the
/// lock libraries locksuit knows.
fn is_library_namespace(name: &str) -> bool {
    matches!(
        name,
        "std"
            | "core"
            | "alloc"
            | "parking_lot"
            | "parking_lot_core"
            | "lock_api"
            | "spin"
            | "crossbeam_utils"
            | "absl"
            | "folly"
            | "__gnu_cxx"
    )
}

/// Where a scope walk is: what it found so far, the innermost function
/// around (for naming its statics), and whether it is inside a library's
/// namespace.
struct Scope<'v, 'f> {
    /// Variables with a fixed address, each with its type's DIE.
    found: &'v mut Vec<(Variable, Option<usize>)>,
    function: Option<&'f str>,
    library: bool,
}

/// Walks a scope (a unit, namespace, function or block) for variables with
/// a fixed address, and notes the types a library's namespace defines.
fn scope<'d>(
    dies: &Dies<'_, 'd>,
    build: &mut Build,
    at: &mut Scope<'_, '_>,
    (u, node): (usize, gimli::EntriesTreeNode<'_, '_, '_, R<'d>>),
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut children = node.children();
    while let Ok(Some(child)) = children.next() {
        let entry = child.entry();
        match entry.tag() {
            dw::DW_TAG_variable => {
                if let Some(var) = variable(dies, u, entry, at.function) {
                    at.found.push(var);
                }
            }
            dw::DW_TAG_subprogram => {
                let name =
                    linkage_name(dies, u, entry).or_else(|| dies.string(u, entry, dw::DW_AT_name));
                let mut inner = Scope {
                    found: &mut *at.found,
                    function: name.as_deref(),
                    library: at.library,
                };
                scope(dies, build, &mut inner, (u, child), depth + 1);
            }
            dw::DW_TAG_namespace => {
                // Only the outermost namespace says whose it is: `std` in
                // a program's own `app::std` is the program's.
                let library = at.library
                    || (depth == 0
                        && dies
                            .string(u, entry, dw::DW_AT_name)
                            .is_some_and(|n| is_library_namespace(&n)));
                let mut inner = Scope {
                    found: &mut *at.found,
                    function: at.function,
                    library,
                };
                scope(dies, build, &mut inner, (u, child), depth + 1);
            }
            dw::DW_TAG_lexical_block | dw::DW_TAG_module => {
                scope(dies, build, at, (u, child), depth + 1);
            }
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type
                if at.library =>
            {
                if let Some(die) = dies.starts[u].checked_add(entry.offset().0) {
                    build.library.insert(die);
                }
            }
            // Types and the rest: their children are members and
            // parameters, not variables with addresses.
            _ => {}
        }
    }
}

/// A variable DIE with a fixed address, if it is one.
/// Its type is read later (see [`load`]): the variable comes with its
/// type's DIE, and a type and size of unknown.
fn variable<'d>(
    dies: &Dies<'_, 'd>,
    u: usize,
    entry: &Entry<'_, 'd>,
    function: Option<&str>,
) -> Option<(Variable, Option<usize>)> {
    // A location list (`DW_FORM_sec_offset`) is a local's, never a fixed
    // address.
    let expr = entry
        .attr_value(dw::DW_AT_location)
        .ok()??
        .exprloc_value()?;
    let unit = &dies.units[u];
    let mut ops = expr.operations(unit.encoding());
    let start = match ops.next().ok()?? {
        Operation::Address { address } => address,
        Operation::AddressIndex { index } => dies.dwarf.address(unit, index).ok()?,
        _ => return None,
    };
    // Anything after the address (DW_OP_form_tls_address: a thread-local)
    // makes it no fixed address.
    if start == 0 || !matches!(ops.next(), Ok(None)) {
        return None;
    }
    let name = match (
        linkage_name(dies, u, entry),
        dies.string(u, entry, dw::DW_AT_name),
    ) {
        (Some(name), _) => name,
        (None, Some(name)) => match function {
            Some(f) => format!("{f}::{name}"),
            None => name,
        },
        (None, None) => return None,
    };
    let ty = dies.reference(u, entry, dw::DW_AT_type);
    Some((
        Variable {
            start,
            size: 0,
            name: name.into(),
            ty: UNKNOWN,
        },
        ty,
    ))
}

/// A C++ name with its namespaces and classes (`store::shards`,
/// `counted()`), demangled from the DIE's mangled name as the symbol table
/// would give it.
fn linkage_name<'d>(dies: &Dies<'_, 'd>, u: usize, entry: &Entry<'_, 'd>) -> Option<String> {
    [dw::DW_AT_linkage_name, dw::DW_AT_MIPS_linkage_name]
        .into_iter()
        .find_map(|at| dies.string(u, entry, at))
        .map(|mangled| crate::input::symbols::demangle(&mangled))
}

/// The type described at DIE `die`, read once.
fn resolve(dies: &Dies<'_, '_>, build: &mut Build, die: usize, depth: usize) -> TypeId {
    if let Some(&id) = build.seen.get(&die) {
        return id;
    }
    if depth > MAX_DEPTH {
        return UNKNOWN;
    }
    let Some((u, entry)) = dies.at(die) else {
        return UNKNOWN;
    };
    let target = |build: &mut Build| {
        dies.reference(u, &entry, dw::DW_AT_type)
            .map_or(UNKNOWN, |t| resolve(dies, build, t, depth + 1))
    };
    let id = match entry.tag() {
        dw::DW_TAG_typedef => {
            let to = target(build);
            let lock = dies
                .string(u, &entry, dw::DW_AT_name)
                .is_some_and(|n| is_lock_type_name(&n));
            if lock {
                let size = build.layouts.type_of(to).size;
                build.layouts.push_type(Type {
                    size,
                    shape: Shape::Lock,
                    library: false,
                })
            } else {
                to
            }
        }
        dw::DW_TAG_const_type
        | dw::DW_TAG_volatile_type
        | dw::DW_TAG_restrict_type
        | dw::DW_TAG_atomic_type => target(build),
        dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type => {
            record(dies, build, (u, die, &entry), depth)
        }
        dw::DW_TAG_array_type => {
            let element = target(build);
            array(dies, build, (u, die), element)
        }
        _ => {
            let size = constant(&entry, dw::DW_AT_byte_size).unwrap_or(match entry.tag() {
                dw::DW_TAG_pointer_type
                | dw::DW_TAG_reference_type
                | dw::DW_TAG_rvalue_reference_type => {
                    u64::from(dies.units[u].encoding().address_size)
                }
                _ => 0,
            });
            build.layouts.push_type(Type {
                size,
                shape: Shape::Scalar,
                library: false,
            })
        }
    };
    build.seen.insert(die, id);
    id
}

/// A struct, class or union: its data members by offset.
fn record<'d>(
    dies: &Dies<'_, 'd>,
    build: &mut Build,
    (u, die, entry): (usize, usize, &Entry<'_, 'd>),
    depth: usize,
) -> TypeId {
    let size = constant(entry, dw::DW_AT_byte_size).unwrap_or(0);
    // Seen before its members are read: a member pointing back at its own
    // record (a damaged file) finds it.
    let id = build.layouts.push_type(Type {
        size,
        shape: Shape::Scalar,
        library: build.library.contains(&die),
    });
    build.seen.insert(die, id);
    // An incomplete type (`struct s;`) has no members to name.
    if entry
        .attr_value(dw::DW_AT_declaration)
        .ok()
        .flatten()
        .is_some()
    {
        return id;
    }
    let mut members = Vec::new();
    let unit = &dies.units[u];
    let Ok(mut tree) = unit.entries_tree(Some(gimli::UnitOffset(die - dies.starts[u]))) else {
        return id;
    };
    let Ok(root) = tree.root() else {
        return id;
    };
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let m = child.entry();
        if !matches!(m.tag(), dw::DW_TAG_member | dw::DW_TAG_inheritance) {
            continue;
        }
        // Static members (declared in the class, defined elsewhere) take
        // no room in it.
        let is = |at| m.attr_value(at).ok().flatten().is_some();
        if is(dw::DW_AT_declaration) || is(dw::DW_AT_external) {
            continue;
        }
        let offset = match m.attr_value(dw::DW_AT_data_member_location).ok().flatten() {
            Some(AttributeValue::Exprloc(expr)) => {
                match expr.operations(unit.encoding()).next() {
                    // DWARF 2's form: DW_OP_plus_uconst N.
                    Ok(Some(Operation::PlusConstant { value })) => value,
                    _ => continue,
                }
            }
            Some(value) => match value.udata_value() {
                Some(offset) => offset,
                None => continue,
            },
            None => constant(m, dw::DW_AT_data_bit_offset).map_or(0, |bits| bits / 8),
        };
        let name = (m.tag() == dw::DW_TAG_member)
            .then(|| dies.string(u, m, dw::DW_AT_name))
            .flatten();
        let ty = dies
            .reference(u, m, dw::DW_AT_type)
            .map_or(UNKNOWN, |t| resolve(dies, build, t, depth + 1));
        members.push(Member {
            offset,
            name: name.map(String::into_boxed_str),
            ty,
        });
    }
    // Stable: a union's members stay in declaration order.
    members.sort_by_key(|m| m.offset);
    build.layouts.types[id as usize].shape = Shape::Record { members };
    id
}

/// An array type: one dimension per subrange, outermost first
/// (`m[3][4]` is 3 arrays of 4).
fn array(
    dies: &Dies<'_, '_>,
    build: &mut Build,
    (u, die): (usize, usize),
    element: TypeId,
) -> TypeId {
    let mut counts = Vec::new();
    let unit = &dies.units[u];
    if let Ok(mut tree) = unit.entries_tree(Some(gimli::UnitOffset(die - dies.starts[u]))) {
        if let Ok(root) = tree.root() {
            let mut children = root.children();
            while let Ok(Some(child)) = children.next() {
                let d = child.entry();
                if d.tag() != dw::DW_TAG_subrange_type {
                    continue;
                }
                let count = constant(d, dw::DW_AT_count).or_else(|| {
                    let upper = constant(d, dw::DW_AT_upper_bound)?;
                    let lower = constant(d, dw::DW_AT_lower_bound).unwrap_or(0);
                    upper.checked_sub(lower)?.checked_add(1)
                });
                counts.push(count);
            }
        }
    }
    if counts.is_empty() {
        counts.push(None);
    }
    let mut ty = element;
    for count in counts.into_iter().rev() {
        let stride = build.layouts.type_of(ty).size;
        let size = count.map_or(0, |n| n.saturating_mul(stride));
        ty = build.layouts.push_type(Type {
            size,
            shape: Shape::Array { element: ty, count },
            library: false,
        });
    }
    ty
}
