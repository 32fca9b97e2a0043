#!/usr/bin/env bash
# test-bench.sh: the benchmarks still run and still print what they
# promise (bench/README.md), on tiny settings, so that a change to the
# engine's API, the plugin or the scripts that breaks them shows here and
# not in the middle of someone's measurement.
#
# 1. bench/core-bench (built by make): one row per phase, the columns
#    numbers, a cold read a cache miss and a hot one not, the pool file
#    gone afterwards, a bad option refused.
# 2. run-bench.sh --suite core with two builds (the same one twice): the
#    side-by-side table with its A/B columns; instructions counted (under
#    callgrind when the machine has no counter and valgrind is there).
# 3. run-bench.sh (default suite) on null, zvol and raw, two jobs, one
#    round of one second: every row of the table with its ceiling shares,
#    the CSVs, the zvol target's txg history, and the charts when gnuplot
#    is there.  Not under --enable-sanitizers: run-bench.sh starts a plain
#    nbdkit, which cannot load an ASan plugin.
# 4. run-bench.sh --suite rados on a throw-away memstore cluster, one job,
#    one round: the rows of null, rbd (qemu-nbd) and zvol-rados, the
#    zvol-rados/rbd ratios, the cluster gone afterwards.  (Not without the
#    Ceph packages or qemu's rbd driver, nor under the sanitizers.)

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
zv_setup

top=${ZVOL_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${ZVOL_TOP_BUILDDIR:-$top}
cb=$build/bench/core-bench
[ -x "$cb" ] || die "missing $cb (build first)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# run_bench NAME WHAT [VAR=VALUE ...] -- ARG ...: bench/run-bench.sh with
# those settings (and PYTHON, ZVOL_PLUGIN) and ARGs, into $ZV_TMP/NAME,
# what it prints in $ZV_TMP/NAME.log: "WHAT runs", or the log's end and
# "WHAT failed".
run_bench ()
{
    local name=$1 what=$2
    local -a vars=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        vars+=("$1")
        shift
    done
    [ $# -eq 0 ] || shift
    if env PYTHON="$py" ZVOL_PLUGIN="$ZVOL_PLUGIN" "${vars[@]}" \
            "$top/bench/run-bench.sh" "$@" -o "$ZV_TMP/$name" >"$ZV_TMP/$name.log" 2>&1; then
        zv_pass "$what runs"
    else
        tail -n 40 "$ZV_TMP/$name.log"
        die "$what failed"
    fi
}

# ---- 1. core-bench ----
zv_log "core-bench, tiny"
if "$cb" -q -t -d "$ZV_TMP" -s 16M -n 256 -k 2 -l 4 >"$ZV_TMP/cb.tsv" 2>"$ZV_TMP/cb.err"; then
    zv_pass "core-bench runs"
else
    cat "$ZV_TMP/cb.err"
    die "core-bench failed"
fi
ops=$(grep -v '^#' "$ZV_TMP/cb.tsv" | cut -f1 | tr '\n' ' ')
check "one row per phase, in order ($ops)" \
    test "$ops" = "write-128k write-4k txg-sync read-128k read-128k-hot read-4k read-4k-hot zil-commit write-4k-base snapshot write-4k-snap write-4k-full write-128k-full write-4k-room txg-sync-room write-4k-room-snap txg-sync-snap write-4k-room-less "
check "the two -full phases give their device writes (#dev lines)" \
    test "$(awk -F'\t' '/^#dev\t/ && $3 > 0 && $4 > 0 && $5 > 0' "$ZV_TMP/cb.tsv" | wc -l)" -eq 2
check "the three write-4k-room phases give their txgs (#txgs lines: 8 each, data and metadata written)" \
    test "$(awk -F'\t' '/^#txgs\t/ && $3 == 8 && $4 > 0 && $5 > 0 && $6 > 0' "$ZV_TMP/cb.tsv" | wc -l)" -eq 3
check "-R runs the write-4k-room phases alone" \
    test "$("$cb" -q -t -R -d "$ZV_TMP" -s 16M -n 256 -k 2 | grep -v '^#' | cut -f1 | tr '\n' ' ')" = \
        "write-4k-room txg-sync-room write-4k-room-snap txg-sync-snap write-4k-room-less "
check "every row: ops, instr or -, then four numbers" \
    awk -F'\t' '!/^#/ { if (NF != 7 || $2 !~ /^[0-9]+$/ || $3 !~ /^(-|[0-9]+)$/) exit 1
                        for (i = 4; i <= 7; i++) if ($i !~ /^[0-9]+\.[0-9]+$/) exit 1 }' "$ZV_TMP/cb.tsv"
check "the 4 KiB phases did 256 operations, the 128 KiB ones cover 16 MiB" \
    awk -F'\t' '$1 == "write-4k" && $2 == 256 { a = 1 } $1 == "read-128k" && $2 == 128 { b = 1 }
                END { exit !(a && b) }' "$ZV_TMP/cb.tsv"
check "a cold 4 KiB read misses the cache, a hot one hits it" \
    awk -F'\t' '$1 == "read-4k" && $7 >= 0.9 { a = 1 } $1 == "read-4k-hot" && $7 < 0.1 { b = 1 }
                END { exit !(a && b) }' "$ZV_TMP/cb.tsv"
check "a cold 128 KiB read misses the cache (8 blocks), a hot one hits it" \
    awk -F'\t' '$1 == "read-128k" && $7 >= 7.9 { a = 1 } $1 == "read-128k-hot" && $7 < 0.1 { b = 1 }
                END { exit !(a && b) }' "$ZV_TMP/cb.tsv"
check_not "-a past a page is refused" "$cb" -q -d "$ZV_TMP" -s 16M -a 4096
check "a txg sync costs CPU outside the calling thread (the sync thread)" \
    awk -F'\t' '$1 == "txg-sync" && $4 > $5 { a = 1 } END { exit !a }' "$ZV_TMP/cb.tsv"
check "the pool file is removed" \
    bash -c "! ls '$ZV_TMP'/core-bench.*.img >/dev/null 2>&1"
check_not "-n larger than the volume's blocks is refused" \
    "$cb" -q -d "$ZV_TMP" -s 16M -n 5000
check_not "an unknown option is refused" "$cb" -x

# ---- 2. the core suite, A and B ----
zv_log "run-bench.sh --suite core"
cg=0
if command -v valgrind >/dev/null && [ -z "${ZVOL_SANITIZERS:-}" ]; then
    cg=1
fi
run_bench core "the core suite" CORE_BENCH="$cb" CORE_BENCH_B="$cb" CORE_DIR="$ZV_TMP" \
    ROUNDS=1 CORE_CALLGRIND=$cg CORE_ARGS="-s 16M -n 256 -k 2 -l 4" \
    BENCH_DIR="$ZV_TMP/bd" -- --suite core
check "core.md has A and B side by side, with A/B" \
    grep -q 'A instr/op.*B instr/op.*instr A/B.*cpu A/B' "$ZV_TMP/core/core.md"
check "core.md has a row for write-4k and for txg-sync" \
    bash -c "grep -q '^| write-4k ' '$ZV_TMP/core/core.md' && grep -q '^| txg-sync ' '$ZV_TMP/core/core.md'"
check "core.csv has a line per build and phase" \
    test "$(grep -c '^[AB],' "$ZV_TMP/core/core.csv")" -eq 36
if [ "$cg" = 1 ] || ! grep -q '^#instr	none' "$ZV_TMP/core/core/A.1.tsv"; then
    check "instructions per operation are counted" \
        awk -F, '$1 == "A" && $2 == "write-4k" && $4 > 1000 { a = 1 } END { exit !a }' \
        "$ZV_TMP/core/core.csv"
    check "the same build counts the same instructions twice, within 10%" \
        awk -F, '$2 == "write-4k" { v[$1] = $4 }
                 END { r = v["B"] / v["A"]; exit !(r > 0.9 && r < 1.1) }' "$ZV_TMP/core/core.csv"
fi

# ---- 3. the default suite ----
if [ "${ZVOL_SANITIZERS:-}" = asan ]; then
    zv_log "default suite skipped: run-bench.sh's plain nbdkit cannot load an ASan plugin"
    zv_summary
fi
requires fio --enghelp=nbd
zv_log "run-bench.sh, default suite, tiny"
run_bench def "the default suite" BENCH_DIR="$ZV_TMP/bd" BENCH_SIZE=16M RUNTIME=1 \
    RAMP=0 ROUNDS=1 BENCH_TARGETS="null zvol raw" \
    BENCH_JOBS="rand-write-4k-qd1-fsync rand-read-4k-qd32" -- --quick
md=$ZV_TMP/def/results.md
check "the table has a row per job and target (6)" \
    test "$(grep -cE '^\| (rand-write-4k-qd1-fsync|rand-read-4k-qd32) +\| (null|zvol|raw) ' "$md")" -eq 6
check "the table's columns: shares of both ceilings, the file ratio, p99s" \
    bash -c "tr -d ' ' <'$md' | grep -q '^|job|target|IOPS|MiB/s|p99us|fsyncp99us|%null|%raw|xfile|latxnull|latxraw|'"
check "every row has the machine's CPU: busy % (0-100) and us per I/O" \
    awk -F'|' '$2 ~ /^ (rand-write-4k-qd1-fsync|rand-read-4k-qd32) / {
                   n++; if ($13 + 0 > 0 && $13 + 0 <= 100 && $14 + 0 > 0) ok++ }
               END { exit !(n == 6 && ok == 6) }' "$md"
check "zvol's fsync row has a flush p99 and both shares" \
    awk -F'|' '$2 ~ /rand-write-4k-qd1-fsync / && $3 ~ /zvol/ {
                   if ($7 + 0 > 0 && $8 + 0 > 0 && $9 + 0 > 0) ok = 1 } END { exit !ok }' "$md"
check "raw's fsync row has a flush p99 (fdatasync through io_uring)" \
    awk -F'|' '$2 ~ /rand-write-4k-qd1-fsync / && $3 ~ /raw/ && $7 + 0 > 0 { ok = 1 } END { exit !ok }' "$md"
check "results.csv: a header and 6 rows" \
    test "$(wc -l <"$ZV_TMP/def/results.csv")" -eq 7
check "runs.tsv: every run timed (2 fills, none for null; 6 runs)" \
    test "$(wc -l <"$ZV_TMP/def/runs.tsv")" -eq 8
check "the Growth table: the zvol target's fill and both jobs, metadata and its indirect/deferred shares, the throttle's counts and VmHWM" \
    awk -F'|' '/^## Growth/ { g = 1 }
               g && $2 ~ /zvol/ && $6 ~ /%/ && $7 ~ /^ *[0-9.]+% \/ [0-9.]+% *$/ \
                 && $8 ~ /^ *[0-9]+ *$/ && $9 ~ /^ *[0-9.]+ *$/ \
                 && $10 ~ /^ *[0-9]+ *$/ && $11 + 0 > 0 { n++ }
               END { exit n != 3 }' "$md"
check "the zvol target's txg history has committed txgs" \
    test "$(wc -l <"$ZV_TMP/def/txgs-zvol.tsv")" -ge 2
check "the backing files are removed" \
    bash -c "! ls '$ZV_TMP'/bd/*.img >/dev/null 2>&1"
if command -v gnuplot >/dev/null; then
    for png in iops latency ceiling txg-zvol; do
        check "$png.png drawn" \
            bash -c "head -c 8 '$ZV_TMP/def/$png.png' | od -An -c | grep -q 'P   N   G'"
    done
else
    zv_log "gnuplot not found: the charts are not checked"
fi

# zvol-cold: the same volume with a cache far under it, whose sequential
# reads go to the device (zvol's stay in its cache).
zv_log "run-bench.sh, zvol against zvol-cold, sequential reads"
run_bench cold "zvol against zvol-cold" BENCH_DIR="$ZV_TMP/bdc" BENCH_SIZE=32M \
    BENCH_COLD_CACHE=8M RUNTIME=1 RAMP=0 ROUNDS=1 BENCH_TARGETS="zvol zvol-cold" \
    BENCH_JOBS="seq-read-128k" -- --quick
check "zvol-cold runs with BENCH_COLD_CACHE as its cache limit" \
    grep -qx 'cache_limit 8388608' "$ZV_TMP/cold/growth.stats.zvol-cold"
check "zvol-cold's sequential reads miss its cache, zvol's hardly" \
    awk '$1 == "cache_misses" { m[FILENAME ~ /cold$/] = $2 }
         END { exit !(m[1] > 1000 && m[1] > 10 * m[0]) }' \
        "$ZV_TMP/cold/growth.stats.zvol" "$ZV_TMP/cold/growth.stats.zvol-cold"
check "a BENCH_COLD_CACHE not under BENCH_SIZE is refused" \
    bash -c "BENCH_DIR='$ZV_TMP/bdc' BENCH_SIZE=16M BENCH_COLD_CACHE=16M \
               BENCH_TARGETS=zvol-cold ZVOL_PLUGIN='$ZVOL_PLUGIN' \
               '$top/bench/run-bench.sh' --quick -o '$ZV_TMP/cold2' 2>&1 |
             grep -q 'must be under BENCH_SIZE'"

# ---- 4. the rados suite ----
if ! command -v ceph-mon >/dev/null || ! command -v ceph-osd >/dev/null ||
   ! command -v rbd >/dev/null; then
    zv_log "rados suite not checked: no Ceph packages (ceph-mon ceph-osd ceph-common)"
    zv_summary
fi
if ! qemu-img --help 2>/dev/null | grep -qw rbd; then
    zv_log "rados suite not checked: qemu has no rbd driver (qemu-block-extra)"
    zv_summary
fi
zv_log "run-bench.sh --suite rados, tiny (a memstore cluster)"
run_bench rados "the rados suite" BENCH_DIR="$ZV_TMP/bdr" BENCH_SIZE=16M RUNTIME=1 \
    RAMP=0 ROUNDS=1 BENCH_CEPH_STORE=memstore BENCH_JOBS="rand-write-4k-qd1-fsync" \
    -- --suite rados --quick
md=$ZV_TMP/rados/results.md
check "the table has a row per target (null, rbd, zvol-rados)" \
    test "$(grep -cE '^\| rand-write-4k-qd1-fsync +\| (null|rbd|zvol-rados) ' "$md")" -eq 3
check "rbd and zvol-rados have a flush p99 and a share of null" \
    test "$(awk -F'|' '$3 ~ /^ (rbd|zvol-rados) / && $7 + 0 > 0 && $8 + 0 > 0' "$md" | wc -l)" -eq 2
check "the zvol-rados/rbd table has the job's ratios" \
    bash -c "grep -q 'zvol-rados/rbd IOPS' '$md' && grep -qE '^\| rand-write-4k-qd1-fsync +\| +[0-9.]+x \| +[0-9.]+x ' '$md'"
check "the header names the cluster and says what the figures are" \
    bash -c "grep -q 'throw-away: one monitor, one memstore OSD' '$md' &&
             grep -q 'not how fast a cluster is' '$md'"
check "the throw-away cluster is stopped and removed" \
    test ! -e "$ZV_TMP/bdr/ceph"
zv_summary
