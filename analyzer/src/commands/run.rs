//! `locksuit run`: record a command, then report on what it recorded.

use super::options::{build_report, RunArgs};
use super::output::print;
use crate::analysis::findings::Limits;
use crate::base::exit::*;
use crate::input::stream::StreamFilter;

/// Records `args.command` and prints its report; the exit status is the
/// command's own, else the gate's.
pub fn run(args: RunArgs) -> i32 {
    let watch = args
        .deadlock_timeout
        .map(|seconds| crate::commands::record::DeadlockWatch {
            timeout: std::time::Duration::from_secs_f64(seconds),
            on_deadlock: args.on_deadlock,
        });
    // Read before the command runs: a malformed file must not cost a run.
    let suppressions = match args.options.suppressions() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    };
    let recorded = match crate::commands::record::record(
        &args.command,
        (args.dir.as_deref(), args.shim.as_deref()),
        (args.policy.as_deref(), args.lean),
        watch,
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    };
    let options = &args.options;
    // A process it stopped for a deadlock: the names its threads had.
    let thread_names: std::collections::BTreeMap<(u32, u32), String> = recorded
        .deadlock
        .iter()
        .flat_map(|d| {
            d.thread_names
                .iter()
                .map(|(&tid, n)| ((d.pid, tid), n.clone()))
        })
        .collect();
    let printed = options
        .limits()
        .map(|limits| Limits {
            thread_names: std::sync::Arc::new(thread_names),
            ..limits
        })
        .and_then(|limits| Ok((limits, options.prior_runs()?)))
        .and_then(|(limits, prior)| {
            build_report(
                std::slice::from_ref(&recorded.dir),
                &options.selection(),
                (&limits, &prior),
                &StreamFilter::Off,
            )
        })
        .and_then(|mut report| {
            crate::analysis::suppress::apply(&mut report, &suppressions);
            print(report, options)
        });
    let gate_failed = match printed {
        Ok(failed) => failed,
        Err(e) => {
            eprintln!("locksuit: no report: {e}");
            false
        }
    };
    eprintln!("locksuit: traces kept in {}", recorded.dir.display());
    if recorded.deadlock.is_some() {
        return EXIT_GATE; // it deadlocked: 1, whatever the stopped command returned
    }
    // The command's own failure wins; then the gate.
    match recorded.exit_status {
        EXIT_OK if gate_failed => EXIT_GATE,
        status => status,
    }
}
