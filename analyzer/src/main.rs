/// Out of memory is exit status 2 with a message, not an abort.
#[global_allocator]
static ALLOCATOR: locksuit::base::oom::ExitOnOom = locksuit::base::oom::ExitOnOom;

fn main() {
    locksuit::base::oom::map_large_allocations();
    std::process::exit(locksuit::cli::main());
}
