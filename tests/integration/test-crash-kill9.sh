#!/usr/bin/env bash
# test-crash-kill9.sh: acknowledged flushes and FUA writes survive kill -9,
# and no 4 KiB block is ever torn or invented.
#
# Each round: import the pool; a writer keeps up to 16 asynchronous
# writes (4-64 KiB, 4 KiB aligned), zeroes and trims in flight over a
# 16 MiB region and journals every event: odd rounds send a flush every
# ~24 completions and 10% of requests with FUA, even rounds no flush and
# 30% FUA; nbdkit is killed with SIGKILL 0.5-3 s in; import again and
# check every 4 KiB block of the region.
#
# The model.  Every write gives each 4 KiB block it covers a value: a
# unique id (the block holds a header with the id and its own offset,
# then bytes derived from both), or zero for zero/trim.  In-flight
# requests never overlap, so the writes to one block form a sequence
# h[0..n] where h[0] is the block's value at the start of the round (the
# pool was stopped cleanly, so it is durable).  Let d be the index of
# the last write to the block that is durable:
#   - a write acknowledged before a flush was sent, once that flush has
#     returned (the flush's coverage is fixed when it is sent); or
#   - a write with FUA, once it has been acknowledged.
# After the crash the block must read as one of h[d], h[d+1], ..., h[n]:
# the durable value or any later write (acknowledged or not), never an
# older value, never a mix of two values inside 4 KiB (torn), never
# bytes nobody wrote.
#
# Trim: on the whole volblocks (16 KiB) it covers, a trim is a write of
# zeros (the plugin frees them: they read as zeros).  On the 4 KiB blocks
# of a partly covered volblock the NBD protocol leaves the content open:
# there the trim may read as zeros or leave the block alone, so it is a
# possible value (zeros) but never the durable one, even with FUA or a
# flush after it: the durable value stays the last real write before it.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
ROUNDS=${ZVOL_CRASH_ROUNDS:-5}

cat >"$ZV_TMP/crashlib.py" <<'EOF'
import hashlib, struct
BS = 4096
VBS = 16384                     # the volblocksize of the test pool
REGION_BLOCKS = 4096            # 16 MiB
REGION_OFF = 32 << 20           # the region starts at 32 MiB

def block_value(wid, blk):
    """The 4 KiB content written by write wid into block blk."""
    hdr = struct.pack("<QQ", wid, blk) + b"ZVOLCRSH"
    return hdr + hashlib.shake_128(hdr).digest(BS - len(hdr))

def identify(data, blk):
    """The id a block holds: 0 for zeros, None if it is garbage/torn."""
    if data == bytes(BS):
        return 0
    wid, b = struct.unpack_from("<QQ", data)
    if b == blk and data == block_value(wid, blk):
        return wid
    return None

def describe(data, blk, ids):
    """Say where the bytes of a bad block come from: the longest prefix
    and suffix that match one of the values ids (0 = zeros)."""
    def content(v):
        return bytes(BS) if v == 0 else block_value(v, blk)
    def prefix(c):
        n = 0
        while n < BS and data[n] == c[n]:
            n += 1
        return n
    def suffix(c):
        n = 0
        while n < BS and data[BS - 1 - n] == c[BS - 1 - n]:
            n += 1
        return n
    best_p = max(((prefix(content(v)), v) for v in set(ids)), default=(0, None))
    best_s = max(((suffix(content(v)), v) for v in set(ids)), default=(0, None))
    if best_p[0] + best_s[0] >= BS:
        return ("bytes 0-%d are value %s, bytes %d-4095 are value %s"
                % (best_p[0] - 1, best_p[1], best_p[0], best_s[1]))
    return ("bytes 0-%d match value %s, the last %d bytes match value %s, "
            "bytes in between match nothing written here"
            % (best_p[0] - 1, best_p[1], best_s[0], best_s[1]))
EOF

cat >"$ZV_TMP/writer.py" <<'EOF'
# Writer: issue requests until the server dies or the time is up.
# Journal lines: "W id kind blk n fua" (issued; kind w/z/t), "A id"
# (acknowledged), "E id errno", "F seq" (flush sent), "D seq" (flush
# returned), "X seq errno" (flush failed).
import os, random, sys, time
import nbd
from crashlib import *

uri, journal, seed, first_id, mode = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                      int(sys.argv[4]), sys.argv[5])
rng = random.Random(seed)
# mode "flush": flushes and 10% FUA; mode "fua": no flushes, 30% FUA
FUA_RATE = 0.1 if mode == "flush" else 0.3
QD, MAXTIME = 16, 20.0
fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
def log(s):
    os.write(fd, (s + "\n").encode())

h = nbd.NBD()
h.connect_uri(uri)
busy = set()           # blocks with a request in flight
inflight = {}          # id -> (blocks, buffer)
nflush_inflight = 0
next_id = first_id
flush_seq = 0
done_since_flush = 0
start = time.time()
dead = False

def on_write(wid):
    def cb(err):
        global done_since_flush
        e = err.value
        log(("A %d" % wid) if e == 0 else ("E %d %d" % (wid, e)))
        blocks, _ = inflight.pop(wid)
        busy.difference_update(blocks)
        done_since_flush += 1
        return 1
    return cb

def on_flush(seq):
    def cb(err):
        global nflush_inflight
        e = err.value
        log(("D %d" % seq) if e == 0 else ("X %d %d" % (seq, e)))
        nflush_inflight -= 1
        return 1
    return cb

try:
    while time.time() - start < MAXTIME:
        while len(inflight) < QD:
            n = rng.choice([1, 1, 1, 2, 3, 4, 4, 8, 16])
            for _ in range(20):
                blk = rng.randrange(0, REGION_BLOCKS - n + 1)
                blocks = set(range(blk, blk + n))
                if not blocks & busy:
                    break
            else:
                break
            r = rng.random()
            kind = "w" if r < 0.85 else ("z" if r < 0.95 else "t")
            fua = rng.random() < FUA_RATE
            wid = next_id
            next_id += 1
            off = REGION_OFF + blk * BS
            flags = nbd.CMD_FLAG_FUA if fua else 0
            log("W %d %s %d %d %d" % (wid, kind, blk, n, int(fua)))
            busy |= blocks
            if kind == "w":
                buf = nbd.Buffer.from_bytearray(
                    b"".join(block_value(wid, b) for b in range(blk, blk + n)))
                inflight[wid] = (blocks, buf)
                h.aio_pwrite(buf, off, completion=on_write(wid), flags=flags)
            elif kind == "z":
                inflight[wid] = (blocks, None)
                h.aio_zero(n * BS, off, completion=on_write(wid), flags=flags)
            else:
                inflight[wid] = (blocks, None)
                h.aio_trim(n * BS, off, completion=on_write(wid), flags=flags)
        if (mode == "flush" and done_since_flush >= rng.randrange(8, 40) and
                nflush_inflight < 2):
            flush_seq += 1
            done_since_flush = 0
            log("F %d" % flush_seq)
            nflush_inflight += 1
            h.aio_flush(completion=on_flush(flush_seq))
        h.poll(1000)
except nbd.Error as e:
    dead = True
    log("# connection lost: %s" % e.string)
print("writer: %d requests, %d flushes, %s" %
      (next_id - first_id, flush_seq, "server died" if dead else "time is up"))
log("# next_id %d" % next_id)
EOF

cat >"$ZV_TMP/checker.py" <<'EOF'
# Checker: replay the journal over the baseline, read the region, check
# the model described at the top of the test; write the new baseline.
import json, sys
import nbd
from zvtest import ok, connect, finish
from crashlib import *

uri, journal, statef, rnd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
st = json.load(open(statef))
base = st["base"]                          # per block: value at round start
hist = [[v] for v in base]                 # per block: values in issue order
maybe = [[False] for v in base]            # per entry: partial trim (0 or keep)
PER = VBS // BS
durable = [0] * REGION_BLOCKS              # index into hist of durable value
by_fua = [False] * REGION_BLOCKS           # durable only thanks to a FUA write
acked = {}                                 # block -> index of last acked
                                           # (partial trims left out)
pos = {}                                   # id -> (blocks, index per block)
flushes = {}                               # seq -> snapshot of acked
fua_ids, nacked, ndone, next_id = set(), 0, 0, st["next_id"]
for line in open(journal):
    f = line.split()
    if not f or f[0] == "#":
        if len(f) == 3 and f[1] == "next_id":
            next_id = int(f[2])
        continue
    if f[0] == "W":
        wid, kind, blk, n, fua = int(f[1]), f[2], int(f[3]), int(f[4]), f[5] == "1"
        val = wid if kind == "w" else 0
        # whole volblocks covered (in 4 KiB block numbers)
        full = range(-(-blk // PER) * PER, (blk + n) // PER * PER)
        idx = {}
        for b in range(blk, blk + n):
            hist[b].append(val)
            maybe[b].append(kind == "t" and b not in full)
            idx[b] = len(hist[b]) - 1
        pos[wid] = idx
        if fua:
            fua_ids.add(wid)
        next_id = max(next_id, wid + 1)
    elif f[0] == "A":
        wid = int(f[1])
        nacked += 1
        for b, i in pos[wid].items():
            if maybe[b][i]:
                continue                   # a partial trim makes nothing durable
            acked[b] = i
            if wid in fua_ids and i > durable[b]:
                durable[b] = i
                by_fua[b] = True
    elif f[0] == "F":
        flushes[int(f[1])] = dict(acked)
    elif f[0] == "D":
        ndone += 1
        for b, i in flushes.pop(int(f[1])).items():
            if i >= durable[b]:
                durable[b] = i
                by_fua[b] = False

h = connect(uri)
bad, torn, nd, nfua, badfua = [], [], 0, 0, 0
newbase = []
for c in range(0, REGION_BLOCKS, 256):
    data = h.pread(256 * BS, REGION_OFF + c * BS)
    for k in range(256):
        b = c + k
        v = identify(data[k * BS:(k + 1) * BS], b)
        if durable[b] > 0:
            nd += 1
        if by_fua[b]:
            nfua += 1
        if v is None:
            # -1: the baseline of a block found bad in an earlier round
            # (reported then; it stays bad until rewritten)
            if -1 not in hist[b][durable[b]:]:
                torn.append("block %d: %s" % (b, describe(data[k * BS:(k + 1) * BS], b,
                                                          [x for x in hist[b] if x >= 0])))
            newbase.append(-1)
            continue
        if v not in hist[b][durable[b]:]:
            badfua += by_fua[b]
            older = v in hist[b][:durable[b]]
            bad.append("block %d holds %s%s; durable value %s (history %s, durable index %d)"
                       % (b, v, " (an older value)" if older else " (never written here)",
                          hist[b][durable[b]], hist[b][-6:], durable[b]))
        newbase.append(v)
print("round %s: %d requests acknowledged, %d flushes returned, %d FUA requests, "
      "%d blocks with a durable write this round, %d of them durable by FUA alone"
      % (rnd, nacked, ndone, len(fua_ids), nd, nfua))
ok(not torn, "round %s: no torn or garbage 4 KiB block (%d bad)%s"
   % (rnd, len(torn), "".join("\n    " + x for x in torn[:10])))
ok(not bad, "round %s: every block holds its durable value or a later write (%d violations)%s"
   % (rnd, len(bad), "".join("\n    " + x for x in bad[:10])))
if nfua:
    ok(badfua == 0, "round %s: blocks durable by an acknowledged FUA write alone survive "
       "(%d of %d lost)" % (rnd, badfua, nfua))
st = {"base": newbase, "next_id": next_id}
json.dump(st, open(statef, "w"))
finish()
EOF

"$NBD_PY" -c "
import json
json.dump({'base': [0] * 4096, 'next_id': 1}, open('$ZV_TMP/state.json', 'w'))"

zv_log "create a 256 MiB pool"
start_zvol "$sock" device="$pool" create=true size=256M || die "create the pool"
check "clean stop" stop_zvol

for (( r = 1; r <= ROUNDS; r++ )); do
    delay=$("$NBD_PY" -c "import random; r = random.Random($ZVOL_TEST_SEED * 100 + $r); print('%.2f' % r.uniform(0.5, 3.0))")
    # odd rounds: flushes and some FUA; even rounds: FUA only, no flush
    mode=$([ $((r % 2)) -eq 1 ] && echo flush || echo fua)
    zv_log "round $r ($mode): import, write, kill -9 after ${delay}s"
    start_zvol "$sock" device="$pool" || die "round $r: import"
    journal=$ZV_TMP/journal.$r
    : >"$journal"
    next_id=$("$NBD_PY" -c "import json; print(json.load(open('$ZV_TMP/state.json'))['next_id'])")
    PYTHONPATH=$ZV_TMP timeout 120 "$NBD_PY" "$ZV_TMP/writer.py" "$uri" "$journal" \
        $((ZVOL_TEST_SEED + r)) "$next_id" "$mode" &
    wpid=$!
    track_pid "$wpid"
    # the clock starts once the writer has its first request in flight
    for (( i = 0; i < 300; i++ )); do
        [ -s "$journal" ] && break
        sleep 0.1
    done
    sleep "$delay"
    check "round $r: server still running when it is killed" zvol_running
    check "round $r: kill -9" kill9_zvol
    _zv_wait_exit "$wpid" 150 || :
    _zv_reap "$wpid"
    wrc=$ZV_RC
    check "round $r: writer ended normally (status $wrc)" test "$wrc" -eq 0
    zv_log "round $r: $(grep -c '^W' "$journal") requests issued, $(grep -c '^A' "$journal") acknowledged, $(grep -c '^D' "$journal") flushes returned"
    start_zvol "$sock" device="$pool" || die "round $r: import after kill -9"
    py_checks "round $r: check the region" "$ZV_TMP/checker.py" "$uri" "$journal" \
        "$ZV_TMP/state.json" "$r" || :
    check "round $r: clean stop" stop_zvol
done

zv_summary
