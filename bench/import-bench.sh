#!/bin/bash
# import-bench.sh: import time against the volume's size, two builds side
# by side (issue 11, "Growth").  For each size, one pool is filled (the
# volume written whole, then RANDOM_S seconds of 4 KiB random writes) by
# build A's import-bench, then both builds import it ROUNDS times,
# interleaved (A, B, A, B...: the pool's format is the same), and the
# medians are printed; the file is deleted after.
#
#   SIZES     volume sizes (default "1G 8G 64G")
#   ROUNDS    imports per build and size (default 3)
#   RANDOM_S  seconds of random writes after the fill (default 0)
#   BENCH_DIR where the pool file goes (default /var/tmp)
#   A_TREE    source tree of build A (default: this one), built in A_TREE/build
#   B_TREE    source tree of build B (e.g. /var/tmp/before), or empty: A only
#   FULL      1: A also imports with verify=full (the walk) each round
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
A_TREE=${A_TREE:-$here}
B_TREE=${B_TREE:-}
SIZES=${SIZES:-"1G 8G 64G"}
ROUNDS=${ROUNDS:-3}
RANDOM_S=${RANDOM_S:-0}
BENCH_DIR=${BENCH_DIR:-/var/tmp}
FULL=${FULL:-1}
work=$(mktemp -d "$BENCH_DIR/import-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# build TREE OUT: import-bench against TREE's zvol.h and libzvol.so.
build () {
    local tree=$1 out=$2 defs=()
    grep -q pc_verify_full "$tree/core/zvol.h" && defs+=(-DHAVE_VERIFY_FULL)
    grep -q ps_written_data "$tree/core/zvol.h" && defs+=(-DHAVE_WRITTEN_STATS)
    cc -O2 -std=gnu11 "${defs[@]}" -I"$tree/core" -o "$out" \
        "$here/bench/import-bench.c" -L"$tree/build/core/.libs" -lzvol \
        -Wl,-rpath,"$tree/build/core/.libs"
}
build "$A_TREE" "$work/ib-a"
[ -n "$B_TREE" ] && build "$B_TREE" "$work/ib-b"

median () { sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "-") }'; }

printf '%-6s %-12s %12s %12s %10s\n' size build import_ms first_read_ms vmhwm_MiB
for size in $SIZES; do
    dev=$work/pool-$size.img
    "$work/ib-a" fill "$dev" "$size" "$RANDOM_S" >"$work/fill-$size.txt"
    sed "s/^/# $size /" "$work/fill-$size.txt"
    : >"$work/a"; : >"$work/b"; : >"$work/f"
    for ((r = 0; r < ROUNDS; r++)); do
        "$work/ib-a" time "$dev" 1 >>"$work/a"
        [ -n "$B_TREE" ] && "$work/ib-b" time "$dev" 1 >>"$work/b"
        [ "$FULL" = 1 ] && "$work/ib-a" time "$dev" 1 full >>"$work/f"
    done
    for side in a b f; do
        [ -s "$work/$side" ] || continue
        name=$([ $side = a ] && echo A || { [ $side = b ] && echo B; } || echo A-verify=full)
        printf '%-6s %-12s %12s %12s %10s\n' "$size" "$name" \
            "$(cut -d' ' -f1 "$work/$side" | median)" \
            "$(cut -d' ' -f2 "$work/$side" | median)" \
            "$(awk '{ print int($3 / 1024) }' "$work/$side" | median)"
    done
    rm -f "$dev"
done
