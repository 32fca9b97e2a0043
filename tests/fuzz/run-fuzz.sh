#!/bin/bash
# run-fuzz.sh: one libFuzzer harness as a "make check" test (the log
# compiler of the .fuzz tests).
#
#   tests/fuzz/run-fuzz.sh tests/fuzz/NAME.fuzz
#
# NAME.fuzz names the harness (tests/fuzz/fuzz_NAME) and lists its
# libFuzzer options, one per line ('#' starts a comment).  Two checks:
#
#   1. every regression input in tests/fuzz/regress/NAME/ (a crash found
#      earlier, kept with its fix) runs without a crash;
#   2. ZVOL_FUZZ_TIME seconds (make check: FUZZ_CHECK_TIME, 5) of fuzzing
#      from the seeds tests/fuzz/make_seeds made (tests/fuzz/seeds/NAME)
#      and the regression inputs, in a scratch corpus: no crash, no
#      failed check, no leak, no timeout.
#
# A crash is kept in tests/fuzz/crashes/NAME/ of the build tree, with how
# to replay it.  Skips (exit 77) when configure found no usable clang
# (ZVOL_FUZZ_SKIP says why).  Environment: as the integration tests'
# (tests/integration/functions.sh), set by make check.
set -euo pipefail

manifest=${1:?usage: run-fuzz.sh NAME.fuzz}
name=$(basename "$manifest" .fuzz)
: "${ZVOL_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${ZVOL_TOP_BUILDDIR:=$PWD}"
# shellcheck source=../integration/functions.sh
. "$ZVOL_TOP_SRCDIR/tests/integration/functions.sh"
ZV_TEST_NAME=fuzz-$name

if [ -n "${ZVOL_FUZZ_SKIP:-}" ]; then
    skip "$ZVOL_FUZZ_SKIP"
fi
bin=$ZVOL_TOP_BUILDDIR/tests/fuzz/fuzz_$name
seeds=$ZVOL_TOP_BUILDDIR/tests/fuzz/seeds/$name
regress=$ZVOL_TOP_SRCDIR/tests/fuzz/regress/$name
secs=${ZVOL_FUZZ_TIME:-5}
[ -x "$bin" ] || die "$bin is not built"
[ -d "$seeds" ] || die "no seeds in $seeds (tests/fuzz/make_seeds did not run)"
zv_setup

opts=()
while read -r line; do
    line=${line%%#*}
    [ -n "${line// /}" ] && opts+=($line)
done < "$manifest"
export ZV_FUZZ_DATA=$ZVOL_TOP_BUILDDIR/tests/fuzz/data
# Leaks are checked at exit of each run; a slow input is a failure too.
common=(-rss_limit_mb=4096 -print_final_stats=1 ${opts[@]+"${opts[@]}"})

# The last libFuzzer status line: executions and coverage.
fuzz_stats ()
{
    local execs cov
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$1" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$1" | tail -n 1 | sed 's/cov: //')
    echo "${execs:-?} executions, cov ${cov:-?}"
}

# Keep the crash, show its report, and say how to replay it.
fuzz_crash ()
{
    local log=$1 keep=$ZVOL_TOP_BUILDDIR/tests/fuzz/crashes/$name a
    mkdir -p "$keep"
    for a in "$ZV_TMP"/art-*; do
        [ -e "$a" ] || continue
        cp "$a" "$keep/"
        zv_log "kept $keep/$(basename "$a"); replay: $bin $keep/$(basename "$a")"
    done
    grep -E -A40 'ERROR: |==ERROR|check failed|assertion failed|SUMMARY' \
        "$log" | head -n 80 || tail -n 40 "$log"
}

# 1. The regression inputs.
if [ -d "$regress" ] && [ -n "$(ls -A "$regress" 2>/dev/null)" ]; then
    n=$(find "$regress" -type f | wc -l)
    if "$bin" "${common[@]}" -artifact_prefix="$ZV_TMP/art-" \
            "$regress"/* > "$ZV_TMP/regress.log" 2>&1; then
        zv_pass "$n regression input(s) of tests/fuzz/regress/$name run clean"
    else
        zv_fail "a regression input of tests/fuzz/regress/$name crashes again"
        fuzz_crash "$ZV_TMP/regress.log"
    fi
else
    zv_log "no regression inputs for $name"
fi

# 2. Fuzzing from the seeds.
mkdir -p "$ZV_TMP/corpus"
dirs=("$ZV_TMP/corpus" "$seeds")
[ -d "$regress" ] && dirs+=("$regress")
if "$bin" "${common[@]}" -max_total_time="$secs" \
        -artifact_prefix="$ZV_TMP/art-" "${dirs[@]}" \
        > "$ZV_TMP/fuzz.log" 2>&1; then
    zv_pass "fuzzed fuzz_$name for ${secs}s from $(ls "$seeds" | wc -l) seeds: $(fuzz_stats "$ZV_TMP/fuzz.log")"
else
    zv_fail "fuzz_$name found a crash after $(fuzz_stats "$ZV_TMP/fuzz.log")"
    fuzz_crash "$ZV_TMP/fuzz.log"
fi
zv_summary
