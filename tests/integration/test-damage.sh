#!/usr/bin/env bash
# test-damage.sh: a damaged data block is detected by its checksum and
# reported as EIO; the plugin never returns wrong data.
#
#  1. volblocksize=16K: fill 8 MiB with known data, with a unique 16 KiB
#     pattern in the volblock at offset X; flush; clean stop;
#  2. find the pattern in the device file (every copy of it) and flip
#     bytes in each;
#  3. import: reading any range that touches X fails with EIO; every other
#     16 KiB block of the region reads back exactly; a partial write into
#     the damaged block succeeds without reading it (what it wrote reads
#     back, the block still fails with EIO); a whole-block overwrite heals it
#     (and survives a restart);
#  4. four times, on copies of the pool: flip bytes in 1 random used
#     sector that is not volume data (metadata or a stale copy) and 2 that
#     are (seeded): the pool still imports (metadata has two copies), every
#     block reads right or fails with EIO, at most 2 fail.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
zv_admin_setup
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
VBS=16384
X=$((3 * 1024 * 1024 + 7 * VBS))

cat >"$ZV_TMP/damage.py" <<'EOF'
import errno, sys
import nbd
from zvtest import *

uri, op, X = sys.argv[1], sys.argv[2], int(sys.argv[3])
maxeio = int(sys.argv[4]) if len(sys.argv) > 4 else 2
MiB, VBS, REG = 1 << 20, 16384, 8 << 20

def expected(i):
    """Expected content of volblock i of the region."""
    return pattern("victim" if i * VBS == X else "blk%d" % i, VBS)

h = connect(uri, strict=False)
if op == "write":
    for i in range(REG // VBS):
        h.pwrite(expected(i), i * VBS)
    h.flush()
    ok(h.pread(VBS, X) == pattern("victim", VBS), "the victim block reads back before damage")
elif op == "check":
    bad, eio, other = [], [], []
    for i in range(REG // VBS):
        try:
            if h.pread(VBS, i * VBS) != expected(i):
                bad.append(i)
        except nbd.Error as e:
            (eio if e.errnum == errno.EIO else other).append((i, errname(e)))
    xi = X // VBS
    ok(not bad, "no 16 KiB block returns wrong data (wrong: %s)" % bad[:10])
    ok(not other, "errors are EIO only (others: %s)" % other[:10])
    ok([i for (i, _) in eio] == [xi],
       "exactly the damaged block %d fails with EIO (failing: %s)" % (xi, eio[:10]))
    expect_errno("a 4 KiB read inside the damaged block fails with EIO",
                 errno.EIO, h.pread, 4096, X + 8192)
    expect_errno("a 512-byte read inside the damaged block fails with EIO",
                 errno.EIO, h.pread, 512, X + 512)
    expect_errno("a read spanning the damaged block and its neighbours fails with EIO",
                 errno.EIO, h.pread, 3 * VBS, X - VBS)
    expect_errno("an unaligned read touching the damaged block fails with EIO",
                 errno.EIO, h.pread, 1000, X + VBS - 10)
    ok(h.pread(VBS, X - VBS) == expected(xi - 1) and
       h.pread(VBS, X + VBS) == expected(xi + 1),
       "the neighbours of the damaged block read fine")
    ok(h.pread(2 * MiB, 0) == b"".join(expected(i) for i in range(2 * MiB // VBS)),
       "a large read away from the damage reads fine")
    # the connection still works after errors
    h.flush()
    # No read on the write path: a partial write of an uncached block does
    # not read the old block, so it succeeds; what it wrote reads back,
    # the rest of the block still fails (a sync that cannot merge it
    # keeps the damage and says the write is lost: test_dmu).
    h.pwrite(b"\x55" * 4096, X + 4096)
    ok(h.pread(4096, X + 4096) == b"\x55" * 4096,
       "a partial write into the damaged block reads back")
    try:
        h.pread(VBS, X)
        got = "no error"
    except nbd.Error as e:
        got = errname(e)
    ok(got == "EIO", "the damaged block still fails with EIO after the "
       "partial write (got %s)" % got)
    new = pattern("healed", VBS)
    h.pwrite(new, X)
    ok(h.pread(VBS, X) == new, "a whole-block overwrite heals the damaged block")
    h.flush()
elif op == "scatter":
    # after random damage: every block reads right or fails with EIO
    bad, eio, other = [], [], []
    for i in range(REG // VBS):
        want = pattern("healed", VBS) if i * VBS == X else expected(i)
        try:
            if h.pread(VBS, i * VBS) != want:
                bad.append(i)
        except nbd.Error as e:
            (eio if e.errnum == errno.EIO else other).append(i)
    print("scattered damage: %d of %d blocks fail with EIO" % (len(eio), REG // VBS))
    ok(len(eio) <= maxeio, "at most %d blocks fail (failing: %s)" % (maxeio, eio[:10]))
    ok(not bad, "after scattered damage no block returns wrong data (wrong: %s)" % bad[:10])
    ok(not other, "after scattered damage errors are EIO only (others: %s)" % other[:10])
    ok(h.pread(MiB, 100 * MiB) == bytes(MiB),
       "after scattered damage a never-written range still reads zeros")
elif op == "healed":
    ok(h.pread(VBS, X) == pattern("healed", VBS),
       "the healed block reads back after a restart")
    ok(all(h.pread(VBS, i * VBS) == expected(i)
           for i in range(REG // VBS) if i * VBS != X),
       "the rest of the region reads back after a restart")
finish()
EOF

cat >"$ZV_TMP/corrupt.py" <<'EOF'
# Flip 64 bytes in the middle of every copy of the victim pattern in the
# device file; print the number of copies.
import sys
sys.path.insert(0, sys.argv[2])
from zvtest import pattern
dev = sys.argv[1]
pat = pattern("victim", 16384)
data = open(dev, "rb").read()
found, pos = [], data.find(pat)
while pos >= 0:
    found.append(pos)
    pos = data.find(pat, pos + 1)
with open(dev, "r+b") as f:
    for p in found:
        f.seek(p + 8000)
        f.write(bytes(b ^ 0xFF for b in data[p + 8000:p + 8064]))
print(len(found), " ".join(map(str, found)))
EOF

cat >"$ZV_TMP/scatter.py" <<'EOF'
# Flip 16 bytes in random used 4 KiB sectors of the data area (between
# the labels): NMETA among the sectors that do not hold the volume's data
# (metadata: indirect blocks, space maps, object set; or stale copies),
# NDATA among those that do.  Prints the counts and the device offsets.
import random, sys
dev, seed, nmeta, ndata, X, tmp = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                   int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
sys.path.insert(0, tmp)
from zvtest import pattern
LABEL, S, VBS, REG = 256 * 1024, 4096, 16384, 8 << 20
known = set()
for i in range(REG // VBS):
    blk = pattern("healed" if i * VBS == X else "blk%d" % i, VBS)
    known.update(blk[k:k + S] for k in range(0, VBS, S))
data = open(dev, "rb").read()
end = len(data) // S * S - LABEL
zero = bytes(S)
used = [o for o in range(LABEL, end, S) if data[o:o + S] != zero]
dat = [o for o in used if data[o:o + S] in known]
meta = [o for o in used if data[o:o + S] not in known]
rng = random.Random(seed)
if nmeta < 0:                       # -1: every non-data sector
    nmeta = len(meta)
pick = rng.sample(meta, min(nmeta, len(meta))) + rng.sample(dat, min(ndata, len(dat)))
with open(dev, "r+b") as f:
    for o in sorted(pick):
        at = o + rng.randrange(0, S - 16)
        f.seek(at)
        f.write(bytes(b ^ 0x5A for b in data[at:at + 16]))
print(len(dat), len(meta), " ".join(map(str, sorted(pick))))
EOF

zv_log "create a 256 MiB pool, volblocksize=16K, write 8 MiB of known data"
start_zvol "$sock" device="$pool" create=true size=256M volblocksize=16K ||
    die "create the pool"
py_checks "write known data" "$ZV_TMP/damage.py" "$uri" write "$X" || :
check "clean stop" stop_zvol

zv_log "find the 16 KiB victim pattern (volume offset $X) in the device file"
read -r ncopies where < <(timeout 300 "$NBD_PY" "$ZV_TMP/corrupt.py" "$pool" "$ZV_TMP")
zv_log "found $ncopies copies at device offsets: ${where:-none}"
if [ "$ncopies" -eq 0 ]; then
    die "the victim pattern is stored verbatim in the device file (not found: is the data compressed or encrypted?)"
fi
zv_pass "the victim pattern was found on the device and damaged ($ncopies copies)"

start_zvol "$sock" device="$pool" control="$ZV_TMP/ctl" ||
    die "the pool imports with a damaged data block"
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status0.out" 2>&1 ||
    zv_fail "zvoladm status before the reads"
check "status before the reads: no errors" \
    grep -q "^errors: none since the pool was opened$" "$ZV_TMP/status0.out"
py_checks "reads of damaged and intact blocks" "$ZV_TMP/damage.py" "$uri" check "$X" || :
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status1.out" 2>&1 ||
    zv_fail "zvoladm status after the reads"
# Device 0's row: DEV READ WRITE CKSUM PATH; every copy of the block
# failed its checksum at least once, none failed to read.
check "status counts the checksum errors on the device, no read errors" \
    awk -v p="$pool" '$1 == "0" && $5 == p && $2 == 0 && $3 == 0 && $4 >= '"$ncopies"' { ok = 1 }
        END { exit !ok }' "$ZV_TMP/status1.out"
check "status: errors reported" grep -q "^errors: [1-9][0-9]* since the pool was opened" "$ZV_TMP/status1.out"
check "clean stop" stop_zvol
start_zvol "$sock" device="$pool" || die "the pool imports after healing"
py_checks "healed block after a restart" "$ZV_TMP/damage.py" "$uri" healed "$X" || :
check "clean stop" stop_zvol

# Scattered damage, four times on copies of the pool: one sector of
# metadata (never both copies of a block, so the second copy must serve)
# and two of data.
cp --sparse=always "$pool" "$ZV_TMP/pool.orig"
for k in 1 2 3 4; do
    zv_log "scattered damage $k: flip bytes in 1 random non-data and 2 data sectors"
    cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
    read -r ndata nmeta where < <(timeout 300 "$NBD_PY" "$ZV_TMP/scatter.py" "$pool" \
        $((ZVOL_TEST_SEED + k)) 1 2 "$X" "$ZV_TMP")
    zv_log "$ndata data and $nmeta other used sectors; damaged at device offsets: $where"
    if start_zvol "$sock" device="$pool"; then
        zv_pass "scattered damage $k: the pool imports"
        py_checks "scattered damage $k: reads" "$ZV_TMP/damage.py" "$uri" scatter "$X" || :
        check "scattered damage $k: server still running" zvol_running
        check "scattered damage $k: clean stop" stop_zvol
    else
        zv_fail "scattered damage $k: the pool imports (metadata is written twice)"
    fi
done

# Every used sector that is not volume data damaged: nothing verifies, so
# the import must fail -- or, if it serves, serve only right data or EIO
# (a rewind to an older, emptier txg would read zeros: wrong data).
zv_log "all non-data sectors damaged"
cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
read -r ndata nmeta where < <(timeout 300 "$NBD_PY" "$ZV_TMP/scatter.py" "$pool" \
    "$ZVOL_TEST_SEED" -1 0 "$X" "$ZV_TMP")
zv_log "damaged all $nmeta non-data sectors"
if expect_start_failure "$ZV_TMP/allmeta.log" device="$pool"; then
    zv_pass "all metadata damaged: the import fails: $(grep -i error "$ZV_TMP/allmeta.log" | tail -n 1)"
else
    zv_log "all metadata damaged: the pool imported; checking it serves no wrong data"
    start_zvol "$sock" device="$pool" || die "import (second try)"
    py_checks "all metadata damaged: reads" "$ZV_TMP/damage.py" "$uri" scatter "$X" 512 || :
    check "all metadata damaged: clean stop" stop_zvol
fi

zv_summary
