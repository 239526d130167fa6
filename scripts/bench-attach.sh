#!/usr/bin/env bash
# What `locksuit attach` costs the process it is attached to (issue 38), on
# a lock-heavy kernel: bench/uncontended.c's uncontended pairs (one mutex;
# its own figure, nanoseconds per pair) run plain, attached without
# --locks (futex system calls only: this kernel makes none, so the figure
# is what tracepoints on every system call cost it), and attached with
# --locks (uprobes on every lock and unlock: a trap into the kernel each).
# Interleaved RUNS times; prints the medians. Needs root and a locksuit
# built with its BPF programs; says why and exits 0 otherwise.
#
#   scripts/bench-attach.sh [RUNS] [PAIRS]   (defaults 5 and 2,000,000)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
pairs=${2:-2000000}
locksuit=$root/target/release/locksuit
[ -x "$locksuit" ] || { echo "bench-attach.sh: build first: cargo build --release" >&2; exit 2; }
out=$root/target/bench
mkdir -p "$out"
${CC:-cc} -O2 -pthread -o "$out/uncontended" "$root/bench/uncontended.c"
work=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-attach-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! "$locksuit" attach $$ --duration 0 -o "$work" >/dev/null 2>"$work/why"; then
  echo "bench-attach.sh: skipped: $(cat "$work/why")" >&2
  exit 0
fi

# One run: ns per pair, attached with the given arguments (none: plain).
one() { # plain|attached|locks
  local go=$work/go result
  rm -f "$go"
  UNCONTENDED_GO=$go "$out/uncontended" "$pairs" >"$work/result" &
  local pid=$!
  if [ "$1" != plain ]; then
    local extra=()
    [ "$1" = locks ] && extra=(--locks)
    "$locksuit" attach "$pid" -o "$work" "${extra[@]}" >/dev/null 2>"$work/attach.err" &
    local attach=$!
    # Started once it says so on its first line.
    until grep -q "attached to" "$work/attach.err" 2>/dev/null; do
      kill -0 "$attach" 2>/dev/null || { cat "$work/attach.err" >&2; exit 1; }
      sleep 0.05
    done
  fi
  touch "$go"
  wait "$pid"
  [ "$1" = plain ] || wait "$attach"
  cat "$work/result"
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for _ in $(seq "$runs"); do
  for mode in plain attached locks; do
    echo "$mode $(one $mode)" >>"$work/all"
  done
done
echo "uncontended pairs, $pairs a run, $runs interleaved runs (medians, ns per pair):"
for mode in plain attached locks; do
  printf '  %-9s %s\n' "$mode" "$(awk -v m=$mode '$1 == m {print $2}' "$work/all" | median)"
done
