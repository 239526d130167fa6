//! `locksuit cc` and `locksuit c++`: the C/C++ compiler with access
//! instrumentation, for data-level suitability. Every load and store the
//! compiler emits may call `__sanitizer_cov_load{1,2,4,8,16}(address)` or
//! `…_store…`, and the program is linked against liblocksuit_cov.so, whose
//! callbacks do nothing: the program runs as it did without the shim.
//! Under the shim (which defines the same callbacks and comes first in the
//! lookup order) the accesses made while a lock is held are recorded. The
//! callbacks only receive the address: atomics, ordering and every value
//! stay exactly as compiled.
//!
//! Two ways to make those calls:
//! - the access gate (`gate/access_gate.cpp`, a clang plugin built with
//!   the analyzer when LLVM 19's development files are there): each call
//!   sits behind an inline test of two thread-local words the shim keeps,
//!   so a thread holding no lock makes none for its loads, and a program
//!   run without the shim makes none at all;
//! - otherwise clang's `-fsanitize-coverage=edge,trace-loads,trace-stores`,
//!   which calls on every access.
//!
//! Drop-in: `CC="locksuit cc" make`. The compiler is `$LOCKSUIT_CC` (or
//! `$LOCKSUIT_CXX`), else clang-19, else clang; it must be clang (GCC's
//! coverage options differ). The gate is used with clang-19 found on the
//! `PATH` only (it is built for clang 19), on x86_64 only, and not when
//! `$LOCKSUIT_GATE` is `off`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The flag that makes every load and store call the shim, without the gate.
pub const INSTRUMENT: &str = "-fsanitize-coverage=edge,trace-loads,trace-stores";
/// Keeps clang from linking its own sanitizer runtime, whose weak
/// callbacks would bind inside the program where the shim cannot replace
/// them.
pub const NO_RUNTIME: &str = "-fno-sanitize-link-runtime";

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

/// The compiler, and whether it is the clang 19 the gate plugin is built
/// for (not when the user chose it with `$LOCKSUIT_CC`/`CXX`, nor an
/// unversioned `clang`, whose version may be another).
fn compiler(cxx: bool) -> (OsString, bool) {
    let (var, versioned, plain) = if cxx {
        ("LOCKSUIT_CXX", "clang++-19", "clang++")
    } else {
        ("LOCKSUIT_CC", "clang-19", "clang")
    };
    if let Some(c) = std::env::var_os(var).filter(|c| !c.is_empty()) {
        return (c, false);
    }
    if on_path(versioned) {
        (versioned.into(), true)
    } else {
        (plain.into(), false)
    }
}

/// The access gate plugin: `liblocksuit_gate.so` beside the callbacks
/// library (where both were installed), else where the build made it.
fn gate_plugin(libdir: Option<&Path>) -> Option<PathBuf> {
    // The gate's thread-local words are defined in x86_64 assembly (in the
    // shim and in liblocksuit_cov.so); elsewhere they would be missing.
    if !cfg!(target_arch = "x86_64")
        || std::env::var_os("LOCKSUIT_GATE").is_some_and(|v| v == "off")
    {
        return None;
    }
    let beside = libdir.map(|d| d.join("liblocksuit_gate.so"));
    let built = Some(env!("LOCKSUIT_GATE_PLUGIN"))
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    beside.into_iter().chain(built).find(|p| p.is_file())
}

/// Where liblocksuit_cov.so is: `$LOCKSUIT_COV_DIR`, else beside this
/// binary (the build directory, or where both were installed).
fn library_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LOCKSUIT_COV_DIR") {
        return Some(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.to_path_buf();
    dir.join("liblocksuit_cov.so").exists().then_some(dir)
}

/// Whether the compiler will link (no `-c`, `-S`, `-E` or dependency-only run).
fn links(args: &[OsString]) -> bool {
    !args.iter().any(|a| {
        matches!(
            a.to_str(),
            Some("-c" | "-S" | "-E" | "-M" | "-MM" | "-fsyntax-only")
        )
    })
}

/// The compiler's arguments for `args`: instrumented through the `gate`
/// plugin if given, else through sanitizer coverage.
pub fn command_line(
    args: &[OsString],
    gate: Option<&Path>,
    libdir: Option<&Path>,
) -> Vec<OsString> {
    let mut full: Vec<OsString> = match gate {
        Some(plugin) => vec![format!("-fpass-plugin={}", plugin.display()).into()],
        None => vec![INSTRUMENT.into(), NO_RUNTIME.into()],
    };
    full.extend(args.iter().cloned());
    if links(args) {
        if let Some(dir) = libdir {
            full.push(format!("-L{}", dir.display()).into());
            full.push("-llocksuit_cov".into());
            full.push(format!("-Wl,-rpath,{}", dir.display()).into());
        }
    }
    full
}

/// Runs the compiler in place of this process; returns only if it could
/// not be started (exit status 2, said on stderr).
pub fn run(args: &[OsString], cxx: bool) -> i32 {
    let libdir = library_dir();
    if libdir.is_none() && links(args) {
        eprintln!(
            "locksuit: liblocksuit_cov.so is not beside {}; build it (cargo build --release) or set LOCKSUIT_COV_DIR",
            std::env::current_exe().map_or("locksuit".into(), |p| p.display().to_string())
        );
        return crate::base::exit::EXIT_USAGE;
    }
    let (cc, clang_19) = compiler(cxx);
    let gate = if clang_19 {
        gate_plugin(libdir.as_deref())
    } else {
        None
    };
    let full = command_line(args, gate.as_deref(), libdir.as_deref());
    let err = Command::new(&cc).args(&full).exec();
    eprintln!(
        "locksuit: cannot run the compiler {}: {err} (install clang-19, or set {})",
        cc.to_string_lossy(),
        if cxx { "LOCKSUIT_CXX" } else { "LOCKSUIT_CC" }
    );
    crate::base::exit::EXIT_USAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linking_adds_the_callbacks_library_and_compiling_does_not() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let dir = Path::new("/opt/locksuit");
        let compile = command_line(&args(&["-c", "a.c", "-o", "a.o"]), None, Some(dir));
        assert_eq!(compile[0], INSTRUMENT);
        assert!(!compile.iter().any(|a| a == "-llocksuit_cov"));
        let gated = command_line(
            &args(&["-c", "a.c"]),
            Some(Path::new("/opt/g.so")),
            Some(dir),
        );
        assert_eq!(gated, args(&["-fpass-plugin=/opt/g.so", "-c", "a.c"]));
        let link = command_line(&args(&["a.o", "-o", "a"]), None, Some(dir));
        assert!(link.ends_with(&args(&[
            "-L/opt/locksuit",
            "-llocksuit_cov",
            "-Wl,-rpath,/opt/locksuit"
        ])));
    }
}
