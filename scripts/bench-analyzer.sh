#!/usr/bin/env bash
# Analyzer speed and memory: records fully traced runs of the uncontended
# benchmark (two events per lock/unlock pair) of 10 M and EVENTS events, then
# times `locksuit report --format json` on each and samples its memory. The
# two sizes show whether memory grows with the number of events: anonymous
# memory (the analyzer's own) should not; resident memory also counts the
# pages of the mapped trace, which the kernel can drop at will.
#
#   scripts/bench-analyzer.sh [EVENTS]    (default 100000000; needs ~64 B of
#                                         disk per event, 6.4 GB by default)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
events=${1:-100000000}
shim=$root/target/release/libsyncshim.so
locksuit=$root/target/release/locksuit
[ -e "$shim" ] && [ -e "$locksuit" ] || { echo "bench-analyzer.sh: build first: cargo build --release" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-analyzer.XXXXXX")
trap 'rm -rf "$work"' EXIT
${CC:-cc} -O2 -pthread -o "$work/uncontended" "$root/bench/uncontended.c"

# Peaks of anonymous and of resident memory (kB) while PID runs.
peaks_of() {
  local pid=$1 anon=0 rss=0 a r
  while kill -0 "$pid" 2>/dev/null; do
    read -r a r < <(awk '$1 == "RssAnon:" {a = $2} $1 == "VmRSS:" {r = $2} END {print a + 0, r + 0}' \
      "/proc/$pid/status" 2>/dev/null || echo "0 0")
    [ "$a" -gt "$anon" ] && anon=$a
    [ "$r" -gt "$rss" ] && rss=$r
    sleep 0.01
  done
  echo "$anon $rss"
}

measure() {
  local n=$1 dir=$work/trace-$1
  mkdir -p "$dir"
  # Two events per pair; room for them all (64 B each) plus the rest.
  local mb=$(( n * 64 / 1048576 + 64 ))
  LD_PRELOAD=$shim LOCKSUIT_DIR=$dir LOCKSUIT_EVENTS=all LOCKSUIT_MAX_MB=$mb \
    "$work/uncontended" $(( n / 2 )) > /dev/null
  local t0 t1 pid peaks recorded
  t0=$(date +%s.%N)
  "$locksuit" report "$dir" --format json > "$work/report.json" &
  pid=$!
  peaks=$(peaks_of "$pid")
  wait "$pid"
  t1=$(date +%s.%N)
  recorded=$(grep -o '"events": [0-9]*' "$work/report.json" | head -1 | awk '{print $2}')
  awk -v a="$t0" -v b="$t1" -v e="$recorded" -v mb="$(du -m "$dir" | cut -f1)" -v p="$peaks" 'BEGIN {
    split(p, k, " ");
    printf "| %d | %d MiB | %.2f s | %.1f M | %.0f MiB | %.0f MiB |\n", e, mb, b - a, e / (b - a) / 1e6, k[1] / 1024, k[2] / 1024
  }'
  rm -rf "$dir"
}

echo "Analyzer: \`locksuit report --format json\` on fully traced runs, one core"
echo
echo "| events | trace | time | events/s | peak anonymous memory | peak resident (with mapped trace pages) |"
echo "|---|---|---|---|---|---|"
measure 10000000
measure "$events"
