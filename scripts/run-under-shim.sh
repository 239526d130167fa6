#!/usr/bin/env bash
# Runs any command (a whole test suite, say) with every process it starts
# recorded by libsyncshim.so, then reports on all of them.
#
#   scripts/run-under-shim.sh [--dir DIR] [--report FILE] [REPORT OPTIONS...] -- CMD [ARGS...]
#
# The command's own output is left alone: the report goes to stderr, or to
# FILE with --report FILE, never to stdout. REPORT OPTIONS go to
# `locksuit report` as they are: --threshold R, --format text|json|summary,
# --width N, --top N, --exe NAME, --pid N, --sort KEY, --fail-on-findings, …
# (see `locksuit report --help`). Last, on stderr, a one-screen summary:
# processes recorded, findings by kind, which processes fail the gate.
#
# Exit status: the command's own when it failed; otherwise 1 if
# --fail-on-findings was given and a process has a finding, else 0. 2: bad
# usage (a report option locksuit refuses is caught before CMD runs), or the
# shim or locksuit is missing. Traces stay in DIR (default: a new directory
# under $TMPDIR), so they can be reported again.
set -u

usage() { sed -n '5p' "$0" | sed 's/^# *//' >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
shim=${LOCKSUIT_SHIM:-$root/target/release/libsyncshim.so}
locksuit=${LOCKSUIT_BIN:-$root/target/release/locksuit}
dir=
report_file=
report_options=()

while [ $# -gt 0 ]; do
  case "$1" in
    --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
    --report) [ $# -ge 2 ] || usage; report_file=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) report_options+=("$1"); shift ;;
  esac
done
[ $# -gt 0 ] || { echo "run-under-shim.sh: no command given after --" >&2; usage; }
for f in "$shim" "$locksuit"; do
  [ -e "$f" ] || { echo "run-under-shim.sh: $f not found; run 'cargo build --release' first" >&2; exit 2; }
done
shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")

# A mistyped report option should not cost a whole suite run: ask locksuit
# now, about a path that is not there (only a usage error says "error:").
refused=$(env -u LD_PRELOAD "$locksuit" report /nonexistent/locksuit-options-check \
  "${report_options[@]}" 2>&1 >/dev/null \
  | grep -m1 '^locksuit: error:')
if [ -n "$refused" ]; then
  echo "$refused" >&2
  echo "run-under-shim.sh: report options are those of 'locksuit report --help'" >&2
  exit 2
fi

if [ -z "$dir" ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-suite.XXXXXX") || exit 2
else
  mkdir -p "$dir" || exit 2
fi
dir=$(cd "$dir" && pwd)

LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}" LOCKSUIT_DIR="$dir" "$@"
status=$?

# The analyzer runs without the shim (it is not part of the suite). The
# report and its summary go to stderr (or the report to FILE): stdout is the
# suite's.
report=(report "$dir" "${report_options[@]}" --summary)
if [ -n "$report_file" ]; then
  env -u LD_PRELOAD "$locksuit" "${report[@]}" --output "$report_file"
else
  env -u LD_PRELOAD "$locksuit" "${report[@]}" >&2
fi
report_status=$?
where="traces in $dir"
[ -n "$report_file" ] && where="$where; report in $report_file"
echo "run-under-shim.sh: the command exited with status $status; $where" >&2

if [ "$status" -ne 0 ]; then
  exit "$status"
fi
case "$report_status" in
  0) exit 0 ;;
  1) exit 1 ;;
  *) echo "run-under-shim.sh: no readable traces (static binaries are not recorded)" >&2; exit 0 ;;
esac
