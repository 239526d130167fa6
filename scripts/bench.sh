#!/usr/bin/env bash
# The overhead suite: each microbenchmark runs without the shim, with it in
# the default mode, with full event tracing (LOCKSUIT_EVENTS=all) and in
# lean mode (LOCKSUIT_MODE=lean), the four interleaved RUNS times so all
# see the same machine state. Prints the
# medians, their ratios to the plain run, and the trace bytes written per
# operation, as Markdown for the README.
#
#   scripts/bench.sh [RUNS] [--micro]   (default 7; --micro: only the
#                                        microbenchmarks' table)
#
# Then runs scripts/bench-e2e.sh (real programs, with and without the shim)
# and scripts/bench-analyzer.sh (analyzer speed and memory). bench/cells.c
# is the fluidanimate-like kernel (many fine-grained cell locks); bench/fork.c
# a fork loop (scripts/bench-fork.sh runs it alone).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-7}
shim=$root/target/release/libsyncshim.so
[ -e "$shim" ] || { echo "bench.sh: build first: cargo build --release" >&2; exit 2; }
out=$root/target/bench
mkdir -p "$out"
for b in uncontended contended pingpong create_join cells io fork; do
  ${CC:-cc} -O2 -pthread -o "$out/$b" "$root/bench/$b.c"
done
traces=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-bench.XXXXXX")
trap 'rm -rf "$traces"' EXIT

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"

# One run in MODE (plain, default, all, lean); prints the program's
# figure. For the shim modes it also leaves the trace size in
# $traces/MODE.bytes.
run_once() {
  local mode=$1; shift
  if [ "$mode" = plain ]; then
    "$@"
    return
  fi
  rm -f "$traces"/*.trace
  local events=contended recording=full
  [ "$mode" = all ] && events=all
  [ "$mode" = lean ] && recording=lean
  LD_PRELOAD=$shim LOCKSUIT_DIR=$traces LOCKSUIT_EVENTS=$events LOCKSUIT_MODE=$recording "$@"
  stat -c %s "$traces"/*.trace | awk '{s += $1} END {print s}' > "$traces/$mode.bytes"
}

# bench LABEL UNIT OPS PROGRAM ARGS…: OPS is the number of lock operations
# the run makes, for trace bytes per operation.
bench() {
  local label=$1 unit=$2 ops=$3; shift 3
  local plain=() def=() all=() lean=()
  for _ in $(seq "$runs"); do
    plain+=("$(run_once plain "$@")")
    def+=("$(run_once default "$@")")
    all+=("$(run_once all "$@")")
    lean+=("$(run_once lean "$@")")
  done
  local p d a le bd ba
  p=$(printf '%s\n' "${plain[@]}" | median)
  d=$(printf '%s\n' "${def[@]}" | median)
  a=$(printf '%s\n' "${all[@]}" | median)
  le=$(printf '%s\n' "${lean[@]}" | median)
  bd=$(cat "$traces/default.bytes"); ba=$(cat "$traces/all.bytes")
  awk -v l="$label" -v u="$unit" -v p="$p" -v d="$d" -v a="$a" -v le="$le" -v o="$ops" -v bd="$bd" -v ba="$ba" \
    'BEGIN { printf "| %s | %s | %s | %s (%.2fx) | %s (%.2fx) | %s (%.2fx) | %.1f | %.1f |\n", l, u, p, d, d / p, a, a / p, le, le / p, bd / o, ba / o }'
}

pairs=1000000; ops=1000000; rounds=50000; creates=10000; sweeps=20; iocalls=1000000
forks=2000; locking_forks=500
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $(nproc) cores, $cpu; $runs interleaved runs, medians; ratios are to the plain run"
echo
echo "| benchmark | unit | plain | default mode | full tracing | lean mode | trace B/op default | trace B/op full |"
echo "|---|---|---|---|---|---|---|---|"
bench "uncontended lock+unlock, 1 thread" "ns/pair" "$((2 * pairs))" "$out/uncontended" "$pairs"
bench "random pair over 4,096 locks, 1 thread" "ns/pair" "$((2 * pairs))" "$out/uncontended" "$pairs" random
bench "one lock, 2 threads hammering" "ns/op" "$((2 * ops))" "$out/contended" 2 "$ops"
bench "one lock, 4 threads hammering" "ns/op" "$((2 * ops))" "$out/contended" 4 "$ops"
bench "condvar ping-pong" "ns/round trip" "$((6 * rounds))" "$out/pingpong" "$rounds"
bench "thread create+join" "ns/thread" "$creates" "$out/create_join" "$creates"
bench "fine-grained cells (65,536 locks), 2 threads" "ns/op" "$((2 * 65536 * sweeps))" "$out/cells" 2 "$sweeps"
bench "4 KiB write+read through a pipe (never blocks)" "ns/call" "$iocalls" "$out/io" pipe "$iocalls"
bench "4 KiB pwrite+pread of a file (page cache)" "ns/call" "$iocalls" "$out/io" file "$iocalls" "$traces"
bench "fork + waitpid, the child exits at once" "µs CPU/fork" "$forks" "$out/fork" "$forks"
bench "fork + waitpid, the child takes a lock first" "µs CPU/fork" "$locking_forks" "$out/fork" "$locking_forks" lock
echo
echo "Trace bytes include the fixed part (header, tables, per-thread blocks),"
echo "so short runs show more bytes per operation than long ones; for the fork"
echo "rows an operation is a fork, and a child that takes a lock writes a trace"
echo "of its own. Full tracing of the cells kernel outgrows the default 256 MiB"
echo "cap; the rest is dropped."
[ "${2:-}" = --micro ] && exit 0
echo
echo "End to end (default mode; each program $runs times, interleaved):"
echo
"$root/scripts/bench-e2e.sh" "$runs"
if [ -x "$root/scripts/bench-analyzer.sh" ]; then
  echo
  "$root/scripts/bench-analyzer.sh"
fi
