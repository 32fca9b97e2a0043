# functions.sh: helpers shared by the integration tests of nbdkit-zvol.
# Sourced (not run) by tests/integration/test-*.sh.
#
# Environment (set by "make check" through TESTS_ENVIRONMENT):
#   ZVOL_PLUGIN         absolute path of nbdkit-zvol-plugin.so
#   ZVOL_TOP_SRCDIR     top of the source tree
#   ZVOL_TOP_BUILDDIR   top of the build tree
# Optional:
#   ZVOL_PYTHON         a python3 that can "import nbd" (python3-libnbd)
#   ZVOL_KEEP_TMP=1     keep the temporary directory (for debugging);
#                       =failed: keep it only if the test fails
#   ZVOL_TEST_SEED      seed for the randomised tests (default: random)
#
# Conventions:
#   - Each test prints what it checks, one "PASS: ..." or "FAIL: ..." line
#     per check, and ends with "N passed, N failed" (zv_summary).
#   - Exit 0 = pass, 77 = skip (with the reason printed), 1 = fail.
#   - Everything lives in a temporary directory under /var/tmp, removed by
#     an EXIT trap that also kills every process the test started.
#   - nbdkit servers listen on Unix sockets only.

set -euo pipefail

ZV_TEST_NAME=$(basename "$0" .sh)
ZV_PASSED=0
ZV_FAILED=0
ZV_TMP=
ZV_PIDS=()            # every background process we started (killed at exit)
ZV_CLEANUP=()         # extra cleanup commands, run in reverse order at exit
declare -A ZV_SRV_PID # socket -> nbdkit pid
declare -A ZV_SRV_LOG # socket -> nbdkit log file
ZV_SOCK=              # socket of the last server started
ZV_PID=               # pid of the last server started
ZV_LOG=               # log of the last server started

# Timeouts (seconds).  Every wait in the tests is bounded by one of these.
ZV_START_TIMEOUT=${ZV_START_TIMEOUT:-30}
ZV_STOP_TIMEOUT=${ZV_STOP_TIMEOUT:-60}
ZV_CLIENT_TIMEOUT=${ZV_CLIENT_TIMEOUT:-300}

# ---------------------------------------------------------------- reporting

# Print a progress message.
zv_log ()
{
    echo "[$ZV_TEST_NAME] $*"
}

# Record one passed check.
zv_pass ()
{
    ZV_PASSED=$((ZV_PASSED + 1))
    echo "PASS: $*"
}

# Record one failed check.
zv_fail ()
{
    ZV_FAILED=$((ZV_FAILED + 1))
    echo "FAIL: $*"
}

# check DESC CMD...: run CMD, pass if it exits 0.
check ()
{
    local desc=$1; shift
    if "$@"; then zv_pass "$desc"; else zv_fail "$desc"; fi
}

# check_not DESC CMD...: run CMD, pass if it exits non-zero.
check_not ()
{
    local desc=$1; shift
    if "$@"; then zv_fail "$desc"; else zv_pass "$desc"; fi
}

# Print the final line and exit with the test's status.
zv_summary ()
{
    ZV_SUMMARY_DONE=1
    echo "$ZV_PASSED passed, $ZV_FAILED failed"
    if [ "$ZV_FAILED" -eq 0 ] && [ "$ZV_PASSED" -gt 0 ]; then
        exit 0
    fi
    exit 1
}

# die MESSAGE: count a failure, print the summary and stop the test (a
# step the rest of the test depends on went wrong).
die ()
{
    zv_fail "$*"
    zv_summary
}

# skip REASON: exit 77 with the reason (the suite's summary lists it).
skip ()
{
    echo "SKIP: $ZV_TEST_NAME: ${*:-no reason given (a bug in the test)}"
    exit 77
}

# ------------------------------------------------------------- requirements

# requires CMD [ARGS...]: skip unless CMD exists (and, with ARGS, unless
# "CMD ARGS" succeeds).
requires ()
{
    if ! command -v "$1" >/dev/null 2>&1; then
        skip "required command '$1' not found"
    fi
    if [ $# -gt 1 ] && ! "$@" >/dev/null 2>&1; then
        skip "required command '$*' failed"
    fi
}

# requires_root: skip unless running as root.
requires_root ()
{
    if [ "$(id -u)" -ne 0 ]; then
        skip "must be run as root"
    fi
}

# Locate the plugin.  Under "make check" ZVOL_PLUGIN is always set; a
# missing file there is a failure (the build is broken), not a skip.
requires_plugin ()
{
    requires nbdkit --version
    if [ -z "${ZVOL_PLUGIN:-}" ]; then
        local here
        here=$(cd "$(dirname "$0")" && pwd)
        ZVOL_PLUGIN=${ZVOL_TOP_BUILDDIR:-$here/../..}/plugin/.libs/nbdkit-zvol-plugin.so
        if [ ! -f "$ZVOL_PLUGIN" ]; then
            skip "ZVOL_PLUGIN is not set and $ZVOL_PLUGIN does not exist"
        fi
    fi
    if [ ! -f "$ZVOL_PLUGIN" ]; then
        echo "$ZV_TEST_NAME: plugin $ZVOL_PLUGIN does not exist" >&2
        exit 1
    fi
    export ZVOL_PLUGIN
}

# Find a python3 that has the libnbd bindings ("import nbd"); PATH may
# hold a python3 (pyenv, venv) that does not see Debian's python3-libnbd.
# Sets NBD_PY; skips when there is none.
requires_nbd_python ()
{
    local py
    for py in "${ZVOL_PYTHON:-}" python3 /usr/bin/python3; do
        [ -n "$py" ] || continue
        if "$py" -c 'import nbd' >/dev/null 2>&1; then
            NBD_PY=$py
            export NBD_PY
            return 0
        fi
    done
    skip "no python3 with the libnbd bindings (install python3-libnbd)"
}

# nbdsh ARGS...: run nbdsh with the python found above (the nbdsh script
# runs whatever "python3" comes first in PATH).
nbdsh ()
{
    "$NBD_PY" -m nbd "$@"
}

# ------------------------------------------------------ temp dir and cleanup

# Run at exit: user cleanups (reverse order), then kill what we started,
# then remove the temporary directory.
_zv_exit ()
{
    local rc=$? i pid
    set +e
    trap - EXIT INT TERM ERR
    if [ -z "${ZV_SUMMARY_DONE:-}" ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
        # set -e stopped the test outside a check: say where, count it
        zv_fail "test aborted (status $rc) at line ${ZV_ERR_LINE:-?}: ${ZV_ERR_CMD:-?}"
        echo "$ZV_PASSED passed, $ZV_FAILED failed"
    fi
    for (( i=${#ZV_CLEANUP[@]}-1; i>=0; i-- )); do
        eval "${ZV_CLEANUP[$i]}" >/dev/null 2>&1
    done
    for pid in ${ZV_PIDS[@]+"${ZV_PIDS[@]}"}; do
        if _zv_alive "$pid"; then
            disown "$pid" 2>/dev/null
            kill -KILL "$pid" 2>/dev/null
            _zv_wait_exit "$pid" 10
        fi
        wait "$pid" 2>/dev/null
    done
    if [ -n "$ZV_TMP" ] && [ -d "$ZV_TMP" ]; then
        if [ "${ZVOL_KEEP_TMP:-0}" = 1 ] ||
           { [ "${ZVOL_KEEP_TMP:-0}" = failed ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; }; then
            echo "$ZV_TEST_NAME: keeping $ZV_TMP"
        else
            rm -rf "$ZV_TMP"
        fi
    fi
    exit "$rc"
}

# on_exit CMD: run CMD (a string, eval'ed) when the test exits.
on_exit ()
{
    ZV_CLEANUP+=("$1")
}

# Create the temporary directory ($ZV_TMP) and install the exit trap.
zv_setup ()
{
    ZV_TMP=$(mktemp -d "/var/tmp/zvol-$ZV_TEST_NAME.XXXXXX")
    # Every server of the test, and its zvoladm, put and find control
    # sockets and kstat files here, not in /run/nbdkit-zvol: tests that
    # run side by side serve pools of the same names ("tank"), and a
    # command of one must not reach the other's server.
    export ZVOL_RUNTIME_DIR=$ZV_TMP/run
    mkdir -p -m 0700 "$ZVOL_RUNTIME_DIR"
    trap _zv_exit EXIT
    trap 'ZV_ERR_LINE=$LINENO; ZV_ERR_CMD=$BASH_COMMAND' ERR
    trap 'exit 130' INT
    trap 'exit 143' TERM
    zv_write_pyhelpers
    if [ -z "${ZVOL_TEST_SEED:-}" ]; then
        ZVOL_TEST_SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    fi
    export ZVOL_TEST_SEED
    zv_log "temporary directory $ZV_TMP, seed $ZVOL_TEST_SEED"
}

# track_pid PID: kill PID at exit if still running.
track_pid ()
{
    ZV_PIDS+=("$1")
}

# ------------------------------------------------------------ nbdkit control

# nbd_uri SOCK: the NBD URI of a server on Unix socket SOCK.
nbd_uri ()
{
    echo "nbd+unix:///?socket=$1"
}

# _zv_alive PID: true while any thread of PID runs.  A killed
# multi-threaded process shows its main thread as a zombie while other
# threads are still exiting (say, waiting for I/O) and still hold its
# files and locks; it has exited only when every thread has.
_zv_alive ()
{
    local t st
    [ -d "/proc/$1/task" ] || return 1
    for t in /proc/"$1"/task/*/stat; do
        st=
        { read -r st <"$t"; } 2>/dev/null || continue
        st=${st##*) }      # "pid (comm) S ...": the state follows the comm
        st=${st%% *}
        if [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; then
            return 0
        fi
    done
    return 1
}

# _zv_reap PID: collect the exit status of our child PID (which has
# exited) and forget the pid (so it is never killed after reuse).  Sets
# ZV_RC.  (Not to be called in a subshell: the caller must reap.)
_zv_reap ()
{
    local p keep=()
    ZV_RC=0
    wait "$1" 2>/dev/null || ZV_RC=$?
    for p in ${ZV_PIDS[@]+"${ZV_PIDS[@]}"}; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    ZV_PIDS=(${keep[@]+"${keep[@]}"})
}

# _zv_kill_reap PID: SIGKILL our child PID, wait up to 10 s for it to go,
# and reap it (sets ZV_RC).
_zv_kill_reap ()
{
    kill -KILL "$1" 2>/dev/null || :
    _zv_wait_exit "$1" 10 || :
    _zv_reap "$1"
}

# _zv_wait_exit PID SECONDS: wait until PID has exited; true if it did.
_zv_wait_exit ()
{
    local pid=$1 tries=$(( $2 * 10 ))
    while [ "$tries" -gt 0 ]; do
        _zv_alive "$pid" || return 0
        sleep 0.1
        tries=$((tries - 1))
    done
    ! _zv_alive "$pid"
}

# Print the tail of a server log, indented.
_zv_show_log ()
{
    echo "---- nbdkit log $1 (last 40 lines) ----"
    tail -n 40 "$1" 2>/dev/null | sed 's/^/    /'
    echo "----"
}

# zv_nbdkit_cmd: set ZV_NBDKIT to the command that runs nbdkit.  When the
# plugin was built with --enable-sanitizers (ZVOL_SANITIZERS=asan),
# nbdkit itself is not instrumented, so the ASan runtime (and the exit
# shim, see asan-exit-shim.c) is preloaded into it, and only into it: not
# into --run children.  Leak checking is off: nbdkit and its libraries
# leak by design at exit; the unit tests check ours.  The command starts
# with env, which execs nbdkit: "$!" of a backgrounded "${ZV_NBDKIT[@]}"
# is nbdkit's own pid.
zv_nbdkit_cmd ()
{
    ZV_NBDKIT=(nbdkit)
    if [ "${ZVOL_SANITIZERS:-}" = asan ]; then
        local shim="${ZV_TMP:-/tmp}/asan-exit-shim.so"
        if [ ! -f "$shim" ]; then
            gcc -shared -fPIC -o "$shim" \
                "${ZVOL_TOP_SRCDIR:-$(dirname "${BASH_SOURCE[0]}")/../..}/tests/integration/asan-exit-shim.c" ||
                die "cannot build the ASan exit shim"
        fi
        # libstdc++ too, and early: ASan resolves the real __cxa_throw
        # when it starts, and librados (C++, which throws and catches
        # inside) comes in only with the plugin; without it ASan's
        # interceptor finds no real function and aborts the server.
        ZV_NBDKIT=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so.6) $shim"
                   "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
                   "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
                   nbdkit)
    fi
}

# start_zvol SOCK ARGS...: start nbdkit with the zvol plugin in the
# background on Unix socket SOCK with plugin arguments ARGS; wait up to
# $ZV_START_TIMEOUT seconds for the pidfile and socket.  Returns 1 (and
# prints the log) if nbdkit died or did not come up.  Sets ZV_SOCK,
# ZV_PID, ZV_LOG.  Set ZV_NBDKIT_OPTS (array) for extra nbdkit options.
start_zvol ()
{
    local sock=$1; shift
    local pidfile=$sock.pid log=$sock.log pid rc tries
    rm -f "$sock" "$pidfile"
    echo "=== $(date '+%T') nbdkit $* ===" >>"$log"
    zv_nbdkit_cmd
    "${ZV_NBDKIT[@]}" -f -U "$sock" -P "$pidfile" -t 32 ${ZV_NBDKIT_OPTS[@]+"${ZV_NBDKIT_OPTS[@]}"} \
        "$ZVOL_PLUGIN" "$@" </dev/null >>"$log" 2>&1 &
    pid=$!
    track_pid "$pid"
    ZV_SRV_PID[$sock]=$pid
    ZV_SRV_LOG[$sock]=$log
    # shellcheck disable=SC2034 # ZV_PID and ZV_LOG are for the tests
    ZV_SOCK=$sock; ZV_PID=$pid; ZV_LOG=$log
    tries=$(( ZV_START_TIMEOUT * 10 ))
    while [ "$tries" -gt 0 ]; do
        if ! _zv_alive "$pid"; then
            _zv_reap "$pid"
            echo "nbdkit exited with status $ZV_RC before serving"
            _zv_show_log "$log"
            return 1
        fi
        if [ -s "$pidfile" ] && [ -S "$sock" ]; then
            return 0
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "nbdkit did not start serving within ${ZV_START_TIMEOUT}s"
    _zv_show_log "$log"
    _zv_kill_reap "$pid"
    return 1
}

# _zv_pid_of [SOCK]: the pid of the server on SOCK (default: the last).
_zv_pid_of ()
{
    local sock=${1:-$ZV_SOCK}
    echo "${ZV_SRV_PID[$sock]:-}"
}

# stop_zvol [SOCK]: SIGTERM, wait up to $ZV_STOP_TIMEOUT s for the exit
# (a clean stop syncs the pool), then SIGKILL.  Returns 0 only if nbdkit
# exited by itself with status 0.
stop_zvol ()
{
    local sock=${1:-$ZV_SOCK} pid rc
    pid=$(_zv_pid_of "$sock")
    [ -n "$pid" ] || { echo "stop_zvol: no server on $sock"; return 1; }
    unset "ZV_SRV_PID[$sock]"
    kill -TERM "$pid" 2>/dev/null || :
    if _zv_wait_exit "$pid" "$ZV_STOP_TIMEOUT"; then
        _zv_reap "$pid"
        if [ "$ZV_RC" -ne 0 ]; then
            echo "nbdkit on $sock exited with status $ZV_RC after SIGTERM"
            _zv_show_log "${ZV_SRV_LOG[$sock]}"
            return 1
        fi
        return 0
    fi
    echo "nbdkit on $sock did not exit within ${ZV_STOP_TIMEOUT}s of SIGTERM; SIGKILL"
    _zv_show_log "${ZV_SRV_LOG[$sock]}"
    _zv_kill_reap "$pid"
    return 1
}

# kill9_zvol [SOCK]: SIGKILL the server (simulated crash) and reap it.
kill9_zvol ()
{
    local sock=${1:-$ZV_SOCK} pid
    pid=$(_zv_pid_of "$sock")
    [ -n "$pid" ] || { echo "kill9_zvol: no server on $sock"; return 1; }
    unset "ZV_SRV_PID[$sock]"
    # disown: no "Killed" job message; bash still reaps it
    disown "$pid" 2>/dev/null || :
    kill -KILL "$pid" 2>/dev/null || :
    if ! _zv_wait_exit "$pid" 30; then
        echo "nbdkit $pid survived SIGKILL for 30s"
        return 1
    fi
    _zv_reap "$pid"
    return 0
}

# zvol_running [SOCK]: true if the server on SOCK is still running.
zvol_running ()
{
    local pid
    pid=$(_zv_pid_of "${1:-$ZV_SOCK}")
    [ -n "$pid" ] && _zv_alive "$pid"
}

# expect_start_failure LOG ARGS...: run nbdkit with the plugin and ARGS
# on a fresh socket; true if it exits non-zero before serving (within
# $ZV_START_TIMEOUT s).  Its output goes to LOG.  If it starts serving
# instead, it is stopped and the function returns 1.
expect_start_failure ()
{
    local log=$1; shift
    local sock pidfile pid rc tries
    sock=$ZV_TMP/fail.$RANDOM.sock
    pidfile=$sock.pid
    : >"$log"
    zv_nbdkit_cmd
    "${ZV_NBDKIT[@]}" -f -U "$sock" -P "$pidfile" -t 32 "$ZVOL_PLUGIN" "$@" </dev/null >"$log" 2>&1 &
    pid=$!
    track_pid "$pid"
    tries=$(( ZV_START_TIMEOUT * 10 ))
    while [ "$tries" -gt 0 ]; do
        if ! _zv_alive "$pid"; then
            _zv_reap "$pid"
            if [ "$ZV_RC" -ne 0 ]; then
                return 0
            fi
            echo "nbdkit exited with status 0 (expected a failure)"
            return 1
        fi
        if [ -s "$pidfile" ]; then
            echo "nbdkit started serving with: $* (expected a failure)"
            kill -TERM "$pid" 2>/dev/null || :
            _zv_wait_exit "$pid" "$ZV_STOP_TIMEOUT" || kill -KILL "$pid" 2>/dev/null || :
            _zv_wait_exit "$pid" 10 || :
            _zv_reap "$pid"
            return 1
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "nbdkit neither failed nor served within ${ZV_START_TIMEOUT}s"
    _zv_kill_reap "$pid"
    return 1
}

# ------------------------------------------------------------ python checks

# py_checks DESC SCRIPT ARGS...: run a python script (with libnbd) under a
# timeout.  The script prints "PASS: ..."/"FAIL: ..." lines, which are
# counted here; a non-zero exit without any FAIL line counts as one failure.
py_checks ()
{
    local desc=$1; shift
    local out rc=0 p f
    out=$ZV_TMP/py.$RANDOM.out
    zv_log "$desc"
    PYTHONPATH=$ZV_TMP${PYTHONPATH:+:$PYTHONPATH} \
        timeout "$ZV_CLIENT_TIMEOUT" "$NBD_PY" "$@" >"$out" 2>&1 || rc=$?
    cat "$out"
    p=$(grep -c '^PASS: ' "$out" || :)
    f=$(grep -c '^FAIL: ' "$out" || :)
    ZV_PASSED=$((ZV_PASSED + p))
    ZV_FAILED=$((ZV_FAILED + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        if [ "$rc" -eq 124 ]; then
            zv_fail "$desc: timed out after ${ZV_CLIENT_TIMEOUT}s"
        else
            zv_fail "$desc: script exited with status $rc"
        fi
    fi
    rm -f "$out"
    [ "$rc" -eq 0 ] && [ "$f" -eq 0 ]
}

# Write $ZV_TMP/zvtest.py, the python side of these helpers.
zv_write_pyhelpers ()
{
    cat >"$ZV_TMP/zvtest.py" <<'EOF'
# zvtest.py: python helpers for the nbdkit-zvol integration tests.
import errno, hashlib, os, sys
import nbd

failed = 0

def ok(cond, desc):
    """Print one PASS/FAIL line; return cond."""
    global failed
    if cond:
        print("PASS: " + desc, flush=True)
    else:
        failed += 1
        print("FAIL: " + desc, flush=True)
    return bool(cond)

def connect(uri, strict=True):
    """Connect with the base:allocation context requested."""
    h = nbd.NBD()
    h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    if not strict:
        h.set_strict_mode(0)
    h.connect_uri(uri)
    return h

def pattern(tag, n):
    """n deterministic, incompressible bytes named by tag."""
    return hashlib.shake_128(str(tag).encode()).digest(n)

def expect_errno(desc, want, fn, *args, **kw):
    """Check that fn(*args) raises nbd.Error with errno in want."""
    if isinstance(want, int):
        want = (want,)
    try:
        fn(*args, **kw)
    except nbd.Error as e:
        names = "/".join(errno.errorcode.get(w, str(w)) for w in want)
        return ok(e.errnum in want,
                  "%s (got %s: %s, want %s)" %
                  (desc, errno.errorcode.get(e.errnum, e.errnum), e.string, names))
    return ok(False, desc + " (the request succeeded, want an error)")

def extents(h, off, count):
    """base:allocation extents from off as a list of (off, len, flags)."""
    out = []
    def cb(meta, offset, entries, err):
        if meta != nbd.CONTEXT_BASE_ALLOCATION:
            return 0
        o = offset
        for i in range(0, len(entries), 2):
            out.append((o, entries[i], entries[i + 1]))
            o += entries[i]
        return 0
    h.block_status(count, off, cb)
    return out

def flags_at(ext, off, length):
    """The set of extent flags that cover [off, off+length)."""
    fl = set()
    for (o, l, f) in ext:
        if o < off + length and off < o + l:
            fl.add(f)
    return fl

def covered(ext, off, length):
    """True if ext covers all of [off, off+length) contiguously."""
    pos = off
    for (o, l, f) in ext:
        if o > pos:
            return False
        if o + l > pos:
            pos = o + l
        if pos >= off + length:
            return True
    return pos >= off + length

def errname(e):
    """The errno name of an nbd.Error."""
    return errno.errorcode.get(e.errnum, str(e.errnum))

def finish():
    sys.exit(1 if failed else 0)
EOF
}

# ------------------------------------------------------------- fio verify

# fio_verify_setup RAND MIX SEQ: write $ZV_TMP/verify.fio, fio's nbd
# engine on $uri (exported) writing with crc32c verification
# (verify_fatal=1); the sizes are MiB:
#   rand4k   randwrite 4k, QD32, 4 jobs x RAND (offset_increment), verify
#            backlog 1024 while writing, then a full verify pass;
#   randmix  randwrite 4k/64k mix, QD32, MIX, after them;
#   seq128k  sequential write 128k, QD16, SEQ, after that.
# The same jobs (offsets and seeds) with verify_only=1 read and verify
# what they wrote: fio_verify write, then fio_verify PHASE after each
# restart.
fio_verify_setup ()
{
    FIO_SIZES="$1 $2 $3"
    FIO_TIMEOUT=${FIO_TIMEOUT:-1200}
    cat >"$ZV_TMP/verify.fio" <<EOF
[global]
ioengine=nbd
uri=\${uri}
verify=crc32c
verify_fatal=1
do_verify=1
randrepeat=1
end_fsync=1
verify_only=\${VERIFY_ONLY}
group_reporting=0

[rand4k]
rw=randwrite
bs=4k
iodepth=32
numjobs=4
size=${1}M
offset=0
offset_increment=${1}M
verify_backlog=1024

[randmix]
rw=randwrite
bssplit=4k/50:64k/50
iodepth=32
numjobs=1
size=${2}M
offset=$(( 4 * $1 ))M

[seq128k]
rw=write
bs=128k
iodepth=16
numjobs=1
size=${3}M
offset=$(( 4 * $1 + $2 ))M
EOF
}

# fio_verify PHASE: run the job file ("write": write and verify; any
# other phase: only verify); check every job's error field and the
# amounts written and read from the JSON output.
fio_verify ()
{
    local phase=$1
    local out=$ZV_TMP/fio-$phase.json rc=0
    zv_log "fio ($phase)"
    VERIFY_ONLY=$([ "$phase" = write ] && echo 0 || echo 1) \
        timeout "$FIO_TIMEOUT" fio --output-format=json --output="$out" \
        "$ZV_TMP/verify.fio" || rc=$?
    if [ "$rc" -eq 124 ]; then
        zv_fail "fio ($phase) finished within ${FIO_TIMEOUT}s"
    else
        check "fio ($phase) exits 0 (got $rc)" test "$rc" -eq 0
    fi
    # shellcheck disable=SC2086 # FIO_SIZES: three words
    py_checks "fio ($phase) results" /dev/stdin "$out" "$phase" $FIO_SIZES <<'EOF' || :
import json, sys
from zvtest import ok, finish
path, phase = sys.argv[1], sys.argv[2]
try:
    text = open(path).read()
    # fio may print messages before the JSON document
    doc = json.loads(text[text.index("{"):])
except Exception as e:
    ok(False, "fio %s wrote a JSON report (%s)" % (phase, e))
    finish()
sizes = dict(zip(("rand4k", "randmix", "seq128k"), (int(x) << 20 for x in sys.argv[3:6])))
seen = {}
for j in doc["jobs"]:
    name = j["jobname"]
    seen[name] = seen.get(name, 0) + 1
    w = j["write"]["io_bytes"]
    r = j["read"]["io_bytes"]
    ok(j["error"] == 0, "fio %s job %s: error=%d" % (phase, name, j["error"]))
    if phase == "write":
        ok(w >= sizes[name], "fio %s job %s wrote %d MiB" % (phase, name, w >> 20))
        print("  %s: write %.0f IOPS %.1f MiB/s" %
              (name, j["write"]["iops"], j["write"]["bw_bytes"] / 2**20))
    ok(r >= sizes[name], "fio %s job %s read back (verified) %d MiB" % (phase, name, r >> 20))
ok(seen == {"rand4k": 4, "randmix": 1, "seq128k": 1},
   "fio %s ran all jobs (%s)" % (phase, seen))
finish()
EOF
    if [ "$rc" -ne 0 ] || grep -qi 'verify.*fail\|bad magic\|crc32c.*mismatch' "$out"; then
        echo "---- fio output ($phase) ----"
        grep -v '^\s*$' "$out" | grep -iv '"' | head -n 40 || :
        grep -i 'verify\|error\|mismatch' "$out" | head -n 40 || :
    fi
}

# requires_fio_nbd: skip without fio or its nbd engine.
requires_fio_nbd ()
{
    requires fio --version
    if ! fio --enghelp=nbd >/dev/null 2>&1; then
        skip "fio has no nbd engine"
    fi
}

# ------------------------------------------------- ext4 on nbdfuse + loop

# requires_nbdfuse_ext4: skip unless this machine has what ext4 on a
# volume through nbdfuse and a loop device takes (before zv_setup).
# Sets FUSERMOUNT.
requires_nbdfuse_ext4 ()
{
    requires_root
    requires nbdfuse --version
    requires losetup --version
    requires mkfs.ext4 -V
    requires fsck.ext4 -V
    requires mount --version
    requires umount --version
    requires sha256sum --version
    if command -v fusermount3 >/dev/null 2>&1; then
        FUSERMOUNT=fusermount3
    elif command -v fusermount >/dev/null 2>&1; then
        FUSERMOUNT=fusermount
    else
        skip "neither fusermount3 nor fusermount found"
    fi
    if [ ! -c /dev/fuse ]; then
        skip "/dev/fuse is missing"
    fi
    if ! losetup -f >/dev/null 2>&1; then
        skip "'losetup -f' finds no free loop device (no loop support here?)"
    fi
}

# nbdfuse_setup: after zv_setup: $ZV_FUSEDIR (nbdfuse's mount point) and
# $ZV_MNT (the file system's), the teardown at exit, $ZV_TMP/mktree.py;
# then a probe with nbdkit's memory plugin (FUSE mounts, a loop device
# over a FUSE file).  Returns 1 with the reason in ZV_NBDFUSE_SKIP if the
# kernel or container cannot.
nbdfuse_setup ()
{
    ZV_FUSEDIR=$ZV_TMP/fuse
    ZV_MNT=$ZV_TMP/mnt
    mkdir -p "$ZV_FUSEDIR" "$ZV_MNT"
    LOOP=
    FUSE_PID=
    on_exit nbdfuse_teardown
    # The tree: deterministic pseudo-random files, nested; about MIB MiB
    # (default 50): a few large files, many small and medium ones.
    cat >"$ZV_TMP/mktree.py" <<'EOF'
import os, random, sys
root, seed, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mib = int(sys.argv[4]) if len(sys.argv) > 4 else 50
rng = random.Random(seed)
total = 0
for i in range(4):                       # large files
    n = rng.randrange(mib * (4 << 20) // 50, mib * (8 << 20) // 50)
    d = os.path.join(root, tag, "big")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d.bin" % i), "wb") as f:
        f.write(rng.randbytes(n))
    total += n
while total < (mib << 20):               # nested small and medium files
    d = os.path.join(root, tag, "d%d" % rng.randrange(20), "e%d" % rng.randrange(10))
    os.makedirs(d, exist_ok=True)
    n = rng.choice([0, 1, 100, 4095, 4096, 4097, rng.randrange(1, 300000)])
    with open(os.path.join(d, "f%d" % rng.randrange(1 << 30)), "wb") as f:
        f.write(rng.randbytes(n))
    total += n
os.symlink("big/f0.bin", os.path.join(root, tag, "link"))
print(total)
EOF
    zv_log "probe: can this machine do nbdfuse + loop?"
    if ! nbdfuse_up --command nbdkit -s --exit-with-parent memory 16M; then
        ZV_NBDFUSE_SKIP="nbdfuse cannot mount here (FUSE not permitted?); see above"
        return 1
    fi
    if ! LOOP=$(timeout 60 losetup -f --show "$ZV_FUSEDIR/nbd" 2>"$ZV_TMP/losetup.err"); then
        LOOP=
        ZV_NBDFUSE_SKIP="cannot attach a loop device to a FUSE file: $(head -n 1 "$ZV_TMP/losetup.err")"
        nbdfuse_teardown
        return 1
    fi
    nbdfuse_teardown
}

# nbdfuse_teardown: unmount, detach, unmount FUSE, in that order (also
# on failure, at exit).
nbdfuse_teardown ()
{
    if mountpoint -q "$ZV_MNT" 2>/dev/null; then
        timeout 60 umount "$ZV_MNT" || timeout 30 umount -l "$ZV_MNT" || :
    fi
    if [ -n "$LOOP" ]; then
        timeout 60 losetup -d "$LOOP" || :
        LOOP=
    fi
    if [ -n "$FUSE_PID" ]; then
        timeout 30 "$FUSERMOUNT" -u "$ZV_FUSEDIR" 2>/dev/null ||
            timeout 30 "$FUSERMOUNT" -u -z "$ZV_FUSEDIR" 2>/dev/null || :
        _zv_wait_exit "$FUSE_PID" 30 || kill -KILL "$FUSE_PID" 2>/dev/null || :
        _zv_wait_exit "$FUSE_PID" 10 || :
        _zv_reap "$FUSE_PID"
        FUSE_PID=
    fi
}

# nbdfuse_up URI-ARGS...: start nbdfuse on $ZV_FUSEDIR/nbd; wait for its
# pidfile.
nbdfuse_up ()
{
    local pidfile=$ZV_TMP/nbdfuse.pid tries=300
    rm -f "$pidfile"
    nbdfuse -P "$pidfile" "$ZV_FUSEDIR" "$@" </dev/null >>"$ZV_TMP/nbdfuse.log" 2>&1 &
    FUSE_PID=$!
    track_pid "$FUSE_PID"
    while [ "$tries" -gt 0 ]; do
        if [ -s "$pidfile" ] && [ -e "$ZV_FUSEDIR/nbd" ]; then
            return 0
        fi
        if ! _zv_alive "$FUSE_PID"; then
            _zv_reap "$FUSE_PID"
            FUSE_PID=
            echo "nbdfuse exited (status $ZV_RC):"
            tail -n 20 "$ZV_TMP/nbdfuse.log" | sed 's/^/    /'
            return 1
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "nbdfuse did not come up within 30s"
    return 1
}

# nbdfuse_attach SOCK: nbdfuse on the server at SOCK, a loop device on
# its file ($LOOP).  nbdfuse_teardown is the reverse.
nbdfuse_attach ()
{
    nbdfuse_up --unix "$1" || return 1
    LOOP=$(timeout 60 losetup -f --show "$ZV_FUSEDIR/nbd") || { LOOP=; return 1; }
    zv_log "attached $LOOP -> $ZV_FUSEDIR/nbd -> $1"
}

# ext4_sums_ok LIST: sha256sum -c of LIST over the mount.
ext4_sums_ok ()
{
    (cd "$ZV_MNT" && timeout 600 sha256sum -c --quiet "$1")
}

# ext4_sums TAG OUT: the sha256sums of the tree TAG on the mount.
ext4_sums ()
{
    (cd "$ZV_MNT" && find "$1" -type f -print0 | sort -z | xargs -0 sha256sum) >"$2"
}

# ext4_fsck_clean: fsck.ext4 -fn of $LOOP finds nothing (else prints it).
ext4_fsck_clean ()
{
    timeout 600 fsck.ext4 -fn "$LOOP" >"$ZV_TMP/fsck.log" 2>&1 || {
        cat "$ZV_TMP/fsck.log"
        return 1
    }
}

# ---------------------------------------------------------------- Ceph

# ceph_cluster_start: start a throw-away Ceph cluster in $ZV_TMP/ceph
# (tests/ceph/ceph-cluster.sh; ZV_CEPH_STORE picks its objectstore),
# stopped by PID at exit; skip when the Ceph packages are missing.  Sets
# ZV_CEPH (the script), ZV_CEPH_DIR, CEPH_CONF and ZV_CEPH_POOL.
ceph_cluster_start ()
{
    local rc=0
    ZV_CEPH=${ZVOL_TOP_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/tests/ceph/ceph-cluster.sh
    ZV_CEPH_DIR=$ZV_TMP/ceph
    "$ZV_CEPH" start "$ZV_CEPH_DIR" >"$ZV_TMP/cluster.out" 2>&1 || rc=$?
    on_exit "'$ZV_CEPH' stop '$ZV_CEPH_DIR'"
    if [ $rc -eq 77 ]; then
        skip "$(cat "$ZV_TMP/cluster.out")"
    fi
    [ $rc -eq 0 ] || { cat "$ZV_TMP/cluster.out"; die "the Ceph cluster did not start"; }
    # shellcheck disable=SC1091
    . "$ZV_CEPH_DIR/env"
    zv_log "cluster (${ZV_CEPH_STORE:-memstore}) ready in $ZV_CEPH_READY_MS ms"
}

# rc_is WANT DESC CMD...: CMD exits with status WANT (stdout in
# $ZV_TMP/adm.out, stderr in $ZV_TMP/adm.err).
rc_is ()
{
    local want=$1 desc=$2 rc=0; shift 2
    "$@" >"$ZV_TMP/adm.out" 2>"$ZV_TMP/adm.err" || rc=$?
    if [ "$rc" -eq "$want" ]; then
        zv_pass "$desc (exit $rc)"
    else
        zv_fail "$desc: exit $rc, expected $want"
        cat "$ZV_TMP/adm.out" "$ZV_TMP/adm.err"
    fi
}

# zv_admin_setup: $ADM, the built zvoladm, with a pool cache of the
# test's own and no $ZVOLADM_SOCKET from the caller's environment.
zv_admin_setup ()
{
    ADM=$ZVOL_TOP_BUILDDIR/cmd/zvoladm
    [ -x "$ADM" ] || die "$ADM is not built"
    export ZVOLADM_CACHE=$ZV_TMP/pools
    unset ZVOLADM_SOCKET
}

# zv_runtime_pool NAME: $rundir (zv_runtime_dir), and the runtime
# directory of pool NAME in it (its control socket) removed at exit.
zv_runtime_pool ()
{
    zv_runtime_dir
    on_exit "rm -rf '$rundir/$1'"
}

# zv_hold SOCK EXPORT: a client connected to EXPORT of the server on
# SOCK (one read done), until zv_release; returns once it is connected
# (at most 30 s).  $ZV_HOLD_PID is the client.  One at a time.
zv_hold ()
{
    rm -f "$ZV_TMP/held" "$ZV_TMP/release"
    cat >"$ZV_TMP/hold.py" <<'EOF'
import nbd, os, sys, time
h = nbd.NBD()
h.set_export_name(sys.argv[2])
h.connect_unix(sys.argv[1])
h.pread(4096, 0)
open(sys.argv[3], "w").close()
for _ in range(600):
    if os.path.exists(sys.argv[4]):
        break
    time.sleep(0.1)
h.shutdown()
EOF
    "$NBD_PY" "$ZV_TMP/hold.py" "$1" "$2" "$ZV_TMP/held" "$ZV_TMP/release" &
    ZV_HOLD_PID=$!
    track_pid "$ZV_HOLD_PID"
    for _ in $(seq 300); do [ -e "$ZV_TMP/held" ] && break; sleep 0.1; done
}

# zv_release: the client of zv_hold disconnects; returns once it is gone.
zv_release ()
{
    touch "$ZV_TMP/release"
    wait "$ZV_HOLD_PID" || :
}

# zv_runtime_dir: where the test's servers put their control sockets
# (and kstat files), into $rundir: the test's own ZVOL_RUNTIME_DIR.
zv_runtime_dir ()
{
    rundir=$ZVOL_RUNTIME_DIR
}
