//! Builds the access gate (`gate/access_gate.cpp`), the clang plugin that
//! `locksuit cc` compiles programs with, when LLVM 19's development files
//! are installed (Debian's llvm-19-dev; `$LLVM_CONFIG` names another
//! llvm-config). Without them `locksuit cc` falls back to clang's own
//! sanitizer coverage, which calls the shim on every access (see
//! `src/commands/cc.rs`); the build says so once.
//!
//! Also compiles `locksuit attach`'s BPF program (`bpf/futex.bpf.c`) with
//! clang-19 (or `$BPF_CLANG`, or clang) `-target bpf`. Without a clang that
//! can, the build still succeeds and `locksuit attach` says it was built
//! without its BPF programs; the build says so once.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=gate/access_gate.cpp");
    println!("cargo:rerun-if-env-changed=LLVM_CONFIG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let plugin = out.join("liblocksuit_gate.so");
    match build(&plugin) {
        Ok(()) => println!("cargo:rustc-env=LOCKSUIT_GATE_PLUGIN={}", plugin.display()),
        Err(why) => {
            println!("cargo:warning=locksuit cc will use clang's sanitizer coverage: the access gate plugin was not built ({why})");
            println!("cargo:rustc-env=LOCKSUIT_GATE_PLUGIN=");
        }
    }
    build_bpf(&out);
}

/// Compiles the BPF program to `$OUT_DIR/futex.bpf.o`; on failure leaves
/// an empty file there (the program then knows it has none).
fn build_bpf(out: &std::path::Path) {
    println!("cargo:rerun-if-changed=bpf/futex.bpf.c");
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    let object = out.join("futex.bpf.o");
    let clang = std::env::var("BPF_CLANG").ok().unwrap_or_else(|| {
        if on_path("clang-19") {
            "clang-19".into()
        } else {
            "clang".into()
        }
    });
    let built = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-c", "bpf/futex.bpf.c", "-o"])
        .arg(&object)
        .status()
        .map_err(|e| format!("{clang}: {e}"))
        .and_then(|s| {
            s.success()
                .then_some(())
                .ok_or_else(|| format!("{clang} failed on bpf/futex.bpf.c"))
        });
    if let Err(why) = built {
        println!("cargo:warning=locksuit attach is built without its BPF program ({why}; install clang-19)");
        std::fs::write(&object, b"").expect("OUT_DIR is writable");
    }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

fn build(plugin: &PathBuf) -> Result<(), String> {
    let config = std::env::var("LLVM_CONFIG").unwrap_or_else(|_| "llvm-config-19".into());
    let flags = Command::new(&config)
        .arg("--cxxflags")
        .output()
        .map_err(|e| format!("{config}: {e}; install llvm-19-dev"))?;
    if !flags.status.success() {
        return Err(format!("{config} --cxxflags failed"));
    }
    let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
    let cxx = if on_path("clang++-19") {
        "clang++-19"
    } else {
        "c++"
    };
    let status = Command::new(cxx)
        .args(["-shared", "-fPIC", "-O2"])
        .args(flags.split_whitespace())
        .arg("gate/access_gate.cpp")
        .arg("-o")
        .arg(plugin)
        .status()
        .map_err(|e| format!("{cxx}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cxx} failed on gate/access_gate.cpp"))
    }
}
