//! Locks inside structs and arrays of globals are named by their path in
//! the variable (`&chop[4].m`, `&cfg.locks[2]`, `&grid[1][2]`, `&q.cond`),
//! from the DWARF: in the program, in a shared library and in C++. Without
//! DWARF, by the variable's symbol and the offset into it, never an index
//! worked out from the lock's size (which named `chop[4].m` `&chop[12]`).
//!
//! The programs print each object's address and expected path, with the
//! address and size of its variable and its own size:
//! `lock <address> <path> <variable> <variable size> <object size>`.

use locksuit_tests::*;
use std::path::Path;
use std::process::Command;

/// One object a program printed.
struct Printed {
    cond: bool,
    address: String,
    path: String,
    /// The variable holding it and its size, and the object's own size
    /// (absent from the C++ program's lines).
    var: Option<(u64, u64, u64)>,
}

fn printed(stdout: &str) -> Vec<Printed> {
    let objects: Vec<Printed> = stdout
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let cond = match f.first() {
                Some(&"lock") => false,
                Some(&"cond") => true,
                _ => return None,
            };
            let var = (f.len() == 6).then(|| {
                (
                    parse_addr(f[3]),
                    f[4].parse().unwrap(),
                    f[5].parse().unwrap(),
                )
            });
            Some(Printed {
                cond,
                address: f[1].to_string(),
                path: f[2].to_string(),
                var,
            })
        })
        .collect();
    assert!(
        !objects.is_empty(),
        "the program printed no objects: {stdout}"
    );
    objects
}

/// Runs `bin` under the shim: its printed objects and its process's report.
fn run(bin: &Path, tag: &str) -> (Vec<Printed>, Value) {
    let dir = fresh_dir(tag);
    let out = run_under_shim(bin, &[] as &[&str], &dir);
    assert_success(&out, tag);
    let report = report_json(&[&only_trace(&dir)], None);
    (printed(&stdout_str(&out)), only_process(&report).clone())
}

/// The id the report gives the object printed as `o`.
fn id_in<'a>(p: &'a Value, o: &Printed) -> &'a str {
    if o.cond {
        id_of(cond_by_address(p, &o.address))
    } else {
        id_of(lock_by_address(p, &o.address))
    }
}

/// Every printed object is named by the path the program printed.
fn assert_paths(p: &Value, objects: &[Printed]) {
    let wrong: Vec<String> = objects
        .iter()
        .filter(|o| id_in(p, o) != o.path)
        .map(|o| format!("{} named {:?}", o.path, id_in(p, o)))
        .collect();
    assert!(wrong.is_empty(), "wrong names: {wrong:#?}");
}

/// Compiles tests/c/struct_names.c by hand: without `-g` (symbols but no
/// DWARF), and stripped if asked.
fn build_without_dwarf(stripped: bool) -> std::path::PathBuf {
    let dir = fresh_dir(&format!("struct_names_build_{stripped}"));
    let bin = dir.join(if stripped { "stripped" } else { "nodebug" });
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-O0", "-pthread", "-o"])
        .arg(&bin)
        .arg(c_dir().join("struct_names.c"))
        .output()
        .unwrap();
    assert_success(&out, "compiling struct_names.c without -g");
    if stripped {
        assert_success(&Command::new("strip").arg(&bin).output().unwrap(), "strip");
    }
    bin
}

#[test]
fn locks_in_structs_and_arrays_are_named_by_their_path() {
    let (objects, p) = run(&build_c("struct_names"), "struct_names");
    assert_paths(&p, &objects);
    // Spot checks of what the printout covers, so a program that printed
    // less would not pass.
    let paths: Vec<&str> = objects.iter().map(|o| o.path.as_str()).collect();
    for path in [
        "&chop[4].m",
        "&node[0].b",
        "&node[1].a",
        "&cfg.locks[2]",
        "&grid[1][2]",
        "&table.rw",
        "&spins.s[1]",
        "&pool.sem",
        "&q.cond",
        "&anon.m",
        "&anon.inner",
        "&later[1].b",
        "&bump::counted",
        "&bump::local.m",
    ] {
        assert!(paths.contains(&path), "{path} not printed: {paths:?}");
    }
    // Every lock of the program is in a variable, and named by it (the
    // ones it did not print too: `&chop[1].m`, …).
    for lock in locks(&p) {
        let id = id_of(lock);
        assert!(id.starts_with('&') && !id.contains('#'), "{}", short(lock));
    }
    let kinds: Vec<(&str, &str)> = ["&table.rw", "&spins.s[1]", "&pool.sem"]
        .into_iter()
        .map(|id| (id, str_of(lock_by_id(&p, id), "kind")))
        .collect();
    assert_eq!(
        kinds,
        [
            ("&table.rw", "rwlock"),
            ("&spins.s[1]", "spin"),
            ("&pool.sem", "sem")
        ]
    );
}

/// Without DWARF the variable's type is unknown: `&chop+0x220`, never an
/// index from the lock's size. Stripped, there is no variable to name.
#[test]
fn without_dwarf_a_lock_is_its_variable_and_an_offset() {
    let (objects, p) = run(&build_without_dwarf(false), "struct_names_nodebug");
    for o in &objects {
        let (var, var_size, size) = o.var.unwrap();
        let offset = parse_addr(&o.address) - var;
        // `&chop[4].m` -> chop; `&bump::counted` -> counted (whose symbol
        // is `counted.N`, GCC's name for a function's static).
        let root = o.path.trim_start_matches('&');
        let root = root.rsplit("::").next().unwrap();
        let root = root.split(['[', '.']).next().unwrap();
        let suffix = if offset == 0 && var_size <= size {
            String::new()
        } else {
            format!("+{offset:#x}")
        };
        let id = id_in(&p, o);
        let symbol = id
            .strip_prefix('&')
            .and_then(|s| s.strip_suffix(suffix.as_str()))
            .unwrap_or_else(|| panic!("{}: {id:?}, expected &{root}{suffix}", o.path));
        let numbered = symbol
            .strip_prefix(root)
            .and_then(|n| n.strip_prefix('.'))
            .is_some_and(|n| n.parse::<u32>().is_ok());
        assert!(
            symbol == root || numbered,
            "{}: {id:?}, expected &{root}{suffix}",
            o.path
        );
    }
    assert_eq!(id_in(&p, &objects[0]), "&chop+0x220", "chop[4].m");
    for lock in locks(&p) {
        assert!(!id_of(lock).contains('['), "{}", short(lock));
    }

    let (_, p) = run(&build_without_dwarf(true), "struct_names_stripped");
    for lock in locks(&p) {
        let id = id_of(lock);
        assert!(!id.contains('[') && !id.starts_with('&'), "{}", short(lock));
    }
}

/// A library's variables are at file addresses offset by where it was
/// loaded: named by path as the program's are.
#[test]
fn locks_in_a_shared_library_are_named_by_their_path() {
    let bin = build_c_linked("struct_names_main", &["struct_names_lib"]);
    let (objects, p) = run(&bin, "struct_names_lib");
    assert_paths(&p, &objects);
    let paths: Vec<&str> = objects.iter().map(|o| o.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "&lib_slots[2].m",
            "&lib_private.locks[1]",
            "&lib_take::lib_counted",
            "&pairs[1].first"
        ]
    );
}

/// C++: namespaces and classes from the mangled names, members by name;
/// `std::mutex` and `std::condition_variable` are not walked into.
#[test]
fn cxx_globals_are_named_by_their_qualified_path() {
    let dir = fresh_dir("struct_names_cxx_build");
    let bin = dir.join("struct_names_cxx");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let out = Command::new(&cxx)
        .args(["-g", "-O0", "-pthread", "-o"])
        .arg(&bin)
        .arg(c_dir().join("struct_names_cxx.cpp"))
        .output()
        .unwrap();
    assert_success(&out, "compiling struct_names_cxx.cpp");
    let (objects, p) = run(&bin, "struct_names_cxx");
    assert_paths(&p, &objects);
    assert_eq!(objects.len(), 6, "every object printed");
}
