#!/usr/bin/env bash
# CI regression guard for the hot path: counts the instructions of one more
# uncontended lock+unlock pair, with and without the shim, under callgrind
# (deterministic, unlike wall-clock time on a shared VM), and fails if the
# ratio shim/plain is more than twice the committed figure in
# bench/guard-baseline. Ratios, not absolute counts, so another libc or CPU
# moves both sides together.
#
#   scripts/bench-guard.sh            check against the baseline
#   scripts/bench-guard.sh --print    only print the measured figures
#   scripts/bench-guard.sh --held     print them, and the same with another
#                                     lock held all along (nested pairs)
#
# Exit codes: 0 within the limit (or valgrind missing: said on stderr),
# 1 the overhead regressed, 2 setup error.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
shim=$root/target/release/libsyncshim.so
[ -e "$shim" ] || { echo "bench-guard.sh: build first: cargo build --release" >&2; exit 2; }
if ! command -v valgrind >/dev/null 2>&1; then
  echo "bench-guard.sh: valgrind is not installed; the overhead guard is skipped" >&2
  exit 0
fi
out=$root/target/bench
mkdir -p "$out"
${CC:-cc} -O2 -pthread -o "$out/uncontended" "$root/bench/uncontended.c"
work=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-guard.XXXXXX")
trap 'rm -rf "$work"' EXIT

# instructions PRELOAD PAIRS [held]: total instructions executed by the program.
instructions() {
  local preload=$1 pairs=$2 file=$work/cg.$RANDOM
  LD_PRELOAD=$preload LOCKSUIT_DIR=$work valgrind --tool=callgrind --callgrind-out-file="$file" \
    "$out/uncontended" "$pairs" ${3:-} >/dev/null 2>"$work/valgrind.log" \
    || { echo "bench-guard.sh: valgrind failed:" >&2; cat "$work/valgrind.log" >&2; exit 2; }
  awk '/^(summary|totals):/ {print $2; exit}' "$file"
}
# Per pair: the difference between two run lengths cancels start-up costs.
per_pair() {
  local a b
  a=$(instructions "$1" 200000 ${2:-})
  b=$(instructions "$1" 400000 ${2:-})
  echo $(((b - a) / 200000))
}
plain=$(per_pair "")
shimmed=$(per_pair "$shim")
ratio=$(awk -v p="$plain" -v s="$shimmed" 'BEGIN { printf "%.2f", s / p }')
echo "uncontended pair: $plain instructions plain, $shimmed with the shim (ratio $ratio)"
if [ "${1:-}" = --held ]; then
  plain_held=$(per_pair "" held)
  shimmed_held=$(per_pair "$shim" held)
  echo "with another lock held: $plain_held instructions plain, $shimmed_held with the shim"
  exit 0
fi
[ "${1:-}" = --print ] && exit 0
baseline=$(awk '/^ratio / {print $2}' "$root/bench/guard-baseline")
if awk -v r="$ratio" -v b="$baseline" 'BEGIN { exit !(r > 2 * b) }'; then
  echo "bench-guard.sh: the shim's uncontended-pair cost regressed: ratio $ratio, more than twice the committed $baseline (bench/guard-baseline)" >&2
  exit 1
fi
echo "within the limit: ratio $ratio <= 2 x $baseline"
