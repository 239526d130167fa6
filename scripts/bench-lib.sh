# Helpers the benchmark scripts share; sourced, not run.

# median: the median of the numbers on standard input, one per line.
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# callgrind_instructions DIR PRELOAD PROGRAM ARGS...: instructions the whole
# run executed under callgrind, with LD_PRELOAD=PRELOAD ("" for none) and its
# trace (if any) written to DIR, a scratch directory. Exits 2 if valgrind fails.
callgrind_instructions() {
  local dir=$1 preload=$2 file=$1/cg.$RANDOM
  shift 2
  rm -f "$dir"/*.trace
  LD_PRELOAD=$preload LOCKSUIT_DIR=$dir valgrind --tool=callgrind --callgrind-out-file="$file" \
    "$@" >/dev/null 2>"$dir/valgrind.log" \
    || { echo "$(basename "$0"): valgrind failed:" >&2; cat "$dir/valgrind.log" >&2; exit 2; }
  awk '/^(summary|totals):/ {print $2; exit}' "$file"
}
