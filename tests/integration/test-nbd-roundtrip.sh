#!/usr/bin/env bash
# test-nbd-roundtrip.sh: the NBD surface of the zvol plugin through libnbd.
#
#  1. negotiation: export size, can_* flags, block sizes;
#  2. I/O: random (also unaligned) round trips against an in-memory model,
#     a 32 MiB write, FUA write, flush, trim, zero (with and without
#     FAST_ZERO, with and without NO_HOLE), extents, out-of-range requests;
#  3. persistence: a clean stop and an import read everything back;
#  4. multi-conn: a write on connection A, a flush on connection B, then
#     kill -9: after import the write is there.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
size=$((1024 * 1024 * 1024))

cat >"$ZV_TMP/phase1.py" <<'EOF'
# Phase 1: negotiation and I/O checks on a fresh volume; saves the
# expected contents of the regions it checks later.
import os, random, sys, errno
import nbd
from zvtest import *

uri, size, state = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(int(os.environ["ZVOL_TEST_SEED"]))
MiB = 1 << 20
VBS = 16384

h = connect(uri)
ok(h.get_size() == size, "export size is %d (got %d)" % (size, h.get_size()))
for what in ("flush", "fua", "multi_conn", "trim", "zero", "fast_zero"):
    ok(getattr(h, "can_" + what)(), "can_%s is true" % what)
ok(not h.is_read_only(), "export is writable")
ok(h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION),
   "base:allocation (extents) is negotiated")
bmin = h.get_block_size(nbd.SIZE_MINIMUM)
bpref = h.get_block_size(nbd.SIZE_PREFERRED)
bmax = h.get_block_size(nbd.SIZE_MAXIMUM)
ok(bmin == 512, "minimum block size is 512 (got %d)" % bmin)
ok(bpref == VBS, "preferred block size is volblocksize %d (got %d)" % (VBS, bpref))
ok(bmax == 32 * MiB, "maximum block size is 32M (got %d)" % bmax)

# A never-written volume reads as zeros and reports one hole.
ok(h.pread(MiB, 0) == bytes(MiB), "a fresh volume reads as zeros")
ext = extents(h, 0, 64 * MiB)
ok(covered(ext, 0, 64 * MiB) and flags_at(ext, 0, 64 * MiB) == {3},
   "a fresh volume is reported as hole|zero (got %s)" % ext[:4])

# Random round trips, many unaligned, inside a 64 MiB model region.
u = connect(uri, strict=False)
REG = 64 * MiB
model = bytearray(REG)
bad = 0
for i in range(300):
    ln = rng.choice([1, 511, 512, 513, 4095, 4096, 4097, 16383, 16384,
                     16385, rng.randrange(1, 300000)])
    off = rng.randrange(0, REG - ln)
    if rng.random() < 0.5:
        off &= ~511
    data = pattern("rt%d" % i, ln)
    u.pwrite(data, off)
    model[off:off + ln] = data
    # read back an enclosing, also unaligned, range
    a = max(0, off - rng.randrange(0, 20000))
    b = min(REG, off + ln + rng.randrange(0, 20000))
    if u.pread(b - a, a) != model[a:b]:
        bad += 1
ok(bad == 0, "300 random unaligned write/read round trips (%d mismatches)" % bad)
got = b"".join(h.pread(8 * MiB, o) for o in range(0, REG, 8 * MiB))
ok(got == model, "the whole 64 MiB region matches the model")
ext = extents(h, 0, REG)
ok(covered(ext, 0, REG), "extents cover the written region")

# Writes at the very end of the volume.
tail = pattern("tail", 3000)
u.pwrite(tail, size - 3000)
ok(u.pread(3000, size - 3000) == tail, "unaligned write ending at the last byte")

# A 32 MiB write and read.
big = pattern("big", 32 * MiB)
h.pwrite(big, 128 * MiB)
ok(h.pread(32 * MiB, 128 * MiB) == big, "32 MiB write + read at 128 MiB")
ext = extents(h, 128 * MiB, 32 * MiB)
ok(covered(ext, 128 * MiB, 32 * MiB) and
   all(f & 1 == 0 for f in flags_at(ext, 128 * MiB, 32 * MiB)),
   "written 32 MiB is reported as data, not a hole")

# FUA write and flush.
fua = pattern("fua", 3 * VBS + 512)
h.pwrite(fua, 200 * MiB + 512, nbd.CMD_FLAG_FUA)
ok(h.pread(len(fua), 200 * MiB + 512) == fua, "write with FUA reads back")
h.flush()
ok(True, "flush returns")

# Trim whole volblocks: reads zeros, extents say hole.
T0, TL = 128 * MiB + 4 * MiB, 2 * MiB
h.trim(TL, T0)
ok(h.pread(TL, T0) == bytes(TL), "trimmed range reads zeros")
ok(h.pread(MiB, T0 + TL) == big[6 * MiB:7 * MiB] and
   h.pread(MiB, T0 - MiB) == big[3 * MiB:4 * MiB],
   "data around the trimmed range is intact")
ext = extents(h, T0, TL)
ok(covered(ext, T0, TL) and flags_at(ext, T0, TL) == {3},
   "trimmed range is reported as hole|zero (got %s)" % ext[:4])
h.trim(TL, T0 + 8 * MiB, nbd.CMD_FLAG_FUA)
ok(h.pread(TL, T0 + 8 * MiB) == bytes(TL), "trim with FUA reads zeros")
big = bytearray(big)
big[4 * MiB:6 * MiB] = bytes(TL)
big[12 * MiB:14 * MiB] = bytes(TL)

# Unaligned trim: bytes outside the range are untouched.
u.trim(10000, 128 * MiB + 20 * MiB + 777)
ok(u.pread(777, 128 * MiB + 20 * MiB) == big[20 * MiB:20 * MiB + 777] and
   u.pread(5000, 128 * MiB + 20 * MiB + 10777) ==
   big[20 * MiB + 10777:20 * MiB + 15777],
   "unaligned trim leaves the bytes around it intact")
tr = u.pread(10000, 128 * MiB + 20 * MiB + 777)
ok(tr == bytes(10000) or tr == big[20 * MiB + 777:20 * MiB + 10777],
   "unaligned trim reads either zeros or the old data, never anything else")
big[20 * MiB + 777:20 * MiB + 10777] = tr

# Zero without FAST_ZERO: aligned (may punch) and with NO_HOLE.
Z0 = 128 * MiB + 24 * MiB
h.zero(MiB, Z0)
ok(h.pread(MiB, Z0) == bytes(MiB), "zero (aligned) reads zeros")
ext = extents(h, Z0, MiB)
ok(covered(ext, Z0, MiB) and all(f & 2 for f in flags_at(ext, Z0, MiB)),
   "zeroed range is reported with the zero flag (got %s)" % ext[:4])
h.zero(MiB, Z0 + 2 * MiB, nbd.CMD_FLAG_NO_HOLE)
ok(h.pread(MiB, Z0 + 2 * MiB) == bytes(MiB), "zero with NO_HOLE reads zeros")
big[24 * MiB:25 * MiB] = bytes(MiB)
big[26 * MiB:27 * MiB] = bytes(MiB)

# Zero with FAST_ZERO: on whole volblocks it must succeed (metadata only).
h.zero(MiB, Z0 + 4 * MiB, nbd.CMD_FLAG_FAST_ZERO)
ok(h.pread(MiB, Z0 + 4 * MiB) == bytes(MiB), "fast zero (aligned) reads zeros")
ext = extents(h, Z0 + 4 * MiB, MiB)
ok(covered(ext, Z0 + 4 * MiB, MiB) and
   all(f & 2 for f in flags_at(ext, Z0 + 4 * MiB, MiB)),
   "fast-zeroed range is reported with the zero flag (got %s)" % ext[:4])
big[28 * MiB:29 * MiB] = bytes(MiB)
# Unaligned fast zero: either it works or it fails at once with ENOTSUP
# and leaves the data alone.
uz = 128 * MiB + 30 * MiB + 1000
before = u.pread(40000, uz - 5000)
try:
    u.zero(30000, uz, nbd.CMD_FLAG_FAST_ZERO)
    exp = before[:5000] + bytes(30000) + before[35000:]
    ok(u.pread(40000, uz - 5000) == exp, "unaligned fast zero reads zeros")
    big[30 * MiB + 1000:30 * MiB + 31000] = bytes(30000)
except nbd.Error as e:
    ok(e.errnum in (errno.ENOTSUP, errno.EOPNOTSUPP) and
       u.pread(40000, uz - 5000) == before,
       "unaligned fast zero failed with ENOTSUP and changed nothing "
       "(got %s)" % errname(e))
# Unaligned (plain) zero: exact bytes.
uz = 128 * MiB + 31 * MiB + 333
u.zero(20000, uz)
ok(u.pread(20000, uz) == bytes(20000) and
   u.pread(333, uz - 333) == big[31 * MiB:31 * MiB + 333] and
   u.pread(1000, uz + 20000) == big[31 * MiB + 20333:31 * MiB + 21333],
   "unaligned zero zeroes exactly its range")
big[31 * MiB + 333:31 * MiB + 20333] = bytes(20000)
ok(h.pread(32 * MiB, 128 * MiB) == big, "the 32 MiB region matches its model")

# A large zero (beyond the 32M payload limit) is fine.
h.zero(256 * MiB, 512 * MiB)
ok(h.pread(MiB, 512 * MiB) == bytes(MiB), "a 256 MiB zero request works")

# Out of range requests fail and change nothing.
expect_errno("read past the end fails", (errno.EINVAL, errno.ERANGE),
             u.pread, 1024, size - 512)
expect_errno("read at the end fails", (errno.EINVAL, errno.ERANGE),
             u.pread, 1, size)
expect_errno("write past the end fails", (errno.EINVAL, errno.ERANGE, errno.ENOSPC),
             u.pwrite, bytes(4096), size - 2048)
ok(u.pread(3000, size - 3000) == tail, "a failed write past the end changed nothing")
expect_errno("trim past the end fails", (errno.EINVAL, errno.ERANGE, errno.ENOSPC),
             u.trim, 2 * MiB, size - MiB)
expect_errno("zero past the end fails", (errno.EINVAL, errno.ERANGE, errno.ENOSPC),
             u.zero, 2 * MiB, size - MiB)
ok(u.pread(3000, size - 3000) == tail, "failed trim/zero past the end changed nothing")
h.flush()
ok(u.pread(3000, size - 3000) == tail, "the connection still works after errors")

with open(state, "wb") as f:
    f.write(model)
    f.write(big)
    f.write(fua)
    f.write(tail)
u.shutdown()
h.shutdown()
finish()
EOF

cat >"$ZV_TMP/phase2.py" <<'EOF'
# Phase 2: after a clean stop and an import, everything reads back.
import sys
import nbd
from zvtest import *

uri, size, state = sys.argv[1], int(sys.argv[2]), sys.argv[3]
MiB = 1 << 20
with open(state, "rb") as f:
    model = f.read(64 * MiB)
    big = f.read(32 * MiB)
    fua = f.read(3 * 16384 + 512)
    tail = f.read(3000)
h = connect(uri, strict=False)
ok(h.get_size() == size, "after import the export size is still %d" % size)
got = b"".join(h.pread(8 * MiB, o) for o in range(0, 64 * MiB, 8 * MiB))
ok(got == model, "after import the 64 MiB random-write region matches")
ok(h.pread(32 * MiB, 128 * MiB) == big,
   "after import the 32 MiB region (with trims and zeros) matches")
ok(h.pread(len(fua), 200 * MiB + 512) == fua, "after import the FUA write is there")
ok(h.pread(3000, size - 3000) == tail, "after import the last bytes are there")
ext = extents(h, 128 * MiB + 4 * MiB, 2 * MiB)
ok(covered(ext, 128 * MiB + 4 * MiB, 2 * MiB) and
   flags_at(ext, 128 * MiB + 4 * MiB, 2 * MiB) == {3},
   "after import the trimmed range is still a hole (got %s)" % ext[:4])
ext = extents(h, 300 * MiB, 64 * MiB)
ok(covered(ext, 300 * MiB, 64 * MiB) and
   flags_at(ext, 300 * MiB, 64 * MiB) == {3},
   "after import a never-written range is still a hole")
h.shutdown()
finish()
EOF

cat >"$ZV_TMP/multiconn.py" <<'EOF'
# Multi-conn: phase "write" writes on connection A and flushes on B (and
# checks B sees A's write); phase "check" verifies after kill -9 + import.
import sys
import nbd
from zvtest import *

uri, phase = sys.argv[1], sys.argv[2]
MiB = 1 << 20
spots = [(700 * MiB + 4096 * i * 37 + (i % 3) * 512, 4096 * (1 + i % 5))
         for i in range(16)]
if phase == "write":
    a, b, c = connect(uri), connect(uri), connect(uri)
    ok(a.can_multi_conn(), "multi-conn is advertised")
    for i, (off, ln) in enumerate(spots):
        a.pwrite(pattern("mc%d" % i, ln), off)
    # a third connection writes too, then B's flush must cover both
    c.pwrite(pattern("mc-c", 65536), 800 * MiB)
    ok(all(b.pread(ln, off) == pattern("mc%d" % i, ln)
           for i, (off, ln) in enumerate(spots)),
       "connection B reads what connection A wrote")
    b.flush()
    ok(True, "flush on connection B returned")
    # the server is killed now, with A and C still connected
    print("READY", flush=True)
else:
    h = connect(uri)
    bad = [i for i, (off, ln) in enumerate(spots)
           if h.pread(ln, off) != pattern("mc%d" % i, ln)]
    ok(not bad, "after kill -9: writes of connection A flushed by B are there "
       "(missing %s)" % bad)
    ok(h.pread(65536, 800 * MiB) == pattern("mc-c", 65536),
       "after kill -9: the write of connection C flushed by B is there")
finish()
EOF

zv_log "create a 1 GiB volume (volblocksize 16K) on $pool"
start_zvol "$sock" device="$pool" create=true size=1G volblocksize=16K ||
    die "server starts with create=true"
check "create=true made the device file" test -f "$pool"
devsize=$(stat -c %s "$pool")
# sparse creation: volume size + 25% + 128 MiB + twice dirty_max (auto:
# 10% of physical memory, at most 4 GiB)
dmax=$(( $(getconf _PHYS_PAGES) * $(getconf PAGESIZE) / 100 * 10 ))
[ "$dmax" -le $(( 4 << 30 )) ] || dmax=$(( 4 << 30 ))
want=$(( size + size / 4 + 128 * 1024 * 1024 + 2 * dmax ))
check "created device size is volume + 25% + 128 MiB + 2 x dirty_max ($want, got $devsize)" \
    test "$devsize" -ge $((want - 1048576)) -a "$devsize" -le $((want + 1048576))
check "created device is sparse" \
    test "$(( $(stat -c %b "$pool") * $(stat -c %B "$pool") ))" -lt $((size / 4))

py_checks "negotiation and I/O on a fresh volume" \
    "$ZV_TMP/phase1.py" "$uri" "$size" "$ZV_TMP/state" || :

zv_log "clean stop, then import (no create)"
check "clean stop (SIGTERM) exits 0" stop_zvol
start_zvol "$sock" device="$pool" || die "server imports the pool"
py_checks "data survives a clean restart" \
    "$ZV_TMP/phase2.py" "$uri" "$size" "$ZV_TMP/state" || :

zv_log "multi-conn: write on A, flush on B, kill -9, import"
py_checks "multi-conn write/flush" "$ZV_TMP/multiconn.py" "$uri" write || :
check "kill -9 the server" kill9_zvol
start_zvol "$sock" device="$pool" || die "server imports the pool after kill -9"
py_checks "multi-conn data after kill -9" "$ZV_TMP/multiconn.py" "$uri" check || :
py_checks "earlier data after kill -9" \
    "$ZV_TMP/phase2.py" "$uri" "$size" "$ZV_TMP/state" || :
check "clean stop (SIGTERM) exits 0" stop_zvol

zv_log "create=true preallocate=true: the file written whole, then the pool"
pre=$ZV_TMP/pre.img
ZV_NBDKIT_OPTS=(-v)             # the progress is debug output
start_zvol "$sock" device="$pre" create=true size=64M dirty_max=16M preallocate=true ||
    die "server starts with create=true preallocate=true"
ZV_NBDKIT_OPTS=()
presize=$(stat -c %s "$pre")
check "the preallocated file is the created size (64M + 25% + 128M + 2 x 16M)" \
    test "$presize" -eq $(( (64 + 16 + 128 + 32) << 20 ))
check "every byte of it allocated on the host" \
    test "$(( $(stat -c %b "$pre") * $(stat -c %B "$pre") ))" -ge "$presize"
check "progress in the log" grep -q "preallocate: 100%" "$ZV_LOG"
check "the volume on it reads back what was written" "$NBD_PY" - "$uri" <<'PYEOF'
import sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
d = bytes(range(256)) * 256
h.pwrite(d, 1 << 20)
h.flush()
assert h.pread(len(d), 1 << 20) == d
assert h.pread(4096, 0) == bytes(4096)
PYEOF
check "clean stop (SIGTERM) exits 0" stop_zvol

zv_summary
