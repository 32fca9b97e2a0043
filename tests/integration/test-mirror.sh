#!/usr/bin/env bash
# test-mirror.sh: a pool on a mirror of two files, served by nbdkit.
#
#  1. create device=mirror:a.img,b.img (relative names, resolved before
#     nbdkit changes directory), write 8 MiB of known data, stop;
#  2. damage side a in the victim block and in 8 random other data
#     blocks; serve with mirror_read_side=1 (reads meet side a first):
#     every block reads right, no EIO; zvoladm status lists the mirror
#     ONLINE with its two sides, side 0 counting the checksum errors;
#     after a stop the damaged places of a.img hold b.img's bytes again;
#  2b. damage side b in 9 data blocks; serve reading side a only: a
#     live scrub (zvoladm scrub -w) repairs every copy on side b, a
#     second finds nothing, and the places hold side a's bytes again;
#  3. side b missing: the pool is served degraded (status DEGRADED, side
#     1 FAULTED), every block reads right, writes go on; with b back the
#     stale side is healed as it is read and the new data reads right;
#  4. zvoladm replace zvol b.img c.img while served: status shows side 1
#     RESILVERING and the progress, reads stay right, the resilver ends
#     (ONLINE), and c.img alone (a.img away) serves every block right.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup
zv_admin_setup

sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
VBS=16384
X=$((3 * 1024 * 1024 + 7 * VBS))
A=$ZV_TMP/a.img
B=$ZV_TMP/b.img

cat >"$ZV_TMP/mirror.py" <<'EOF'
import errno, sys
import nbd
from zvtest import *

uri, op, X = sys.argv[1], sys.argv[2], int(sys.argv[3])
MiB, VBS, REG = 1 << 20, 16384, 8 << 20

def expected(i, gen):
    if gen == "new" and i < 64:
        return pattern("new%d" % i, VBS)
    return pattern("victim" if i * VBS == X else "blk%d" % i, VBS)

h = connect(uri, strict=False)
if op == "write":
    for i in range(REG // VBS):
        h.pwrite(expected(i, "old"), i * VBS)
    h.flush()
elif op in ("check", "checknew"):
    gen = "new" if op == "checknew" else "old"
    bad, errs = [], []
    for i in range(REG // VBS):
        try:
            if h.pread(VBS, i * VBS) != expected(i, gen):
                bad.append(i)
        except nbd.Error as e:
            errs.append((i, errname(e)))
    ok(not errs, "no read fails (failing: %s)" % errs[:10])
    ok(not bad, "every block reads right (wrong: %s)" % bad[:10])
elif op == "writenew":
    for i in range(64):
        h.pwrite(expected(i, "new"), i * VBS)
    h.flush()
    ok(True, "writes to a degraded mirror succeed")
finish()
EOF

cat >"$ZV_TMP/damage.py" <<'EOF'
# Flip 64 bytes of the victim block and of NDATA other data blocks on
# side a only; print the offsets damaged.
import random, sys
a, seed, ndata, X, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, tmp)
from zvtest import pattern
VBS, REG = 16384, 8 << 20
data = open(a, "rb").read()
rng = random.Random(seed)
blocks = [i for i in range(REG // VBS) if i * VBS != X]
want = [pattern("victim", VBS)] + [pattern("blk%d" % i, VBS)
                                   for i in rng.sample(blocks, ndata)]
offs = []
with open(a, "r+b") as f:
    for p in want:
        at = data.find(p)
        if at < 0:
            continue
        f.seek(at + 4000)
        f.write(bytes(b ^ 0xFF for b in data[at + 4000:at + 4064]))
        offs.append(at)
print(" ".join(map(str, offs)))
EOF

cat >"$ZV_TMP/same.py" <<'EOF'
# Do a and b hold the same 16 KiB at every offset given?
import sys
a, b = open(sys.argv[1], "rb"), open(sys.argv[2], "rb")
bad = []
for o in map(int, sys.argv[3:]):
    a.seek(o); b.seek(o)
    if a.read(16384) != b.read(16384):
        bad.append(o)
print(" ".join(map(str, bad)))
sys.exit(1 if bad else 0)
EOF

zv_log "create a pool on mirror:a.img,b.img (relative names), write 8 MiB"
here=$PWD
cd "$ZV_TMP"
start_zvol "$sock" device=mirror:a.img,b.img create=true size=64M \
    volblocksize=16K || die "create the mirrored pool"
cd "$here"
check "both sides were made" test -s "$A" -a -s "$B"
py_checks "write known data" "$ZV_TMP/mirror.py" "$uri" write "$X" || :
check "clean stop" stop_zvol

zv_log "damage side a: the victim block and 8 random data blocks"
where=$(timeout 300 "$NBD_PY" "$ZV_TMP/damage.py" "$A" 42 8 "$X" "$ZV_TMP")
n=$(echo "$where" | wc -w)
check "9 blocks found and damaged on side a only ($n)" test "$n" -eq 9
check_not "the sides differ where side a was damaged" \
    "$NBD_PY" "$ZV_TMP/same.py" "$A" "$B" $where

start_zvol "$sock" device="mirror:$A,$B" control="$ZV_TMP/ctl" \
    mirror_read_side=1 || die "the pool imports with side a damaged"
py_checks "every read right over a damaged side" "$ZV_TMP/mirror.py" "$uri" check "$X" || :
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status1.out" 2>&1 ||
    zv_fail "zvoladm status after the reads"
cat "$ZV_TMP/status1.out"
check "status: pool ONLINE" grep -q "^ state: ONLINE$" "$ZV_TMP/status1.out"
check "status: the mirror ONLINE" grep -q "mirror ONLINE$" "$ZV_TMP/status1.out"
# Side rows: READ WRITE CKSUM side N STATE PATH ...
check "status: side 0 counts the checksum errors, no read errors" \
    awk -v p="$A" '$4 == "side" && $5 == "0" && $6 == "ONLINE" && $7 == p &&
        $1 == 0 && $2 == 0 && $3 >= 9 { ok = 1 } END { exit !ok }' "$ZV_TMP/status1.out"
check "status: side 1 has no errors" \
    awk -v p="$B" '$4 == "side" && $5 == "1" && $6 == "ONLINE" && $7 == p &&
        $1 == 0 && $2 == 0 && $3 == 0 { ok = 1 } END { exit !ok }' "$ZV_TMP/status1.out"
check "status: the mirror itself has no errors" \
    awk '$1 == "0" && $5 ~ /^mirror:/ && $2 == 0 && $3 == 0 && $4 == 0 { ok = 1 }
        END { exit !ok }' "$ZV_TMP/status1.out"
check "the log tells of the rewrites" grep -q "rewritten from side 1" "$ZV_LOG"
check "clean stop" stop_zvol
check "every damaged place of side a was rewritten" \
    "$NBD_PY" "$ZV_TMP/same.py" "$A" "$B" $where

zv_log "side b damaged in 9 data blocks, read from side a only: a live scrub repairs side b"
where=$(timeout 300 "$NBD_PY" "$ZV_TMP/damage.py" "$B" 7 8 "$X" "$ZV_TMP")
n=$(echo "$where" | wc -w)
check "9 blocks found and damaged on side b only ($n)" test "$n" -eq 9
start_zvol "$sock" device="mirror:$A,$B" control="$ZV_TMP/ctl" \
    mirror_read_side=1 || die "the pool imports with side b damaged"
"$ADM" -S "$ZV_TMP/ctl" scrub -w zvol >"$ZV_TMP/scrub1.out" 2>&1 || :
cat "$ZV_TMP/scrub1.out"
check "the scrub repaired every damaged copy, lost none" \
    grep -Eq "repaired (9|[1-9][0-9]+) copies, repairs failed 0, blocks that could not be repaired 0" \
    "$ZV_TMP/scrub1.out"
"$ADM" -S "$ZV_TMP/ctl" scrub -w zvol >"$ZV_TMP/scrub2.out" 2>&1 || :
check "a second scrub finds nothing" \
    grep -Eq "repaired 0 copies, repairs failed 0, blocks that could not be repaired 0" \
    "$ZV_TMP/scrub2.out"
check "clean stop" stop_zvol
check "every damaged place of side b holds side a's bytes again" \
    "$NBD_PY" "$ZV_TMP/same.py" "$A" "$B" $where

zv_log "side b missing: degraded"
mv "$B" "$B.away"
start_zvol "$sock" device="mirror:$A,$B" control="$ZV_TMP/ctl" ||
    die "the pool imports with side b missing"
check "the log says the mirror is degraded" grep -q "DEGRADED" "$ZV_LOG"
py_checks "every read right, degraded" "$ZV_TMP/mirror.py" "$uri" check "$X" || :
py_checks "writes, degraded" "$ZV_TMP/mirror.py" "$uri" writenew "$X" || :
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status2.out" 2>&1 ||
    zv_fail "zvoladm status, degraded"
cat "$ZV_TMP/status2.out"
check "status: pool DEGRADED" grep -q "^ state: DEGRADED$" "$ZV_TMP/status2.out"
check "status: the mirror DEGRADED" grep -q "mirror DEGRADED$" "$ZV_TMP/status2.out"
check "status: side 1 FAULTED, cannot be opened" \
    grep -q "side 1 FAULTED .*cannot be opened" "$ZV_TMP/status2.out"
check "clean stop" stop_zvol

zv_log "side b back, stale: healed as it is read"
mv "$B.away" "$B"
start_zvol "$sock" device="mirror:$A,$B" control="$ZV_TMP/ctl" \
    mirror_read_side=2 || die "the pool imports with side b back"
py_checks "every read right with the stale side back" "$ZV_TMP/mirror.py" "$uri" checknew "$X" || :
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status3.out" 2>&1 ||
    zv_fail "zvoladm status, side b back"
check "status: pool ONLINE again" grep -q "^ state: ONLINE$" "$ZV_TMP/status3.out"
check "status: stale blocks of side 1 counted as checksum errors" \
    awk '$4 == "side" && $5 == "1" && $3 > 0 { ok = 1 } END { exit !ok }' "$ZV_TMP/status3.out"
check "clean stop" stop_zvol

zv_log "replace side b by c.img online: resilvered, whole again"
C=$ZV_TMP/c.img
truncate -s "$(stat -c %s "$A")" "$C"
start_zvol "$sock" device="mirror:$A,$B" control="$ZV_TMP/ctl" \
    resilver_delay=50 || die "serve before the replace"
"$ADM" -S "$ZV_TMP/ctl" replace zvol "$B" "$C" >"$ZV_TMP/replace.out" 2>&1 ||
    zv_fail "zvoladm replace: $(cat "$ZV_TMP/replace.out")"
check "replace says it is resilvering" grep -q "resilvering" "$ZV_TMP/replace.out"
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status4.out" 2>&1 || :
cat "$ZV_TMP/status4.out"
check "status: side 1 RESILVERING on c.img" \
    awk -v p="$C" '$4 == "side" && $5 == "1" && $6 == "RESILVERING" && $7 == p { ok = 1 }
        END { exit !ok }' "$ZV_TMP/status4.out"
check "status: resilver progress shown" grep -q "^resilver: device 0 side 1, " "$ZV_TMP/status4.out"
check "status: pool DEGRADED while resilvering" grep -q "^ state: DEGRADED$" "$ZV_TMP/status4.out"
py_checks "every read right while resilvering" "$ZV_TMP/mirror.py" "$uri" checknew "$X" || :
for _ in $(seq 600); do
    grep -q "the mirror is whole" "$ZV_LOG" && break
    sleep 0.1
done
check "the log says the mirror is whole" grep -q "the mirror is whole" "$ZV_LOG"
"$ADM" -S "$ZV_TMP/ctl" status >"$ZV_TMP/status5.out" 2>&1 || :
check "status: pool ONLINE after the resilver" grep -q "^ state: ONLINE$" "$ZV_TMP/status5.out"
check "status: side 1 ONLINE on c.img" \
    awk -v p="$C" '$4 == "side" && $5 == "1" && $6 == "ONLINE" && $7 == p { ok = 1 }
        END { exit !ok }' "$ZV_TMP/status5.out"
check "clean stop" stop_zvol
zv_log "side a away: c.img alone holds the pool"
mv "$A" "$A.away"
start_zvol "$sock" device="mirror:$A,$C" || die "serve from the new side alone"
py_checks "every read right from the resilvered side alone" "$ZV_TMP/mirror.py" "$uri" checknew "$X" || :
check "clean stop" stop_zvol
mv "$A.away" "$A"

zv_summary
