#!/usr/bin/env bash
# What the least any per-lock profiler must do costs, next to the shim:
# bench/floor.c's interposers (forward only; a counter per (lock, line) at
# the lock's own place; the same placed by a hash; a bare count with no
# key) against plain runs and the shim, interleaved RUNS times. Prints a
# Markdown table of medians (each program's own figure: ns per pair or per
# operation) and their ratios to plain. docs/performance.md reads the
# shim's figures against these.
#
#   scripts/bench-floor.sh [RUNS]     (default 5)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
shim=$root/target/release/libsyncshim.so
[ -e "$shim" ] || { echo "bench-floor.sh: build first: cargo build --release" >&2; exit 2; }
out=$root/target/bench
mkdir -p "$out"
for b in uncontended cells; do
  ${CC:-cc} -O2 -pthread -o "$out/$b" "$root/bench/$b.c"
done
${CC:-cc} -O2 -shared -fPIC -o "$out/floor.so" "$root/bench/floor.c" -ldl
work=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-floor.XXXXXX")
traces=$work/traces
mkdir "$traces"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"

variants="plain forward count-in-place count-hashed bare-count shim"

# One run of PROGRAM ARGS… as VARIANT; prints the program's figure.
run() {
  local variant=$1; shift
  case $variant in
    plain) "$@" ;;
    forward) FLOOR_MODE=0 LD_PRELOAD=$out/floor.so "$@" ;;
    count-in-place) FLOOR_MODE=1 LD_PRELOAD=$out/floor.so "$@" ;;
    count-hashed) FLOOR_MODE=2 LD_PRELOAD=$out/floor.so "$@" ;;
    bare-count) FLOOR_MODE=3 LD_PRELOAD=$out/floor.so "$@" ;;
    shim) rm -f "$traces"/*; LD_PRELOAD=$shim LOCKSUIT_DIR=$traces "$@" ;;
  esac
}

# row LABEL UNIT PROGRAM ARGS…
row() {
  local label=$1 unit=$2 v i plain line
  shift 2
  for i in $(seq "$runs"); do
    for v in $variants; do
      run "$v" "$@" | tail -1 >> "$work/figures.$v"
    done
  done
  plain=$(median < "$work/figures.plain")
  line="| $label | $unit"
  for v in $variants; do
    local m
    m=$(median < "$work/figures.$v")
    line="$line | $m ($(awk -v a="$m" -v b="$plain" 'BEGIN {printf "%.2fx", a / b}'))"
    rm -f "$work/figures.$v"
  done
  echo "$line |"
}

echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); $runs interleaved runs, medians; ratios to plain"
echo
echo "| benchmark | unit | plain | forward only | count in place | count hashed | bare count | the shim |"
echo "|---|---|---|---|---|---|---|---|"
row "uncontended lock+unlock, 1 thread" "ns/pair" "$out/uncontended" 20000000
row "random pair over 4,096 locks, 1 thread" "ns/pair" "$out/uncontended" 5000000 random
row "cells (65,536 locks), 2 threads, 20 sweeps" "ns/op" "$out/cells" 2 20
row "cells, 2 threads, 200 sweeps" "ns/op" "$out/cells" 2 200
row "cells, 4 threads, 2 sweeps" "ns/op" "$out/cells" 4 2
row "cells, 4 threads, 200 sweeps" "ns/op" "$out/cells" 4 200
