#!/usr/bin/env bash
# scrub-bench.sh: does a scrub stay out of the clients' way?  Foreground
# 4 KiB random writes at queue depth 32 (the default suite's
# rand-write-4k-qd32 job: fio's nbd engine against nbdkit and this
# plugin), measured on one pool in pairs of runs: alone, and while a
# background scrub runs the whole time (zvoladm scrub -w, over and over,
# through the control socket), the two in turn.  Prints each pair's IOPS
# and ratio and the median ratio (issue 13 asks for 0.8 or more), with
# the scrub's status around each run under it.
#
#   scripts/scrub-bench.sh [SECONDS]         (default 60 per run)
#   ROUNDS=5 scripts/scrub-bench.sh 20       (pairs, default 3)
#
# Environment: BENCH_DIR (default /var/tmp/zvol-bench: put it on the
# storage you care about, not tmpfs), BENCH_SIZE (the volume, default
# 4G; filled first, so the scrub has data to read), POOL_SIZE (a sparse
# pool of this size, as run-bench.sh's zvol-snap; default: the pool
# create makes for the volume alone, tight), SCRUB_OPTS (plugin
# arguments for both runs, e.g. "scan_yield_ms=20" or
# "scan_rate_max=200M"), ZVOL_PLUGIN (default the build's).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
plugin=${ZVOL_PLUGIN:-$top/plugin/.libs/nbdkit-zvol-plugin.so}
adm=$top/cmd/zvoladm
secs=${1:-60}
dir=${BENCH_DIR:-/var/tmp/zvol-bench}
size=${BENCH_SIZE:-4G}
[ -e "$plugin" ] || { echo "no plugin at $plugin (build first)" >&2; exit 1; }
fio --enghelp=nbd >/dev/null 2>&1 || { echo "fio has no nbd engine" >&2; exit 1; }
mkdir -p "$dir"
img=$dir/scrub-bench.img sock=$dir/scrub-bench.sock ctl=$dir/scrub-bench.ctl
pidf=$dir/scrub-bench.pid log=$dir/scrub-bench.log stop=$dir/scrub-bench.stop
rm -f "$img" "$sock" "$ctl" "$pidf" "$stop"
pool=()
if [ -n "${POOL_SIZE:-}" ]; then
    truncate -s "$POOL_SIZE" "$img"
    pool=(sparse=true)
fi
: >"$log"
loop=
cleanup ()
{
    touch "$stop"
    [ -z "$loop" ] || wait "$loop" 2>/dev/null || :
    [ ! -s "$pidf" ] || kill "$(cat "$pidf")" 2>/dev/null || :
    sleep 1
    rm -f "$img" "$stop"
}
trap cleanup EXIT

# shellcheck disable=SC2086 # SCRUB_OPTS is a list of key=value
nbdkit -U "$sock" -P "$pidf" -t 16 "$plugin" device="$img" create=true \
    size="$size" control="$ctl" "${pool[@]}" ${SCRUB_OPTS:-} >>"$log" 2>&1 </dev/null
for _ in $(seq 600); do
    [ -s "$pidf" ] && [ -S "$sock" ] && [ -S "$ctl" ] && break
    sleep 0.1
done
[ -S "$ctl" ] || { echo "the server did not start (see $log)" >&2; exit 1; }
uri="nbd+unix:///?socket=$sock"

echo "filling the $size volume..."
fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=128k \
    --iodepth=8 --size="$size" --output=/dev/null

run ()
{
    local out=$dir/scrub-bench-$1.json
    fio --name="rand-write-4k-qd32" --ioengine=nbd --uri="$uri" \
        --rw=randwrite --bs=4k --iodepth=32 --size="$size" \
        --norandommap=1 --randrepeat=0 --time_based=1 --runtime="$secs" \
        --ramp_time=5 --group_reporting=1 --output-format=json \
        --output="$out"
    /usr/bin/python3 -c 'import json, sys
print("%.0f" % json.load(open(sys.argv[1]))["jobs"][0]["write"]["iops"])' "$out"
}

# scrub_on / scrub_off: a background loop of whole scrubs, and its end
# (the scrub under way cancelled).
scrub_on ()
{
    rm -f "$stop"
    ( while [ ! -e "$stop" ]; do
          "$adm" -S "$ctl" scrub -w zvol >/dev/null 2>&1 || sleep 1
      done ) &
    loop=$!
    sleep 2
}
scrub_off ()
{
    touch "$stop"
    "$adm" -S "$ctl" scrub -s zvol >/dev/null 2>&1 || :
    wait "$loop" 2>/dev/null || :
    loop=
}

# ROUNDS pairs, the two runs of a pair in turn (alone first in odd
# rounds, the scrub first in even ones), so that the machine's drift
# falls on both; the ratio of each pair, and their median.
rounds=${ROUNDS:-3}
ratios=()
for r in $(seq "$rounds"); do
    for which in $( [ $((r % 2)) -eq 1 ] && echo "alone scrub" || echo "scrub alone"); do
        if [ "$which" = scrub ]; then
            echo "round $r: rand-write with a scrub running, ${secs}s..."
            scrub_on
            "$adm" -S "$ctl" status zvol | sed -n '/scan:/,/scan:/p' | head -n 3
            with=$(run "scrub-$r")
            "$adm" -S "$ctl" status zvol | sed -n '/scan:/,/scan:/p' | head -n 3
            scrub_off
        else
            echo "round $r: rand-write alone, ${secs}s..."
            alone=$(run "alone-$r")
        fi
    done
    ratio=$(/usr/bin/python3 -c 'import sys; a, w = map(float, sys.argv[1:]); print("%.3f" % (w / a if a else 0))' "$alone" "$with")
    echo "round $r: alone $alone IOPS, with a scrub $with IOPS, ratio $ratio"
    ratios+=("$ratio")
done
/usr/bin/python3 - "${ratios[@]}" <<'PYEOF'
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
print("rand-write-4k-qd32 with a scrub / alone: median %.2f of %d rounds (%s)"
      % (statistics.median(r), len(r), " ".join("%.2f" % x for x in r)))
PYEOF
