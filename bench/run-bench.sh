#!/usr/bin/env bash
# run-bench.sh: the benchmarks of nbdkit-zvol, measured the same way every
# time (bench/README.md says how to read them).
#
#   bench/run-bench.sh [--quick | --full] [--suite default|sync|core|rados] [-o DIR]
#
# Suites:
#   default   fio jobs (seq write 128k QD16, rand write 4k QD32, rand write
#             4k QD1 fsync=1 with 1 and with 8 jobs, rand read 4k QD32,
#             seq read 128k QD16) against
#               null      nbdkit null: nothing stored, the transport ceiling
#               memory    nbdkit memory: a RAM disk
#               file      nbdkit file (page cache, flush = fdatasync)
#               qcow2     qemu-nbd, qcow2, O_DIRECT, io_uring
#               zvol      nbdkit + the zvol plugin
#               zvol-snap zvol with SNAPSHOTS (100) snapshots taken
#                         after its fill (live, through its control
#                         socket): what snapshots cost the jobs
#               zvol-cold zvol with a buffer cache far smaller than the
#                         volume (BENCH_COLD_CACHE, 64M): reads go to
#                         the device, as for a working set past the cache
#               zvol-b    the same with another build of the plugin,
#                         $ZVOL_PLUGIN_B (a target only when that is set:
#                         before/after a change in one interleaved run)
#               raw       no NBD: fio io_uring O_DIRECT on a file in the
#                         same directory, the device ceiling
#             The NBD servers listen on Unix sockets; every backing file is
#             in $BENCH_DIR.  Each target is filled once; then every job
#             runs ROUNDS rounds, each round every target once, one after
#             the other (interleaved, so a drift of the machine hits every
#             target alike), the order rotated by one each round (the first
#             of a round runs slower).  The table (markdown), CSVs, and PNG charts of
#             the figures and of the zvol targets' txg history (sampled
#             from their kstat files during the run) go to the output
#             directory.
#   sync      durable small writes on zvol, zvol-txg (flush=txg), file,
#             qcow2: fio randwrite 4k QD1 fsync=1 with 1/4/8/16 jobs and
#             fua-bench (libnbd, FUA writes; built from bench/fua-bench.c
#             at run time); zvol's intent-log counters after each run.
#   rados     the default suite's jobs, rounds and table on a Ceph cluster
#             (a throw-away one, tests/ceph/ceph-cluster.sh, unless
#             BENCH_CEPH_CONF names one) against
#               null        nbdkit null: the transport ceiling
#               rbd         qemu-nbd with qemu's rbd driver on an rbd image
#               zvol-rados  this plugin with its device on RADOS
#             and a zvol-rados/rbd table of ratios.  On one machine the
#             figures say that it works, not how fast a cluster is.
#   core      bench/core-bench (built by make): the engine without nbdkit;
#             instructions and CPU time per 4 KiB and 128 KiB write, per
#             read, per txg sync, per log commit; with CORE_BENCH_B, a
#             second build's side by side.
#
# Modes: --full (the default) and --quick (smaller volumes, shorter runs:
# the default suite in under 10 minutes on 2 CPUs).  A variable set in the
# environment wins over both.
#
# Environment (defaults: full / quick):
#   BENCH_SUITE     suite if --suite is not given (default "default")
#   BENCH_MODE      full or quick, if neither option is given
#   BENCH_OUT       output directory if -o is not given (default
#                   bench/out/YYYYmmdd-HHMMSS-SUITE)
#   BENCH_DIR       backing files, sockets, kstat files (default
#                   /var/tmp/zvol-bench); keep it off tmpfs (O_DIRECT)
#   BENCH_SIZE      size of each volume (1G / 256M)
#   RUNTIME, RAMP   seconds per run and of ramp (10, 2 / 2, 1)
#   ROUNDS          rounds per job (3 / 3)
#   SETTLE          seconds of quiet (after a host sync) before each run
#                   (default suite 0; sync suite 6 / 2)
#   BENCH_TARGETS   subset and order of the suite's targets
#   BENCH_JOBS      default suite: subset of job names (files in bench/jobs)
#   SYNC_NUMJOBS    sync suite: fio numjobs values ("1 4 8 16" / "1 8")
#   SYNC_FUA_CONNS  sync suite: fua-bench connections ("1 16" / "1 8")
#   SYNC_FILL       sync suite: 0 skips filling the volumes (default 1)
#   SYNC_LOGDEV=1   sync suite: give each zvol target a separate log
#                   device, $BENCH_DIR/T.slog of SYNC_LOGDEV_SIZE (256M)
#   ZVOL_PLUGIN     the plugin .so (default: build/plugin/.libs/ or
#                   plugin/.libs/ of this tree, the first that exists)
#   ZVOL_PLUGIN_B   the plugin .so of the zvol-b target
#   SNAPSHOTS       zvol-snap: how many snapshots (default 100); ZVOLADM the tool
#   BENCH_COLD_CACHE  zvol-cold's cache_size (default 64M; under BENCH_SIZE)
#   SNAP_POOL_SIZE  the pool of zvol-snap (and of zvol, zvol-b beside it),
#                   a sparse file: default 16 x BENCH_SIZE
#   ZVOL_POOL_SIZE  the pool of zvol and zvol-b, a sparse file of this
#                   size (default: what create=true makes, the volume
#                   + 25% + 128M + twice dirty_max)
#   ZVOL_B_POOL_SIZE  zvol-b's alone (e.g. a roomy pool against the
#                   default with one build)
#   ZVOL_OPTS       extra zvol plugin parameters (e.g. "volblocksize=4K")
#   ZVOL_B_OPTS     zvol-b's own, after ZVOL_OPTS (with ZVOL_PLUGIN_B the
#                   same build: a tunable's before and after in one run;
#                   "compression=off" against zvol's default lz4;
#                   "preallocate=true": a pool file written whole first)
#   ZVOL_A_OPTS     zvol's own, after ZVOL_OPTS (a tunable's two values,
#                   one in ZVOL_A_OPTS and one in ZVOL_B_OPTS: a
#                   parameter may be given only once)
#   BENCH_DATA      what fio writes: "fio" (the default: fio's own, random
#                   buffers it reuses), "random" (refill_buffers: new
#                   random data for every write, incompressible) or "half"
#                   (and buffer_compress_percentage=50: about 2:1);
#                   the zvol targets' compressratio after each job is in
#                   the results
#   FILE_OPTS       extra file plugin parameters (e.g. "cache=none")
#   NBDKIT_THREADS  nbdkit -t (default 32)
#   QEMU_SHARED     qemu-nbd -e (default 32; sync suite 64: enough for the
#                   most jobs, each with a probe connection)
#   CORE_BENCH      core suite: the program (default: build/bench/ or
#                   bench/ of this tree); CORE_BENCH_B: the other build's
#   CORE_ARGS       core suite: its options (-s 1G -n 16384 -k 100 -l 1000 /
#                   -s 256M -n 4096 -k 20 -l 200)
#   CORE_DIR        core suite: where its pool file goes (default BENCH_DIR;
#                   /dev/shm takes the disk out)
#   CORE_CALLGRIND  core suite: 0 never runs callgrind (default 1: once per
#                   build when the machine has no instruction counter)
#   BENCH_KEEP=1    keep the backing files afterwards
#   PYTHON          python 3 for the tables (default /usr/bin/python3)
#   BENCH_CEPH_CONF rados suite: an existing cluster's ceph.conf (default:
#                   start a throw-away cluster in $BENCH_DIR/ceph)
#   BENCH_CEPH_POOL rados suite: its pool (required with BENCH_CEPH_CONF)
#   BENCH_CEPH_USER rados suite: its client name (default admin)
#   BENCH_CEPH_STORE  rados suite, throw-away cluster: bluestore (default,
#                   on a sparse file in $BENCH_DIR/ceph) or memstore

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

usage ()
{
    echo "usage: $0 [--quick | --full] [--suite default|sync|core|rados] [-o DIR]"
    echo "  (settings: see the top of this script and bench/README.md)"
}
SUITE=${BENCH_SUITE:-default}
MODE=${BENCH_MODE:-full}
OUT=${BENCH_OUT:-}
while [ $# -gt 0 ]; do
    case $1 in
    --suite) [ $# -ge 2 ] || { usage >&2; exit 2; }; SUITE=$2; shift 2 ;;
    --suite=*) SUITE=${1#--suite=}; shift ;;
    --quick) MODE=quick; shift ;;
    --full) MODE=full; shift ;;
    -o|--out) [ $# -ge 2 ] || { usage >&2; exit 2; }; OUT=$2; shift 2 ;;
    --out=*) OUT=${1#--out=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
case $MODE in
full|quick) ;;
*) echo "run-bench: unknown mode $MODE (full, quick)" >&2; exit 2 ;;
esac

# first_file A B...: the first of the paths that exists (else A).
first_file ()
{
    local f
    for f in "$@"; do
        if [ -e "$f" ]; then echo "$f"; return; fi
    done
    echo "$1"
}

def_b=
[ -z "${ZVOL_PLUGIN_B:-}" ] || def_b=zvol-b
case $SUITE:$MODE in
default:full|rados:full)
    def_size=1G; def_runtime=10; def_ramp=2; def_rounds=3; def_settle=0 ;;
default:quick|rados:quick)
    def_size=256M; def_runtime=2; def_ramp=1; def_rounds=3; def_settle=0 ;;
sync:full)
    def_size=1G; def_runtime=10; def_ramp=2; def_rounds=3; def_settle=6 ;;
sync:quick)
    def_size=256M; def_runtime=3; def_ramp=1; def_rounds=2; def_settle=2 ;;
core:*)
    def_size=-; def_runtime=-; def_ramp=-; def_rounds=3; def_settle=0 ;;
*) echo "run-bench: unknown suite $SUITE (default, sync, core, rados)" >&2; exit 2 ;;
esac
case $SUITE in
default) def_targets="null memory file qcow2 zvol $def_b raw"; def_shared=32 ;;
sync) def_targets="zvol zvol-txg $def_b file qcow2"; def_shared=64 ;;
rados) def_targets="null rbd zvol-rados"; def_shared=32 ;;
core) def_targets=; def_shared=0 ;;
esac
if [ "$MODE" = quick ]; then
    def_numjobs="1 8"; def_fua="1 8"
    def_core="-s 256M -n 4096 -k 20 -l 200"
else
    def_numjobs="1 4 8 16"; def_fua="1 16"
    def_core="-s 1G -n 16384 -k 100 -l 1000"
fi

BENCH_DIR=${BENCH_DIR:-/var/tmp/zvol-bench}
BENCH_SIZE=${BENCH_SIZE:-$def_size}
RUNTIME=${RUNTIME:-$def_runtime}
RAMP=${RAMP:-$def_ramp}
ROUNDS=${ROUNDS:-$def_rounds}
SETTLE=${SETTLE:-$def_settle}
BENCH_TARGETS=${BENCH_TARGETS:-$def_targets}
BENCH_JOBS=${BENCH_JOBS:-seq-write-128k rand-write-4k-qd32 rand-write-4k-qd1-fsync rand-write-4k-qd1-fsync-8j rand-read-4k-qd32 seq-read-128k}
SYNC_NUMJOBS=${SYNC_NUMJOBS-$def_numjobs}
SYNC_FUA_CONNS=${SYNC_FUA_CONNS-$def_fua}
SYNC_FILL=${SYNC_FILL:-1}
SYNC_LOGDEV=${SYNC_LOGDEV:-0}
SYNC_LOGDEV_SIZE=${SYNC_LOGDEV_SIZE:-256M}
ZVOL_PLUGIN=${ZVOL_PLUGIN:-$(first_file "$top/build/plugin/.libs/nbdkit-zvol-plugin.so" \
    "$top/plugin/.libs/nbdkit-zvol-plugin.so")}
ZVOL_OPTS=${ZVOL_OPTS:-}
ZVOL_B_OPTS=${ZVOL_B_OPTS:-}
ZVOL_A_OPTS=${ZVOL_A_OPTS:-}
BENCH_DATA=${BENCH_DATA:-fio}
case $BENCH_DATA in fio|random|half) ;; *) echo "run-bench: BENCH_DATA=$BENCH_DATA: fio, random or half" >&2; exit 2 ;; esac
FILE_OPTS=${FILE_OPTS:-}
NBDKIT_THREADS=${NBDKIT_THREADS:-32}
QEMU_SHARED=${QEMU_SHARED:-$def_shared}
ZVOLADM=${ZVOLADM:-$(first_file "$top/build/cmd/zvoladm" "$top/cmd/zvoladm")}
SNAPSHOTS=${SNAPSHOTS:-100}
BENCH_COLD_CACHE=${BENCH_COLD_CACHE:-64M}
CORE_BENCH=${CORE_BENCH:-$(first_file "$top/build/bench/core-bench" "$top/bench/core-bench")}
CORE_BENCH_B=${CORE_BENCH_B:-}
CORE_ARGS=${CORE_ARGS:-$def_core}
CORE_DIR=${CORE_DIR:-$BENCH_DIR}
CORE_CALLGRIND=${CORE_CALLGRIND:-1}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ ! -x /usr/bin/python3 ] || PYTHON=/usr/bin/python3
fi
OUT=${OUT:-$here/out/$(date '+%Y%m%d-%H%M%S')-$SUITE}
export RUNTIME RAMP

# Every target this script knows, for the checks and the cleanup.
ALL_TARGETS="null memory file qcow2 zvol zvol-b zvol-snap zvol-cold zvol-txg raw rbd zvol-rados"
# The rados suite's names in the cluster: an rbd image, a RADOS device.
RBD_IMAGE=zvbench-rbd
RADOS_DEV=zvbench-zvol

die () { echo "run-bench: $*" >&2; exit 1; }

"$PYTHON" -c 'import json, statistics' || die "$PYTHON cannot run"
if [ "$SUITE" != core ]; then
    command -v fio >/dev/null || die "fio not found"
    fio --enghelp=nbd >/dev/null 2>&1 || die "fio has no nbd engine"
    command -v nbdkit >/dev/null || die "nbdkit not found"
    command -v numfmt >/dev/null || die "numfmt (coreutils) not found"
    vol_bytes=$(numfmt --from=iec "${BENCH_SIZE^^}") || die "BENCH_SIZE $BENCH_SIZE: not a size"
    [ $(( vol_bytes % (1 << 20) )) -eq 0 ] || die "BENCH_SIZE $BENCH_SIZE: not a multiple of 1M"
    command -v gnuplot >/dev/null ||
        echo "run-bench: gnuplot not found: no charts (apt-get install gnuplot-nox)" >&2
fi
case $SUITE in
default|rados)
    for j in $BENCH_JOBS fill; do
        [ -f "$here/jobs/$j.fio" ] || die "no job file $here/jobs/$j.fio"
    done
    ;;
sync)
    for j in sync-write-4k-qd1 fill; do
        [ -f "$here/jobs/$j.fio" ] || die "no job file $here/jobs/$j.fio"
    done
    command -v cc >/dev/null || die "cc not found (needed to build fua-bench)"
    pkg-config --exists libnbd || die "libnbd development files not found (pkg-config libnbd)"
    ;;
esac

targets=()
for t in $BENCH_TARGETS; do
    case $SUITE:$t in
    *:zvol|sync:zvol-txg|default:zvol-snap|default:zvol-cold)
        [ -f "$ZVOL_PLUGIN" ] || die "zvol plugin $ZVOL_PLUGIN not found (build it, or set ZVOL_PLUGIN)"
        [ "$t" != zvol-snap ] || [ -x "$ZVOLADM" ] ||
            die "target zvol-snap needs zvoladm ($ZVOLADM; make, or set ZVOLADM)"
        if [ "$t" = zvol-cold ]; then
            cold=$(numfmt --from=iec "${BENCH_COLD_CACHE^^}" 2>/dev/null) ||
                die "BENCH_COLD_CACHE=$BENCH_COLD_CACHE: not a size"
            [ "$cold" -lt "$(numfmt --from=iec "${BENCH_SIZE^^}")" ] ||
                die "zvol-cold: BENCH_COLD_CACHE ($BENCH_COLD_CACHE) must be under BENCH_SIZE ($BENCH_SIZE), or its reads hit the cache"
        fi
        ;;
    *:zvol-b)
        [ -f "${ZVOL_PLUGIN_B:-}" ] || die "target zvol-b needs ZVOL_PLUGIN_B, the other build's plugin .so"
        ;;
    *:file|*:memory|default:null|default:raw|rados:null) ;;
    rados:rbd)
        command -v qemu-nbd >/dev/null || die "qemu-nbd not found (apt-get install qemu-utils)"
        qemu-img --help 2>/dev/null | grep -qw rbd ||
            die "qemu has no rbd driver (apt-get install qemu-block-extra)"
        command -v rbd >/dev/null || die "rbd not found (apt-get install ceph-common)"
        ;;
    rados:zvol-rados)
        [ -f "$ZVOL_PLUGIN" ] || die "zvol plugin $ZVOL_PLUGIN not found (build it, or set ZVOL_PLUGIN)"
        ;;
    *:qcow2)
        if ! command -v qemu-nbd >/dev/null || ! command -v qemu-img >/dev/null; then
            echo "run-bench: qemu-nbd/qemu-img not found: skipping the qcow2 target" >&2
            continue
        fi
        ;;
    *) die "target $t is not one of suite $SUITE's" ;;
    esac
    targets+=("$t")
done
[ "$SUITE" = core ] || [ ${#targets[@]} -gt 0 ] || die "no targets"

mkdir -p "$BENCH_DIR" "$OUT"
OUT=$(cd "$OUT" && pwd)
json=$OUT/json
logs=$OUT/logs
if [ "$SUITE" != core ]; then
    rm -rf "$json"
    mkdir -p "$json" "$logs" "$OUT/jobs"
    : >"$OUT/runs.tsv"
fi
t_begin=$SECONDS

# --- servers ---

# PID[t]: the server's pid once it is up.  STARTED[t]: we launched it, so
# its pidfile (written by the server) names our process even if it came up
# too late for start_target.  SAMPLER[t]: the txg sampler of a zvol target.
declare -A PID STARTED SAMPLER
cleanup ()
{
    local t
    set +e
    for t in "${!SAMPLER[@]}"; do
        kill "${SAMPLER[$t]}" 2>/dev/null
    done
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
    [ "$SUITE" != rados ] || ceph_teardown
    if [ "${BENCH_KEEP:-0}" != 1 ]; then
        for t in $ALL_TARGETS; do
            rm -f "$BENCH_DIR/$t.img" "$BENCH_DIR/$t.slog"
            rm -rf "$(kstat_of "$t")"
        done
        rm -f "$BENCH_DIR/disk.qcow2"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 129' HUP
trap 'exit 143' TERM

# --- the rados suite's cluster ---

# ceph_setup: CEPH_CONF and CEPH_POOL of the cluster to measure on: the
# one BENCH_CEPH_CONF names, or a throw-away one (one monitor, one OSD on
# 127.0.0.1) started in $BENCH_DIR/ceph, its bluestore file big enough for
# both volumes and the fill.  Objects a run before left are removed.
CEPH_STARTED=
ceph_setup ()
{
    local cs=$top/tests/ceph/ceph-cluster.sh blk
    if [ -n "${BENCH_CEPH_CONF:-}" ]; then
        [ -n "${BENCH_CEPH_POOL:-}" ] || die "BENCH_CEPH_CONF needs BENCH_CEPH_POOL"
        CEPH_CONF=$BENCH_CEPH_CONF
        CEPH_POOL=$BENCH_CEPH_POOL
    else
        blk=$(( (3 * vol_bytes + (4 << 30)) >> 30 ))G
        echo "run-bench: starting a throw-away Ceph cluster in $BENCH_DIR/ceph" \
            "(${BENCH_CEPH_STORE:-bluestore}, $blk)"
        CEPH_STARTED=1
        ZV_CEPH_STORE=${BENCH_CEPH_STORE:-bluestore} ZV_CEPH_BLOCK_SIZE=$blk \
            "$cs" start "$BENCH_DIR/ceph" >"$logs/ceph.out" 2>&1 ||
            { cat "$logs/ceph.out" >&2; die "the Ceph cluster did not start"; }
        CEPH_CONF=$BENCH_DIR/ceph/ceph.conf
        CEPH_POOL=zvtest
        ceph -c "$CEPH_CONF" osd pool application enable "$CEPH_POOL" rbd \
            >/dev/null 2>&1 || true
    fi
    CEPH_USER=${BENCH_CEPH_USER:-admin}
    export CEPH_CONF
    ceph_objects_rm
}

# ceph_objects_rm: remove the suite's image and device from the pool.
ceph_objects_rm ()
{
    local o
    rbd -c "$CEPH_CONF" --id "$CEPH_USER" rm "$CEPH_POOL/$RBD_IMAGE" >/dev/null 2>&1 || true
    rados -c "$CEPH_CONF" --id "$CEPH_USER" -p "$CEPH_POOL" ls 2>/dev/null |
        { grep -E "^$RADOS_DEV(\.[0-9a-f]{16})?\$" || true; } | while read -r o; do
            rados -c "$CEPH_CONF" --id "$CEPH_USER" -p "$CEPH_POOL" rm "$o" || true
        done
}

# ceph_teardown: after the servers stopped: the throw-away cluster goes
# (its daemons by PID), or an existing one loses the suite's objects.
ceph_teardown ()
{
    if [ -n "$CEPH_STARTED" ]; then
        "$top/tests/ceph/ceph-cluster.sh" stop "$BENCH_DIR/ceph"
        [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$BENCH_DIR/ceph"
    elif [ -n "${CEPH_POOL:-}" ] && [ "${BENCH_KEEP:-0}" != 1 ]; then
        ceph_objects_rm
    fi
}

sock_of () { echo "$BENCH_DIR/$1.sock"; }

# take_snapshots T: SNAPSHOTS snapshots of T's volume, live through its
# control socket, after its fill: every block a job overwrites is then
# one they hold (the birth rule puts it on the dead list).
take_snapshots ()
{
    local t=$1 ctl=$BENCH_DIR/$1.ctl vol i
    vol=$("$ZVOLADM" -S "$ctl" list -H -o name) || die "$t: zvoladm list failed"
    echo "run-bench: $t: $SNAPSHOTS snapshots of $vol"
    for (( i = 1; i <= SNAPSHOTS; i++ )); do
        "$ZVOLADM" -S "$ctl" snapshot "$vol@bench$i" >>"$logs/$t.log" 2>&1 ||
            die "$t: zvoladm snapshot $vol@bench$i failed ($logs/$t.log)"
    done
}
uri_of () { echo "nbd+unix:///?socket=$(sock_of "$1")"; }
kstat_of () { echo "$BENCH_DIR/$1.kstat"; }
# round_order R: the targets in the order round R runs them, rotated by
# one each round, so that no target is always first: the first of a
# round ran about 9% slower in seq-write-128k whichever build it was
# (two builds swapped between zvol and zvol-b gave 0.92x and 0.91x).
round_order ()
{
    local n=${#targets[@]} i
    for (( i = 0; i < n; i++ )); do
        printf '%s\n' "${targets[$(( (i + $1 - 1) % n ))]}"
    done
}

is_zvol () { case $1 in zvol|zvol-b|zvol-snap|zvol-cold|zvol-txg|zvol-rados) return 0 ;; esac; return 1; }

# txg_sampler T: in the background, append T's kstat txgs table (the
# newest 100 txgs, rewritten every second) to $OUT/T.txgs.raw once a
# second, each copy after a line "@ EPOCH", for as long as the server
# lives; report.py merges the copies into one row per txg.
txg_sampler ()
{
    local t=$1 f pid=${PID[$1]}
    f=$(kstat_of "$t")/txgs
    (
        while kill -0 "$pid" 2>/dev/null; do
            if [ -f "$f" ]; then
                echo "@ $EPOCHREALTIME"
                cat "$f" 2>/dev/null || true
            fi
            sleep 1
        done
    ) >>"$OUT/$t.txgs.raw" 2>/dev/null &
    SAMPLER[$t]=$!
}

# txg_samplers_stop: one last copy (after the kstat thread's next
# rewrite), then stop the samplers.
txg_samplers_stop ()
{
    local t
    [ ${#SAMPLER[@]} -gt 0 ] || return 0
    sleep 1.2
    for t in "${!SAMPLER[@]}"; do
        kill "${SAMPLER[$t]}" 2>/dev/null || true
        wait "${SAMPLER[$t]}" 2>/dev/null || true
        { echo "@ $EPOCHREALTIME"; cat "$(kstat_of "$t")/txgs" 2>/dev/null || true; } \
            >>"$OUT/$t.txgs.raw"
        unset "SAMPLER[$t]"
    done
}

# start_target T: create the backing file, start the server as a daemon
# (so it is not our child, and tail --pid can wait for it), wait up to
# 60 s for its pidfile and socket.  The zvol targets write their kstat
# files to $BENCH_DIR/T.kstat (the txg history and the zil_* counters
# come from there); $OUT/T.start gets the time their engine started: in
# the middle of launch and pidfile, +- half of that time (the second
# field), which places the txgs' births on the run's clock.
start_target ()
{
    local t=$1 sock log pidfile i launch pre=() post=()
    sock=$(sock_of "$t"); log=$logs/$t.log; pidfile=$BENCH_DIR/$t.pid
    rm -f "$sock" "$pidfile"
    : >"$log"
    launch=$EPOCHREALTIME
    case $t in
    raw)
        # No server: fio writes the file itself (fill.fio creates it).
        rm -f "$BENCH_DIR/raw.img"
        return 0
        ;;
    zvol|zvol-txg|zvol-b|zvol-snap|zvol-cold)
        STARTED[$t]=1
        local plugin=$ZVOL_PLUGIN
        [ "$t" != zvol-b ] || plugin=$ZVOL_PLUGIN_B
        rm -f "$BENCH_DIR/$t.img" "$BENCH_DIR/$t.slog" "$OUT/$t.txgs.raw"
        rm -rf "$(kstat_of "$t")"
        if [ "$SYNC_LOGDEV" = 1 ] && [ "$SUITE" = sync ]; then
            truncate -s "$SYNC_LOGDEV_SIZE" "$BENCH_DIR/$t.slog"
            pre+=("log=$BENCH_DIR/$t.slog")
        fi
        # zvol: flush=log (the default) before ZVOL_OPTS; zvol-txg:
        # flush=txg after them, so ZVOL_OPTS cannot undo it.
        if [ "$t" = zvol-txg ]; then post+=(flush=txg); else pre+=(flush=log); fi
        # zvol-snap: a control socket, for the snapshots after its fill;
        # its volume is thin (a snapshot of a thick one needs its whole
        # reservation free again) on a pool with room for the blocks the
        # snapshots keep and for the txg pipeline (dirty data and two
        # txgs of deferred frees, some GB at the default dirty_max).
        # zvol and zvol-b get the same when zvol-snap runs beside them,
        # so that they differ by the snapshots (or the build) alone: a
        # pool with less room is slower by itself (its free space is
        # scattered, and the space kick and the throttle's space term
        # shrink its txgs).  On 4 x BENCH_SIZE + 256M, the snapshots'
        # BENCH_SIZE was half the free space, and that, not the
        # snapshots' code, made zvol-snap slower.
        local psize=
        if [ "$t" = zvol-snap ] || { { [ "$t" = zvol ] || [ "$t" = zvol-b ]; } && [[ " ${targets[*]} " == *" zvol-snap "* ]]; }; then
            psize=${SNAP_POOL_SIZE:-$(( 16 * $(numfmt --from=iec "$BENCH_SIZE") ))}
        fi
        # ZVOL_POOL_SIZE, ZVOL_B_POOL_SIZE: a pool of that size instead
        # (the pool's room changes the figures; see bench/README.md).
        [ "$t" != zvol ] && [ "$t" != zvol-b ] || psize=${ZVOL_POOL_SIZE:-$psize}
        [ "$t" != zvol-b ] || psize=${ZVOL_B_POOL_SIZE:-$psize}
        if [ -n "$psize" ]; then
            truncate -s "$psize" "$BENCH_DIR/$t.img"
            pre+=(sparse=true)
        fi
        [ "$t" != zvol-snap ] || pre+=("control=$BENCH_DIR/$t.ctl")
        # zvol-b: its own parameters too (a tunable's A/B with one build)
        # shellcheck disable=SC2206 # ZVOL_[AB]_OPTS are lists of key=value
        [ "$t" != zvol ] || post+=($ZVOL_A_OPTS)
        # shellcheck disable=SC2206
        [ "$t" != zvol-b ] || post+=($ZVOL_B_OPTS)
        # zvol-cold: a cache far smaller than the volume, after ZVOL_OPTS.
        [ "$t" != zvol-cold ] || post+=("cache_size=$BENCH_COLD_CACHE")
        # shellcheck disable=SC2086
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" "$plugin" \
            device="$BENCH_DIR/$t.img" create=true size="$BENCH_SIZE" \
            kstat="$(kstat_of "$t")" "${pre[@]}" $ZVOL_OPTS "${post[@]}" \
            >>"$log" 2>&1 </dev/null
        ;;
    file)
        STARTED[$t]=1
        rm -f "$BENCH_DIR/file.img"
        truncate -s "$BENCH_SIZE" "$BENCH_DIR/file.img"
        # shellcheck disable=SC2086
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" file \
            file="$BENCH_DIR/file.img" $FILE_OPTS >>"$log" 2>&1 </dev/null
        ;;
    memory|null)
        STARTED[$t]=1
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" "$t" \
            size="$BENCH_SIZE" >>"$log" 2>&1 </dev/null
        ;;
    rbd)
        # qemu's rbd driver on a new image; cache=writeback is librbd's
        # cache (flush = write it back), qemu's default for rbd.
        STARTED[$t]=1
        rbd -c "$CEPH_CONF" --id "$CEPH_USER" create --size "$BENCH_SIZE" \
            "$CEPH_POOL/$RBD_IMAGE" >>"$log" 2>&1 || { cat "$log" >&2; die "rbd create failed"; }
        qemu-nbd -f raw --cache=writeback --discard=unmap \
            -e "$QEMU_SHARED" -t --fork -k "$sock" --pid-file="$pidfile" \
            "rbd:$CEPH_POOL/$RBD_IMAGE:conf=$CEPH_CONF:id=$CEPH_USER" >>"$log" 2>&1 </dev/null
        ;;
    zvol-rados)
        # librados does not survive nbdkit's fork: -f, in a subshell that
        # exits at once, so the server is not our child either.
        STARTED[$t]=1
        rm -f "$OUT/$t.txgs.raw"
        rm -rf "$(kstat_of "$t")"
        # shellcheck disable=SC2086
        ( nbdkit -f -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" "$ZVOL_PLUGIN" \
            device="rados:$CEPH_POOL/$RADOS_DEV" create=true size="$BENCH_SIZE" \
            ceph_conf="$CEPH_CONF" ceph_user="$CEPH_USER" flush=log \
            kstat="$(kstat_of "$t")" $ZVOL_OPTS >>"$log" 2>&1 </dev/null & )
        ;;
    qcow2)
        STARTED[$t]=1
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
            if is_zvol "$t"; then
                awk -v a="$launch" -v b="$EPOCHREALTIME" \
                    'BEGIN { printf "%.6f %.6f\n", (a + b) / 2, (b - a) / 2 }' >"$OUT/$t.start"
                txg_sampler "$t"
            fi
            return 0
        fi
        sleep 0.1
    done
    cat "$log" >&2
    die "$t server did not start"
}

# make_job T JOB FILE [VAR=VALUE...]: FILE = the fio job of JOB for
# target T: a [global] section that says where (the NBD engine and T's
# socket, or for raw io_uring and O_DIRECT on $BENCH_DIR/raw.img), then
# bench/jobs/JOB.fio with ${RUNTIME}, ${RAMP}, ${JOBSIZE8} and the
# VARs filled in.  Kept in $OUT/jobs/, so one run can be repeated by hand
# (fio FILE).  For raw, fsync= becomes fdatasync= (the file plugin's
# flush is an fdatasync too; an fsync would add an inode write).
make_job ()
{
    local t=$1 job=$2 f=$3 kv sed_args=()
    shift 3
    for kv in "RUNTIME=$RUNTIME" "RAMP=$RAMP" "JOBSIZE8=$(( vol_bytes / 8 / 4096 * 4096 ))" "$@"; do
        sed_args+=(-e "s|\${${kv%%=*}}|${kv#*=}|g")
    done
    [ "$t" != raw ] || sed_args+=(-e 's/^fsync=/fdatasync=/')
    {
        echo "; $job on $t (bench/run-bench.sh)"
        echo "[global]"
        if [ "$t" = raw ]; then
            echo "ioengine=io_uring"
            echo "filename=$BENCH_DIR/raw.img"
            echo "direct=1"
            echo "size=$vol_bytes"
        else
            echo "ioengine=nbd"
            echo "uri=$(uri_of "$t")"
        fi
        # The data written (BENCH_DATA): new buffers for every write, so
        # that nothing compresses by repeating the last one.
        [ "$BENCH_DATA" = fio ] || echo "refill_buffers=1"
        [ "$BENCH_DATA" != half ] || echo "buffer_compress_percentage=50"
        echo
        sed "${sed_args[@]}" "$here/jobs/$job.fio"
    } >"$f"
}

# cpu_jiffies: the machine's busy and total CPU time so far (jiffies,
# all CPUs: user, nice, system, irq, softirq and steal are busy; idle
# and iowait are not), from /proc/stat's first line.
cpu_jiffies ()
{
    local _c u n s i w q sq st _rest
    read -r _c u n s i w q sq st _rest </proc/stat
    echo "$(( u + n + s + q + sq + st )) $(( u + n + s + i + w + q + sq + st ))"
}

# run_fio T JOB OUT: one fio run of bench/jobs/JOB.fio on T; fails loudly
# on fio errors.  Its start and end go to $OUT/runs.tsv (the txg charts
# shade them), with the share of the machine's CPU time that was busy
# meanwhile (fio, the server and the kernel together; the ramp and
# fio's start included) and the number of CPUs: report.py turns them
# into CPU time per I/O.
run_fio ()
{
    local t=$1 job=$2 out=$3 rc=0 jf a b0 t0 b1 t1
    jf=$OUT/jobs/$t.$job.fio
    make_job "$t" "$job" "$jf"
    a=$EPOCHREALTIME
    read -r b0 t0 < <(cpu_jiffies)
    timeout $(( RUNTIME + RAMP + 600 )) \
        fio --output-format=json --output="$out" "$jf" || rc=$?
    read -r b1 t1 < <(cpu_jiffies)
    if [ "$rc" -ne 0 ]; then
        echo "run-bench: fio $job on $t failed (status $rc):" >&2
        head -n 50 "$out" >&2
        die "fio failed"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$job" "$t" "${4:-0}" "$a" "$EPOCHREALTIME" \
        "$(awk -v b=$(( b1 - b0 )) -v t=$(( t1 - t0 )) 'BEGIN { printf "%.4f", (t > 0 ? b / t : 0) }')" \
        "$(nproc)" >>"$OUT/runs.tsv"
    growth_sample "$t" "$job" "${4:-0}"
}

# growth_sample T JOB ROUND: after a run on a zvol target, one line of
# growth.tsv: the server's resident memory peak so far (VmHWM, KiB), its
# cache limit and dirty_max, the bytes its syncs wrote so far (volume
# data, metadata) and the write throttle's counts (writers delayed, the
# time they slept, writers stopped at dirty_max), the blocks its
# compressor ran on so far (tried less those the early abort refused;
# report.py cpubound) and the metadata bytes of indirect blocks and of
# deferred-free lists among those written, from its kstat stats
# file (issue 11, "Growth"); the last sample's files stay in OUT
# (growth.stats.T).
growth_sample ()
{
    local t=$1 f hwm
    is_zvol "$t" || return 0
    f=$OUT/growth.stats.$t
    # (At most a second old: the kstat thread rewrites it every second.)
    cp "$(kstat_of "$t")/stats" "$f" 2>/dev/null || : >"$f"
    hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/${PID[$t]}/status" 2>/dev/null || :)
    awk -v job="$2" -v t="$t" -v r="$3" -v hwm="${hwm:-0}" '
        { v[$1] = $2 }
        END { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", job, t, r, hwm,
              v["cache_limit"] + 0, v["dirty_max"] + 0,
              v["written_data_bytes"] + 0, v["written_meta_bytes"] + 0,
              v["throttle_delays"] + 0, v["throttle_delay_ns"] + 0,
              v["throttle_stalls"] + 0,
              v["compress_tried"] - v["compress_aborted"],
              v["written_meta_indirect_bytes"] + 0,
              v["written_meta_defer_bytes"] + 0 }' \
        "$f" >>"$OUT/growth.tsv"
    # The volume's compression figures (its stats file, as zfs get).
    for f in "$(kstat_of "$t")"/volumes/*/stats; do
        [ -f "$f" ] || continue
        awk -v job="$2" -v t="$t" -v r="$3" '
            { v[$1] = $2 }
            END { if ("compression" in v)
                    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", job, t, r,
                           v["compression"], v["compressratio"],
                           v["logicalused"] + 0, v["written"] + 0 }' \
            "$f" >>"$OUT/compress.tsv"
    done
}

# lz4_ceiling: lz4 -1's own speed on one core, on data fio makes as the
# jobs' (BENCH_DATA), in blocks of the volume's (volblocksize in
# ZVOL_OPTS, else 16K): what compression alone takes on this machine,
# the most a compressed volume can write a second for each core it
# spends compressing, whatever the engine does.  A line for the report.
lz4_ceiling ()
{
    local f=$BENCH_DIR/lz4-sample.dat bs=16K bytes line
    local -a data=()
    if ! command -v lz4 >/dev/null; then
        echo "- lz4 alone: not measured (no lz4 command; scripts/setup.sh installs it)"
        return 0
    fi
    [[ " $ZVOL_OPTS " != *" volblocksize="* ]] ||
        bs=$(sed -n 's/.*volblocksize=\([^ ]*\).*/\1/p' <<<"$ZVOL_OPTS")
    # (the plugin takes 16k as 16K; numfmt only the latter)
    if ! bytes=$(numfmt --from=iec "${bs^^}" 2>/dev/null); then
        echo "- lz4 alone: not measured (volblocksize=$bs: not a size numfmt reads)"
        return 0
    fi
    [ "$BENCH_DATA" = fio ] || data+=(--refill_buffers=1)
    [ "$BENCH_DATA" != half ] || data+=(--buffer_compress_percentage=50)
    if ! fio --name=lz4-sample --ioengine=psync --rw=write --bs=128k \
            --size=256M --filename="$f" "${data[@]}" --output=/dev/null \
            >/dev/null 2>&1; then
        rm -f "$f"
        echo "- lz4 alone: not measured (fio could not write $f)"
        return 0
    fi
    # "1#lz4-sample.dat :  268435456 ->  201326592 (1.333),  650.1 MB/s , 3500.2 MB/s"
    line=$(lz4 -b1 -B"$bytes" -i2 "$f" 2>&1 | tr '\r' '\n' |
               grep 'MB/s' | tail -n 1)
    rm -f "$f"
    sed -n 's/.*(\([0-9.]*\)), *\([0-9.]*\) MB\/s *, *\([0-9.]*\) MB\/s.*/- lz4 alone (lz4 -b1, one core, '"$bs"' blocks, fio data: '"$BENCH_DATA"'): ratio \1, compression \2 MB\/s, decompression \3 MB\/s/p' <<<"$line" | grep . ||
        echo "- lz4 alone: not measured (lz4 -b printed no speed: $line)"
    DEV_SAVE_US=
    dev_saving "$bytes" "$(sed -n 's/.*(\([0-9.]*\)),.*/\1/p' <<<"$line")"
    cpu_bound "$(sed -n 's/.*(\([0-9.]*\)), *\([0-9.]*\) MB\/s.*/\2/p' <<<"$line")" "$bytes" \
        ${DEV_SAVE_US:+"$DEV_SAVE_US"}
}

# fio_cpu_per_write JSON: fio's own CPU time (user and system) per write
# of a run, in microseconds.
fio_cpu_per_write ()
{
    "$PYTHON" -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
n = j["write"]["total_ios"]
print("%.3f" % ((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1000 / n) if n else "")
' "$1" 2>/dev/null
}

# dev_saving BYTES RATIO: the CPU that compression saves on the way to
# the device, for one BYTES block that lz4 shrinks by RATIO (stored in
# whole sectors, as the pool stores it): fio io_uring O_DIRECT random
# writes (QD32, 2 s) of BYTES and of the stored size, alternated three
# times on a preallocated file in BENCH_DIR, fio's CPU per write each
# (the medians' difference); and the checksum of the bytes saved at the
# pool's checksum's speed (xxhsum -b, XXH128).  What the sum is set
# against is compression's own cost a block: report.py cpubound.  Sets
# DEV_SAVE_US; prints a line for the report.
dev_saving ()
{
    local bytes=$1 ratio=$2 f=$BENCH_DIR/dev-saving.img saved stored r s
    local dev b_us s_us sum_line its v figs
    local -a big=() small=()
    [ -n "$ratio" ] || return 0
    if ! command -v xxhsum >/dev/null; then
        echo "- What compression saves the device: not measured (no xxhsum command; scripts/setup.sh installs it)"
        return 0
    fi
    saved=$("$PYTHON" -c 'import sys; b = int(sys.argv[1]); r = float(sys.argv[2])
print(int(b * (1 - 1 / r) // 4096 * 4096) if r > 0 else 0)' "$bytes" "$ratio")
    if [ "$saved" -le 0 ] || [ "$saved" -ge "$bytes" ]; then
        echo "- What compression saves the device: nothing (ratio $ratio saves no whole sector of a $bytes-byte block)"
        DEV_SAVE_US=0
        return 0
    fi
    stored=$((bytes - saved))
    if ! fallocate -l 1G "$f" 2>/dev/null; then
        rm -f "$f"
        echo "- What compression saves the device: not measured (cannot preallocate $f)"
        return 0
    fi
    for r in 1 2 3; do
        for s in "$bytes" "$stored"; do
            fio --name=dev-saving --filename="$f" --size=1G --ioengine=io_uring \
                --direct=1 --rw=randwrite --bs="$s" --iodepth=32 --time_based \
                --runtime=2 --output-format=json --output="$f.json" \
                >/dev/null 2>&1 || continue
            v=$(fio_cpu_per_write "$f.json")
            [ -n "$v" ] || continue
            if [ "$s" = "$bytes" ]; then big+=("$v"); else small+=("$v"); fi
        done
    done
    rm -f "$f" "$f.json"
    sum_line=$(xxhsum -b11 -B"$saved" -i1 2>&1 | tr '\r' '\n' | grep 'it/s' | tail -n 1)
    its=$(sed -n 's/.*-> *\([0-9]*\) it\/s.*/\1/p' <<<"$sum_line")
    if [ "${#big[@]}" -lt 3 ] || [ "${#small[@]}" -lt 3 ] || [ -z "$its" ]; then
        echo "- What compression saves the device: not measured (fio runs ${#big[@]}+${#small[@]} of 6, xxhsum: ${sum_line:-nothing})"
        return 0
    fi
    # The saving (device and checksum), the device's part, and the two
    # medians it comes from.
    figs=$("$PYTHON" -c '
import statistics, sys
b, s, its = sys.argv[1:4]
big = statistics.median(float(x) for x in b.split())
small = statistics.median(float(x) for x in s.split())
dev = max(0.0, big - small)
print("%.3f %.3f %.3f %.3f" % (dev + 1e6 / float(its), dev, big, small))
' "${big[*]}" "${small[*]}" "$its") || return 0
    read -r DEV_SAVE_US dev b_us s_us <<<"$figs"
    echo "- What compression saves a $bytes-byte block stored in $stored bytes: $dev us of the device path's CPU (fio io_uring O_DIRECT random writes, CPU per write: $b_us us for $bytes bytes, $s_us us for $stored; medians of 3) and $("$PYTHON" -c "print('%.2f' % (1e6 / $its))") us of checksum (xxhsum -b, XXH128, $saved bytes)"
}

# cpu_bound MBPS BLOCK [SAVE_US]: what the processors allow a compressed volume's
# 128 KiB sequential writes at most, from this run's figures (report.py
# cpubound: the transport's CPU per request, lz4's own time for 128 KiB
# at MBPS, the device write's CPU), beside the uncompressed ceiling and
# each zvol target's rate and CPU per request.  Where the bound is below
# what a target without compression reached, compression cannot catch
# up with it on this machine, whatever the engine does.  With a target
# whose compression is off in the run, the same for 4 KiB random
# writes: its CPU per write, plus the compressions per write the engine
# counted, each of a BLOCK-byte block at MBPS; and with SAVE_US (what
# compression saves a block: dev_saving), compression's net cost a block
# and what a model predicts for it with every CPU busy.
cpu_bound ()
{
    [ -n "$1" ] || return 0
    "$PYTHON" "$here/report.py" cpubound "$OUT" "$1" "$(nproc)" "${2:-16384}" ${3:+"$3"} ||
        echo "- CPU bound of compressed 128 KiB writes: not computed (report.py failed)"
}

# compress_report: each zvol target's compressratio after each job (its
# last round), with the data the bench wrote (BENCH_DATA), and lz4's own
# speed on that data.
compress_report ()
{
    [ -s "$OUT/compress.tsv" ] || return 0
    {
        echo
        echo "## Compression (zvol targets; fio data: $BENCH_DATA)"
        echo
        echo "| target | job | compression | compressratio | logicalused MiB | written MiB |"
        echo "|---|---|---|---|---|---|"
        awk -F'\t' '
            { key = $2 "\t" $1; if (!(key in row)) order[++n] = key
              row[key] = sprintf ("| %s | %s | %s | %sx | %.0f | %.0f |", $2, $1, $4,
                                  $5, $6 / 1048576, $7 / 1048576) }
            END { for (i = 1; i <= n; i++) print row[order[i]] }' "$OUT/compress.tsv"
        echo
        lz4_ceiling
    } | tee -a "$OUT/results.md"
}

# growth_report: per zvol target and job, the metadata the syncs wrote
# per GiB of volume data during the job's runs, the write throttle's
# delays and stops during them, and the resident peak against cache +
# dirty_max.
growth_report ()
{
    [ -s "$OUT/growth.tsv" ] || return 0
    {
        echo
        echo "## Growth (zvol targets)"
        echo
        echo "| target | job | data written MiB | metadata MiB | metadata per data | of it indirect / deferred frees | throttle delays | delayed s | stops | VmHWM MiB | cache + dirty_max MiB |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|"
        awk -F'\t' '
            { key = $2 "\t" $1
              if (!(key in d0)) { d0[key] = pd[$2]; m0[key] = pm[$2]
                                  y0[key] = py[$2]; n0[key] = pn[$2]; s0[key] = ps[$2]
                                  i0[key] = pi[$2]; f0[key] = pf[$2]
                                  order[++n] = key }
              d1[key] = $7; m1[key] = $8; hwm[key] = $4; lim[key] = $5 + $6
              y1[key] = $9; n1[key] = $10; s1[key] = $11; i1[key] = $13; f1[key] = $14
              pd[$2] = $7; pm[$2] = $8; py[$2] = $9; pn[$2] = $10; ps[$2] = $11
              pi[$2] = $13; pf[$2] = $14 }
            END { for (i = 1; i <= n; i++) { k = order[i]; split(k, a, "\t")
                    dd = d1[k] - d0[k]; dm = m1[k] - m0[k]
                    di = i1[k] - i0[k]; df = f1[k] - f0[k]
                    printf "| %s | %s | %.0f | %.1f | %.2f%% | %.2f%% / %.2f%% | %d | %.2f | %d | %.0f | %.0f |\n", a[1], a[2],
                        dd / 1048576, dm / 1048576, (dd > 0 ? 100 * dm / dd : 0),
                        (dd > 0 ? 100 * di / dd : 0), (dd > 0 ? 100 * df / dd : 0),
                        y1[k] - y0[k], (n1[k] - n0[k]) / 1e9, s1[k] - s0[k],
                        hwm[k] / 1024, lim[k] / 1048576 } }' "$OUT/growth.tsv"
    } | tee -a "$OUT/results.md"
}

# header_lines: the first lines of the results (machine, versions).
header_lines ()
{
    echo "# nbdkit-zvol benchmark, suite $SUITE ($MODE), $(date -u '+%Y-%m-%d %H:%M:%SZ')"
    echo
    echo "- host: $(uname -srm), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg);" \
        "$(fio --version); $(nbdkit --version | head -n 1)"
    if command -v qemu-nbd >/dev/null; then
        echo "- $(qemu-nbd --version | head -n 1)"
    fi
    echo "- dir $BENCH_DIR ($(df -PT "$BENCH_DIR" | awk 'NR==2 {print $2}')), size $BENCH_SIZE," \
        "runtime ${RUNTIME}s, ramp ${RAMP}s, $ROUNDS rounds, settle ${SETTLE}s, nbdkit -t $NBDKIT_THREADS"
}

# ====================================================================
# default suite
# ====================================================================
suite_default ()
{
    local t job r n total nj per
    nj=$(wc -w <<<"$BENCH_JOBS")
    total=$(( nj * ROUNDS * ${#targets[@]} ))
    per=$(( RUNTIME + RAMP + SETTLE + 1 ))
    echo "run-bench: suite $SUITE ($MODE); targets ${targets[*]}; jobs $BENCH_JOBS"
    [ "$SUITE" != rados ] || ceph_setup
    echo "run-bench: size $BENCH_SIZE, runtime ${RUNTIME}s + ramp ${RAMP}s, $ROUNDS rounds;" \
        "$total runs, about $(( (total * per + 59) / 60 )) min after filling; backing files in $BENCH_DIR"
    echo "run-bench: output in $OUT"
    for t in "${targets[@]}"; do
        start_target "$t"
        # null stores nothing: filling it would only measure the protocol.
        if [ "$t" != null ]; then
            echo "run-bench: $t: filling $BENCH_SIZE"
            run_fio "$t" fill "$json/fill-$t.json" 0
        fi
        [ "$t" != zvol-snap ] || take_snapshots "$t"
    done

    n=0
    for job in $BENCH_JOBS; do
        for (( r = 1; r <= ROUNDS; r++ )); do
            for t in $(round_order "$r"); do
                n=$((n + 1))
                printf 'run-bench: [%d/%d] %s round %d on %s\n' "$n" "$total" "$job" "$r" "$t"
                if [ "$SETTLE" != 0 ]; then sync; sleep "$SETTLE"; fi
                run_fio "$t" "$job" "$json/$job.$t.$r.json" "$r"
            done
        done
    done
    txg_samplers_stop

    # --- tables and charts ---

    {
        header_lines
        if [ "$SUITE" = rados ]; then
            echo "- $(ceph --version | cut -d' ' -f1-3); cluster $CEPH_CONF, pool $CEPH_POOL" \
                "$( [ -n "$CEPH_STARTED" ] && echo "(throw-away: one monitor, one" \
                    "${BENCH_CEPH_STORE:-bluestore} OSD on 127.0.0.1, in $BENCH_DIR/ceph)")"
            echo "- zvol-rados: $ZVOL_PLUGIN device=rados:$CEPH_POOL/$RADOS_DEV flush=log" \
                "${ZVOL_OPTS}; rbd: qemu-nbd -f raw --cache=writeback rbd:$CEPH_POOL/$RBD_IMAGE;" \
                "on one machine these figures show that it works, not how fast a cluster is"
        else
            echo "- fio data: $BENCH_DATA; zvol: $ZVOL_PLUGIN ${ZVOL_OPTS} ${ZVOL_A_OPTS}" \
                "(pool: ${ZVOL_POOL_SIZE:-the default});" \
                "zvol-b: ${ZVOL_PLUGIN_B:-none} ${ZVOL_B_OPTS}" \
                "(pool: ${ZVOL_B_POOL_SIZE:-${ZVOL_POOL_SIZE:-the default}});" \
                "file: ${FILE_OPTS:-default}; qcow2: --cache=none --aio=io_uring -e $QEMU_SHARED;" \
                "raw: fio io_uring direct=1 on $BENCH_DIR/raw.img"
        fi
    } >"$OUT/header.txt"
    local rc=0
    # shellcheck disable=SC2086 # BENCH_JOBS is a list of words
    "$PYTHON" "$here/report.py" default "$OUT" "$ROUNDS" "${targets[*]}" $BENCH_JOBS || rc=$?
    growth_report
    compress_report
    echo "run-bench: $(( (SECONDS - t_begin) / 60 )) min $(( (SECONDS - t_begin) % 60 )) s;" \
        "table in $OUT/results.md, CSV in $OUT/results.csv and runs.csv, raw fio JSON in $json"
    [ "$rc" -eq 0 ] || die "some runs have no result (see above)"
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
            da = a["zil_lwbs_ahead"] - b["zil_lwbs_ahead"]
            dc = a["zil_commits"] - b["zil_commits"]
            dsl = a["zil_commit_sleeps"] - b["zil_commit_sleeps"]
            dbytes = a["zil_lwb_bytes"] - b["zil_lwb_bytes"]
            dfb = a["zil_commit_fallbacks"] - b["zil_commit_fallbacks"]
            mean = 0
            if (dc > 0)
                mean = (a["zil_commit_latency_mean_ns"] * a["zil_commits"] - \
                        b["zil_commit_latency_mean_ns"] * b["zil_commits"]) / dc / 1000
            fmt = "zil %s: lwbs +%d (ahead +%d, avg %.1f KiB), commits +%d, waiters/lwb %.2f, "
            fmt = fmt "sleeps/commit %.2f, commit mean %.0f us, fallbacks +%d | since start: "
            fmt = fmt "waiters/lwb %s, commit p99 <= %.0f us\n"
            avg = 0; wpl = 0; spc = 0
            if (dl > 0) { avg = dbytes / dl / 1024; wpl = dc / dl }
            if (dc > 0) spc = dsl / dc
            printf fmt, t, dl, da, avg, dc, wpl, spc, mean, dfb,
                   a["zil_waiters_per_lwb"], a["zil_commit_latency_p99_ns"] / 1000
        }' "$2" "$3"
}

# sync_run T JOB OUT: one run of a sync-suite job; on failure (error,
# timeout, dead server) it writes OUT.failed and returns 1 instead of
# stopping the whole benchmark, so one bad run is reported precisely and
# the other targets still get measured.
sync_run ()
{
    local t=$1 job=$2 out=$3 rc=0 n c a=$EPOCHREALTIME
    if ! kill -0 "${PID[$t]}" 2>/dev/null; then
        echo "server $t (pid ${PID[$t]}) is gone" >"$out.failed"
    else
        case $job in
        fsync-j*)
            n=${job#fsync-j}
            make_job "$t" sync-write-4k-qd1 "$OUT/jobs/$t.$job.fio" \
                NUMJOBS="$n" JOBSIZE=$(( vol_bytes / n / 4096 * 4096 ))
            timeout $(( RUNTIME + RAMP + 120 )) \
                fio --output-format=json --output="$out" \
                "$OUT/jobs/$t.$job.fio" 2>"$out.stderr" || rc=$?
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
    printf '%s\t%s\t%s\t%s\t%s\n' "$job" "$t" "${4:-0}" "$a" "$EPOCHREALTIME" >>"$OUT/runs.tsv"
    if [ -f "$out.failed" ]; then
        echo "run-bench:   FAILED: $job on $t:" >&2
        sed 's/^/run-bench:     /' "$out.failed" >&2
        echo "run-bench:     last lines of $logs/$t.log:" >&2
        tail -n 10 "$logs/$t.log" | sed 's/^/run-bench:     /' >&2
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

    # Built here, not by make: a benchmark tool, not part of the product.
    # The libraries go after the source (the linker drops them otherwise).
    # shellcheck disable=SC2046
    cc -O2 -Wall $(pkg-config --cflags libnbd) -o "$BENCH_DIR/fua-bench" \
        "$here/fua-bench.c" $(pkg-config --libs libnbd) -pthread ||
        die "cannot build $here/fua-bench.c"

    echo "run-bench: suite sync ($MODE); targets ${targets[*]}; jobs ${jobs[*]}"
    echo "run-bench: size $BENCH_SIZE, runtime ${RUNTIME}s + ramp ${RAMP}s, $ROUNDS rounds;" \
        "backing files in $BENCH_DIR; output in $OUT"
    for t in "${targets[@]}"; do
        start_target "$t"
        if [ "$SYNC_FILL" = 1 ]; then
            echo "run-bench: $t: filling $BENCH_SIZE"
            run_fio "$t" fill "$json/fill-$t.json" 0
        fi
    done

    zil=$json/zil-runs.txt
    : >"$zil"
    total=$(( ${#jobs[@]} * ROUNDS * ${#targets[@]} ))
    n=0
    for (( r = 1; r <= ROUNDS; r++ )); do
        for job in "${jobs[@]}"; do
            for t in $(round_order "$r"); do
                n=$((n + 1))
                printf 'run-bench: [%d/%d] round %d %s on %s\n' "$n" "$total" "$r" "$job" "$t"
                if [ "$SETTLE" != 0 ]; then sync; sleep "$SETTLE"; fi
                [ "$t" != zvol ] || zil_snapshot "$t" "$json/$job.$t.$r.zil-before"
                sync_run "$t" "$job" "$json/$job.$t.$r.json" "$r" || failed=$((failed + 1))
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

    txg_samplers_stop

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
    } | tee "$OUT/results.txt"
    local zt=()
    for t in "${targets[@]}"; do
        if is_zvol "$t"; then zt+=("$t"); fi
    done
    [ ${#zt[@]} -eq 0 ] || "$PYTHON" "$here/report.py" txg "$OUT" "${zt[@]}" || true
    echo "run-bench: $(( (SECONDS - t_begin) / 60 )) min $(( (SECONDS - t_begin) % 60 )) s;" \
        "table in $OUT/results.txt; raw results in $json"
    [ "$failed" -eq 0 ] || die "$failed run(s) failed (see FAILED RUNS above)"
}

# ====================================================================
# core suite
# ====================================================================

# core_run BIN OUTFILE [callgrind PREFIX]: one run of core-bench (-t).
core_run ()
{
    local bin=$1 out=$2 rc=0
    # shellcheck disable=SC2086 # CORE_ARGS is a list of options
    # --compress-strings=no: every dump names its own functions (compressed,
    # a name is written only in the first dump that uses it, and
    # callgrind_annotate of a later phase's dump showed no function at all).
    if [ "${3:-}" = callgrind ]; then
        valgrind --tool=callgrind --callgrind-out-file="$4.%p" --dump-line=no \
            --compress-strings=no \
            "$bin" -q -t -d "$CORE_DIR" $CORE_ARGS >"$out" 2>"$out.stderr" || rc=$?
    else
        "$bin" -q -t -d "$CORE_DIR" $CORE_ARGS >"$out" 2>"$out.stderr" || rc=$?
    fi
    if [ "$rc" -ne 0 ]; then
        cat "$out.stderr" >&2
        die "$bin failed (status $rc)"
    fi
    [ -s "$out.stderr" ] || rm -f "$out.stderr"
}

suite_core ()
{
    local sides=(A) r s files cg="" specs=()
    local -A bins
    bins[A]=$CORE_BENCH
    [ -x "$CORE_BENCH" ] || die "core-bench $CORE_BENCH not found (make; or set CORE_BENCH)"
    if [ -n "$CORE_BENCH_B" ]; then
        [ -x "$CORE_BENCH_B" ] || die "CORE_BENCH_B $CORE_BENCH_B: not an executable"
        sides+=(B)
        bins[B]=$CORE_BENCH_B
    fi
    mkdir -p "$CORE_DIR" "$OUT/core"
    echo "run-bench: suite core ($MODE); A = $CORE_BENCH${CORE_BENCH_B:+, B = $CORE_BENCH_B}"
    echo "run-bench: core-bench -d $CORE_DIR $CORE_ARGS, $ROUNDS rounds; output in $OUT"
    for (( r = 1; r <= ROUNDS; r++ )); do
        for s in "${sides[@]}"; do
            echo "run-bench: round $r, $s"
            core_run "${bins[$s]}" "$OUT/core/$s.$r.tsv"
        done
    done
    # No instruction counter (a VM without PMU): count them under
    # callgrind, once per build (instructions do not vary run to run).
    if grep -q '^#instr	none' "$OUT/core/A.1.tsv" && [ "$CORE_CALLGRIND" != 0 ]; then
        if command -v valgrind >/dev/null; then
            cg=yes
            for s in "${sides[@]}"; do
                echo "run-bench: $s under callgrind (instructions)"
                core_run "${bins[$s]}" "$OUT/core/$s.callgrind.tsv" callgrind "$OUT/core/$s.callgrind"
            done
        else
            echo "run-bench: no instruction counter and no valgrind: no instructions" >&2
        fi
    fi
    {
        header_lines_core
        echo
    } >"$OUT/core.md.head"
    for s in "${sides[@]}"; do
        files=$(printf '%s,' "$OUT/core/$s".[0-9]*.tsv)
        specs+=("$s=${files%,}${cg:+@$OUT/core/$s.callgrind.[0-9]*}")
    done
    cat "$OUT/core.md.head"
    "$PYTHON" "$here/report.py" core "$OUT" "${specs[@]}"
    { cat "$OUT/core.md.head" "$OUT/core.md"; } >"$OUT/core.md.new" &&
        mv "$OUT/core.md.new" "$OUT/core.md" && rm -f "$OUT/core.md.head"
    echo "run-bench: $(( (SECONDS - t_begin) / 60 )) min $(( (SECONDS - t_begin) % 60 )) s;" \
        "table in $OUT/core.md and core.csv${cg:+; callgrind profiles in $OUT/core (callgrind_annotate FILE)}"
}

header_lines_core ()
{
    echo "# nbdkit-zvol core benchmark ($MODE), $(date -u '+%Y-%m-%d %H:%M:%SZ')"
    echo
    echo "- host: $(uname -srm), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- core-bench -d $CORE_DIR ($(df -PT "$CORE_DIR" | awk 'NR==2 {print $2}'))" \
        "$CORE_ARGS; $ROUNDS rounds"
    echo "- A: $CORE_BENCH"
    [ -z "$CORE_BENCH_B" ] || echo "- B: $CORE_BENCH_B"
}

case $SUITE in
default|rados) suite_default ;;
sync) suite_sync ;;
core) suite_core ;;
esac
