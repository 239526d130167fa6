//! The path walk on hand-made types (glibc x86-64 sizes): what the DWARF
//! of tests/c/struct_names.c describes, and the corners around it.

use super::*;

const MUTEX: u64 = 40;

struct Build(Layouts);

impl Build {
    fn new() -> Self {
        Build(Layouts::default())
    }
    fn ty(&mut self, size: u64, shape: Shape) -> TypeId {
        self.0.push_type(Type {
            size,
            shape,
            library: false,
        })
    }
    /// A record of a library's (its steps are not the program's).
    fn library(&mut self, size: u64, members: &[(u64, &str, TypeId)]) -> TypeId {
        let id = self.record(size, members);
        self.0.types[id as usize].library = true;
        id
    }
    fn scalar(&mut self, size: u64) -> TypeId {
        self.ty(size, Shape::Scalar)
    }
    fn lock(&mut self, size: u64) -> TypeId {
        self.ty(size, Shape::Lock)
    }
    fn array(&mut self, element: TypeId, count: u64) -> TypeId {
        let size = self.0.type_of(element).size * count;
        self.ty(
            size,
            Shape::Array {
                element,
                count: Some(count),
            },
        )
    }
    fn record(&mut self, size: u64, members: &[(u64, &str, TypeId)]) -> TypeId {
        let members = members
            .iter()
            .map(|&(offset, name, ty)| Member {
                offset,
                name: (!name.is_empty()).then(|| name.into()),
                ty,
            })
            .collect();
        self.ty(size, Shape::Record { members })
    }
    fn finish(mut self, vars: &[(u64, &str, TypeId)]) -> Layouts {
        let vars = vars
            .iter()
            .map(|&(start, name, ty)| Variable {
                start,
                size: self.0.type_of(ty).size,
                name: name.into(),
                ty,
            })
            .collect();
        self.0.set_variables(vars);
        self.0
    }
}

fn name(layouts: &Layouts, address: u64, object_size: u64) -> Option<String> {
    layouts.place(address, object_size).map(|p| p.name())
}

#[test]
fn a_member_of_an_array_element_is_named_by_index_and_member() {
    let mut b = Build::new();
    let mutex = b.lock(MUTEX);
    let byte = b.scalar(1);
    let pad = b.array(byte, 64);
    let tail = b.array(byte, 16);
    let chopstick = b.record(
        120,
        &[(0, "pad", pad), (64, "m", mutex), (104, "tail", tail)],
    );
    let chop = b.array(chopstick, 5);
    let node_t = {
        let long = b.scalar(8);
        b.record(
            88,
            &[(0, "a", mutex), (40, "b", mutex), (80, "value", long)],
        )
    };
    let node = b.array(node_t, 3);
    let l = b.finish(&[(0x1000, "chop", chop), (0x2000, "node", node)]);
    // The size-computed names were &chop[12], &node[1] and &node[2].
    assert_eq!(
        name(&l, 0x1000 + 4 * 120 + 64, MUTEX).unwrap(),
        "&chop[4].m"
    );
    assert_eq!(name(&l, 0x1000 + 64, MUTEX).unwrap(), "&chop[0].m");
    assert_eq!(name(&l, 0x2000 + 40, MUTEX).unwrap(), "&node[0].b");
    assert_eq!(name(&l, 0x2000 + 88, MUTEX).unwrap(), "&node[1].a");
    assert_eq!(name(&l, 0x2000 + 88 + 80, 8).unwrap(), "&node[1].value");
    assert_eq!(name(&l, 0x1000 + 600, MUTEX), None, "past the array");
    assert_eq!(name(&l, 0xfff, MUTEX), None, "before it");
}

#[test]
fn arrays_in_structs_and_arrays_of_arrays() {
    let mut b = Build::new();
    let mutex = b.lock(MUTEX);
    let int = b.scalar(4);
    let locks = b.array(mutex, 4);
    let config = b.record(168, &[(0, "count", int), (8, "locks", locks)]);
    let row = b.array(mutex, 4);
    let grid = b.array(row, 3);
    let spin = b.lock(4);
    let spins_s = b.array(spin, 3);
    let spins = b.record(16, &[(0, "flags", int), (4, "s", spins_s)]);
    let l = b.finish(&[
        (0x100, "cfg", config),
        (0x400, "grid", grid),
        (0x800, "spins", spins),
    ]);
    assert_eq!(name(&l, 0x100 + 8 + 80, MUTEX).unwrap(), "&cfg.locks[2]");
    assert_eq!(name(&l, 0x100 + 8, MUTEX).unwrap(), "&cfg.locks[0]");
    assert_eq!(name(&l, 0x400 + 160 + 80, MUTEX).unwrap(), "&grid[1][2]");
    assert_eq!(name(&l, 0x400, MUTEX).unwrap(), "&grid[0][0]");
    // A 4-byte spinlock: no index from any size.
    assert_eq!(name(&l, 0x808, 4).unwrap(), "&spins.s[1]");
}

#[test]
fn offsets_inside_scalars_and_padding_are_bytes_past_the_path() {
    let mut b = Build::new();
    let byte = b.scalar(1);
    let long = b.scalar(8);
    let int = b.scalar(4);
    let s = b.record(24, &[(0, "c", byte), (8, "x", long), (16, "y", int)]);
    let l = b.finish(&[(0x10, "s", s)]);
    assert_eq!(name(&l, 0x10 + 18, MUTEX).unwrap(), "&s.y+0x2");
    assert_eq!(name(&l, 0x10 + 3, MUTEX).unwrap(), "&s+0x3", "padding");
    assert_eq!(name(&l, 0x10 + 8, MUTEX).unwrap(), "&s.x");
    assert_eq!(
        name(&l, 0x10 + 21, MUTEX).unwrap(),
        "&s+0x15",
        "tail padding"
    );
}

#[test]
fn anonymous_members_add_no_name_and_a_union_picks_the_lock() {
    let mut b = Build::new();
    let mutex = b.lock(MUTEX);
    let byte = b.scalar(1);
    let int = b.scalar(4);
    let long = b.scalar(8);
    let pad = b.array(byte, 64);
    // The padding declared first: the lock still wins.
    let union = b.record(64, &[(0, "pad", pad), (0, "m", mutex)]);
    let inner = b.record(48, &[(0, "x", long), (8, "inner", mutex)]);
    let anon = b.record(120, &[(0, "kind", int), (8, "", union), (72, "", inner)]);
    let l = b.finish(&[(0x40, "anon", anon)]);
    assert_eq!(name(&l, 0x48, MUTEX).unwrap(), "&anon.m");
    assert_eq!(name(&l, 0x40 + 80, MUTEX).unwrap(), "&anon.inner");
    assert_eq!(name(&l, 0x48 + 50, 1).unwrap(), "&anon.pad[50]");
}

#[test]
fn a_type_the_object_fills_is_not_walked_into() {
    let mut b = Build::new();
    // std::mutex: a class around __mutex_base around the pthread mutex,
    // described without the typedef here.
    let bytes = {
        let byte = b.scalar(1);
        b.array(byte, 40)
    };
    let base = b.record(40, &[(0, "_M_mutex", bytes)]);
    let std_mutex = b.record(40, &[(0, "", base)]);
    let long = b.scalar(8);
    let shard = b.record(48, &[(0, "n", long), (8, "m", std_mutex)]);
    let shards = b.array(shard, 4);
    let cond = b.lock(48);
    let mutex = b.lock(MUTEX);
    let queue = b.record(96, &[(0, "lock", mutex), (40, "cond", cond)]);
    let l = b.finish(&[
        (0x100, "shards", shards),
        (0x400, "mtx", std_mutex),
        (0x500, "q", queue),
    ]);
    assert_eq!(name(&l, 0x100 + 48 * 2 + 8, MUTEX).unwrap(), "&shards[2].m");
    assert_eq!(name(&l, 0x400, MUTEX).unwrap(), "&mtx");
    // A condition variable, of unknown size: its typedef stops the path.
    assert_eq!(name(&l, 0x528, 0).unwrap(), "&q.cond");
    assert_eq!(name(&l, 0x528, 48).unwrap(), "&q.cond");
    assert_eq!(name(&l, 0x500, MUTEX).unwrap(), "&q.lock");
}

#[test]
fn a_variable_of_unknown_type_is_left_to_the_symbol_table() {
    let l = Build::new().finish(&[(0x10, "opaque", UNKNOWN)]);
    assert_eq!(name(&l, 0x10, MUTEX), None);
}

#[test]
fn a_damaged_type_cycle_ends() {
    let mut b = Build::new();
    // A record whose only member is itself: no real type is, a damaged
    // file may say so.
    let id = b.record(8, &[]);
    b.0.types[id as usize].shape = Shape::Record {
        members: vec![Member {
            offset: 0,
            name: Some("self".into()),
            ty: id,
        }],
    };
    let l = b.finish(&[(0x10, "loop", id)]);
    let place = l.place(0x12, MUTEX).unwrap();
    assert!(place.path.starts_with("loop.self.self"), "{place:?}");
    assert_eq!(place.offset, 2);
}

#[test]
fn without_a_type_a_symbol_gives_an_offset_never_an_index() {
    let name = |offset, size, object| Place::of_symbol("table".into(), offset, size, object).name();
    assert_eq!(name(0, 40, MUTEX), "&table");
    assert_eq!(
        name(0, 320, MUTEX),
        "&table+0x0",
        "somewhere in a bigger one"
    );
    assert_eq!(name(120, 320, MUTEX), "&table+0x78");
    assert_eq!(name(0x1e0, 600, MUTEX), "&table+0x1e0");
    assert_eq!(
        name(0, 320, 0),
        "&table",
        "object of unknown size at the start"
    );
}

#[test]
fn a_library_objects_private_fields_are_not_the_programs_object() {
    // Rust's std, 1.8x: `Mutex<u32>` { inner: sys::Mutex { futex }, poison,
    // data }, `RwLock<u32>` { inner: sys::RwLock { state, writer_notify },
    // … }, `Barrier` { lock: Mutex<BarrierState>, cvar: Condvar }.
    let mut b = Build::new();
    let word = b.scalar(4);
    let byte = b.scalar(1);
    let sys_mutex = b.library(4, &[(0, "futex", word)]);
    let cell = b.library(4, &[(0, "value", word)]);
    let mutex = b.library(
        12,
        &[
            (0, "inner", sys_mutex),
            (4, "poison", byte),
            (8, "data", cell),
        ],
    );
    let sys_rw = b.library(8, &[(0, "state", word), (4, "writer_notify", word)]);
    let rwlock = b.library(
        16,
        &[
            (0, "inner", sys_rw),
            (8, "poison", byte),
            (12, "data", cell),
        ],
    );
    let condvar = b.library(4, &[(0, "inner", word)]);
    let barrier = b.library(20, &[(0, "lock", mutex), (12, "cvar", condvar)]);
    let shared = b.record(28, &[(0, "rw", rwlock), (16, "m", mutex)]);
    let cells = b.library(
        36,
        &[
            (0, "value", mutex),
            (12, "value2", mutex),
            (24, "value3", mutex),
        ],
    );
    let three = b.array(mutex, 3);
    let wrapped = b.library(36, &[(0, "value", three)]);
    let l = b.finish(&[
        (0x100, "app::B", mutex),
        (0x200, "app::RW", rwlock),
        (0x300, "app::C", condvar),
        (0x400, "app::BARRIER", barrier),
        (0x500, "app::S", shared),
        (0x600, "app::CELLS", cells),
        (0x700, "app::M", wrapped),
    ]);
    let place = |address| l.place(address, 4).unwrap();
    let b_ = place(0x100);
    assert_eq!(b_.name(), "&app::B.inner", "the full path stays");
    assert_eq!(b_.object_name(), "&app::B");
    assert_eq!(b_.inside, ".inner");
    assert_eq!(place(0x200).object_name(), "&app::RW");
    assert_eq!(place(0x204).object_name(), "&app::RW/writer_notify");
    assert_eq!(place(0x204).name(), "&app::RW.inner.writer_notify");
    assert_eq!(place(0x300).object_name(), "&app::C");
    assert_eq!(place(0x400).object_name(), "&app::BARRIER/lock");
    assert_eq!(place(0x40c).object_name(), "&app::BARRIER/cvar");
    assert_eq!(place(0x504).object_name(), "&app::S.rw/writer_notify");
    assert_eq!(place(0x510).object_name(), "&app::S.m");
    assert_eq!(place(0x60c).object_name(), "&app::CELLS/value2");
    assert_eq!(place(0x718).object_name(), "&app::M[2]", "an element stays");
}
