#!/usr/bin/env bash
# test-restart.sh: a server that nbdkit itself kills under load comes back,
# restarted as the systemd unit restarts it, with every acknowledged write.
#
# nbdkit 1.32.4 and 1.32.5 abort ("raw_send_socket: Assertion `sock >= 0'
# failed") when a client pipelines requests and hangs up without reading
# the replies (README, "Known issues").  The plugin cannot prevent that;
# the recovery is the answer: the unit restarts the server, which imports
# the pool and replays its intent log.  So:
#
#  1. the server runs with the unit's own commands (ExecStartPre, then
#     ExecStart, read from examples/systemd/nbdkit-zvol@.service, paths
#     moved into the test's directory), in the foreground so that the
#     test sees how it dies;
#  2. a writer keeps 8 FUA writes of 4-64 KiB in flight over a 32 MiB
#     region and records, per 4 KiB block, the last write issued and the
#     last one acknowledged;
#  3. once 200 writes are acknowledged, an abuser opens connections,
#     pipelines 64 reads on each and closes it without reading a reply,
#     until the server dies; if it has not died after ZVOL_ABORT_WAIT
#     seconds (20), the test sends it SIGABRT itself, and says so;
#  4. the server must have died of SIGABRT (nbdkit's assertion, or the
#     test's signal; anything else fails), with writes acknowledged
#     before;
#  5. the unit's commands run again, unchanged (nbdkit forks into the
#     background, as under systemd): the restart must serve, and every
#     block must read as its last acknowledged write or a later one of
#     the writes in flight at the death, never older, never torn;
#  6. after a clean stop and an import the same holds.
#
# The unit's Restart= is checked too, and the unit file is checked by
# "systemd-analyze verify" where that exists.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

UNIT=${ZVOL_TOP_SRCDIR:-$(dirname "$0")/../..}/examples/systemd/nbdkit-zvol@.service
ABORT_WAIT=${ZVOL_ABORT_WAIT:-20}
[ -f "$UNIT" ] || die "no unit file $UNIT"
lib=$ZV_TMP/lib
run=$ZV_TMP/run
mkdir -p "$lib" "$run"
name=t
pool=$lib/$name.img
sock=$run/$name.sock
pidfile=$run/$name.pid
uri=$(nbd_uri "$sock")

# ------------------------------------------------------------- the unit

# unit_value KEY: the values of KEY= in the unit, one per line, with
# continuation lines joined.
unit_value ()
{
    sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' "$UNIT" |
        sed -n "s/^$1=//p"
}

restart=$(unit_value Restart)
check "the unit restarts a server that dies (Restart=$restart)" \
    test "$restart" = on-failure -o "$restart" = always
if command -v systemd-analyze >/dev/null 2>&1; then
    mkdir -p "$ZV_TMP/unit"
    cp "$UNIT" "$ZV_TMP/unit/"
    ln -s "$(basename "$UNIT")" "$ZV_TMP/unit/nbdkit-zvol@$name.service"
    # --man=no: the man page need not be installed here
    if systemd-analyze verify --man=no "$ZV_TMP/unit/nbdkit-zvol@$name.service" \
           >"$ZV_TMP/verify.out" 2>&1 && [ ! -s "$ZV_TMP/verify.out" ]; then
        zv_pass "systemd-analyze verify finds nothing wrong with the unit"
    else
        zv_fail "systemd-analyze verify complains about the unit:"
        sed 's/^/    /' "$ZV_TMP/verify.out"
    fi
else
    zv_log "no systemd-analyze: the unit file is not verified"
fi

# nbdkit as the unit runs it, as a script (the command of zv_nbdkit_cmd:
# under ASan it preloads the runtime).
zv_nbdkit_cmd
{
    echo '#!/bin/sh'
    printf 'exec'
    printf ' %q' "${ZV_NBDKIT[@]}"
    printf ' "$@"\n'
} >"$ZV_TMP/nbdkit"
chmod +x "$ZV_TMP/nbdkit"

# unit_cmd LINE: the words of an Exec line of the unit, moved here: %i is
# $name, /var/lib/nbdkit-zvol and /run/nbdkit-zvol the test's
# directories, /usr/bin/nbdkit the script above, the plugin name "zvol"
# the plugin under test.  Sets CMD (array).
unit_cmd ()
{
    local w words
    read -r -a words <<<"$1"
    CMD=()
    for w in "${words[@]}"; do
        w=${w//%i/$name}
        w=${w//\/var\/lib\/nbdkit-zvol/$lib}
        w=${w//\/run\/nbdkit-zvol/$run}
        case $w in
            /usr/bin/nbdkit) w=$ZV_TMP/nbdkit ;;
            zvol) w=$ZVOL_PLUGIN ;;
        esac
        CMD+=("$w")
    done
}

mapfile -t PRE < <(unit_value ExecStartPre)
START=$(unit_value ExecStart)
[ -n "$START" ] || die "the unit has no ExecStart"

# unit_pre: run the unit's ExecStartPre commands ("-": failure ignored).
unit_pre ()
{
    local line ign
    for line in ${PRE[@]+"${PRE[@]}"}; do
        ign=
        case $line in
            -*) ign=1; line=${line#-} ;;
            [@+!]*) die "unit_pre: cannot run this prefix: $line" ;;
        esac
        unit_cmd "$line"
        if ! "${CMD[@]}" && [ -z "$ign" ]; then
            zv_fail "ExecStartPre failed: ${CMD[*]}"
            return 1
        fi
    done
}

# ------------------------------------------------------------- python

cat >"$ZV_TMP/restartlib.py" <<'EOF'
import hashlib, struct
BS = 4096
NBLK = 8192                     # a 32 MiB region
REGION_OFF = 16 << 20

def block_value(gen, blk):
    """What write number gen puts in 4 KiB block blk."""
    hdr = struct.pack("<QQ", gen, blk) + b"ZVRESTRT"
    return hdr + hashlib.shake_128(hdr).digest(BS - len(hdr))
EOF

cat >"$ZV_TMP/writer.py" <<'EOF'
# writer.py URI STATE READY MAXTIME SEED: FUA writes until the server
# goes away; STATE gets, per block, the last write issued and the last
# one acknowledged; READY appears once 200 writes are acknowledged.
import json, os, random, sys, time
import nbd
from restartlib import *

uri, state, ready, maxtime, seed = (sys.argv[1], sys.argv[2], sys.argv[3],
                                    float(sys.argv[4]), int(sys.argv[5]))
rng = random.Random(seed)
QD = 8
issued, acked = {}, {}
busy, inflight = set(), {}
gen = nack = nerr = 0
lost = None

def done(g, blocks):
    def cb(err):
        global nack, nerr
        if err.value == 0:
            nack += 1
            for b in blocks:
                acked[b] = g
        else:
            nerr += 1
        busy.difference_update(blocks)
        del inflight[g]
        return 1
    return cb

h = nbd.NBD()
h.connect_uri(uri)
t0 = time.monotonic()
try:
    while time.monotonic() - t0 < maxtime:
        while len(inflight) < QD:
            n = rng.choice([1, 1, 2, 4, 8, 16])
            for _ in range(20):
                blk = rng.randrange(0, NBLK - n + 1)
                blocks = range(blk, blk + n)
                if not busy.intersection(blocks):
                    break
            else:
                break
            gen += 1
            for b in blocks:
                issued[b] = gen
            busy.update(blocks)
            buf = nbd.Buffer.from_bytearray(
                b"".join(block_value(gen, b) for b in blocks))
            inflight[gen] = buf
            h.aio_pwrite(buf, REGION_OFF + blk * BS,
                         completion=done(gen, list(blocks)),
                         flags=nbd.CMD_FLAG_FUA)
        h.poll(1000)
        if nack >= 200 and not os.path.exists(ready):
            open(ready, "w").close()
except nbd.Error as e:
    lost = e.string
with open(state, "w") as f:
    json.dump({"issued": issued, "acked": acked, "nack": nack,
               "nerr": nerr, "lost": lost}, f)
print("writer: %d writes issued, %d acknowledged, %d failed; %s" %
      (gen, nack, nerr, "connection lost: %s" % lost if lost else "time is up"))
EOF

cat >"$ZV_TMP/abuser.py" <<'EOF'
# abuser.py URI SECONDS: connections that pipeline 64 reads and hang up
# without reading a reply, until the server is gone or time is up.
import sys, time
import nbd

uri, secs = sys.argv[1], float(sys.argv[2])
t0 = time.monotonic()
n = 0
why = "time is up"
while time.monotonic() - t0 < secs:
    try:
        h = nbd.NBD()
        h.connect_uri(uri)
        for j in range(64):
            h.aio_pread(nbd.Buffer(65536), (j * 65536) % (64 << 20))
    except nbd.Error as e:
        why = "cannot connect any more: %s" % e.string
        break
    del h                       # closes the socket, no NBD_CMD_DISC
    n += 1
print("abuser: %d connections abandoned; %s" % (n, why))
EOF

cat >"$ZV_TMP/checker.py" <<'EOF'
# checker.py URI STATE: every block holds its last acknowledged write or
# a later one issued, and nothing else.
import json, sys
from zvtest import ok, connect, finish
from restartlib import *

uri, statef = sys.argv[1], sys.argv[2]
st = json.load(open(statef))
issued = {int(k): v for k, v in st["issued"].items()}
acked = {int(k): v for k, v in st["acked"].items()}
h = connect(uri)
data = h.pread(NBLK * BS, REGION_OFF)
h.shutdown()
bad = []
newer = 0
for b in range(NBLK):
    got = data[b * BS:(b + 1) * BS]
    a = acked.get(b, 0)
    i = issued.get(b, 0)
    if got == bytes(BS):
        g = 0
    else:
        g = int.from_bytes(got[:8], "little")
        if got != block_value(g, b):
            bad.append("block %d: torn or foreign data" % b)
            continue
    if g < a or g > i:
        bad.append("block %d: holds write %d, last acknowledged %d, "
                   "last issued %d" % (b, g, a, i))
    elif g > a:
        newer += 1
ok(not bad, "every block holds its last acknowledged write or a later "
   "one (%d blocks with an acknowledged write, %d with one in flight at "
   "the death)%s" % (len(acked), newer,
                     "" if not bad else ": " + "; ".join(bad[:5])))
finish()
EOF

# ------------------------------------------------------------- the test

zv_log "create the pool $pool (256 MiB)"
start_zvol "$ZV_TMP/create.sock" device="$pool" create=true size=256M ||
    die "the pool is created"
check "clean stop after create" stop_zvol "$ZV_TMP/create.sock"

# 1. The unit's commands, in the foreground: this shell's child.
unit_pre || die "the unit's ExecStartPre"
unit_cmd "$START"
CMD=("${CMD[0]}" -f "${CMD[@]:1}")
log=$ZV_TMP/server1.log
zv_log "start: ${CMD[*]}"
"${CMD[@]}" </dev/null >"$log" 2>&1 &
pid=$!
track_pid "$pid"
tries=$((ZV_START_TIMEOUT * 10))
while [ "$tries" -gt 0 ] && _zv_alive "$pid" &&
      ! { [ -s "$pidfile" ] && [ -S "$sock" ]; }; do
    sleep 0.1; tries=$((tries - 1))
done
if ! [ -s "$pidfile" ] || ! _zv_alive "$pid"; then
    _zv_show_log "$log"
    die "the server serves with the unit's command line"
fi

# 2. The writer, then 3. the abuser.
PYTHONPATH=$ZV_TMP timeout "$ZV_CLIENT_TIMEOUT" "$NBD_PY" "$ZV_TMP/writer.py" \
    "$uri" "$ZV_TMP/state.json" "$ZV_TMP/ready" 120 "$ZVOL_TEST_SEED" \
    >"$ZV_TMP/writer.out" 2>&1 &
wpid=$!
track_pid "$wpid"
tries=300
while [ ! -e "$ZV_TMP/ready" ] && [ "$tries" -gt 0 ] && _zv_alive "$wpid"; do
    sleep 0.1; tries=$((tries - 1))
done
check "200 writes were acknowledged before the abuse" test -e "$ZV_TMP/ready"
PYTHONPATH=$ZV_TMP timeout "$ZV_CLIENT_TIMEOUT" "$NBD_PY" "$ZV_TMP/abuser.py" \
    "$uri" "$ABORT_WAIT" >"$ZV_TMP/abuser.out" 2>&1 &
apid=$!
track_pid "$apid"
killed_by_test=
if _zv_wait_exit "$pid" "$ABORT_WAIT"; then
    zv_log "the server died under the abuse"
else
    zv_log "the server is still alive after ${ABORT_WAIT}s of abuse:" \
        "the test sends it SIGABRT, as nbdkit's assertion would"
    killed_by_test=1
    kill -ABRT "$pid"
    _zv_wait_exit "$pid" 30 || :
fi
_zv_reap "$pid"
rc=$ZV_RC
wait "$apid" 2>/dev/null || :
wait "$wpid" 2>/dev/null || :
cat "$ZV_TMP/abuser.out" "$ZV_TMP/writer.out"

# 4. How it died.
check "the server died of SIGABRT (exit status $rc, 134 expected)" test "$rc" -eq 134
if [ -n "$killed_by_test" ]; then
    zv_pass "the server was killed by the test's SIGABRT (nbdkit's abort" \
        "did not reproduce within ${ABORT_WAIT}s)"
elif grep -q "raw_send_socket: Assertion \`sock >= 0' failed" "$log"; then
    zv_pass "the server died of nbdkit's own assertion: $(grep -m1 'raw_send_socket' "$log")"
else
    zv_fail "the server died, but not of nbdkit's known assertion"
    _zv_show_log "$log"
fi
nack=$("$NBD_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["nack"])' \
       "$ZV_TMP/state.json" 2>/dev/null || echo 0)
check "writes were acknowledged before the death ($nack, at least 200)" \
    test "$nack" -ge 200
check "the writer lost its connection with the server (not timed out)" \
    grep -q 'connection lost' "$ZV_TMP/writer.out"

# 5. The restart, as the unit does it (nbdkit forks into the background).
zv_log "restart: the unit's commands again"
unit_pre || :
unit_cmd "$START"
if "${CMD[@]}" </dev/null >"$ZV_TMP/server2.log" 2>&1 && [ -s "$pidfile" ]; then
    zv_pass "the unit's command line starts the server again"
    pid2=$(cat "$pidfile")
    track_pid "$pid2"
    py_checks "after the restart" "$ZV_TMP/checker.py" "$uri" "$ZV_TMP/state.json" || :
    kill -TERM "$pid2" 2>/dev/null || :
    check "the restarted server stops cleanly on SIGTERM" \
        _zv_wait_exit "$pid2" "$ZV_STOP_TIMEOUT"
else
    zv_fail "the unit's command line starts the server again"
    _zv_show_log "$ZV_TMP/server2.log"
fi

# 6. An import after the clean stop.
start_zvol "$ZV_TMP/final.sock" device="$pool" || die "import after the clean stop"
py_checks "after a clean stop and an import" "$ZV_TMP/checker.py" \
    "$(nbd_uri "$ZV_TMP/final.sock")" "$ZV_TMP/state.json" || :
check "final clean stop" stop_zvol "$ZV_TMP/final.sock"

zv_summary
