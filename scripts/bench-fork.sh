#!/usr/bin/env bash
# The cost of a fork: bench/fork.c (a fork loop; the child exits at once,
# or first takes one lock and so makes a trace of its own) without and
# with the shim, interleaved RUNS times. Prints the median CPU time per
# fork (parent and child, user and system) and the ratio to the plain run,
# as Markdown. The target (issue 33) is a fork at most 1.5 times plain.
#
#   scripts/bench-fork.sh [RUNS] [SHIM]   (default 9; the built shim)
#
# SHIM may name another build of libsyncshim.so (an older one, to compare).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-9}
shim=${2:-$root/target/release/libsyncshim.so}
[ -e "$shim" ] || { echo "bench-fork.sh: build first: cargo build --release" >&2; exit 2; }
out=$root/target/bench
mkdir -p "$out"
${CC:-cc} -O2 -pthread -o "$out/fork" "$root/bench/fork.c"
traces=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-bench-fork.XXXXXX")
trap 'rm -rf "$traces"' EXIT

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"

row() { # LABEL FORKS [lock]
  local label=$1 forks=$2 plain=() shimmed=()
  shift 2
  for _ in $(seq "$runs"); do
    plain+=("$("$out/fork" "$forks" "$@")")
    rm -f "$traces"/*.trace
    shimmed+=("$(LD_PRELOAD=$shim LOCKSUIT_DIR=$traces "$out/fork" "$forks" "$@")")
  done
  local p s
  p=$(printf '%s\n' "${plain[@]}" | median)
  s=$(printf '%s\n' "${shimmed[@]}" | median)
  awk -v l="$label" -v p="$p" -v s="$s" -v lo="$(printf '%s\n' "${shimmed[@]}" | sort -g | head -1)" \
    -v hi="$(printf '%s\n' "${shimmed[@]}" | sort -g | tail -1)" \
    'BEGIN { printf "| %s | %.1f | %.1f (%s to %s) | %.2fx |\n", l, p, s, lo, hi, s / p }'
}

echo "$(nproc) cores; $runs interleaved runs, medians; CPU µs per fork, parent and child"
echo
echo "| fork loop | plain | with the shim (range) | ratio |"
echo "|---|---|---|---|"
row "the child exits at once" 2000
row "the child takes one lock first" 500 lock
