#!/usr/bin/env bash
# test-abuse.sh: serving under abuse.  While one well-behaved libnbd
# client keeps writing and verifying a pattern:
#
#  1. 200 connections are opened and dropped: before the greeting is
#     read, mid-handshake (after the flags, inside an option), right
#     after NBD_OPT_GO, after a write header with part of its payload,
#     after one or several whole (pipelined) writes whose replies are
#     never read; also a burst of 64 connections held mid-handshake at
#     once, then dropped;
#  2. malformed requests, each on its own connection: reads and writes
#     longer than the advertised maximum block size (32 MiB; libnbd with
#     strict mode off, and a raw socket, also above nbdkit's own 64 MiB
#     limit), a write past the end of the volume, an unknown command, an
#     unknown flag, a bad request magic.  Each must get an error reply or
#     a disconnect of that client only, and change nothing on the volume;
#  3. the server is still alive, its RSS grew by less than 64 MiB, the
#     well-behaved client never saw an error and its data verifies; after
#     a clean stop and an import everything verifies again.
#
#  4. pipelined writes abandoned (100 connections, 8 whole writes each,
#     no reply read), separately: see below.
#
# nbdkit 1.32.5 itself aborts ("connections.c:402: raw_send_socket:
# Assertion `sock >= 0' failed") when a client pipelines requests and
# closes without reading the replies while nbdkit runs several worker
# threads per connection (-t N, N > 1): a worker sends its reply after
# the thread that read EOF has closed the socket.  Its memory plugin
# dies the same way (nbdkit -t 32 memory 256M, pipelined writes or
# reads); with -t 1 it does not.  That is nbdkit's bug, not the
# plugin's, so:
#   - pipelined READS abandoned are left out altogether;
#   - pipelined WRITES abandoned are checked with -t 1 (pass/fail: the
#     server survives and the volume verifies), and once more with -t 32
#     as a separate check that tolerates exactly that nbdkit abort (and
#     then checks that the pool imports and verifies, as after a crash).

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
size=$((256 * 1024 * 1024))
RSS_SLACK_KB=$((64 * 1024))
if [ "${ZVOL_SANITIZERS:-}" = asan ]; then
    # AddressSanitizer keeps freed memory in a quarantine (256 MiB by
    # default) instead of reusing it, which reads as growth: a small one
    # keeps the same bound meaningful (with it the abuse grows the
    # server by about 13 MiB under ASan).
    export ASAN_OPTIONS="quarantine_size_mb=16:${ASAN_OPTIONS:-}"
fi

# ---------------------------------------------------------------- python

cat >"$ZV_TMP/nbdraw.py" <<'EOF'
# nbdraw.py: just enough of the NBD fixed-newstyle protocol, on a raw
# Unix socket, to misbehave on purpose.
import socket, struct

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
OPT_REPLY_MAGIC = 0x3e889045565a9
REQ_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
OPT_GO = 7
REP_ACK = 1
REP_INFO = 3
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2
TIMEOUT = 20

class Closed(Exception):
    pass

def sock_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.connect(path)
    return s

def recvall(s, n):
    buf = bytearray()
    while len(buf) < n:
        try:
            b = s.recv(min(n - len(buf), 1 << 20))
        except (ConnectionResetError, BrokenPipeError):
            b = b""
        if not b:
            raise Closed("server closed the connection")
        buf += b
    return bytes(buf)

def sendall(s, data):
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        raise Closed("server closed the connection")

def greeting(s):
    g = recvall(s, 18)
    assert g[:8] == NBDMAGIC, g
    magic, hflags = struct.unpack(">QH", g[8:])
    assert magic == IHAVEOPT, hex(magic)
    return hflags

def send_flags(s):
    sendall(s, struct.pack(">I", 3))      # FIXED_NEWSTYLE | NO_ZEROES

def opt_go_bytes(name=b""):
    data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
    return struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data

def opt_go(s):
    """Send NBD_OPT_GO for the default export; return the export size."""
    sendall(s, opt_go_bytes())
    size = None
    while True:
        magic, opt, rtype, ln = struct.unpack(">QIII", recvall(s, 20))
        assert magic == OPT_REPLY_MAGIC, hex(magic)
        data = recvall(s, ln)
        if rtype == REP_ACK:
            return size
        if rtype & 0x80000000:
            raise RuntimeError("NBD_OPT_GO refused: 0x%x %r" % (rtype, data))
        if rtype == REP_INFO and len(data) >= 12 and data[:2] == b"\0\0":
            size = struct.unpack(">Q", data[2:10])[0]

def handshake(path):
    s = sock_connect(path)
    greeting(s)
    send_flags(s)
    size = opt_go(s)
    return s, size

def req(cmd, off, count, flags=0, handle=1, magic=REQ_MAGIC):
    return struct.pack(">IHHQQI", magic, flags, cmd, handle, off, count)

def reply(s):
    """Read a simple reply: (error, handle).  Raises Closed."""
    magic, err, handle = struct.unpack(">IIQ", recvall(s, 16))
    assert magic == SIMPLE_REPLY_MAGIC, hex(magic)
    return err, handle

def close(s):
    try:
        s.close()
    except OSError:
        pass
EOF

cat >"$ZV_TMP/good.py" <<'EOF'
# The well-behaved client: rewrites and verifies 64 KiB chunks of a
# 16 MiB region until the stop file appears (bounded in time and count),
# then verifies the whole region and saves the generation of each chunk.
import os, sys, time
import nbd
from zvtest import *

uri, state, ready, stop = sys.argv[1:5]
CH, N = 65536, 256
MAX_S, MAX_OPS = 240, 200000
gen = [0] * N
h = connect(uri)
t0 = time.monotonic()
ops = errors = bad = 0
worst = 0.0
i = 0
while ops < MAX_OPS and time.monotonic() - t0 < MAX_S:
    if i == N:
        open(ready, "w").close()
    if i >= N and os.path.exists(stop):
        break
    c = (i * 37) % N
    i += 1
    try:
        s = time.monotonic()
        data = pattern("g%d-%d" % (c, gen[c] + 1), CH)
        h.pwrite(data, c * CH)
        gen[c] += 1
        if h.pread(CH, c * CH) != data:
            bad += 1
        if i % 64 == 0:
            h.flush()
        worst = max(worst, time.monotonic() - s)
        ops += 1
    except nbd.Error as e:
        errors += 1
        print("good client: %s at op %d" % (e, ops), flush=True)
        if errors > 5:
            break
ok(errors == 0, "the well-behaved client saw no error in %d operations "
   "(%d errors, slowest %.2fs)" % (ops, errors, worst))
ok(bad == 0, "every write of the well-behaved client read back (%d bad)" % bad)
ok(os.path.exists(stop), "the well-behaved client ran until the abuse ended")
ok(worst < 30, "no operation of the well-behaved client waited 30s or more "
   "(slowest %.2fs)" % worst)
region = h.pread(N * CH // 2, 0) + h.pread(N * CH // 2, N * CH // 2)
ok(region == b"".join(pattern("g%d-%d" % (c, gen[c]), CH) if gen[c] else bytes(CH)
                      for c in range(N)),
   "the well-behaved client's 16 MiB region verifies")
h.flush()
h.shutdown()
with open(state, "w") as f:
    f.write(" ".join(map(str, gen)))
finish()
EOF

cat >"$ZV_TMP/regions.py" <<'EOF'
# The regions the abuse aims at, their contents before, and the check
# that they are unchanged (or, for whole writes abandoned, either old or
# new per request).  "prepare" writes the sentinels; "check" verifies
# them and, with a state file, the well-behaved client's region too.
import sys
import nbd
from zvtest import *

MiB = 1 << 20
uri, mode = sys.argv[1], sys.argv[2]
h = connect(uri, strict=False)
size = h.get_size()
# sentinel regions: name -> (offset, length)
S = {
    "oversized write head": (32 * MiB, MiB),
    "oversized write tail": (64 * MiB, MiB),
    "huge write": (72 * MiB, MiB),
    "partial payload": (96 * MiB, 8 * MiB),
    "unknown flag": (128 * MiB, MiB),
    "bad magic": (130 * MiB, MiB),
    "end of volume": (size - MiB, MiB),
}
if mode == "prepare":
    for name, (o, l) in S.items():
        h.pwrite(pattern(name, l), o)
    h.flush()
    h.shutdown()
    sys.exit(0)
for name, (o, l) in S.items():
    ok(h.pread(l, o) == pattern(name, l),
       "%s: the sentinel data is unchanged" % name)
# whole writes abandoned: 16 slots of 64 KiB at 112 MiB, each either the
# old (zeros) or one of the writes sent to it, never a mix
mixed = 0
for k in range(16):
    got = h.pread(65536, 112 * MiB + k * 65536)
    if got != bytes(65536) and not any(got == pattern("abandon%d-%d" % (k, j), 65536)
                                       for j in range(64)):
        mixed += 1
ok(mixed == 0, "abandoned whole writes: each slot holds old or new data, "
   "never a mix (%d mixed)" % mixed)
if len(sys.argv) > 3:
    gen = list(map(int, open(sys.argv[3]).read().split()))
    CH = 65536
    region = h.pread(8 * MiB, 0) + h.pread(8 * MiB, 8 * MiB)
    ok(region == b"".join(pattern("g%d-%d" % (c, g), CH) if g else bytes(CH)
                          for c, g in enumerate(gen)),
       "the well-behaved client's region verifies")
h.shutdown()
finish()
EOF

cat >"$ZV_TMP/abuse.py" <<'EOF'
# The abuse.  Every socket has a timeout; every loop is bounded.
import errno, os, random, sys, threading, time
import nbd
from zvtest import *
from nbdraw import *

MiB = 1 << 20
path, uri, mode = sys.argv[1], sys.argv[2], sys.argv[3]
rng = random.Random(int(os.environ["ZVOL_TEST_SEED"]))

def drop(kind, k):
    """One connection dropped in the way 'kind'.  Returns an error string
    if the server misbehaved (anything but serving or closing)."""
    s = sock_connect(path)
    try:
        if kind == "connect":
            return None
        greeting(s)
        if kind == "greeting":
            return None
        send_flags(s)
        if kind == "flags":
            return None
        if kind == "half-option":
            sendall(s, opt_go_bytes()[:11])
            return None
        opt_go(s)
        if kind == "go":
            return None
        if kind == "header-only":
            sendall(s, req(CMD_WRITE, 96 * MiB + (k % 128) * 65536, 65536))
        elif kind == "partial-payload":
            sendall(s, req(CMD_WRITE, 96 * MiB + (k % 128) * 65536, 65536) +
                    pattern("partial%d" % k, 30000))
        elif kind == "partial-big":
            sendall(s, req(CMD_WRITE, 96 * MiB, 4 * MiB) + pattern("pb", MiB))
        elif kind == "whole-write":
            slot = k % 16
            sendall(s, req(CMD_WRITE, 112 * MiB + slot * 65536, 65536, handle=k) +
                    pattern("abandon%d-%d" % (slot, k % 64), 65536))
        elif kind == "pipelined-writes":
            data = b""
            for j in range(8):
                slot = (k + j) % 16
                data += req(CMD_WRITE, 112 * MiB + slot * 65536, 65536, handle=j) + \
                        pattern("abandon%d-%d" % (slot, (k + j) % 64), 65536)
            sendall(s, data)
        elif kind == "huge-header":
            sendall(s, req(CMD_WRITE, 0, 0xffffffff))
        return None
    except Closed:
        # the server may close on us mid-stream only where we broke the
        # protocol; everywhere here we just stop talking, so a close
        # before we dropped is a misbehaviour unless it is the huge header
        return None if kind == "huge-header" else "%s: server closed first" % kind
    except Exception as e:
        return "%s: %r" % (kind, e)
    finally:
        close(s)

# Pipelined writes abandoned are not among these: see phase_pipelined.
KINDS = ["connect", "greeting", "flags", "half-option", "go", "header-only",
         "partial-payload", "partial-big", "whole-write", "huge-header"]

def phase_pipelined():
    """100 connections that each pipeline 8 whole writes and close
    without reading a reply (bounded, one thread)."""
    problems = []
    for k in range(100):
        try:
            err = drop("pipelined-writes", k)
        except OSError as e:
            err = "connect: %r" % e
        if err:
            problems.append(err)
            break
    ok(not problems, "100 connections pipelined 8 writes each and dropped "
       "(problems: %s)" % problems[:3])

def phase_drops():
    problems = []
    counts = {k: 0 for k in KINDS}
    lock = threading.Lock()
    def worker(w):
        for n in range(50):
            k = w * 50 + n
            kind = KINDS[(k * 7 + w) % len(KINDS)]
            err = drop(kind, k)
            with lock:
                counts[kind] += 1
                if err:
                    problems.append(err)
    ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in ts: t.start()
    for t in ts: t.join(120)
    ok(not any(t.is_alive() for t in ts), "the 200 dropped connections finished")
    ok(sum(counts.values()) == 200 and not problems,
       "200 connections opened and dropped (%s): the server answered each "
       "until it was dropped (problems: %s)" %
       (", ".join("%s %d" % kv for kv in counts.items()), problems[:5]))
    # a burst held open at once, mid-handshake, then all dropped
    held, err = [], None
    try:
        for j in range(64):
            s = sock_connect(path)
            held.append(s)
            if j % 2:
                greeting(s)
                send_flags(s)
    except Exception as e:
        err = e
    for s in held:
        close(s)
    ok(err is None and len(held) == 64,
       "64 connections held mid-handshake at once, then dropped (%r)" % err)

def expect_refused(desc, h, fn, want):
    try:
        fn()
    except nbd.Error as e:
        if not h.aio_is_ready() and not h.aio_is_processing():
            return ok(True, "%s: the client was disconnected (%s)" % (desc, e))
        return ok(e.errnum in want, "%s: refused (got %s, want %s)" %
                  (desc, errname(e), "/".join(errno.errorcode[w] for w in want)))
    return ok(False, "%s: the request succeeded, want a refusal" % desc)

def raw_case(desc, data, want, check_alive=True):
    """Send data (one request) after a handshake; want an error reply with
    an errno in want, or a disconnect.  Then, if the connection is still
    up, a small read must still work on it."""
    try:
        s, size = handshake(path)
    except Exception as e:
        return ok(False, "%s: handshake failed: %r" % (desc, e))
    try:
        sendall(s, data)
        err, handle = reply(s)
    except Closed:
        close(s)
        return ok(True, "%s: the client was disconnected" % desc)
    except Exception as e:
        close(s)
        return ok(False, "%s: %r" % (desc, e))
    names = {v: k for k, v in errno.errorcode.items()}
    # NBD error numbers: EPERM 1, EIO 5, ENOMEM 12, EINVAL 22, ENOSPC 28,
    # EOVERFLOW 75, ENOTSUP 95, ESHUTDOWN 108
    nbd_err = {1: "EPERM", 5: "EIO", 12: "ENOMEM", 22: "EINVAL", 28: "ENOSPC",
               75: "EOVERFLOW", 95: "ENOTSUP", 108: "ESHUTDOWN"}
    r = ok(err != 0 and nbd_err.get(err) in want,
           "%s: error reply %s (want %s)" % (desc, nbd_err.get(err, err), "/".join(want)))
    if check_alive:
        try:
            sendall(s, req(CMD_READ, 0, 4096, handle=99))
            e2, h2 = reply(s)
            if e2 == 0:
                recvall(s, 4096)
            ok(e2 == 0 and h2 == 99, "%s: the connection still serves a read" % desc)
        except Exception as e:
            ok(False, "%s: the connection died after the error reply: %r" % (desc, e))
    close(s)
    return r

def phase_malformed():
    h = connect(uri, strict=False)
    size = h.get_size()
    mx = h.get_block_size(nbd.SIZE_MAXIMUM)
    ok(mx == 32 * MiB, "maximum block size is 32 MiB (got %d)" % mx)
    h.shutdown()
    # libnbd with strict mode off sends what it is given
    for desc, fn in [
        ("libnbd write of max + 512", lambda h: h.pwrite(b"\x5a" * (mx + 512), 32 * MiB)),
        ("libnbd write of 33 MiB", lambda h: h.pwrite(b"\x5a" * (33 * MiB), 32 * MiB)),
        ("libnbd read of max + 512", lambda h: h.pread(mx + 512, 32 * MiB)),
        ("libnbd read of 48 MiB", lambda h: h.pread(48 * MiB, 32 * MiB)),
    ]:
        h = connect(uri, strict=False)
        expect_refused(desc, h, lambda: fn(h), (errno.EINVAL, errno.EOVERFLOW))
        try:
            ok(h.pread(4096, 0) is not None, desc + ": the connection still serves")
        except nbd.Error as e:
            ok(not h.aio_is_ready(), desc + ": disconnected (%s)" % e)
        del h
    # raw: above the maximum (payload sent, so the stream stays in step)
    raw_case("raw write of 33 MiB", req(CMD_WRITE, 32 * MiB, 33 * MiB) +
             b"\x5a" * (33 * MiB), ("EINVAL", "EOVERFLOW"))
    raw_case("raw read of 33 MiB", req(CMD_READ, 32 * MiB, 33 * MiB),
             ("EINVAL", "EOVERFLOW"))
    # above nbdkit's own 64 MiB limit: nbdkit skips the payload or drops us
    raw_case("raw write of 65 MiB", req(CMD_WRITE, 72 * MiB, 65 * MiB) +
             b"\x5a" * (65 * MiB), ("EINVAL", "EOVERFLOW", "ENOMEM"))
    raw_case("raw read of 65 MiB", req(CMD_READ, 72 * MiB, 65 * MiB),
             ("EINVAL", "EOVERFLOW", "ENOMEM"))
    raw_case("raw read of 4 GiB - 1", req(CMD_READ, 0, 0xffffffff),
             ("EINVAL", "EOVERFLOW", "ENOMEM"))
    # past the end
    raw_case("raw write past the end", req(CMD_WRITE, size - 2048, 4096) +
             b"\x5a" * 4096, ("EINVAL", "ENOSPC"))
    raw_case("raw write at offset 2^63", req(CMD_WRITE, 1 << 63, 4096) +
             b"\x5a" * 4096, ("EINVAL", "ENOSPC"))
    raw_case("raw read past the end", req(CMD_READ, size - 512, 4096),
             ("EINVAL",))
    raw_case("raw trim past the end", req(4, size - 512, 1 << 20),
             ("EINVAL", "ENOSPC"))
    # unknown command types (no payload)
    raw_case("raw unknown command 42", req(42, 0, 0), ("EINVAL", "ENOTSUP"))
    raw_case("raw unknown command 65535", req(0xffff, 4096, 4096),
             ("EINVAL", "ENOTSUP"))
    # unknown flags
    raw_case("raw write with unknown flag 1<<10",
             req(CMD_WRITE, 128 * MiB, 4096, flags=1 << 10) + b"\x5a" * 4096,
             ("EINVAL", "ENOTSUP"))
    raw_case("raw read with unknown flag 1<<15",
             req(CMD_READ, 0, 4096, flags=1 << 15), ("EINVAL", "ENOTSUP"))
    # a bad request magic: the server must drop this client, nothing else
    raw_case("raw write with a bad magic",
             req(CMD_WRITE, 130 * MiB, 4096, magic=0xdeadbeef) + b"\x5a" * 4096,
             ())
    # a client that disconnects properly after all that
    s, _ = handshake(path)
    sendall(s, req(CMD_DISC, 0, 0))
    close(s)
    ok(True, "NBD_CMD_DISC after the abuse")

if mode == "drops":
    phase_drops()
elif mode == "pipelined":
    phase_pipelined()
else:
    phase_malformed()
finish()
EOF

# ---------------------------------------------------------------- helpers

rss_kb ()
{
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# Run the well-behaved client in the background; its PASS/FAIL lines are
# counted when it has finished (good_wait).
good_start ()
{
    zv_log "the well-behaved client starts"
    PYTHONPATH=$ZV_TMP timeout "$ZV_CLIENT_TIMEOUT" "$NBD_PY" "$ZV_TMP/good.py" \
        "$uri" "$ZV_TMP/good.state" "$ZV_TMP/good.ready" "$ZV_TMP/good.stop" \
        >"$ZV_TMP/good.out" 2>&1 &
    good_pid=$!
    track_pid "$good_pid"
}

good_wait ()
{
    local rc=0 p f
    touch "$ZV_TMP/good.stop"
    wait "$good_pid" || rc=$?
    cat "$ZV_TMP/good.out"
    p=$(grep -c '^PASS: ' "$ZV_TMP/good.out" || :)
    f=$(grep -c '^FAIL: ' "$ZV_TMP/good.out" || :)
    ZV_PASSED=$((ZV_PASSED + p))
    ZV_FAILED=$((ZV_FAILED + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        zv_fail "the well-behaved client exited with status $rc"
    fi
}

# ---------------------------------------------------------------- the test

zv_log "create a 256 MiB volume (volblocksize 16K) on $pool"
start_zvol "$sock" device="$pool" create=true size=256M volblocksize=16K ||
    die "server starts with create=true"
pid=$ZV_PID

py_checks "write the sentinels" "$ZV_TMP/regions.py" "$uri" prepare ||
    die "the sentinels are written"
good_start
tries=300
while [ ! -e "$ZV_TMP/good.ready" ] && [ "$tries" -gt 0 ] && kill -0 "$good_pid" 2>/dev/null; do
    sleep 0.1; tries=$((tries - 1))
done
check "the well-behaved client made a first pass" test -e "$ZV_TMP/good.ready"
zv_log "server RSS before any abuse: $(rss_kb "$pid") kB"

py_checks "connections opened and dropped" \
    "$ZV_TMP/abuse.py" "$sock" "$uri" drops || :
check "the server is alive after the dropped connections" zvol_running
# The baseline for the memory bound is taken after this first round: it
# populates glibc's per-thread malloc arenas (one per connection thread,
# up to 8 per core), which keep freed request buffers for reuse; in the
# runs seen that is some 50 MiB once, not per round.  What must hold is
# that more abuse does not keep growing it.
rss0=$(rss_kb "$pid")
zv_log "server RSS after the first round (the baseline): $rss0 kB"
py_checks "oversized and malformed requests" \
    "$ZV_TMP/abuse.py" "$sock" "$uri" malformed || :
check "the server is alive after the malformed requests" zvol_running
zvol_running && zv_log "server RSS now: $(rss_kb "$pid") kB"
# two more rounds of drops: the server keeps coping
for round in 2 3; do
    py_checks "connections opened and dropped, round $round" \
        "$ZV_TMP/abuse.py" "$sock" "$uri" drops || :
    check "the server is alive after round $round" zvol_running
    zvol_running && zv_log "server RSS now: $(rss_kb "$pid") kB"
done

if zvol_running; then
    rss1=$(rss_kb "$pid")
    zv_log "server RSS after the abuse: $rss1 kB"
    check "server RSS grew by less than $((RSS_SLACK_KB / 1024)) MiB ($rss0 kB -> $rss1 kB)" \
        test "$rss1" -le $((rss0 + RSS_SLACK_KB))
fi
good_wait
if grep -q 'Assertion\|SEGV\|Aborted' "$ZV_LOG"; then
    zv_fail "the server log shows a crash"
    _zv_show_log "$ZV_LOG"
fi
py_checks "the volume after the abuse" \
    "$ZV_TMP/regions.py" "$uri" check "$ZV_TMP/good.state" || :

zv_log "clean stop, then import"
check "clean stop (SIGTERM) exits 0" stop_zvol
start_zvol "$sock" device="$pool" || die "server imports the pool"
py_checks "the volume after import" \
    "$ZV_TMP/regions.py" "$uri" check "$ZV_TMP/good.state" || :
check "clean stop after import exits 0" stop_zvol

# 4. Pipelined writes abandoned, with one worker thread per connection
# (the last -t given to nbdkit wins): nbdkit's race cannot happen there.
ZV_NBDKIT_OPTS=(-t 1)
start_zvol "$sock" device="$pool" || die "server imports the pool (-t 1)"
py_checks "pipelined writes abandoned (-t 1)" \
    "$ZV_TMP/abuse.py" "$sock" "$uri" pipelined || :
check "the server (-t 1) is alive after the pipelined writes" zvol_running
py_checks "the volume after the pipelined writes (-t 1)" \
    "$ZV_TMP/regions.py" "$uri" check "$ZV_TMP/good.state" || :
check "clean stop (-t 1) exits 0" stop_zvol
ZV_NBDKIT_OPTS=()

# The same with 32 worker threads per connection: tolerated if, and only
# if, nbdkit dies of its own known assertion (see the top of the file).
start_zvol "$sock" device="$pool" || die "server imports the pool (-t 32)"
# (run outside py_checks: its checks would fail whenever nbdkit aborts)
zv_log "pipelined writes abandoned (-t 32, nbdkit may abort)"
PYTHONPATH=$ZV_TMP timeout "$ZV_CLIENT_TIMEOUT" "$NBD_PY" "$ZV_TMP/abuse.py" \
    "$sock" "$uri" pipelined >"$ZV_TMP/pipelined32.out" 2>&1 || :
sleep 0.5
if zvol_running; then
    zv_pass "the server (-t 32) survived the pipelined writes"
    check "clean stop (-t 32) exits 0" stop_zvol
elif grep -q "raw_send_socket: Assertion \`sock >= 0' failed" "$ZV_LOG"; then
    zv_pass "the server (-t 32) died of the known nbdkit 1.32 assertion" \
        "(raw_send_socket), not of the plugin: tolerated"
    _zv_reap "$(_zv_pid_of "$sock")"
    unset "ZV_SRV_PID[$sock]"
else
    zv_fail "the server (-t 32) died during the pipelined writes, not of the known nbdkit assertion"
    _zv_show_log "$ZV_LOG"
    _zv_reap "$(_zv_pid_of "$sock")"
    unset "ZV_SRV_PID[$sock]"
fi
# whatever happened, the pool imports and verifies (as after a crash)
start_zvol "$sock" device="$pool" || die "server imports the pool after the -t 32 case"
py_checks "the volume after the pipelined writes (-t 32)" \
    "$ZV_TMP/regions.py" "$uri" check "$ZV_TMP/good.state" || :
check "final clean stop exits 0" stop_zvol

zv_summary
