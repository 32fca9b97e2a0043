#!/bin/bash
# stress.sh: the randomized stress (tests/stress/zvstress) in a loop, as
# OpenZFS's zloop runs ztest: a fresh seed per run until the time is up,
# every run's output kept, a failing run's pool files kept with its seed.
#
#   scripts/stress.sh [-t SECONDS] [-r SECONDS] [-b BUILDDIR] [-o OUTDIR]
#                     [-- ZVSTRESS-OPTIONS...]
#
#   -t  total time (default 3600); no run starts after it
#   -r  each run's time (zvstress --time; default 600)
#   -b  the build tree that holds tests/stress/zvstress (default: the
#       top of the tree if it was built there, as scripts/setup.sh does,
#       else ./build); the program is made there if it is missing
#   -o  where the logs go (default /var/tmp/zvstress-loop.DATE)
#
# Each run's output is OUTDIR/SEED.log.  A run that fails (a mismatch, an
# unexpected error, a hang) leaves its scratch directory, which moves to
# OUTDIR/fail-SEED (the pool's files and the engine's last messages);
# replay it with the command its log prints.  The last lines sum the runs
# (in zvstress's "N passed, N failed" form, counting checked epochs);
# exit 1 if any run failed.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
total=3600 each=600 build= out=
while getopts "t:r:b:o:h" opt; do
    case $opt in
        t) total=$OPTARG ;;
        r) each=$OPTARG ;;
        b) build=$OPTARG ;;
        o) out=$OPTARG ;;
        *) sed -n '2,22p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

if [ -z "$build" ]; then
    if [ -f "$top/Makefile" ]; then build=$top; else build=$top/build; fi
fi
prog=$build/tests/stress/zvstress
if [ ! -x "$prog" ]; then
    echo "stress: making $prog"
    make -C "$build" tests/stress/zvstress >/dev/null || exit 2
fi
out=${out:-/var/tmp/zvstress-loop.$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 2

start=$(date +%s) runs=0 failed=0 passed_checks=0 failed_checks=0
echo "stress: $prog for ${total}s, ${each}s a run; logs in $out"
while [ $(( $(date +%s) - start )) -lt "$total" ]; do
    left=$(( total - ($(date +%s) - start) ))
    t=$(( left < each ? left : each ))
    [ "$t" -ge 5 ] || break
    seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
    log=$out/$seed.log
    "$prog" --seed "$seed" --time "$t" "$@" >"$log" 2>&1
    rc=$?
    runs=$((runs + 1))
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    # (A run that died, of an assertion say, printed no count.)
    [ -n "$line" ] || line="0 passed, 1 failed"
    passed_checks=$((passed_checks + ${line%% *}))
    if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
        f=${line#*, }
        failed_checks=$((failed_checks + ${f%% *}))
        dir=$(grep -oE '/var/tmp/zv-test-stress\.[A-Za-z0-9]+' "$log" | tail -n 1)
        if [ -n "$dir" ] && [ -d "$dir" ]; then
            mv "$dir" "$out/fail-$seed"
        fi
        echo "stress: run $runs, seed $seed FAILED (exit $rc): $log"
        grep -E 'FAILED|replay with' "$log" | head -n 3 | sed 's/^/stress:   /'
    else
        echo "stress: run $runs, seed $seed: $(grep -E '^zvstress: [0-9]+ epochs' "$log" | sed 's/^zvstress: //')"
    fi
done
echo "stress: $runs runs in $(( $(date +%s) - start ))s, $failed failed; logs in $out"
echo "$passed_checks passed, $failed_checks failed"
[ "$failed" -eq 0 ]
