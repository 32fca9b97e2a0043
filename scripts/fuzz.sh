#!/bin/bash
# fuzz.sh: the long mode of the libFuzzer harnesses (tests/fuzz).
#
#   scripts/fuzz.sh [SECONDS [HARNESS...]]
#   make fuzz FUZZ_TIME=SECONDS [FUZZ_HARNESS=NAME]    (in the build tree)
#
# Runs each harness (default all: label uberblock blkptr tree spacemap zil
# name image) for SECONDS (default 600) in turn, one after the other,
# from its corpus, which is kept between runs in FUZZ_CORPUS/NAME
# (default BUILDDIR/tests/fuzz/corpus/NAME), seeded from the seeds and
# the regression inputs.  A crash stops that harness; its input is kept in
# BUILDDIR/tests/fuzz/crashes/NAME/ and the script goes on with the next
# harness.  FUZZ_JOBS=N runs N libFuzzer processes per harness (-fork=N).
# At the end: executions, coverage and corpus size per harness, and the
# crashes; exit 1 if there was one.
#
# BUILDDIR is ZVOL_TOP_BUILDDIR, else ./build or the current directory,
# whichever holds the harnesses; they and the seeds are built with make
# when missing.  Every crash found becomes a regression input: fix the
# bug, then copy the input to tests/fuzz/regress/NAME/ (make check replays
# them).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
secs=${1:-600}
shift || :
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] ||
    harnesses=(label uberblock blkptr tree spacemap zil name image dsrec stream)

build=${ZVOL_TOP_BUILDDIR:-}
if [ -z "$build" ]; then
    for b in "$top/build" "$PWD"; do
        if [ -f "$b/Makefile" ] && grep -q '^FUZZ_HARNESSES' "$b/Makefile"; then
            build=$b
            break
        fi
    done
fi
[ -n "$build" ] || { echo "fuzz: no configured build tree (run scripts/setup.sh)" >&2; exit 2; }

need=()
for h in "${harnesses[@]}"; do
    [ -x "$build/tests/fuzz/fuzz_$h" ] || need+=("tests/fuzz/fuzz_$h")
done
[ -f "$build/tests/fuzz/seeds.stamp" ] || need+=(tests/fuzz/seeds.stamp)
if [ ${#need[@]} -gt 0 ]; then
    echo "fuzz: make ${need[*]}"
    make -C "$build" -j2 "${need[@]}"
fi

corpus_top=${FUZZ_CORPUS:-$build/tests/fuzz/corpus}
export ZV_FUZZ_DATA=$build/tests/fuzz/data
summary=()
crashed=0
for h in "${harnesses[@]}"; do
    bin=$build/tests/fuzz/fuzz_$h
    corpus=$corpus_top/$h
    crashes=$build/tests/fuzz/crashes/$h
    regress=$top/tests/fuzz/regress/$h
    log=$build/tests/fuzz/fuzz-$h.log
    mkdir -p "$corpus" "$crashes"
    opts=()
    while read -r line; do
        line=${line%%#*}
        [ -n "${line// /}" ] && opts+=($line)
    done < "$top/tests/fuzz/$h.fuzz"
    dirs=("$corpus" "$build/tests/fuzz/seeds/$h")
    [ -d "$regress" ] && dirs+=("$regress")
    jobs=()
    [ -n "${FUZZ_JOBS:-}" ] && jobs=(-fork="$FUZZ_JOBS")
    echo "fuzz: $h for ${secs}s (corpus $corpus, log $log)"
    rc=0
    "$bin" ${opts[@]+"${opts[@]}"} ${jobs[@]+"${jobs[@]}"} -rss_limit_mb=4096 \
        -print_final_stats=1 -max_total_time="$secs" \
        -artifact_prefix="$crashes/" "${dirs[@]}" > "$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
    line="$h: ${execs:-?} executions, cov ${cov:-?}, corpus $(ls "$corpus" | wc -l)"
    if [ "$rc" -ne 0 ]; then
        crashed=1
        line="$line; CRASH (exit $rc): $(ls -t "$crashes" | head -n 1)"
        grep -E -m 3 'ERROR: |check failed|assertion failed' "$log" || :
    fi
    echo "fuzz: $line"
    summary+=("$line")
done
echo "fuzz: ---- summary ----"
for l in "${summary[@]}"; do echo "fuzz: $l"; done
exit "$crashed"
