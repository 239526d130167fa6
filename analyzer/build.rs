//! Builds the access gate (`gate/access_gate.cpp`), the clang plugin that
//! `locksuit cc` compiles programs with, when LLVM 19's development files
//! are installed (Debian's llvm-19-dev; `$LLVM_CONFIG` names another
//! llvm-config). Without them `locksuit cc` falls back to clang's own
//! sanitizer coverage, which calls the shim on every access (see
//! `src/commands/cc.rs`); the build says so once.
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
