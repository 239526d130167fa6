#!/usr/bin/env bash
# Measures the cost of an uncontended pthread_mutex_lock + unlock pair with
# and without libsyncshim.so, interleaving the runs so both see the same
# machine state, and prints the medians as a Markdown table row set.
#
#   scripts/bench.sh [RUNS] [PAIRS]     (defaults: 7 runs of 20,000,000 pairs)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-7}
pairs=${2:-20000000}
shim=$root/target/release/libsyncshim.so
[ -e "$shim" ] || { echo "bench.sh: build first: cargo build --release" >&2; exit 2; }
out=$root/target/bench
mkdir -p "$out"
${CC:-cc} -O2 -pthread -o "$out/uncontended" "$root/bench/uncontended.c"
traces=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-bench.XXXXXX")
trap 'rm -rf "$traces"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plain=(); shimmed=()
for _ in $(seq "$runs"); do
  plain+=("$("$out/uncontended" "$pairs")")
  shimmed+=("$(LD_PRELOAD=$shim LOCKSUIT_DIR=$traces "$out/uncontended" "$pairs")")
done
p=$(printf '%s\n' "${plain[@]}" | median)
s=$(printf '%s\n' "${shimmed[@]}" | median)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $(nproc) cores, $cpu; $runs interleaved runs of $pairs pairs, medians"
echo
echo "| uncontended lock+unlock pair | ns/pair |"
echo "|---|---|"
echo "| without the shim | $p |"
echo "| with libsyncshim.so (default mode) | $s |"
awk -v p="$p" -v s="$s" 'BEGIN { printf "| overhead | +%.2f ns (%.2fx) |\n", s - p, s / p }'
