// Exports the access gate's thread-local words, defined in assembly in
// this library (`src/lib.rs`) and in the shim
// (`shim/src/recorder/tables/thread_state.rs`, whose build script includes this
// one). rustc's export list for a cdylib is made from Rust items only and
// would leave them local; GNU ld merges this list with rustc's.
fn main() {
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let script = std::path::Path::new(&out).join("gate.map");
    std::fs::write(
        &script,
        "{ global: __locksuit_gate_calls; __locksuit_gate_skip_loads; __locksuit_gate_skip_stores; };\n",
    )
    .expect("OUT_DIR is writable");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
    println!("cargo:rerun-if-changed=build.rs");
}
