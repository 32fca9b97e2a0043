#!/usr/bin/env bash
# run-bench.sh: fio (nbd engine) side by side against
#   zvol   nbdkit + the zvol plugin           ($BENCH_DIR/zvol.img)
#   file   nbdkit's file plugin               ($BENCH_DIR/file.img)
#   qcow2  qemu-nbd, qcow2, O_DIRECT, io_uring ($BENCH_DIR/disk.qcow2)
# all on Unix sockets, all backed by files in one directory.  Each target
# is filled once; then for each job, ROUNDS rounds of (zvol, file, qcow2)
# run interleaved, so slow drifts of the machine hit every target alike.
# Prints a table of medians and ratios to the file plugin, also written
# to $BENCH_DIR/results.txt.  See bench/README.md.
#
# Environment:
#   BENCH_DIR       working directory (default /var/tmp/zvol-bench)
#   BENCH_SIZE      size of each volume (default 2G)
#   RUNTIME, RAMP   seconds per job run and ramp (default 10 and 2)
#   ROUNDS          rounds per job (default 3)
#   BENCH_TARGETS   subset and order of "zvol file qcow2"
#   BENCH_JOBS      subset of job names (files in bench/jobs, no .fio)
#   ZVOL_PLUGIN     the plugin .so (default: ../plugin/.libs/ from here)
#   ZVOL_OPTS       extra zvol plugin parameters (e.g. "volblocksize=4K")
#   FILE_OPTS       extra file plugin parameters (e.g. "cache=none")
#   NBDKIT_THREADS  nbdkit -t (default 32)
#   BENCH_KEEP=1    keep the backing files afterwards

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BENCH_DIR=${BENCH_DIR:-/var/tmp/zvol-bench}
BENCH_SIZE=${BENCH_SIZE:-2G}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-3}
BENCH_TARGETS=${BENCH_TARGETS:-zvol file qcow2}
BENCH_JOBS=${BENCH_JOBS:-seq-write-128k rand-write-4k-qd32 rand-write-4k-qd1-fsync rand-read-4k-qd32}
ZVOL_PLUGIN=${ZVOL_PLUGIN:-$here/../plugin/.libs/nbdkit-zvol-plugin.so}
ZVOL_OPTS=${ZVOL_OPTS:-}
FILE_OPTS=${FILE_OPTS:-}
NBDKIT_THREADS=${NBDKIT_THREADS:-32}
PYTHON=${PYTHON:-python3}
export RUNTIME RAMP

die () { echo "run-bench: $*" >&2; exit 1; }

command -v fio >/dev/null || die "fio not found"
fio --enghelp=nbd >/dev/null 2>&1 || die "fio has no nbd engine"
command -v nbdkit >/dev/null || die "nbdkit not found"
"$PYTHON" -c 'import json, statistics' || die "$PYTHON cannot run"
for j in $BENCH_JOBS fill; do
    [ -f "$here/jobs/$j.fio" ] || die "no job file $here/jobs/$j.fio"
done

targets=()
for t in $BENCH_TARGETS; do
    case $t in
    zvol)
        [ -f "$ZVOL_PLUGIN" ] || die "zvol plugin $ZVOL_PLUGIN not found (build it, or set ZVOL_PLUGIN)"
        ;;
    file) ;;
    qcow2)
        if ! command -v qemu-nbd >/dev/null || ! command -v qemu-img >/dev/null; then
            echo "run-bench: qemu-nbd/qemu-img not found: skipping the qcow2 target" >&2
            continue
        fi
        ;;
    *) die "unknown target $t (zvol, file, qcow2)" ;;
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

declare -A PID
cleanup ()
{
    local t
    set +e
    for t in "${!PID[@]}"; do
        kill -TERM "${PID[$t]}" 2>/dev/null
    done
    for t in "${!PID[@]}"; do
        timeout 60 tail --pid="${PID[$t]}" -f /dev/null 2>/dev/null ||
            kill -KILL "${PID[$t]}" 2>/dev/null
    done
    for t in zvol file qcow2; do
        rm -f "$(sock_of "$t")" "$BENCH_DIR/$t.pid"
    done
    if [ "${BENCH_KEEP:-0}" != 1 ]; then
        rm -f "$BENCH_DIR/zvol.img" "$BENCH_DIR/file.img" "$BENCH_DIR/disk.qcow2"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sock_of () { echo "$BENCH_DIR/$1.sock"; }
uri_of () { echo "nbd+unix:///?socket=$(sock_of "$1")"; }

# start_target T: create the backing file, start the server as a daemon
# (so it is not our child, and tail --pid can wait for it), wait up to
# 60 s for its pidfile and socket.
start_target ()
{
    local t=$1 sock log pidfile i
    sock=$(sock_of "$t"); log=$BENCH_DIR/$t.log; pidfile=$BENCH_DIR/$t.pid
    rm -f "$sock" "$pidfile"
    : >"$log"
    case $t in
    zvol)
        rm -f "$BENCH_DIR/zvol.img"
        # shellcheck disable=SC2086
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" "$ZVOL_PLUGIN" \
            device="$BENCH_DIR/zvol.img" create=true size="$BENCH_SIZE" $ZVOL_OPTS \
            >>"$log" 2>&1 </dev/null
        ;;
    file)
        rm -f "$BENCH_DIR/file.img"
        truncate -s "$BENCH_SIZE" "$BENCH_DIR/file.img"
        # shellcheck disable=SC2086
        nbdkit -U "$sock" -P "$pidfile" -t "$NBDKIT_THREADS" file \
            file="$BENCH_DIR/file.img" $FILE_OPTS >>"$log" 2>&1 </dev/null
        ;;
    qcow2)
        rm -f "$BENCH_DIR/disk.qcow2"
        qemu-img create -q -f qcow2 "$BENCH_DIR/disk.qcow2" "$BENCH_SIZE" >>"$log" 2>&1
        qemu-nbd -f qcow2 --cache=none --aio=io_uring --discard=unmap \
            -e 4 -t --fork -k "$sock" --pid-file="$pidfile" "$BENCH_DIR/disk.qcow2" \
            >>"$log" 2>&1 </dev/null
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

# run_fio T JOB OUT: one fio run; fails loudly on fio errors.
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
    echo "# nbdkit-zvol benchmark $(date -u '+%Y-%m-%d %H:%M:%SZ')"
    echo "# host: $(uname -srm), $(nproc) CPUs; $(fio --version); $(nbdkit --version | head -n 1)"
    if command -v qemu-nbd >/dev/null; then
        echo "# $(qemu-nbd --version | head -n 1)"
    fi
    echo "# dir $BENCH_DIR ($(df -PT "$BENCH_DIR" | awk 'NR==2 {print $2}')), size $BENCH_SIZE," \
        "runtime ${RUNTIME}s, ramp ${RAMP}s, $ROUNDS rounds, nbdkit -t $NBDKIT_THREADS"
    echo "# zvol: $ZVOL_PLUGIN ${ZVOL_OPTS}; file: ${FILE_OPTS:-default}; qcow2: --cache=none --aio=io_uring -e 4"
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
EOF
} | tee "$results"
echo "run-bench: table written to $results; raw fio JSON in $json"
