# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_locksuit_global_optspecs
    string join \n h/help V/version
end

function __fish_locksuit_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_locksuit_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_locksuit_using_subcommand
    set -l cmd (__fish_locksuit_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c locksuit -n "__fish_locksuit_needs_command" -s h -l help -d 'Print help'
complete -c locksuit -n "__fish_locksuit_needs_command" -s V -l version -d 'Print version'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "report" -d 'Report on recorded traces'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "run" -d 'Record a command and all its children, then report on every process'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "attach" -d 'Record a running process through the kernel (BPF; root), then report on it'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "events" -d 'Print each lock\'s and condition variable\'s events in causal order'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "export" -d 'Export the timeline of every blocking period for other tools'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "flamegraph" -d 'Draw a flame graph (SVG) of the call stacks, weighted by --weight'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "diff" -d 'Compare two runs, or a run with the spread of the last N saved runs; exit 1 if anything regressed'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "history" -d 'List the runs saved with `report --save`, with their contended share and share of the threads\' time spent waiting (what `diff --against-history` judges)'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "cc" -d 'The C compiler (clang) with access instrumentation, for data-level suitability: `CC="locksuit cc" make`'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "c++" -d 'The C++ compiler (clang++) with access instrumentation; as `cc` ($LOCKSUIT_CXX)'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "top" -d 'A live view of a running program: locks by wait in the last interval and in all, threads blocked now and on whom, the hottest lines; refreshed every second'
complete -c locksuit -n "__fish_locksuit_needs_command" -f -a "generate" -d 'Write locksuit\'s man pages or a shell\'s completion script (made from these options)'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l threshold -d 'Sharing ratio below which a line\'s locking is reported as unsuitable, in [0, 1]' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l format -d 'Output format; json follows schema locksuit.report/3; summary is one screen for many processes' -r -f -a "text\t'Readable tables, as wide as --width'
json\t'Schema locksuit.report/3 (docs/report-schema.md)'
summary\t'One screen: processes recorded, findings by kind, processes with findings'
html\t'One self-contained page (use -o FILE): per-thread timelines of running and blocked time by class, with tooltips and handoffs; time per class; blocking call stacks; findings; the text report\'s tables'
folded\t'Folded stacks (`frame;frame;… value`), outermost frame first, one line per stack, weighted by --weight: what flame-graph tools (inferno, flamegraph.pl, speedscope) read. Each stack starts with a frame naming its process'
pprof\t'A pprof profile (profile.proto, gzipped; use -o FILE) of the waits, like Go\'s mutex profile: contentions/count and delay/nanoseconds per call stack, with functions, files, lines and modules. `go tool pprof`, Pyroscope and Parca read it'
sarif\t'The findings as SARIF 2.1.0 (code-scanning UIs show them inline in a pull request): a rule per finding kind, each finding\'s line, its call chain as a code flow; paths under the current directory relative to %SRCROOT%'"
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l width -d 'Text: no line longer than N columns (default: $COLUMNS, else the terminal, else 100 when written to a pipe or a file)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l top -d 'List only the N highest-ranked findings of each process (text: 20 unless given; json: all unless given)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l exe -d 'Only processes of this executable (its file name or full path; repeatable)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l pid -d 'Only the process with this pid (repeatable)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l suppress -d 'Suppressions: a file of `[name]` entries with `kind`, `lock`, `frame` and `module` glob lines; the findings an entry matches are left out and counted apart (repeatable; default: $LOCKSUIT_SUPPRESS). A `locksuit.supp` in the current directory, or in its parents up to the repository\'s root, is read as well' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l long-hold-ms -d 'long-hold: a hold this long (ms) at a stretch while a thread waited' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l contention-share -d 'high-contention: the share of acquisitions that had to wait, in [0, 1]' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l over-sync-per-sec -d 'over-synchronization: acquisitions per second of a lock that almost never contends' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l asymmetry -d 'asymmetric-contention: how many times more contended the hottest lock of one line is' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l starvation -d 'starvation: one wait that sat through this many acquisitions by other threads' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l min-acquisitions -d 'single-thread-lock, unnecessary-lock and unsuitable-site: a lock or line engaged fewer times than this cost the run too little to be worth a finding' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l min-runs -d 'unnecessary-lock across runs: how many recorded runs of a program (reported together, or saved in the history with --against-history) must each have had one thread alone take a lock before it is called unnecessary' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l classes -d 'Blocking classes of your own: a file of `class = glob` lines (e.g. `database = *sqlite3_step*`) matched against the blocking call and every function of its stack, most specific first, before the built-in classes (default: $LOCKSUIT_CLASSES)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l sort -d 'Text tables: order locks and sites by this column (largest first)' -r -f -a "wait\t'Total time threads waited'
hold\t'Total timed hold time'
acquisitions\t''
contended\t''
changes\t'Owner changes'
p99\t'99th percentile of contended waits'
max\t'Longest contended wait'
threads\t''"
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l columns -d 'Text: the locks table in mutrace\'s columns (Locked, Changed, Cont., tot.Time, avg.Time, max.Time)' -r -f -a "locksuit\t''
mutrace\t'mutrace\'s: Locked, Changed, Cont., tot.Time, avg.Time, max.Time'"
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l tree-min -d 'With --tree: leave out nodes below this share of all the time blocked (1% or 0.01)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l history -d 'The run history database (default: $XDG_DATA_HOME/locksuit/history.db, else ~/.local/share/locksuit/history.db)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l label -d 'The label runs are saved and compared under (e.g. ci-main): runs of one program under other labels are kept apart' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l against-history -d 'Evidence from the run history: the last N runs saved (--save) of each program under --label count as runs reported with this one. A lock two threads took in any of them is shared; one a single thread took in each of --min-runs runs is unnecessary-lock' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l weight -d '--format folded: what a stack\'s value measures' -r -f -a "wait\t'Time blocked (ns): contended lock waits and every recorded blocking period (sleeps, I/O, joins …), at the blocking call'
hold\t'Time locks were held (ns), at the line that took them'
contentions\t'Contended acquisitions, at their line'
acquisitions\t'Acquisitions, at their line'"
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -s o -l output -d 'Write the report to FILE instead of standard output (keeps it apart from the recorded program\'s own output under `run`)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l fail-on-findings -d 'Exit with status 1 if any process has a finding (`run`: unless the command itself failed, whose status wins). Suppressed findings do not count'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l no-default-suppressions -d 'Leave out the built-in suppressions (CPython\'s interpreter locks: the GIL, the import lock, its runtime state and io buffers, and unsuitable-site at its own lines; lock calls made by glibc itself)'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l gen-suppressions -d 'Instead of the report, print a ready suppression entry for each finding left (to append to locksuit.supp)'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l summary -d 'After the report, print the one-screen summary (as --format summary) on stderr'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l tree -d 'Text: also print the waiting call tree (every blocking stack merged from the outermost frame in, with share, total, count and longest wait per node)'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -l save -d 'Save this run\'s summary (per program: locks, sites, findings) in the run history, for `diff --against-history` and `history`'
complete -c locksuit -n "__fish_locksuit_using_subcommand report" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l threshold -d 'Sharing ratio below which a line\'s locking is reported as unsuitable, in [0, 1]' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l format -d 'Output format; json follows schema locksuit.report/3; summary is one screen for many processes' -r -f -a "text\t'Readable tables, as wide as --width'
json\t'Schema locksuit.report/3 (docs/report-schema.md)'
summary\t'One screen: processes recorded, findings by kind, processes with findings'
html\t'One self-contained page (use -o FILE): per-thread timelines of running and blocked time by class, with tooltips and handoffs; time per class; blocking call stacks; findings; the text report\'s tables'
folded\t'Folded stacks (`frame;frame;… value`), outermost frame first, one line per stack, weighted by --weight: what flame-graph tools (inferno, flamegraph.pl, speedscope) read. Each stack starts with a frame naming its process'
pprof\t'A pprof profile (profile.proto, gzipped; use -o FILE) of the waits, like Go\'s mutex profile: contentions/count and delay/nanoseconds per call stack, with functions, files, lines and modules. `go tool pprof`, Pyroscope and Parca read it'
sarif\t'The findings as SARIF 2.1.0 (code-scanning UIs show them inline in a pull request): a rule per finding kind, each finding\'s line, its call chain as a code flow; paths under the current directory relative to %SRCROOT%'"
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l width -d 'Text: no line longer than N columns (default: $COLUMNS, else the terminal, else 100 when written to a pipe or a file)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l top -d 'List only the N highest-ranked findings of each process (text: 20 unless given; json: all unless given)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l exe -d 'Only processes of this executable (its file name or full path; repeatable)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l pid -d 'Only the process with this pid (repeatable)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l suppress -d 'Suppressions: a file of `[name]` entries with `kind`, `lock`, `frame` and `module` glob lines; the findings an entry matches are left out and counted apart (repeatable; default: $LOCKSUIT_SUPPRESS). A `locksuit.supp` in the current directory, or in its parents up to the repository\'s root, is read as well' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l long-hold-ms -d 'long-hold: a hold this long (ms) at a stretch while a thread waited' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l contention-share -d 'high-contention: the share of acquisitions that had to wait, in [0, 1]' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l over-sync-per-sec -d 'over-synchronization: acquisitions per second of a lock that almost never contends' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l asymmetry -d 'asymmetric-contention: how many times more contended the hottest lock of one line is' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l starvation -d 'starvation: one wait that sat through this many acquisitions by other threads' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l min-acquisitions -d 'single-thread-lock, unnecessary-lock and unsuitable-site: a lock or line engaged fewer times than this cost the run too little to be worth a finding' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l min-runs -d 'unnecessary-lock across runs: how many recorded runs of a program (reported together, or saved in the history with --against-history) must each have had one thread alone take a lock before it is called unnecessary' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l classes -d 'Blocking classes of your own: a file of `class = glob` lines (e.g. `database = *sqlite3_step*`) matched against the blocking call and every function of its stack, most specific first, before the built-in classes (default: $LOCKSUIT_CLASSES)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l sort -d 'Text tables: order locks and sites by this column (largest first)' -r -f -a "wait\t'Total time threads waited'
hold\t'Total timed hold time'
acquisitions\t''
contended\t''
changes\t'Owner changes'
p99\t'99th percentile of contended waits'
max\t'Longest contended wait'
threads\t''"
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l columns -d 'Text: the locks table in mutrace\'s columns (Locked, Changed, Cont., tot.Time, avg.Time, max.Time)' -r -f -a "locksuit\t''
mutrace\t'mutrace\'s: Locked, Changed, Cont., tot.Time, avg.Time, max.Time'"
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l tree-min -d 'With --tree: leave out nodes below this share of all the time blocked (1% or 0.01)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l history -d 'The run history database (default: $XDG_DATA_HOME/locksuit/history.db, else ~/.local/share/locksuit/history.db)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l label -d 'The label runs are saved and compared under (e.g. ci-main): runs of one program under other labels are kept apart' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l against-history -d 'Evidence from the run history: the last N runs saved (--save) of each program under --label count as runs reported with this one. A lock two threads took in any of them is shared; one a single thread took in each of --min-runs runs is unnecessary-lock' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l weight -d '--format folded: what a stack\'s value measures' -r -f -a "wait\t'Time blocked (ns): contended lock waits and every recorded blocking period (sleeps, I/O, joins …), at the blocking call'
hold\t'Time locks were held (ns), at the line that took them'
contentions\t'Contended acquisitions, at their line'
acquisitions\t'Acquisitions, at their line'"
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -s o -l output -d 'Write the report to FILE instead of standard output (keeps it apart from the recorded program\'s own output under `run`)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l dir -d 'Directory for the traces (created with mode 0700 if missing)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l shim -d 'The shim to preload (default: libsyncshim.so next to this binary, or $LOCKSUIT_SHIM)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l policy -d 'A recording policy for the command and its children (sets $LOCKSUIT_POLICY; see docs/policy.md): which processes, threads, objects and sites to record, thresholds, snapshot triggers, sampling and call-chain depth. Counters stay exact' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l deadlock-timeout -d 'Watch for deadlocks while the command runs: one that lasts this many seconds is explained on stderr, acted on (--on-deadlock), reported, and `run` exits 1' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l on-deadlock -d 'What to do with a deadlocked process: kill it, abort it (a core dump for a debugger), or keep it hanging until you stop it' -r -f -a "kill\t'SIGKILL it'
abort\t'SIGABRT it: it dies with a core dump, for a debugger'
keep\t'Leave it hanging (attach a debugger); report when the command ends'"
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l fail-on-findings -d 'Exit with status 1 if any process has a finding (`run`: unless the command itself failed, whose status wins). Suppressed findings do not count'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l no-default-suppressions -d 'Leave out the built-in suppressions (CPython\'s interpreter locks: the GIL, the import lock, its runtime state and io buffers, and unsuitable-site at its own lines; lock calls made by glibc itself)'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l gen-suppressions -d 'Instead of the report, print a ready suppression entry for each finding left (to append to locksuit.supp)'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l summary -d 'After the report, print the one-screen summary (as --format summary) on stderr'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l tree -d 'Text: also print the waiting call tree (every blocking stack merged from the outermost frame in, with share, total, count and longest wait per node)'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l save -d 'Save this run\'s summary (per program: locks, sites, findings) in the run history, for `diff --against-history` and `history`'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -l lean -d 'Record lean (sets $LOCKSUIT_MODE=lean), the mode for profiling left on: each mutex\'s acquisitions per line, its contended waits and who blocked whom, at about half the full mode\'s cost per lock call; no hold times of uncontended holds, lock order, blocking under a mutex or owner changes (the report says so). `--format pprof` of such a trace is what a continuous-profiling backend (Pyroscope, Parca) ingests'
complete -c locksuit -n "__fish_locksuit_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand attach" -l duration -d 'Stop after this many seconds (default: at Ctrl-C or when the process exits)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand attach" -l threads -d 'Report only these threads' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand attach" -s o -l dir -d 'Directory for the recording: the trace locksuit.EXE.PID.trace, which every command reads, and locksuit-attach.PID.json (default: the current one)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand attach" -l locks -d 'Also count every pthread mutex acquisition, per mutex and line, with its hold time: uprobes on the C library\'s mutex and condition-wait calls. Costly: each such call of the process stops in the kernel (a few microseconds; see docs/performance.md)'
complete -c locksuit -n "__fish_locksuit_using_subcommand attach" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -l object -d 'Only these objects (report ids such as L3 or C1; repeatable). An id that no process has is bad usage (exit 2)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -l format -d 'Output format; json is the report schema with a `streams` field per process' -r -f -a "text\t''
json\t''
jsonl\t'With --merged: one JSON object per event and line (docs/merged-stream.md)'"
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -l policy -d '--merged: minimal delivers each event as soon as it may go; concurrent delivers in steps of mutually concurrent events; adjusted raises timestamps just enough to agree with the delivery order and says by how much' -r -f -a "minimal\t'Each event as soon as everything it follows was delivered'
concurrent\t'In steps: the events at the heads of the queues that can go in one round are mutually concurrent and share a step number'
adjusted\t'As minimal, with each timestamp raised by just enough that timestamps never go back in delivery order'"
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -l width -d 'Text: no line longer than N columns (default: as for `report`)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -s o -l output -d 'Write to FILE instead of standard output' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -l merged -d 'One stream per process instead of one per object: every thread\'s events merged into an order that could have happened (happened-before, never clocks across threads; docs/merged-stream.md)'
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -l follow -d '--merged: follow a running program\'s trace (one process): each event is written as soon as it is valid, and the stream ends when the process does'
complete -c locksuit -n "__fish_locksuit_using_subcommand events" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand export" -l format -d 'Output format (one so far): chrome, the trace-event JSON that Perfetto and chrome://tracing open' -r -f -a "chrome\t'Chrome trace-event JSON (Perfetto, chrome://tracing)'"
complete -c locksuit -n "__fish_locksuit_using_subcommand export" -l classes -d 'Blocking classes of your own (as for `report --classes`)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand export" -s o -l output -d 'Write to FILE instead of standard output' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand flamegraph" -l weight -d 'What a stack\'s width measures' -r -f -a "wait\t'Time blocked (ns): contended lock waits and every recorded blocking period (sleeps, I/O, joins …), at the blocking call'
hold\t'Time locks were held (ns), at the line that took them'
contentions\t'Contended acquisitions, at their line'
acquisitions\t'Acquisitions, at their line'"
complete -c locksuit -n "__fish_locksuit_using_subcommand flamegraph" -l classes -d 'Blocking classes of your own (as for `report --classes`)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand flamegraph" -s o -l output -d 'Write the SVG to FILE instead of standard output' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand flamegraph" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l against-history -d 'Compare CUR with the last N saved runs of the same program and label instead of with BASE: each measure against their median and spread (1.4826 x the median absolute deviation)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l threshold -d 'A contended or wait share regresses only past the median by more than this share of it (20% or 0.2), more than --spreads spreads, and one point, and above all base runs but one. Timing findings (long-hold, starvation, ...) new in CUR count only when most runs have them or their lock regressed; deadlock, potential-deadlock, family-order-inversion and misuse count at once' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l spreads -d 'How many spreads of the base runs a share must pass the median by' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l format -r -f -a "text\t''
json\t''"
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l history -d 'The run history database (default: $XDG_DATA_HOME/locksuit/history.db, else ~/.local/share/locksuit/history.db)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l label -d 'The label runs are saved and compared under (e.g. ci-main): runs of one program under other labels are kept apart' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l suppress -d 'Suppressions for the sides read from traces, as for `report` (a JSON report or a saved run has them applied already): so that a finding `report --save` left out is not new here' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -l no-default-suppressions -d 'Leave out the built-in suppressions, as for `report`'
complete -c locksuit -n "__fish_locksuit_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand history" -l exe -d 'Only runs of this executable (its file name)' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand history" -l label -d 'Only runs under this label' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand history" -l history -d 'The run history database (as for `report --save`)' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand history" -l format -r -f -a "text\t''
json\t''"
complete -c locksuit -n "__fish_locksuit_using_subcommand history" -s h -l help -d 'Print help'
complete -c locksuit -n "__fish_locksuit_using_subcommand top" -l interval -d 'Seconds between refreshes' -r
complete -c locksuit -n "__fish_locksuit_using_subcommand top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -s h -l help -d 'Print help'
complete -c locksuit -n "__fish_locksuit_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -f -a "man" -d 'Write the man pages into DIR: locksuit.1 and one per command (locksuit-report.1, …)'
complete -c locksuit -n "__fish_locksuit_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -f -a "completions" -d 'Print a shell\'s completion script, or write it into --dir'
complete -c locksuit -n "__fish_locksuit_using_subcommand generate; and __fish_seen_subcommand_from man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c locksuit -n "__fish_locksuit_using_subcommand generate; and __fish_seen_subcommand_from completions" -l dir -d 'Write the script into DIR (created if missing) instead of standard output' -r -F
complete -c locksuit -n "__fish_locksuit_using_subcommand generate; and __fish_seen_subcommand_from completions" -s h -l help -d 'Print help (see more with \'--help\')'
