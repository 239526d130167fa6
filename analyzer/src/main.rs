fn main() {
    std::process::exit(locksuit::cli::main());
}
