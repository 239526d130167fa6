#!/usr/bin/env bash
# CI regression guard for the hot path: counts instructions under callgrind
# (deterministic, unlike wall-clock time on a shared VM), with and without
# the shim, for five workloads:
#   pair   one more uncontended pthread_mutex_lock + unlock pair;
#   try    one more pthread_mutex_trylock + unlock pair (taken every time);
#   random one more such pair on one of 4,096 mutexes picked at random
#          (bench/uncontended.c random: the per-thread hot cache misses
#          most of the time, the lock table and counter index answer);
#   sem    one more sem_trywait + sem_post pair;
#   cells  one more lock + unlock of a cell in bench/cells.c (65,536 locks,
#          one thread: every operation misses the per-thread caches);
#   stripes one more operation of bench/hashtable.c with its 64 stripe
#          mutexes 48 bytes apart, one thread (they must all fit the
#          per-thread hot cache: a hash that crowds an array of locks into
#          a few of its places shows here);
# and fails if a ratio shim/plain is more than 1.15 times its committed
# figure in bench/guard-baseline. Ratios, not absolute counts, so another
# libc or CPU moves both sides together. A deliberate change updates the
# baseline in the same commit.
#
#   scripts/bench-guard.sh            check against the baseline
#   scripts/bench-guard.sh --print    only print the measured figures
#   scripts/bench-guard.sh --held     print the pair, and the same with
#                                     another lock held all along (nested)
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
${CC:-cc} -O2 -pthread -o "$out/cells" "$root/bench/cells.c"
${CC:-cc} -O2 -pthread -o "$out/hashtable" "$root/bench/hashtable.c"
work=$(mktemp -d "${TMPDIR:-/tmp}/locksuit-guard.XXXXXX")
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
instructions() { callgrind_instructions "$work" "$@"; }
# Per operation: the difference between two run lengths cancels start-up
# costs (and, for cells, the first sweep's first sight of every lock).
pair() { # PRELOAD [held|sem|random|try]
  local a b
  a=$(instructions "$1" "$out/uncontended" 200000 ${2:-})
  b=$(instructions "$1" "$out/uncontended" 400000 ${2:-})
  echo $(((b - a) / 200000))
}
cells() { # PRELOAD: per lock+unlock, 2 x 65,536 of them per sweep
  local a b
  a=$(instructions "$1" "$out/cells" 1 2)
  b=$(instructions "$1" "$out/cells" 1 4)
  echo $(((b - a) / (2 * 2 * 65536)))
}
stripes() { # PRELOAD: per operation of one thread on the padded stripes
  local a b
  a=$(instructions "$1" "$out/hashtable" 1 100000 padded)
  b=$(instructions "$1" "$out/hashtable" 1 200000 padded)
  echo $(((b - a) / 100000))
}
ratio() { awk -v p="$1" -v s="$2" 'BEGIN { printf "%.2f", s / p }'; }

plain=$(pair "")
shimmed=$(pair "$shim")
echo "uncontended pair: $plain instructions plain, $shimmed with the shim (ratio $(ratio "$plain" "$shimmed"))"
if [ "${1:-}" = --held ]; then
  plain_held=$(pair "" held)
  shimmed_held=$(pair "$shim" held)
  echo "with another lock held: $plain_held instructions plain, $shimmed_held with the shim"
  exit 0
fi
try_plain=$(pair "" try)
try_shimmed=$(pair "$shim" try)
echo "trylock pair: $try_plain instructions plain, $try_shimmed with the shim (ratio $(ratio "$try_plain" "$try_shimmed"))"
random_plain=$(pair "" random)
random_shimmed=$(pair "$shim" random)
echo "random pair over 4,096 locks: $random_plain instructions plain, $random_shimmed with the shim (ratio $(ratio "$random_plain" "$random_shimmed"))"
sem_plain=$(pair "" sem)
sem_shimmed=$(pair "$shim" sem)
echo "semaphore pair: $sem_plain instructions plain, $sem_shimmed with the shim (ratio $(ratio "$sem_plain" "$sem_shimmed"))"
cells_plain=$(cells "")
cells_shimmed=$(cells "$shim")
echo "cells lock+unlock: $cells_plain instructions plain, $cells_shimmed with the shim (ratio $(ratio "$cells_plain" "$cells_shimmed"))"
lean_shimmed=$(LOCKSUIT_MODE=lean pair "$shim")
lean_random_shimmed=$(LOCKSUIT_MODE=lean pair "$shim" random)
echo "lean mode (LOCKSUIT_MODE=lean): uncontended pair $lean_shimmed (ratio $(ratio "$plain" "$lean_shimmed")), random pair $lean_random_shimmed (ratio $(ratio "$random_plain" "$lean_random_shimmed"))"
stripes_plain=$(stripes "")
stripes_shimmed=$(stripes "$shim")
echo "hash table operation, 48-byte stripes: $stripes_plain instructions plain, $stripes_shimmed with the shim (ratio $(ratio "$stripes_plain" "$stripes_shimmed"))"
[ "${1:-}" = --print ] && exit 0

failed=0
check() { # NAME PLAIN SHIMMED BASELINE-KEY
  local measured baseline
  measured=$(ratio "$2" "$3")
  baseline=$(awk -v k="$4" '$1 == k {print $2}' "$root/bench/guard-baseline")
  [ -n "$baseline" ] || { echo "bench-guard.sh: no '$4' in bench/guard-baseline" >&2; exit 2; }
  if awk -v r="$measured" -v b="$baseline" 'BEGIN { exit !(r > 1.15 * b) }'; then
    echo "bench-guard.sh: the shim's $1 cost regressed: ratio $measured, more than 1.15 x the committed $baseline ($4 in bench/guard-baseline)" >&2
    failed=1
  else
    echo "within the limit: $1 ratio $measured <= 1.15 x $baseline"
  fi
}
check "uncontended pair" "$plain" "$shimmed" ratio
check "trylock pair" "$try_plain" "$try_shimmed" try_ratio
check "random pair" "$random_plain" "$random_shimmed" random_ratio
check "semaphore pair" "$sem_plain" "$sem_shimmed" sem_ratio
check "cells lock+unlock" "$cells_plain" "$cells_shimmed" cells_ratio
check "hash table operation" "$stripes_plain" "$stripes_shimmed" stripes_ratio
check "lean pair" "$plain" "$lean_shimmed" lean_ratio
check "lean random pair" "$random_plain" "$lean_random_shimmed" lean_random_ratio
exit $failed
