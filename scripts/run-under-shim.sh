#!/usr/bin/env bash
# Runs any command (a whole test suite, say) with every process it starts
# recorded by libsyncshim.so, then prints one combined locksuit report.
#
#   scripts/run-under-shim.sh [--threshold R] [--fail-on-findings] [--format text|json]
#                             [--dir DIR] -- CMD [ARGS...]
#
# The command's output is untouched and its exit status is kept: the script
# exits with it when it is non-zero. Otherwise it exits 1 if --fail-on-findings
# was given and the report has a finding, else 0. Traces stay in DIR (default:
# a new directory under $TMPDIR) so they can be reported again.
# Exit status 2: bad usage, or the shim/analyzer is missing.
set -u

usage() { sed -n '5,6p' "$0" | sed 's/^# *//' >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
shim=${LOCKSUIT_SHIM:-$root/target/release/libsyncshim.so}
locksuit=${LOCKSUIT_BIN:-$root/target/release/locksuit}
threshold=0.3
format=text
fail_on_findings=0
dir=

while [ $# -gt 0 ]; do
  case "$1" in
    --threshold) [ $# -ge 2 ] || usage; threshold=$2; shift 2 ;;
    --format) [ $# -ge 2 ] || usage; format=$2; shift 2 ;;
    --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
    --fail-on-findings) fail_on_findings=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "run-under-shim.sh: unexpected argument '$1' (put the command after --)" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || { echo "run-under-shim.sh: no command given after --" >&2; usage; }
for f in "$shim" "$locksuit"; do
  [ -e "$f" ] || { echo "run-under-shim.sh: $f not found; run 'cargo build --release' first" >&2; exit 2; }
done
shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")

if [ -z "$dir" ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-suite.XXXXXX") || exit 2
else
  mkdir -p "$dir" || exit 2
fi
dir=$(cd "$dir" && pwd)

LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}" LOCKSUIT_DIR="$dir" "$@"
status=$?

report_flags=(--threshold "$threshold" --format "$format")
[ "$fail_on_findings" = 1 ] && report_flags+=(--fail-on-findings)
# The analyzer runs without the shim (it is not part of the suite).
env -u LD_PRELOAD "$locksuit" report "$dir" "${report_flags[@]}"
report_status=$?
echo "run-under-shim.sh: traces in $dir" >&2

if [ "$status" -ne 0 ]; then
  exit "$status"
fi
case "$report_status" in
  0) exit 0 ;;
  1) exit 1 ;;
  *) echo "run-under-shim.sh: no readable traces (static binaries are not recorded)" >&2; exit 0 ;;
esac
