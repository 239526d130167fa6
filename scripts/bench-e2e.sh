#!/usr/bin/env bash
# End-to-end overhead: real programs run without and with the shim (default
# mode), interleaved RUNS times, so both see the same machine state. Prints
# a Markdown table: median wall time of each, the median of the per-run
# ratios, and the trace size of the last shim run. memcached is measured by
# throughput (memcaslap's TPS) and by the server's CPU time per request
# (steadier when client and server share the cores), the others by wall
# time. The targets are issue 18's.
#
#   scripts/bench-e2e.sh [RUNS] [ONLY]   (default 5; called by scripts/bench.sh)
#
# ONLY: run only the rows whose label contains it (e.g. memcached). The
# shim runs in the mode the environment asks for: LOCKSUIT_MODE=lean
# scripts/bench-e2e.sh measures lean mode. LOCKSUIT_E2E_ATTACH=1 measures
# `locksuit attach` instead of the shim, in the memcached rows only (as
# root): the "shim" runs are a plain server attached to for the whole
# load (BPF's own time is charged to the server's threads).
#
# A program that is not installed is reported as skipped, not guessed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
only=${2:-}
shim=$root/target/release/libsyncshim.so
[ -e "$shim" ] || { echo "bench-e2e.sh: build first: cargo build --release" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-e2e.XXXXXX")
memcached_pid=
attach_pid=
cleanup() {
  [ -n "$attach_pid" ] && kill "$attach_pid" 2>/dev/null || true
  [ -n "$memcached_pid" ] && kill "$memcached_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
now() { date +%s.%N; }

# Inputs, generated once: 200 MB of compressible text for pigz and zstd,
# and 2 M lines of numbers for sort.
base64 -w 76 /dev/urandom 2>/dev/null | head -c 200000000 > "$work/input.txt" || true
sed -n '1,2000000p' "$work/input.txt" | cut -c1-12 > "$work/lines.txt"

# One timed run of CMD… in MODE (plain or shim; RUN is unused); prints
# seconds. The shim run leaves its trace size in $work/trace.bytes.
timed() {
  local mode=$1; shift 2
  local t0 t1
  if [ "$mode" = plain ]; then
    t0=$(now); "$@" > /dev/null; t1=$(now)
  else
    rm -rf "$work/traces"; mkdir "$work/traces"
    t0=$(now)
    LD_PRELOAD=$shim LOCKSUIT_DIR=$work/traces "$@" > /dev/null
    t1=$(now)
    du -sb "$work/traces" | cut -f1 > "$work/trace.bytes"
  fi
  awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) print a / b; else print 0}'; }

row() {
  local label=$1 metric=$2 target=$3 p=$4 s=$5 ratio=$6
  local mb
  mb=$(awk -v b="$(cat "$work/trace.bytes")" 'BEGIN {printf "%.1f", b / 1048576}')
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$metric" "$p" "$s" "$ratio" "$target" "$mb"
}

# compare LABEL MEASURE TARGET FORMAT FN ARGS…: runs `FN plain RUN ARGS…`
# and `FN shim RUN ARGS…` RUNS times, interleaved, and prints the row: the
# medians (printf FORMAT) and the median of the per-run ratios shim/plain.
compare() {
  local label=$1 measure=$2 target=$3 format=$4 fn=$5; shift 5
  local plain=() shimmed=() ratios=() p s i
  for i in $(seq "$runs"); do
    p=$("$fn" plain "$i" "$@"); s=$("$fn" shim "$i" "$@")
    plain+=("$p"); shimmed+=("$s")
    ratios+=("$(ratio "$s" "$p")")
  done
  row "$label" "$measure" "$target" \
    "$(printf '%s\n' "${plain[@]}" | median | xargs printf "$format")" \
    "$(printf '%s\n' "${shimmed[@]}" | median | xargs printf "$format")" \
    "$(printf '%s\n' "${ratios[@]}" | median | xargs printf '%.3fx')"
}

# Whether the row LABEL is asked for (see ONLY above).
wanted() { [ -z "$only" ] || [[ "$1" == *"$only"* ]]; }

skipped() {
  printf '| %s | skipped: %s is not installed | | | | %s | |\n' "$1" "$2" "$3"
}

# e2e LABEL TARGET CMD…: wall time, lower is better.
e2e() {
  local label=$1 target=$2; shift 2
  wanted "$label" || return 0
  if ! command -v "$1" > /dev/null; then
    skipped "$label" "$1" "$target"
    return
  fi
  compare "$label" "wall s" "$target" '%.3f' timed "$@"
}

# memcached under memcaslap, one run in MODE: throughput, higher is better
# (the ratio is shim / plain), and the server's CPU time per request in µs
# (utime + stime from /proc, over TPS x 3 s), left in $work/cpu.$MODE.
memcached_tps() {
  local mode=$1 port=$((memcached_port + 2 * $2)) tps
  if [ "$mode" = plain ]; then
    memcached -u "$(id -un)" -t 4 -p "$port" -l 127.0.0.1 -U 0 & memcached_pid=$!
  elif [ "${LOCKSUIT_E2E_ATTACH:-}" = 1 ]; then
    port=$((port + 1))
    rm -rf "$work/traces"; mkdir "$work/traces"
    memcached -u "$(id -un)" -t 4 -p "$port" -l 127.0.0.1 -U 0 & memcached_pid=$!
    sleep 0.2
    "$root/target/release/locksuit" attach "$memcached_pid" -o "$work/traces" \
      > /dev/null 2> "$work/attach.err" & attach_pid=$!
    until grep -q "attached to" "$work/attach.err" 2>/dev/null; do
      kill -0 "$attach_pid" 2>/dev/null || { cat "$work/attach.err" >&2; exit 2; }
      sleep 0.05
    done
  else
    port=$((port + 1))
    rm -rf "$work/traces"; mkdir "$work/traces"
    LD_PRELOAD=$shim LOCKSUIT_DIR=$work/traces \
      memcached -u "$(id -un)" -t 4 -p "$port" -l 127.0.0.1 -U 0 & memcached_pid=$!
  fi
  sleep 0.3
  local ticks0 ticks1
  ticks0=$(cpu_ticks "$memcached_pid")
  tps=$(memcaslap -s "127.0.0.1:$port" -T 2 -c 32 -t 3s 2>&1 | sed -n 's/.*TPS: \([0-9]*\).*/\1/p' | tail -1)
  ticks1=$(cpu_ticks "$memcached_pid")
  if [ -n "$attach_pid" ]; then
    kill -INT "$attach_pid"; wait "$attach_pid" 2>/dev/null || true; attach_pid=
  fi
  kill "$memcached_pid"; wait "$memcached_pid" 2>/dev/null || true; memcached_pid=
  awk -v t=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v tps="${tps:-0}" \
    'BEGIN {if (tps > 0) printf "%.3f\n", t / hz / (tps * 3) * 1e6; else print 0}' >> "$work/cpu.$mode"
  [ "$mode" = shim ] && du -sb "$work/traces" | cut -f1 > "$work/trace.bytes"
  echo "${tps:-0}"
}

# utime + stime of process PID, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

memcached_row() {
  local label="memcached -t 4 under memcaslap" target="≥ 0.95x" tool
  wanted "$label" || return 0
  for tool in memcached memcaslap; do
    command -v "$tool" > /dev/null || { skipped "$label" "$tool" "$target"; return; }
  done
  memcached_port=$((20000 + RANDOM % 20000))
  rm -f "$work/cpu.plain" "$work/cpu.shim"
  compare "$label" "ops/s" "$target" '%d' memcached_tps
  # The CPU time per request of the same runs, paired run by run.
  local ratios
  ratios=$(paste "$work/cpu.plain" "$work/cpu.shim" | awk '$1 > 0 {print $2 / $1}' | median)
  row "memcached, server CPU per request" "µs" "≤ 1.03x" \
    "$(median < "$work/cpu.plain")" "$(median < "$work/cpu.shim")" "$(printf '%.3fx' "${ratios:-0}")"
}

# The distribution's interpreter, not a version manager's wrapper script.
python=$(command -v /usr/bin/python3 || command -v python3 || echo python3)
cells=$root/target/bench/cells
[ -x "$cells" ] || { mkdir -p "$(dirname "$cells")"; ${CC:-cc} -O2 -pthread -o "$cells" "$root/bench/cells.c"; }
fluid=$root/target/bench/fluid_cells
${CC:-cc} -O2 -pthread -I"$root/tests/c" -o "$fluid" "$root/tests/c/fluid_cells.c"

# Peak resident memory of one run of CMD… in MODE, in MiB (from wait4's
# rusage, through GNU time).
peak_mib() {
  local mode=$1; shift 2
  if [ "$mode" = plain ]; then
    /usr/bin/time -f %M -o "$work/rss" "$@" > /dev/null
  else
    rm -rf "$work/traces"; mkdir "$work/traces"
    LD_PRELOAD=$shim LOCKSUIT_DIR=$work/traces /usr/bin/time -f %M -o "$work/rss" "$@" > /dev/null
    du -sb "$work/traces" | cut -f1 > "$work/trace.bytes"
  fi
  awk '{printf "%.1f\n", $1 / 1024}' "$work/rss"
}

echo "| program | measure | plain | with the shim | ratio (median of runs) | target | trace MiB |"
echo "|---|---|---|---|---|---|---|"
e2e "sysbench mutex --threads=4" "≤ 1.03x" sysbench mutex --threads=4 --mutex-locks=200000 run
e2e "pigz -p 4, 200 MB" "≤ 1.03x" pigz -p 4 -c "$work/input.txt"
e2e "sort --parallel=2, 2 M lines" "≤ 1.03x" sort --parallel=2 -S 64M "$work/lines.txt"
e2e "zstd -T2 -6, 200 MB" "≤ 1.03x" zstd -q -T2 -6 -c "$work/input.txt"
e2e "Python: 4 threads, Lock + Queue" "≤ 1.10x" "$python" "$root/bench/py_threads.py" 300000
e2e "cells kernel (65,536 locks), 2 threads, 20 sweeps" "≤ 2x" "$cells" 2 20
e2e "cells kernel, 4 threads, short: 2 sweeps" "≤ 1.25x" "$cells" 4 2
e2e "cells kernel, 4 threads, long: 200 sweeps" "≤ 1.25x" "$cells" 4 200
e2e "fluid kernel (345,600 locks), 4 threads, short: 2 steps" "≤ 1.25x" "$fluid" 720 480 2 4
e2e "fluid kernel, 4 threads, long: 40 steps" "≤ 1.25x" "$fluid" 720 480 40 4
if ! wanted "fluid kernel, 40 steps: peak memory"; then
  :
elif [ -x /usr/bin/time ]; then
  compare "fluid kernel, 40 steps: peak memory" "RSS MiB" "≤ 1.5x" '%.1f' peak_mib "$fluid" 720 480 40 4
else
  skipped "fluid kernel, 40 steps: peak memory" "GNU time" "≤ 1.5x"
fi
memcached_row
