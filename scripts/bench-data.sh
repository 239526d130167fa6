#!/usr/bin/env bash
# What data-level analysis costs: each program is built twice with clang
# (plainly, and with `locksuit cc`, whose every load and store calls the
# shim), and both builds run under the shim. Reports instructions under
# callgrind (steady on a noisy VM) and the median wall time of RUNS
# interleaved runs, and the ratio instrumented / plain; the issue's target
# is at most 3x. Also the instrumented build without the shim (the cost of
# the do-nothing callbacks alone).
#
#   scripts/bench-data.sh [RUNS]     (default 5)
#
# Programs: bench/cells.c (fine-grained locks, little data under each),
# bench/hashtable.c (a striped hash table, malloc'd nodes), and
# bench/sqlite_threads.c over the SQLite amalgamation that cargo fetched
# for the analyzer (skipped, saying so, if it cannot be found). Needs
# clang-19 (or $LOCKSUIT_CC) and valgrind.
#
# Exit codes: 0 done, 2 setup error.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
shim=$root/target/release/libsyncshim.so
locksuit=$root/target/release/locksuit
cc=${LOCKSUIT_CC:-clang-19}
[ -e "$shim" ] && [ -e "$locksuit" ] || { echo "bench-data.sh: build first: cargo build --release" >&2; exit 2; }
command -v "$cc" >/dev/null || { echo "bench-data.sh: $cc is not installed" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench-data.sh: valgrind is not installed" >&2; exit 2; }
out=$root/target/bench/data
mkdir -p "$out"
traces=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-data.XXXXXX")
trap 'rm -rf "$traces"' EXIT

# build NAME SOURCES... [-- FLAGS...]: NAME.plain and NAME.cc.
build() {
  local name=$1; shift
  "$cc" -O2 -pthread "$@" -lm -o "$out/$name.plain"
  "$locksuit" cc -O2 -pthread "$@" -lm -o "$out/$name.cc"
}

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
instructions() { callgrind_instructions "$traces" "$@"; }

# seconds PRELOAD PROGRAM ARGS...: wall seconds of one run.
seconds() {
  local preload=$1 start end
  shift
  rm -f "$traces"/*.trace
  start=$(date +%s%N)
  LD_PRELOAD=$preload LOCKSUIT_DIR=$traces "$@" >/dev/null
  end=$(date +%s%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}

# measure LABEL "CALLGRIND ARGS" "TIMED ARGS" NAME
measure() {
  local label=$1 small=$2 large=$3 name=$4 ip ic ib
  # shellcheck disable=SC2086
  ip=$(instructions "$shim" "$out/$name.plain" $small)
  # shellcheck disable=SC2086
  ic=$(instructions "$shim" "$out/$name.cc" $small)
  # shellcheck disable=SC2086
  ib=$(instructions "" "$out/$name.cc" $small)
  local tp=() tc=()
  for _ in $(seq "$runs"); do
    # shellcheck disable=SC2086
    tp+=("$(seconds "$shim" "$out/$name.plain" $large)")
    # shellcheck disable=SC2086
    tc+=("$(seconds "$shim" "$out/$name.cc" $large)")
  done
  local p c
  p=$(printf '%s\n' "${tp[@]}" | median)
  c=$(printf '%s\n' "${tc[@]}" | median)
  awk -v l="$label" -v ip="$ip" -v ic="$ic" -v ib="$ib" -v p="$p" -v c="$c" 'BEGIN {
    printf "| %s | %.1f M | %.1f M (%.2fx) | %.1f M | %.3f s | %.3f s (%.2fx) |\n",
      l, ip / 1e6, ic / 1e6, ic / ip, ib / 1e6, p, c, c / p }'
}

build cells "$root/bench/cells.c"
build hashtable "$root/bench/hashtable.c"
sqlite_dir=$(cd "$root" && cargo metadata --format-version 1 2>/dev/null \
  | grep -o '"manifest_path":"[^"]*/libsqlite3-sys-[^"]*/Cargo.toml"' | head -1 \
  | sed 's/^"manifest_path":"//; s|/Cargo.toml"$|/sqlite3|') || true
if [ -n "$sqlite_dir" ] && [ -e "$sqlite_dir/sqlite3.c" ]; then
  build sqlite "$root/bench/sqlite_threads.c" "$sqlite_dir/sqlite3.c" -I"$sqlite_dir" \
    -DSQLITE_THREADSAFE=1 -DSQLITE_OMIT_LOAD_EXTENSION
else
  echo "bench-data.sh: the SQLite amalgamation was not found (cargo fetch first); skipping it" >&2
  sqlite_dir=
fi

echo "| program (2 threads) | instructions, plain build under the shim | instrumented build under the shim | instrumented build alone | wall, plain build under the shim | instrumented build under the shim |"
echo "|---|---|---|---|---|---|"
measure "cells, 2 / 20 sweeps" "2 2" "2 20" cells
measure "hash table, 200k / 2M operations" "2 200000" "2 2000000" hashtable
[ -n "$sqlite_dir" ] && measure "SQLite, 2,000 / 20,000 rows" "2 2000" "2 20000" sqlite
exit 0
