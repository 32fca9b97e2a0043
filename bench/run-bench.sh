#!/usr/bin/env bash
# run-bench.sh: fio (nbd engine) side by side against
#   zvol      nbdkit + the zvol plugin           ($BENCH_DIR/zvol.img)
#   zvol-txg  the same with flush=txg (sync suite) ($BENCH_DIR/zvol-txg.img)
#   zvol-b    the same as zvol with another build of the plugin,
#             $ZVOL_PLUGIN_B (not in the defaults: before/after a change
#             in one interleaved run)             ($BENCH_DIR/zvol-b.img)
#   file      nbdkit's file plugin               ($BENCH_DIR/file.img)
#   qcow2     qemu-nbd, qcow2, O_DIRECT, io_uring ($BENCH_DIR/disk.qcow2)
#   memory    nbdkit's memory plugin: a RAM disk, flush a no-op (not in
#             the defaults; a ceiling: what the protocol alone costs)
# all on Unix sockets, all backed by files in one directory.  Each target
# is filled once; then the jobs run in rounds, every target one after the
# other (interleaved), so slow drifts of the machine hit every target
# alike.  Prints a table of medians and ratios, also written to
# $BENCH_DIR/results.txt.  See bench/README.md.
#
# Suites (bench/run-bench.sh [--suite NAME]):
#   default   seq/random write and read jobs on zvol, file, qcow2; for each
#             job ROUNDS rounds of every target.
#   sync      durable small writes on zvol, zvol-txg, file, qcow2: fio
#             randwrite 4k QD1 fsync=1 with 1/4/8/16 jobs (one connection
#             each) and fua-bench (libnbd, QD1 4k writes with FUA, 1 and
#             16 connections; built from bench/fua-bench.c at run time).
#             Each round runs every job on every target; zvol's intent-log
#             counters are printed after each zvol run.
#
# Environment:
#   BENCH_SUITE     suite if --suite is not given (default "default")
#   BENCH_DIR       working directory (default /var/tmp/zvol-bench)
#   BENCH_SIZE      size of each volume (default 2G; sync suite 1G)
#   RUNTIME, RAMP   seconds per job run and ramp (default 10 and 2)
#   ROUNDS          rounds per job (default 3)
#   BENCH_TARGETS   subset and order of the suite's targets
#   BENCH_JOBS      default suite: subset of job names (files in bench/jobs)
#   SYNC_NUMJOBS    sync suite: fio numjobs values (default "1 4 8 16";
#                   empty: no fio jobs)
#   SYNC_FUA_CONNS  sync suite: fua-bench connections (default "1 16";
#                   empty: no fua-bench runs)
#   SYNC_FILL       sync suite: 0 skips filling the volumes (default 1)
#   SYNC_LOGDEV=1   sync suite: give each zvol target a separate log
#                   device, $BENCH_DIR/T.slog of SYNC_LOGDEV_SIZE (256M)
#   ZVOL_PLUGIN     the plugin .so (default: ../plugin/.libs/ from here)
#   ZVOL_PLUGIN_B   the plugin .so of the zvol-b target
#   ZVOL_OPTS       extra zvol plugin parameters (e.g. "volblocksize=4K")
#   FILE_OPTS       extra file plugin parameters (e.g. "cache=none")
#   NBDKIT_THREADS  nbdkit -t (default 32)
#   QEMU_SHARED     qemu-nbd -e (default 4; sync suite 64, so that 16 fio
#                   jobs, each with a probe connection, all get in)
#   BENCH_KEEP=1    keep the backing files afterwards
#   SETTLE          sync suite: seconds to wait (after a host sync) before
#                   each run, so the last run's writeback -- page cache,
#                   a zvol txg (txg_timeout is 5 s) -- does not land in the
#                   next target's run (default 6; 0 for none)

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

usage ()
{
    echo "usage: $0 [--suite default|sync]   (settings: see the top of this script and bench/README.md)"
}
SUITE=${BENCH_SUITE:-default}
while [ $# -gt 0 ]; do
    case $1 in
    --suite) [ $# -ge 2 ] || { usage >&2; exit 2; }; SUITE=$2; shift 2 ;;
    --suite=*) SUITE=${1#--suite=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
case $SUITE in
default)
    def_size=2G; def_targets="zvol file qcow2"; def_shared=4 ;;
sync)
    def_size=1G; def_targets="zvol zvol-txg file qcow2"; def_shared=64 ;;
*) echo "run-bench: unknown suite $SUITE (default, sync)" >&2; exit 2 ;;
esac

BENCH_DIR=${BENCH_DIR:-/var/tmp/zvol-bench}
BENCH_SIZE=${BENCH_SIZE:-$def_size}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-3}
BENCH_TARGETS=${BENCH_TARGETS:-$def_targets}
BENCH_JOBS=${BENCH_JOBS:-seq-write-128k rand-write-4k-qd32 rand-write-4k-qd1-fsync rand-read-4k-qd32}
SYNC_NUMJOBS=${SYNC_NUMJOBS-1 4 8 16}
SYNC_FUA_CONNS=${SYNC_FUA_CONNS-1 16}
SYNC_FILL=${SYNC_FILL:-1}
SETTLE=${SETTLE:-6}
SYNC_LOGDEV=${SYNC_LOGDEV:-0}
SYNC_LOGDEV_SIZE=${SYNC_LOGDEV_SIZE:-256M}
ZVOL_PLUGIN=${ZVOL_PLUGIN:-$here/../plugin/.libs/nbdkit-zvol-plugin.so}
ZVOL_OPTS=${ZVOL_OPTS:-}
FILE_OPTS=${FILE_OPTS:-}
NBDKIT_THREADS=${NBDKIT_THREADS:-32}
QEMU_SHARED=${QEMU_SHARED:-$def_shared}
PYTHON=${PYTHON:-python3}
export RUNTIME RAMP

# Every target this script knows, for the checks and the cleanup.
ALL_TARGETS="zvol zvol-txg zvol-b file qcow2 memory"

die () { echo "run-bench: $*" >&2; exit 1; }

command -v fio >/dev/null || die "fio not found"
fio --enghelp=nbd >/dev/null 2>&1 || die "fio has no nbd engine"
command -v nbdkit >/dev/null || die "nbdkit not found"
"$PYTHON" -c 'import json, statistics' || die "$PYTHON cannot run"
if [ "$SUITE" = default ]; then
    for j in $BENCH_JOBS fill; do
        [ -f "$here/jobs/$j.fio" ] || die "no job file $here/jobs/$j.fio"
    done
else
    for j in sync-write-4k-qd1 fill; do
        [ -f "$here/jobs/$j.fio" ] || die "no job file $here/jobs/$j.fio"
    done
    command -v cc >/dev/null || die "cc not found (needed to build fua-bench)"
    pkg-config --exists libnbd || die "libnbd development files not found (pkg-config libnbd)"
    command -v numfmt >/dev/null || die "numfmt (coreutils) not found"
fi

targets=()
for t in $BENCH_TARGETS; do
    case $t in
    zvol|zvol-txg)
        [ -f "$ZVOL_PLUGIN" ] || die "zvol plugin $ZVOL_PLUGIN not found (build it, or set ZVOL_PLUGIN)"
        ;;
    zvol-b)
        [ -f "${ZVOL_PLUGIN_B:-}" ] || die "target zvol-b needs ZVOL_PLUGIN_B, the other build's plugin .so"
        ;;
    file|memory) ;;
    qcow2)
        if ! command -v qemu-nbd >/dev/null || ! command -v qemu-img >/dev/null; then
            echo "run-bench: qemu-nbd/qemu-img not found: skipping the qcow2 target" >&2
            continue
        fi
        ;;
    *) die "unknown target $t ($ALL_TARGETS)" ;;
    esac
    targets+=("$t")
done
[ ${#targets[@]} -gt 0 ] || die "no targets"

mkdir -p "$BENCH_DIR"
json=$BENCH_DIR/json
rm -rf "$json"
mkdir -p "$json"
results=$BENCH_DIR/results.txt

# --- servers ---

# PID[t]: the server's pid once it is up.  STARTED[t]: we launched it, so
# its pidfile (written by the server) names our process even if it came up
# too late for start_target.
declare -A PID STARTED
cleanup ()
{
    local t
    set +e
    for t in "${!STARTED[@]}"; do
        if [ -z "${PID[$t]:-}" ] && [ -s "$BENCH_DIR/$t.pid" ]; then
            PID[$t]=$(cat "$BENCH_DIR/$t.pid")
        fi
    done
    for t in "${!PID[@]}"; do
        kill -TERM "${PID[$t]}" 2>/dev/null
    done
    for t in "${!PID[@]}"; do
        timeout 60 tail --pid="${PID[$t]}" -f /dev/null 2>/dev/null ||
            kill -KILL "${PID[$t]}" 2>/dev/null
    done
    for t in $ALL_TARGETS; do
        rm -f "$(sock_of "$t")" "$BENCH_DIR/$t.pid"
    done
    rm -f "$BENCH_DIR/fua-bench"
    if [ "${BENCH_KEEP:-0}" != 1 ]; then
        rm -f "$BENCH_DIR/zvol.img" "$BENCH_DIR/zvol-txg.img" \
            "$BENCH_DIR/zvol-b.img" "$BENCH_DIR/zvol-b.slog" \
            "$BENCH_DIR/zvol.slog" "$BENCH_DIR/zvol-txg.slog" \
            "$BENCH_DIR/file.img" "$BENCH_DIR/disk.qcow2"
        rm -rf "$BENCH_DIR/zvol.kstat" "$BENCH_DIR/zvol-txg.kstat" \
            "$BENCH_DIR/zvol-b.kstat"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 129' HUP
trap 'exit 143' TERM

sock_of () { echo "$BENCH_DIR/$1.sock"; }
uri_of () { echo "nbd+unix:///?socket=$(sock_of "$1")"; }
kstat_of () { echo "$BENCH_DIR/$1.kstat"; }

# start_target T: create the backing file, start the server as a daemon
# (so it is not our child, and tail --pid can wait for it), wait up to
# 60 s for its pidfile and socket.  The zvol targets write their kstat
# files to $BENCH_DIR/T.kstat (the zil_* counters come from there).
start_target ()
{
    local t=$1 sock log pidfile i pre=() post=()
    sock=$(sock_of "$t"); log=$BENCH_DIR/$t.log; pidfile=$BENCH_DIR/$t.pid
    rm -f "$sock" "$pidfile"
    : >"$log"
    STARTED[$t]=1
    case $t in
    zvol|zvol-txg|zvol-b)
        local plugin=$ZVOL_PLUGIN
        [ "$t" != zvol-b ] || plugin=$ZVOL_PLUGIN_B
        rm -f "$BENCH_DIR/$t.img" "$BENCH_DIR/$t.slog"
        rm -rf "$(kstat_of "$t")"
        if [ "$SYNC_LOGDEV" = 1 ]; then
            truncate -s "$SYNC_LOGDEV_SIZE" "$BENCH_DIR/$t.slog"
            pre+=("log=$BENCH_DIR/$t.slog")
        fi
        # zvol: flush=log (the default) before ZVOL_OPTS; zvol-txg:
        # flush=txg after them, so ZVOL_OPTS cannot undo it.
        if [ "$t" = zvol-txg ]; then post+=(flush=txg); else pre+=(flush=log); fi
        # shellcheck disable=SC2086
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" "$plugin" \
            device="$BENCH_DIR/$t.img" create=true size="$BENCH_SIZE" \
            kstat="$(kstat_of "$t")" "${pre[@]}" $ZVOL_OPTS "${post[@]}" \
            >>"$log" 2>&1 </dev/null
        ;;
    file)
        rm -f "$BENCH_DIR/file.img"
        truncate -s "$BENCH_SIZE" "$BENCH_DIR/file.img"
        # shellcheck disable=SC2086
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" file \
            file="$BENCH_DIR/file.img" $FILE_OPTS >>"$log" 2>&1 </dev/null
        ;;
    memory)
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" memory \
            size="$BENCH_SIZE" >>"$log" 2>&1 </dev/null
        ;;
    qcow2)
        rm -f "$BENCH_DIR/disk.qcow2"
        qemu-img create -q -f qcow2 "$BENCH_DIR/disk.qcow2" "$BENCH_SIZE" >>"$log" 2>&1
        qemu-nbd -f qcow2 --cache=none --aio=io_uring --discard=unmap \
            -e "$QEMU_SHARED" -t --fork -k "$sock" --pid-file="$pidfile" \
            "$BENCH_DIR/disk.qcow2" >>"$log" 2>&1 </dev/null
        ;;
    esac
    for (( i = 0; i < 600; i++ )); do
        if [ -s "$pidfile" ] && [ -S "$sock" ]; then
            PID[$t]=$(cat "$pidfile")
            return 0
        fi
        sleep 0.1
    done
    cat "$log" >&2
    die "$t server did not start"
}

# run_fio T JOB OUT: one fio run of bench/jobs/JOB.fio; fails loudly on
# fio errors.
run_fio ()
{
    local t=$1 job=$2 out=$3 rc=0
    uri=$(uri_of "$t") timeout $(( RUNTIME + RAMP + 600 )) \
        fio --output-format=json --output="$out" "$here/jobs/$job.fio" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "run-bench: fio $job on $t failed (status $rc):" >&2
        head -n 50 "$out" >&2
        die "fio failed"
    fi
}

# header_lines: the first lines of results.txt (machine, versions).
header_lines ()
{
    echo "# nbdkit-zvol benchmark, suite $SUITE, $(date -u '+%Y-%m-%d %H:%M:%SZ')"
    echo "# host: $(uname -srm), $(nproc) CPUs; $(fio --version); $(nbdkit --version | head -n 1)"
    if command -v qemu-nbd >/dev/null; then
        echo "# $(qemu-nbd --version | head -n 1)"
    fi
    echo "# dir $BENCH_DIR ($(df -PT "$BENCH_DIR" | awk 'NR==2 {print $2}')), size $BENCH_SIZE," \
        "runtime ${RUNTIME}s, ramp ${RAMP}s, $ROUNDS rounds, nbdkit -t $NBDKIT_THREADS"
}

# ====================================================================
# default suite
# ====================================================================
suite_default ()
{
    local t job r n total
    echo "run-bench: targets ${targets[*]}; jobs $BENCH_JOBS"
    echo "run-bench: size $BENCH_SIZE, runtime ${RUNTIME}s + ramp ${RAMP}s, $ROUNDS rounds, in $BENCH_DIR"
    for t in "${targets[@]}"; do
        start_target "$t"
        echo "run-bench: $t: filling $BENCH_SIZE"
        run_fio "$t" fill "$json/fill-$t.json"
    done

    total=$(( $(wc -w <<<"$BENCH_JOBS") * ROUNDS * ${#targets[@]} ))
    n=0
    for job in $BENCH_JOBS; do
        for (( r = 1; r <= ROUNDS; r++ )); do
            for t in "${targets[@]}"; do
                n=$((n + 1))
                printf 'run-bench: [%d/%d] %s round %d on %s\n' "$n" "$total" "$job" "$r" "$t"
                run_fio "$t" "$job" "$json/$job.$t.$r.json"
            done
        done
    done

    # --- table ---

    {
        header_lines
        echo "# zvol: $ZVOL_PLUGIN ${ZVOL_OPTS}; zvol-b: ${ZVOL_PLUGIN_B:-none}; file: ${FILE_OPTS:-default}; qcow2: --cache=none --aio=io_uring -e $QEMU_SHARED"
        # shellcheck disable=SC2086 # BENCH_JOBS is a list of words
        "$PYTHON" - "$json" "$ROUNDS" "${targets[*]}" $BENCH_JOBS <<'EOF'
import json, os, statistics, sys
jdir, rounds, targets, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]

def load(path):
    text = open(path).read()
    doc = json.loads(text[text.index("{"):])     # fio may print notes first
    iops = bw = 0.0
    lat = []
    for j in doc["jobs"]:
        for d in ("read", "write"):
            iops += j[d]["iops"]
            bw += j[d]["bw_bytes"]
            if j[d]["io_bytes"]:
                lat.append(j[d]["clat_ns"]["percentile"].get("99.000000", 0) / 1000)
    return iops, bw / 2**20, max(lat) if lat else 0

rows = []
print("%-24s %-6s %12s %10s %10s %9s   %s" %
      ("job", "target", "IOPS(med)", "MiB/s(med)", "p99 us", "vs file", "IOPS per round"))
for job in jobs:
    med = {}
    for t in targets:
        runs = [load(os.path.join(jdir, "%s.%s.%d.json" % (job, t, r)))
                for r in range(1, rounds + 1)]
        med[t] = (statistics.median(x[0] for x in runs),
                  statistics.median(x[1] for x in runs),
                  statistics.median(x[2] for x in runs),
                  [x[0] for x in runs])
    for t in targets:
        iops, mib, p99, each = med[t]
        if "file" in med and med["file"][0] > 0:
            ratio = "%.2fx" % (iops / med["file"][0])
        else:
            ratio = "-"
        print("%-24s %-6s %12.0f %10.1f %10.0f %9s   %s" %
              (job, t, iops, mib, p99, ratio, " ".join("%.0f" % x for x in each)))
    rows.append((job, med))
# Before/after: this build against zvol-b's, round by round (the rounds
# ran interleaved, so each pair saw the same machine).
if "zvol" in targets and "zvol-b" in targets:
    print()
    print("%-24s %10s %10s   %s" % ("job", "zvol/zvol-b", "p99 ratio", "IOPS ratio per round"))
    for job, med in rows:
        a, b = med["zvol"], med["zvol-b"]
        per = [x / y if y else 0 for x, y in zip(a[3], b[3])]
        print("%-24s %10s %10s   %s" %
              (job, "%.2fx" % statistics.median(per),
               "%.2fx" % (a[2] / b[2]) if b[2] else "-",
               " ".join("%.2f" % x for x in per)))
EOF
    } | tee "$results"
    echo "run-bench: table written to $results; raw fio JSON in $json"
}

# ====================================================================
# sync suite
# ====================================================================

# zil_snapshot T OUT: wait for the plugin's kstat thread to rewrite T's
# stats file (it does every second, by rename, so a copy is never torn),
# then copy it to OUT.  Waiting makes the copy include everything up to
# the moment of the call.
zil_snapshot ()
{
    local f m0 i
    f=$(kstat_of "$1")/stats
    if [ ! -f "$f" ]; then
        : >"$2"
        return 0
    fi
    m0=$(stat -c %.9Y "$f")
    for (( i = 0; i < 30; i++ )); do
        sleep 0.1
        [ "$(stat -c %.9Y "$f" 2>/dev/null)" != "$m0" ] && break
    done
    cp "$f" "$2"
}

# zil_report T BEFORE AFTER: one line of intent-log counters for one run
# (ramp included), from two snapshots of T's stats file.  The per-run
# commit mean is derived from the cumulative mean and count (every commit
# adds one latency sample); the p99 is only available since pool start
# (a log2 histogram bucket bound).
zil_report ()
{
    if [ ! -s "$2" ] || [ ! -s "$3" ]; then
        echo "zil $1: no kstat stats (see $BENCH_DIR/$1.log)"
        return 0
    fi
    awk -v t="$1" '
        FNR == NR { b[$1] = $2; next }
        { a[$1] = $2 }
        END {
            dl = a["zil_lwbs_written"] - b["zil_lwbs_written"]
            dc = a["zil_commits"] - b["zil_commits"]
            dbytes = a["zil_lwb_bytes"] - b["zil_lwb_bytes"]
            dfb = a["zil_commit_fallbacks"] - b["zil_commit_fallbacks"]
            mean = 0
            if (dc > 0)
                mean = (a["zil_commit_latency_mean_ns"] * a["zil_commits"] - \
                        b["zil_commit_latency_mean_ns"] * b["zil_commits"]) / dc / 1000
            fmt = "zil %s: lwbs +%d (avg %.1f KiB), commits +%d, waiters/lwb %.2f, "
            fmt = fmt "commit mean %.0f us, fallbacks +%d | since start: "
            fmt = fmt "waiters/lwb %s, commit p99 <= %.0f us\n"
            avg = 0; wpl = 0
            if (dl > 0) { avg = dbytes / dl / 1024; wpl = dc / dl }
            printf fmt, t, dl, avg, dc, wpl, mean, dfb,
                   a["zil_waiters_per_lwb"], a["zil_commit_latency_p99_ns"] / 1000
        }' "$2" "$3"
}

# sync_run T JOB OUT: one run of a sync-suite job; on failure (error,
# timeout, dead server) it writes OUT.failed and returns 1 instead of
# stopping the whole benchmark, so one bad run is reported precisely and
# the other targets still get measured.
sync_run ()
{
    local t=$1 job=$2 out=$3 rc=0 n c
    if ! kill -0 "${PID[$t]}" 2>/dev/null; then
        echo "server $t (pid ${PID[$t]}) is gone" >"$out.failed"
    else
        case $job in
        fsync-j*)
            n=${job#fsync-j}
            NUMJOBS=$n JOBSIZE=$(( vol_bytes / n / 4096 * 4096 )) uri=$(uri_of "$t") \
                timeout $(( RUNTIME + RAMP + 120 )) \
                fio --output-format=json --output="$out" \
                "$here/jobs/sync-write-4k-qd1.fio" 2>"$out.stderr" || rc=$?
            ;;
        fua-c*)
            c=${job#fua-c}
            timeout $(( RUNTIME + RAMP + 120 )) \
                "$BENCH_DIR/fua-bench" -j -c "$c" -t "$RUNTIME" -r "$RAMP" \
                "$(uri_of "$t")" >"$out" 2>"$out.stderr" || rc=$?
            ;;
        esac
        [ -s "$out.stderr" ] || rm -f "$out.stderr"
        if [ "$rc" -ne 0 ]; then
            {
                if [ "$rc" -eq 124 ]; then
                    echo "status 124: timed out after $(( RUNTIME + RAMP + 120 ))s (hang?)"
                else
                    echo "status $rc"
                fi
                [ -f "$out.stderr" ] && head -n 20 "$out.stderr"
                [ -f "$out" ] && head -n 20 "$out"
                kill -0 "${PID[$t]}" 2>/dev/null || echo "server $t (pid ${PID[$t]}) died"
            } >"$out.failed"
        fi
    fi
    if [ -f "$out.failed" ]; then
        echo "run-bench:   FAILED: $job on $t:" >&2
        sed 's/^/run-bench:     /' "$out.failed" >&2
        echo "run-bench:     last lines of $BENCH_DIR/$t.log:" >&2
        tail -n 10 "$BENCH_DIR/$t.log" | sed 's/^/run-bench:     /' >&2
        return 1
    fi
}

suite_sync ()
{
    local t job r n total jobs=() failed=0 zil
    for n in $SYNC_NUMJOBS; do
        [[ $n =~ ^[1-9][0-9]*$ ]] || die "SYNC_NUMJOBS: bad value $n"
        jobs+=("fsync-j$n")
    done
    for n in $SYNC_FUA_CONNS; do
        [[ $n =~ ^[1-9][0-9]*$ ]] || die "SYNC_FUA_CONNS: bad value $n"
        jobs+=("fua-c$n")
    done
    [ ${#jobs[@]} -gt 0 ] || die "no jobs (SYNC_NUMJOBS and SYNC_FUA_CONNS are empty)"
    vol_bytes=$(numfmt --from=iec "${BENCH_SIZE^^}") || die "BENCH_SIZE $BENCH_SIZE: not a size"

    # Built here, not by make: a benchmark tool, not part of the product.
    # The libraries go after the source (the linker drops them otherwise).
    # shellcheck disable=SC2046
    cc -O2 -Wall $(pkg-config --cflags libnbd) -o "$BENCH_DIR/fua-bench" \
        "$here/fua-bench.c" $(pkg-config --libs libnbd) -pthread ||
        die "cannot build $here/fua-bench.c"

    echo "run-bench: suite sync; targets ${targets[*]}; jobs ${jobs[*]}"
    echo "run-bench: size $BENCH_SIZE, runtime ${RUNTIME}s + ramp ${RAMP}s, $ROUNDS rounds, in $BENCH_DIR"
    for t in "${targets[@]}"; do
        start_target "$t"
        if [ "$SYNC_FILL" = 1 ]; then
            echo "run-bench: $t: filling $BENCH_SIZE"
            run_fio "$t" fill "$json/fill-$t.json"
        fi
    done

    zil=$json/zil-runs.txt
    : >"$zil"
    total=$(( ${#jobs[@]} * ROUNDS * ${#targets[@]} ))
    n=0
    for (( r = 1; r <= ROUNDS; r++ )); do
        for job in "${jobs[@]}"; do
            for t in "${targets[@]}"; do
                n=$((n + 1))
                printf 'run-bench: [%d/%d] round %d %s on %s\n' "$n" "$total" "$r" "$job" "$t"
                if [ "$SETTLE" != 0 ]; then sync; sleep "$SETTLE"; fi
                [ "$t" != zvol ] || zil_snapshot "$t" "$json/$job.$t.$r.zil-before"
                sync_run "$t" "$job" "$json/$job.$t.$r.json" || failed=$((failed + 1))
                # The intent log's counters, for zvol only (zvol-txg's
                # flushes bypass the log: its counters stay at 0).
                if [ "$t" = zvol ]; then
                    zil_snapshot "$t" "$json/$job.$t.$r.zil-after"
                    zil_report "$t" "$json/$job.$t.$r.zil-before" "$json/$job.$t.$r.zil-after" |
                        sed "s/^/round $r $job: /" | tee -a "$zil" | sed 's/^/run-bench:   /'
                fi
            done
        done
    done

    # --- table ---

    {
        header_lines
        echo "# zvol: $ZVOL_PLUGIN flush=log ${ZVOL_OPTS}; zvol-txg: the same with flush=txg;" \
            "$( [ "$SYNC_LOGDEV" = 1 ] && echo "separate log devices of $SYNC_LOGDEV_SIZE;" )" \
            "file: ${FILE_OPTS:-default}; qcow2: --cache=none --aio=io_uring -e $QEMU_SHARED;" \
            "filled first: $( [ "$SYNC_FILL" = 1 ] && echo yes || echo no );" \
            "settle before each run: ${SETTLE}s"
        echo "# fsync-jN: fio randwrite 4k QD1 fsync=1, N jobs (connections), disjoint regions;" \
            "p99 = write clat p99 (without the flush), sync p99 = the flush's"
        echo "# fua-cN: fua-bench, N connections, QD1 4k writes with FUA, disjoint regions;" \
            "p99 = the FUA write's latency"
        echo "# xbest = IOPS / the better IOPS of (file, qcow2); p99/file = p99 / file's p99; medians over rounds"
        "$PYTHON" - "$json" "$ROUNDS" "${targets[*]}" "${jobs[@]}" <<'EOF'
import json, os, statistics, sys
jdir, rounds, targets, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]

def load(job, path):
    """(iops, p99 us, sync p99 us or None) of one run."""
    text = open(path).read()
    doc = json.loads(text[text.index("{"):])     # fio may print notes first
    if job.startswith("fua-"):
        return doc["iops"], doc["lat_p99_us"], None
    iops, p99, sp99 = 0.0, 0.0, None
    for j in doc["jobs"]:
        w = j["write"]
        iops += w["iops"]
        if w["io_bytes"]:
            p99 = max(p99, w["clat_ns"]["percentile"].get("99.000000", 0) / 1000)
        s = j.get("sync", {})
        if s.get("total_ios"):
            v = s["lat_ns"].get("percentile", {}).get("99.000000")
            if v is not None:
                sp99 = max(sp99 or 0, v / 1000)
    return iops, p99, sp99

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def fmt(x, f):
    return "-" if x is None else f % x

print("%-10s %-8s %9s %9s %6s %8s %10s %4s   %s" %
      ("job", "target", "IOPS", "p99 us", "xbest", "p99/file", "sync p99", "ok", "IOPS per round"))
failures = []
for job in jobs:
    res = {}
    for t in targets:
        runs = []
        for r in range(1, rounds + 1):
            p = os.path.join(jdir, "%s.%s.%d.json" % (job, t, r))
            if os.path.exists(p + ".failed"):
                failures.append("%s on %s, round %d: %s" %
                                (job, t, r, open(p + ".failed").read().strip().replace("\n", " | ")))
                continue
            try:
                runs.append(load(job, p))
            except (OSError, ValueError, KeyError) as e:
                failures.append("%s on %s, round %d: unreadable result (%s)" % (job, t, r, e))
        res[t] = runs
    m = {t: (med(x[0] for x in res[t]), med(x[1] for x in res[t]), med(x[2] for x in res[t]))
         for t in targets}
    base = [m[t][0] for t in ("file", "qcow2") if t in m and m[t][0]]
    best = max(base) if base else None
    fp99 = m["file"][1] if "file" in m else None
    for t in targets:
        iops, p99, sp99 = m[t]
        xb = iops / best if iops is not None and best else None
        xp = p99 / fp99 if p99 is not None and fp99 else None
        print("%-10s %-8s %9s %9s %6s %8s %10s %4s   %s" %
              (job, t, fmt(iops, "%.0f"), fmt(p99, "%.0f"), fmt(xb, "%.2fx"), fmt(xp, "%.2fx"),
               fmt(sp99, "%.0f"), "%d/%d" % (len(res[t]), rounds),
               " ".join("%.0f" % x[0] for x in res[t])))
if failures:
    print("\nFAILED RUNS:")
    for f in failures:
        print("  " + f)
EOF
        if [ -s "$zil" ]; then
            echo
            echo "# intent-log counters per zvol run (deltas over the run incl. ramp; 'since start' = since the pool was created)"
            cat "$zil"
        fi
    } | tee "$results"
    echo "run-bench: table written to $results; raw results in $json"
    [ "$failed" -eq 0 ] || die "$failed run(s) failed (see FAILED RUNS above)"
}

case $SUITE in
default) suite_default ;;
sync) suite_sync ;;
esac
