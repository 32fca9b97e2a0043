#!/usr/bin/env bash
# test-scrub.sh: zvoladm scrub on a pool nbdkit serves.  Volume a (and
# its snapshot a@s1) and volume b written through nbdkit; then, with the
# server stopped, one copy of random metadata blocks flipped on the
# image (indirect blocks, the pool's objects: one of the two ditto
# copies of each, never both) and one data block of a (its only copy).
# Served again: every read of a, a@s1 and b returns the bytes written
# (the damaged data block: EIO, never other bytes).  The live check
# finds the damage; the live scrub (in the server's background, waited
# for with -w), while a client writes to b, repairs every metadata copy
# and names the data block it cannot repair with its snapshot and
# offset (exit 1; status lists it, with the device's error counts); a
# second scrub finds only that block; written again, a third finds
# nothing (exit 0); offline, check and scrub find nothing either.
# Damage made again: a scrub paced by scan_rate_max, killed (kill -9) a
# third of the way, is resumed by the restarted server from its place
# (persisted with the txgs) and finishes; a check then finds all of it
# repaired.  Then the offline scrub: damage made on the
# stopped pool repaired by zvoladm scrub -d with no server.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

zv_admin_setup
pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
truncate -s 256M "$pool"

rc_is 0 "zvoladm create tank" "$ADM" create tank "$pool"
# Uncompressed: the data block to damage is found by its mark.
rc_is 0 "a 32M volume" "$ADM" create -V 32M -o compression=off tank/a
rc_is 0 "a 16M volume" "$ADM" create -V 16M tank/b
zv_runtime_pool tank

# The bytes each export must read as: written by seed, so the reader
# below can make them again.
cat >"$ZV_TMP/content.py" <<'PYEOF'
import random
MARK = b"ZVSCRUBMARK" * 1489 + b"Z" * 5        # one 16K block
def a_before():                                 # a as the snapshot holds it
    d = bytearray(random.Random(1).randbytes(24 << 20))
    d[8 << 20:(8 << 20) + len(MARK)] = MARK
    return bytes(d) + bytes(8 << 20)
def a_after():                                  # a: [2M, 4M) written again
    d = bytearray(a_before())
    d[2 << 20:4 << 20] = random.Random(2).randbytes(2 << 20)
    return bytes(d)
def b():
    return random.Random(3).randbytes(12 << 20) + bytes(4 << 20)
PYEOF

zv_log "data written through nbdkit, a snapshot between"
start_zvol "$sock" "$pool" || die "serve the pool"
PYTHONPATH=$ZV_TMP nbdsh -u "nbd+unix:///a?socket=$sock" -c '
import content
d = content.a_before()
for off in range(0, 24 << 20, 1 << 20):
    h.pwrite(d[off:off + (1 << 20)], off)
h.flush()'
rc_is 0 "snapshot tank/a@s1, live" "$ADM" snapshot tank/a@s1
PYTHONPATH=$ZV_TMP nbdsh -u "nbd+unix:///a?socket=$sock" -c '
import content
h.pwrite(content.a_after()[2 << 20:4 << 20], 2 << 20)
h.flush()'
PYTHONPATH=$ZV_TMP nbdsh -u "nbd+unix:///b?socket=$sock" -c '
import content
d = content.b()
for off in range(0, 12 << 20, 1 << 20):
    h.pwrite(d[off:off + (1 << 20)], off)
h.flush()'
stop_zvol "$sock" || zv_fail "the server stops cleanly"
rc_is 0 "clean before the damage" "$ADM" check tank

# Damage: one copy of COUNT random metadata blocks (found by their
# header's magic; ditto copies hold the same bytes, so at most one of
# each set of equal blocks is touched), and the marked data block.
# Stale blocks (freed, not yet reused) are damaged too: nothing reads
# them, and the check says which of the damaged copies are live.  At
# most 8 (and the data block): the reports list the first 10 of each
# kind in full, so every damaged copy is listed.  MODE "fresh": half of
# the sets picked among the blocks of the newest txg on the image (its
# header's mh_txg), which on a stopped pool are live but for a block a
# later pass of that txg's sync wrote again: stale sets
# outnumber live ones ten to one once the pool has been written a while
# (and every damaged copy makes a set of its own), so random picks alone
# can all miss.
cat >"$ZV_TMP/damage.py" <<'PYEOF'
import hashlib, random, sys
path, seed, count, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
MAGIC = (0x4b4c424d4f565a00).to_bytes(8, "little")
rng = random.Random(seed)
data = open(path, "rb").read()
groups = {}
for off in range(0, len(data), 4096):
    if data[off:off + 8] == MAGIC:
        key = hashlib.sha256(data[off:off + 4096]).digest()
        groups.setdefault(key, []).append(off)
f = open(path, "r+b")
n = 0
keys = sorted(groups)
picked = []
if mode == "fresh" and keys:
    txg = {k: int.from_bytes(data[groups[k][0] + 16:groups[k][0] + 24], "little") for k in keys}
    newest = [k for k in keys if txg[k] == max(txg.values())]
    picked = rng.sample(newest, min(len(newest), max(1, count // 2)))
    keys = [k for k in keys if k not in picked]
picked += rng.sample(keys, min(count - len(picked), len(keys)))
for key in picked:
    off = rng.choice(groups[key]) + 64 + rng.randrange(4000)
    f.seek(off)
    f.write(bytes([data[off] ^ 0xff]))
    n += 1
if mode == "mark":
    m = data.find(b"ZVSCRUBMARK" * 4)
    assert m > 0, "the marked block is not in the image"
    f.seek(m + 100)
    f.write(b"X")
    print(m)
f.close()
print("damaged %d metadata copies of %d sets" % (n, len(groups)), file=sys.stderr)
PYEOF
seed=${ZV_TEST_SEED:-$RANDOM}
# damage_offline SEED COUNT: damage as above (no data block) on the
# stopped pool until the offline check finds some of it live (stale
# blocks are found by magic too, and nothing reads them): at most 5
# tries, each with the next seed.  $ndamaged: the copies it found.
damage_offline ()
{
    local s=$1 n=$2 try
    ndamaged=0
    for try in 1 2 3 4 5; do
        "$NBD_PY" "$ZV_TMP/damage.py" "$pool" "$((s + try))" "$n" fresh
        "$ADM" check tank >"$ZV_TMP/dmg.out" 2>&1 || :
        ndamaged=$(sed -n 's/^  checksum errors \([0-9]*\),.*/\1/p' "$ZV_TMP/dmg.out")
        [ "${ndamaged:-0}" -gt 0 ] && return 0
    done
    return 0
}
zv_log "damage (seed $seed; set ZV_TEST_SEED to replay)"
mark_off=$("$NBD_PY" "$ZV_TMP/damage.py" "$pool" "$seed" 8 mark)
check "the marked block found" test "$mark_off" -gt 0
# The live scrub below must meet damage in a's trees, which only b's
# writer leaves alone (a damaged space map or objset copy is rewritten
# by the next txgs before the scrub reaches it): damage more, with the
# next seeds, until the offline check finds some there (5 tries).
for try in 1 2 3 4 5; do
    "$ADM" check tank >"$ZV_TMP/dmg.out" 2>&1 || :
    grep -Eq "^(volume 'a'|snapshot 'a@s1').* copy [12] of 2: checksum error" \
        "$ZV_TMP/dmg.out" && break
    "$NBD_PY" "$ZV_TMP/damage.py" "$pool" "$((seed + 100 + try))" 4 none
done
check "damage in a's trees" grep -Eq \
    "^(volume 'a'|snapshot 'a@s1').* copy [12] of 2: checksum error" "$ZV_TMP/dmg.out"

# Reads of every export: the bytes written, or EIO at the damaged block.
cat >"$ZV_TMP/reads.py" <<'PYEOF'
import nbd, sys, content
sock, lost = sys.argv[1], [int(x) for x in sys.argv[2:]]
bad = 0
for name, want in (("a", content.a_after()), ("a@s1", content.a_before()),
                   ("b", content.b()[:12 << 20])):   # the writer's: after
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    for off in range(0, len(want), 16384):
        try:
            got = h.pread(16384, off)
        except nbd.Error as e:
            if off in lost and e.errnum == 5:
                continue
            print("%s offset %d: %s" % (name, off, e)); bad += 1; continue
        if got != want[off:off + 16384]:
            print("%s offset %d: wrong bytes" % (name, off)); bad += 1
    h.shutdown()
sys.exit(1 if bad else 0)
PYEOF

zv_log "served again: reads right, the live check sees the damage"
start_zvol "$sock" "$pool" txg_timeout=1 || die "serve the damaged pool"
# The volume offset of the marked block is 8M (in a and a@s1 alike).
rc_is 0 "every read right (the lost block: EIO)" env PYTHONPATH="$ZV_TMP" \
    "$NBD_PY" "$ZV_TMP/reads.py" "$sock" $((8 << 20))
rc_is 1 "live check finds the damage" "$ADM" check tank
cp "$ZV_TMP/adm.out" "$ZV_TMP/check1.out"
nmeta=$(grep -c "copy [12] of 2: checksum error" "$ZV_TMP/check1.out" || :)
zv_log "the check found $nmeta damaged live metadata copies"
check "damaged metadata copies are live" test "$nmeta" -gt 0
check "the data block: lost" grep -q "level 0 block 512: no copy verifies" "$ZV_TMP/check1.out"

zv_log "live scrub while a client writes to b"
rm -f "$ZV_TMP/writer.stop"
cat >"$ZV_TMP/writer.py" <<'PYEOF'
import nbd, os, random, sys
h = nbd.NBD()
h.set_export_name("b")
h.connect_unix(sys.argv[1])
n = 0
while not os.path.exists(sys.argv[2]):
    ln = 4096 << random.randrange(5)
    off = (12 << 20) + random.randrange((4 << 20) // ln) * ln
    h.pwrite(os.urandom(ln), off, nbd.CMD_FLAG_FUA if n % 3 == 0 else 0)
    n += 1
h.flush()
h.shutdown()
open(sys.argv[3], "w").write("%d\n" % n)
PYEOF
"$NBD_PY" "$ZV_TMP/writer.py" "$sock" "$ZV_TMP/writer.stop" "$ZV_TMP/writer.count" &
writer=$!
track_pid "$writer"
sleep 1
rc_is 1 "scrub -p: none is running" "$ADM" scrub -p tank
check "says so" grep -q "no scrub is running" "$ZV_TMP/adm.err"
rc_is 0 "status before: no scan" "$ADM" status tank
check "scan: none requested" grep -q "^  scan: none requested" "$ZV_TMP/adm.out"
rc_is 1 "live scrub -w: repairs, one block it cannot" "$ADM" scrub -w -v tank
cp "$ZV_TMP/adm.out" "$ZV_TMP/scrub1.out"
check "started" grep -q "^pool tank: scrub started" "$ZV_TMP/scrub1.out"
check "progress on stderr (-v), to 100%" grep -q "^scrub: .* (100.0%)" "$ZV_TMP/adm.err"
check "finished" grep -q "^  scan: scrub finished, " "$ZV_TMP/scrub1.out"
check "the summary counts repairs" grep -Eq "^        repaired [1-9][0-9]* copies, repairs failed 0, blocks that could not be repaired 1 " "$ZV_TMP/scrub1.out"
check "the lost block listed by snapshot and offset" \
    grep -q "^        snapshot 'a@s1' offset $((8 << 20)), 16384 bytes$" "$ZV_TMP/scrub1.out"
check "problems remain" grep -q "^Problems remain." "$ZV_TMP/scrub1.out"
rc_is 0 "status after it" "$ADM" status tank
check "status: the scan" grep -q "^  scan: scrub finished, " "$ZV_TMP/adm.out"
check "status: the damaged block" grep -q "^        snapshot 'a@s1' offset $((8 << 20)), 16384 bytes$" "$ZV_TMP/adm.out"
check "status: the device's checksum errors" grep -Eq "^     0 +0 +0 +[1-9][0-9]*  $pool" "$ZV_TMP/adm.out"
grep "scrub: " "$ZV_LOG" | sed 's/^.*scrub: //' >"$ZV_TMP/scrub1.log" || :
check "the server logged copies repaired" grep -q ": repaired$" "$ZV_TMP/scrub1.log"
check_not "no repair failed" grep -q "repair failed" "$ZV_TMP/scrub1.log"
check "the server logged the lost block with its place" \
    grep -q "no copy verifies (what it holds is lost: snapshot 'a@s1' offset $((8 << 20)), 16384 bytes)" "$ZV_TMP/scrub1.log"
# Every damaged copy of a's trees the check saw (they do not change
# while only b is written) is repaired by the scrub.
grep -E "^(volume 'a'|snapshot 'a@s1').* copy [12] of 2: checksum error" "$ZV_TMP/check1.out" \
    | sed 's/, birth txg.*//' | sort >"$ZV_TMP/a-damaged" || :
grep -E ": repaired$" "$ZV_TMP/scrub1.log" | sed 's/, birth txg.*//' | sort >"$ZV_TMP/repaired"
check "every damaged copy of a's trees repaired" \
    test -z "$(comm -23 "$ZV_TMP/a-damaged" "$ZV_TMP/repaired")"
zv_log "$(wc -l <"$ZV_TMP/a-damaged") of a's copies damaged, $(wc -l <"$ZV_TMP/repaired") copies repaired in all"
touch "$ZV_TMP/writer.stop"
wait "$writer" || zv_fail "the writer failed"

rc_is 1 "second scrub: only the lost block" "$ADM" scrub -w tank
check "nothing repaired, one checksum error" grep -q "^        repaired 0 copies, repairs failed 0, blocks that could not be repaired 1 (checksum errors 1, read errors 0)$" "$ZV_TMP/adm.out"
rc_is 0 "every read right still" env PYTHONPATH="$ZV_TMP" \
    "$NBD_PY" "$ZV_TMP/reads.py" "$sock" $((8 << 20))

zv_log "the lost block written again, the snapshot destroyed"
nbdsh -u "nbd+unix:///a?socket=$sock" -c '
h.pwrite(b"ZVSCRUBMARK" * 1489 + b"Z" * 5, 8 << 20)
h.flush()'
rc_is 0 "destroy tank/a@s1" "$ADM" destroy tank/a@s1
rc_is 0 "wait for its blocks to be freed" "$ADM" wait tank
sleep 2   # txg_timeout=1: the frees synced
rc_is 0 "third scrub, started" "$ADM" scrub tank
check "it returns at once" grep -q "^pool tank: scrub started" "$ZV_TMP/adm.out"
rc_is 0 "scrub -w waits for the one running" "$ADM" scrub -w tank
check "no problems" grep -q "^No problems found." "$ZV_TMP/adm.out"
rc_is 1 "scrub -s: none running or paused" "$ADM" scrub -s tank
stop_zvol "$sock" || zv_fail "the server stops cleanly"
rc_is 0 "offline check: clean" "$ADM" check tank
rc_is 0 "offline scrub: clean" "$ADM" scrub tank
check "no problems" grep -q "^No problems found." "$ZV_TMP/adm.out"
rc_is 1 "offline scrub -p: no server" "$ADM" scrub -p tank
rc_is 0 "offline status: no scan" "$ADM" status tank
check "scan: none requested" grep -q "^  scan: none requested" "$ZV_TMP/adm.out"

zv_log "offline scrub: metadata damaged on the stopped pool"
damage_offline "$((seed + 10))" 8
rc_is 1 "offline check finds it" "$ADM" check tank
nmeta=$(sed -n 's/^  checksum errors \([0-9]*\),.*/\1/p' "$ZV_TMP/adm.out")
check "damaged live copies" test "${nmeta:-0}" -gt 0
rc_is 0 "offline scrub -v -d POOL.IMG repairs all of it" "$ADM" scrub -v -d "$pool" tank
check "as many repaired as the check found" grep -q "^  repaired $nmeta copies, repairs failed 0, blocks that could not be repaired 0$" "$ZV_TMP/adm.out"
check "all repaired" grep -q "^All damage found was repaired." "$ZV_TMP/adm.out"
check "progress on stderr" grep -q "^scrub: .* (100.0%)" "$ZV_TMP/adm.err"
rc_is 0 "offline check after it: clean" "$ADM" check tank
zv_log "a scrub killed half way (kill -9) resumes when the server comes back"
damage_offline "$((seed + 20))" 24
rc_is 1 "offline check: damage to repair" "$ADM" check tank
check "damaged live copies" test "${ndamaged:-0}" -gt 0
# Paced (scan_rate_max), so that it is still running when killed.
start_zvol "$sock" "$pool" txg_timeout=1 scan_rate_max=2M || die "serve the pool"
rc_is 0 "scrub, in the background" "$ADM" scrub tank
pct=0
for _ in $(seq 300); do
    "$ADM" status tank >"$ZV_TMP/st.out" 2>&1 || :
    pct=$(sed -n 's/^  scan: scrub in progress, .* (\([0-9]*\)\.[0-9]%).*/\1/p' "$ZV_TMP/st.out")
    [ -n "$pct" ] && [ "$pct" -ge 30 ] && break
    sleep 0.1
done
check "status: in progress, rate and time left" grep -Eq "^  scan: scrub in progress, .* examined of .* in [0-9]+s( \([0-9]+ pieces\))?, .*/s, ([0-9]+m)?[0-9]+s to go$" "$ZV_TMP/st.out"
zv_log "killed at ${pct:-?}%"
sleep 1.5     # txg_timeout=1 and the scrub's own txgs: its place synced
kill9_zvol "$sock" || zv_fail "kill -9"
start_zvol "$sock" "$pool" txg_timeout=1 || die "serve the pool again"
check "the server resumed the scrub from where it was" \
    grep -Eq "a scrub was running when the pool was last written, at [1-9][0-9]* of [0-9]+ bytes: resumed" "$ZV_LOG"
grep "a scrub was running" "$ZV_LOG" | tail -1 || :
"$ADM" status tank >"$ZV_TMP/st.out" 2>&1 || :
check "status: its time so far kept (it did not start over)" \
    grep -Eq "^  scan: scrub (in progress|finished), .* in ([1-9][0-9]*m)?[1-9][0-9]*s" "$ZV_TMP/st.out"
for _ in $(seq 600); do
    "$ADM" status tank >"$ZV_TMP/st.out" 2>&1 || :
    grep -q "^  scan: scrub finished" "$ZV_TMP/st.out" && break
    sleep 0.1
done
check "it finished" grep -q "^  scan: scrub finished" "$ZV_TMP/st.out"
sed -n '/scan:/,$p' "$ZV_TMP/st.out"
rc_is 0 "a live check after it: every damaged copy repaired" "$ADM" check tank
check "clean" grep -q "^No problems found." "$ZV_TMP/adm.out"
stop_zvol "$sock" || zv_fail "the server stops cleanly"
rc_is 0 "offline check: clean" "$ADM" check tank
rc_is 2 "usage: no pool" "$ADM" scrub
rc_is 2 "usage: a bad option" "$ADM" scrub -x tank
start_zvol "$sock" "$pool" || die "serve the pool again"
rc_is 0 "volume a reads back whole" nbdsh -u "nbd+unix:///a?socket=$sock" -c '
import sys
sys.path.insert(0, "'"$ZV_TMP"'")
import content
want = bytearray(content.a_after())
got = b"".join(h.pread(1 << 20, off) for off in range(0, 32 << 20, 1 << 20))
assert got == bytes(want), "volume a does not read back as written"'
stop_zvol "$sock" || zv_fail "the server stops cleanly"

zv_summary
