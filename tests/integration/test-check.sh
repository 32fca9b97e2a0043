#!/usr/bin/env bash
# test-check.sh: zvoladm check, the offline checker, on a pool nbdkit
# wrote: clean (exit 0, a summary, progress on stderr with -v); live,
# through the server's control socket, while clients write with FUA
# and flushes and in bulk (clean, five times; a check whose client is killed leaves
# no hold behind), then offline again; then with a data block damaged
# on disk (exit 1, the checksum error named with its volume, level,
# block, device and offset), and usage (exit 2).

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
# Uncompressed: the damage below finds a marked block in the image.
rc_is 0 "a 32M volume" "$ADM" create -V 32M -o compression=off tank/a
rc_is 0 "a thin 16M volume, 4K blocks" "$ADM" create -V 16M -b 4K -s tank/b

zv_log "data written through nbdkit"
start_zvol "$sock" "$pool" || die "serve the pool"
nbdsh -u "nbd+unix:///a?socket=$sock" -c '
import os
h.pwrite(os.urandom(3 << 20), 0)
h.pwrite(b"ZVCHECKMARK" * 1489 + b"Z" * 5, 8 << 20)   # one 16K block
h.trim(1 << 20, 0)
h.flush()'
nbdsh -u "nbd+unix:///b?socket=$sock" -c '
import os
h.pwrite(os.urandom(1 << 20), 4096)
h.flush()'
stop_zvol "$sock"

zv_log "zvoladm check: a clean pool"
rc_is 0 "check tank" "$ADM" check tank
check "the summary counts both trees" grep -q "^tank: 2 trees" "$ZV_TMP/adm.out"
check "no problems" grep -q "^No problems found." "$ZV_TMP/adm.out"
check "nothing leaked" grep -q "leaked 0B in 0 extents, doubly allocated 0B" "$ZV_TMP/adm.out"
check_not "no progress when stderr is no tty" grep -q "check:" "$ZV_TMP/adm.err"
rc_is 0 "check -v -d POOL.IMG tank" "$ADM" check -v -d "$pool" tank
check "-v: progress on stderr, to 100%" grep -q "^check: .* (100.0%)" "$ZV_TMP/adm.err"
rc_is 2 "usage: no pool" "$ADM" check
rc_is 2 "usage: a bad option" "$ADM" check -x tank
rc_is 1 "a pool not in the cache" "$ADM" check nosuch

zv_log "zvoladm check, live: while nbdkit serves and a client writes"
zv_runtime_pool tank
# Syncs every second at least, and whenever 200K are dirty: many txgs
# commit, and free what the checks' txg holds, while they run.
start_zvol "$sock" "$pool" txg_timeout=1 dirty_max=1M || die "serve the pool"
rm -f "$ZV_TMP/writer.stop" "$ZV_TMP/writer.count"
cat >"$ZV_TMP/writer.py" <<'PYEOF'
# Writes as fio does with --fsync and --fua: random blocks of 4K to 64K
# over the last 20 MiB of volume a (not its marked block at 8 MiB), every third one FUA, a flush every
# fourth (argv[4] "sync"), or 256K blocks without either ("bulk"), until
# told to stop; then how many it wrote.
import nbd, os, random, sys
h = nbd.NBD()
h.set_export_name("a")
h.connect_unix(sys.argv[1])
bulk = sys.argv[4] == "bulk"
buf = os.urandom(256 << 10)
n = 0
while not os.path.exists(sys.argv[2]):
    ln = (256 << 10) if bulk else 4096 << random.randrange(5)
    off = (12 << 20) + random.randrange((20 << 20) // ln) * ln
    fua = not bulk and n % 3 == 0
    h.pwrite(buf[:ln], off, nbd.CMD_FLAG_FUA if fua else 0)
    if not bulk and n % 4 == 3:
        h.flush()
    n += 1
h.flush()
h.shutdown()
open(sys.argv[3], "w").write("%d\n" % n)
PYEOF
"$NBD_PY" "$ZV_TMP/writer.py" "$sock" "$ZV_TMP/writer.stop" "$ZV_TMP/writer.count" sync &
writer=$!
track_pid "$writer"
"$NBD_PY" "$ZV_TMP/writer.py" "$sock" "$ZV_TMP/writer.stop" "$ZV_TMP/bulk.count" bulk &
bulk=$!
track_pid "$bulk"
sleep 2
synced_txg () { "$ADM" stats tank | awk '$1 == "txg_synced" { print $2 }'; }
txg0=$(synced_txg)
for i in 1 2 3 4 5; do
    rc_is 0 "live check $i while the client writes" "$ADM" check -v tank
    check "live check $i: no problems" grep -q "^No problems found." "$ZV_TMP/adm.out"
    check "live check $i: both trees" grep -q "^tank: 2 trees" "$ZV_TMP/adm.out"
    check "live check $i: nothing leaked or doubly allocated" \
        grep -q "leaked 0B in 0 extents, doubly allocated 0B in 0 extents, pointers at free space 0" "$ZV_TMP/adm.out"
    check "live check $i: progress (-v) on stderr, to 100%" \
        grep -q "^check: .* (100.0%)" "$ZV_TMP/adm.err"
done
txg1=$(synced_txg)
zv_log "txgs $txg0 to $txg1 synced over the five checks"
check "txgs synced meanwhile" test "$txg1" -gt "$((txg0 + 2))"
rc_is 0 "status while the client writes" "$ADM" status tank
check_not "no frees held once the check is done" grep -q "held:" "$ZV_TMP/adm.out"
# A check whose client is killed: the server goes on, and the next check
# is not refused (the hold went with it).
"$ADM" check tank >/dev/null 2>&1 &
adm=$!
sleep 0.05
kill -9 "$adm" 2>/dev/null || :
wait "$adm" 2>/dev/null || :
# (It ends at its next look at the connection, a few blocks on.)
for _ in $(seq 100); do
    grep -q "check cancelled: its client went away" "$ZV_LOG" && break
    sleep 0.1
done
rc_is 0 "a check after one whose client was killed" "$ADM" check tank
check "clean" grep -q "^No problems found." "$ZV_TMP/adm.out"
touch "$ZV_TMP/writer.stop"
wait "$writer" || zv_fail "the writer failed"
wait "$bulk" || zv_fail "the bulk writer failed"
check "the writers wrote" test -s "$ZV_TMP/writer.count" -a -s "$ZV_TMP/bulk.count"
zv_log "the writers wrote $(cat "$ZV_TMP/writer.count" 2>/dev/null) and $(cat "$ZV_TMP/bulk.count" 2>/dev/null) blocks"
if grep -q "check cancelled: its client went away" "$ZV_LOG"; then
    zv_pass "the server saw the killed client go and cancelled its check"
else
    zv_log "(the killed client's check had ended before the kill)"
fi
grep "error:" "$ZV_LOG" | grep -v "warning:" | head -5 || :
check_not "the server logged no error" bash -c "grep 'error:' '$ZV_LOG' | grep -qv 'warning:'"
stop_zvol "$sock" || zv_fail "the server stops cleanly"
rc_is 0 "offline check after the live ones" "$ADM" check tank
check "clean offline too" grep -q "^No problems found." "$ZV_TMP/adm.out"

zv_log "zvoladm check: a data block damaged"
off=$("$NBD_PY" - "$pool" <<'PYEOF'
import sys
data = open(sys.argv[1], "rb").read()
print(data.find(b"ZVCHECKMARK" * 4))
PYEOF
)
[ "$off" -gt 0 ] || die "the marked block is not in the pool image"
printf 'X' | dd of="$pool" bs=1 seek=$((off + 100)) conv=notrunc status=none
rc_is 1 "check finds problems" "$ADM" check tank
check "the checksum error, with its place" \
    grep -q "^volume 'a' level 0 block 512 copy 1 of 1: checksum error on device 0 ($pool) offset $off" "$ZV_TMP/adm.out"
check "the summary counts it" grep -q "checksum errors 1," "$ZV_TMP/adm.out"
check "problems found" grep -q "^Problems found." "$ZV_TMP/adm.out"

zv_summary
