#!/usr/bin/env bash
# Runs any command (a whole test suite, say) with every process it starts
# recorded by libsyncshim.so, then reports on all of them.
#
#   scripts/run-under-shim.sh [--dir DIR] [--report FILE] [--baseline BASE | --against-history N] [REPORT OPTIONS...] -- CMD [ARGS...]
#
# The command's own output is left alone: the report goes to stderr, or to
# FILE with --report FILE, never to stdout. REPORT OPTIONS go to
# `locksuit report` as they are: --threshold R, --format text|json|summary,
# --width N, --top N, --exe NAME, --pid N, --sort KEY, --fail-on-findings,
# --suppress FILE, --no-default-suppressions, …
# (see `locksuit report --help`). Last, on stderr, a one-screen summary:
# processes recorded, findings by kind, which processes fail the gate.
#
# The regression gate, in one line of a CI job: --baseline BASE compares
# this run with BASE (a JSON report, a trace file or a directory of traces:
# `locksuit diff BASE DIR`); --against-history N with the median and
# spread of the last N runs saved with --save (under --label and --history,
# which also go to the report), before this run is saved; a first run, with
# none saved yet, passes. What regressed is printed on stderr, with the
# numbers each verdict used.
#
# Exit status: the command's own when it failed; otherwise 1 if
# --fail-on-findings was given and a process has a finding, or the gate
# found a regression, else 0. 2: bad
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
gate=()
history_options=()
suppress_options=()

while [ $# -gt 0 ]; do
  case "$1" in
    --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
    --report) [ $# -ge 2 ] || usage; report_file=$2; shift 2 ;;
    --baseline) [ $# -ge 2 ] || usage; gate=("$2"); shift 2 ;;
    --against-history) [ $# -ge 2 ] || usage; gate=(--against-history "$2"); shift 2 ;;
    --history|--label)
      [ $# -ge 2 ] || usage
      history_options+=("$1" "$2"); report_options+=("$1" "$2"); shift 2 ;;
    # The diff reads the traces too: the same findings must be left out.
    --suppress)
      [ $# -ge 2 ] || usage
      suppress_options+=("$1" "$2"); report_options+=("$1" "$2"); shift 2 ;;
    --no-default-suppressions)
      suppress_options+=("$1"); report_options+=("$1"); shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) report_options+=("$1"); shift ;;
  esac
done
[ $# -gt 0 ] || { echo "run-under-shim.sh: no command given after --" >&2; usage; }
for f in "$shim" "$locksuit"; do
  [ -e "$f" ] || { echo "run-under-shim.sh: $f not found; run 'cargo build --release' first" >&2; exit 2; }
done
shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")

# A mistyped report option, or a file it names that locksuit cannot use (a
# malformed --suppress or --classes file), should not cost a whole suite
# run: ask locksuit now, about a path that is not there; any complaint but
# about that path is the options'.
refused=$(env -u LD_PRELOAD "$locksuit" report /nonexistent/locksuit-options-check \
  "${report_options[@]}" 2>&1 >/dev/null \
  | grep -v -e 'locksuit-options-check' -e '^locksuit: warning:' | grep -m1 '^locksuit: ')
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

# The shim's warnings go into the traces and the report, not into the
# suite's stderr, which its tests may compare (unless LOCKSUIT_QUIET is set).
LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}" LOCKSUIT_DIR="$dir" \
  LOCKSUIT_QUIET="${LOCKSUIT_QUIET:-1}" "$@"
status=$?

# The analyzer runs without the shim (it is not part of the suite). The
# report and its summary go to stderr (or the report to FILE): stdout is the
# suite's.
run_report() {
  local report=(report "$dir" "${report_options[@]}" --summary)
  if [ -n "$report_file" ]; then
    env -u LD_PRELOAD "$locksuit" "${report[@]}" --output "$report_file"
  else
    env -u LD_PRELOAD "$locksuit" "${report[@]}" >&2
  fi
  report_status=$?
  local where="traces in $dir"
  [ -n "$report_file" ] && where="$where; report in $report_file"
  echo "run-under-shim.sh: the command exited with status $status; $where" >&2
}

# The gate. Against the history it runs before the report, whose --save
# would otherwise put this very run among those it is compared with; a
# history with no run of the program yet has nothing to hold it to.
run_gate() {
  local diff errors
  if [ "${gate[0]}" = --against-history ]; then
    diff=(diff "${gate[@]}" "${history_options[@]}" "${suppress_options[@]}" "$dir")
  else
    diff=(diff "${gate[0]}" "${suppress_options[@]}" "$dir")
  fi
  errors=$(mktemp) || exit 2
  env -u LD_PRELOAD "$locksuit" "${diff[@]}" 2>"$errors" >&2
  gate_status=$?
  if [ "$gate_status" -eq 2 ] && [ "${gate[0]}" = --against-history ] \
    && grep -q -e 'no saved runs of' -e 'no run history here' "$errors"; then
    echo "run-under-shim.sh: no saved run to compare with yet: $(cat "$errors")" >&2
    gate_status=0
    rm -f "$errors"
    return
  fi
  cat "$errors" >&2
  rm -f "$errors"
  case "$gate_status" in
    0) echo "run-under-shim.sh: no regression against ${gate[*]}" >&2 ;;
    1) echo "run-under-shim.sh: REGRESSED against ${gate[*]} (above)" >&2 ;;
    *) echo "run-under-shim.sh: the regression gate could not compare (above)" >&2 ;;
  esac
}

gate_status=0
if [ ${#gate[@]} -gt 0 ] && [ "${gate[0]}" = --against-history ]; then
  run_gate
  run_report
else
  run_report
  [ ${#gate[@]} -gt 0 ] && run_gate
fi

if [ "$status" -ne 0 ]; then
  exit "$status"
fi
[ "$gate_status" -ne 0 ] && exit "$gate_status"
case "$report_status" in
  0) exit 0 ;;
  1) exit 1 ;;
  *) echo "run-under-shim.sh: no readable traces (static binaries are not recorded)" >&2; exit 0 ;;
esac
