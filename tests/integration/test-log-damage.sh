#!/usr/bin/env bash
# test-log-damage.sh: a damaged intent-log block in the middle of the
# chain is damage, not the end of the log, through nbdkit.
#
#  1. create a pool (txg_timeout=3600: nothing syncs by itself); one FUA
#     write to make the log usable, then 8 acknowledged 12 KiB FUA writes
#     (one log block each, each written after the one before was
#     durable); kill -9;
#  2. find the log blocks in the device file and damage one sector of the
#     4th: the import fails, and nbdkit's log says which block is damaged,
#     what is lost and how to import anyway (zil_recover=); readonly=true
#     imports with the synced data only;
#  3. zil_recover=truncate imports with the first 3 writes, and a restart
#     without the key keeps them; zil_recover=discard (on a copy) imports
#     with none of them;
#  4. the newest block damaged instead: a torn tail, the import succeeds
#     with the first 7 writes;
#  5. zil_recover with create=true or readonly=true, or a bad value, is
#     refused.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
NW=8

cat >"$ZV_TMP/logdmg.py" <<'EOF'
import sys
import nbd
from zvtest import *

uri, op = sys.argv[1], sys.argv[2]
MiB, LEN, NW = 1 << 20, 12288, 8

def data(i):
    return pattern("w%d" % i, LEN)

h = connect(uri)
if op == "write":
    h.pwrite(pattern("warm", 4096), 60 * MiB, nbd.CMD_FLAG_FUA)
    for i in range(NW):
        h.pwrite(data(i), i * MiB, nbd.CMD_FLAG_FUA)
    ok(all(h.pread(LEN, i * MiB) == data(i) for i in range(NW)),
       "%d FUA writes acknowledged and read back" % NW)
else:
    # "upto N": writes 0..N-1 are there, the others read as zeros
    n = int(sys.argv[3])
    got = [h.pread(LEN, i * MiB) for i in range(NW)]
    there = [i for i in range(NW) if got[i] == data(i)]
    zero = [i for i in range(NW) if got[i] == bytes(LEN)]
    want = ("writes 0-%d are there, " % (n - 1) if n else "writes ") + \
        ("%d-%d dropped" % (n, NW - 1) if n < NW else "none dropped")
    ok(there == list(range(n)) and zero == list(range(n, NW)),
       "%s (there: %s, zeros: %s)" % (want, there, zero))
finish()
EOF

cat >"$ZV_TMP/blocks.py" <<'EOF'
# Print the device offset, seq and length of every intent-log block
# (4 KiB aligned, the log block magic), in seq order.
import struct, sys
MAGIC = 0x42574c4f565a0000
data = open(sys.argv[1], "rb").read()
blocks = []
for o in range(0, len(data) - 64, 4096):
    magic, version, nused, seq = struct.unpack_from("<QIIQ", data, o)
    if magic == MAGIC and version == 1:
        blocks.append((seq, o, (64 + nused + 4095) // 4096 * 4096))
for seq, o, n in sorted(blocks):
    print(o, seq, n)
EOF

# last_log: the log of the last server started on the socket (from its
# "=== ..." line on).
last_log ()
{
    awk '/^=== / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$ZV_LOG"
}

# damage FILE OFFSET: invert 16 bytes at OFFSET.
damage ()
{
    "$NBD_PY" - "$1" "$2" <<'EOF'
import sys
f, at = sys.argv[1], int(sys.argv[2])
with open(f, "r+b") as fp:
    fp.seek(at)
    b = fp.read(16)
    fp.seek(at)
    fp.write(bytes(x ^ 0xFF for x in b))
EOF
}

zv_log "create a pool; 8 acknowledged FUA writes, then kill -9"
start_zvol "$sock" device="$pool" create=true size=64M txg_timeout=3600 ||
    die "create the pool"
py_checks "FUA writes" "$ZV_TMP/logdmg.py" "$uri" write || :
check "kill -9 the server" kill9_zvol

mapfile -t blocks < <("$NBD_PY" "$ZV_TMP/blocks.py" "$pool")
zv_log "log blocks (offset seq length): ${blocks[*]}"
if [ "${#blocks[@]}" -ne "$NW" ]; then
    die "found ${#blocks[@]} log blocks in the device file, expected $NW"
fi
zv_pass "the device holds $NW log blocks"
read -r off4 seq4 len4 <<<"${blocks[3]}"
read -r off8 seq8 len8 <<<"${blocks[7]}"
cp --sparse=always "$pool" "$ZV_TMP/pool.orig"

zv_log "damage a record sector of log block $seq4 (device offset $off4)"
damage "$pool" $((off4 + 4096 + 200))
cp --sparse=always "$pool" "$ZV_TMP/pool.damaged"
if expect_start_failure "$ZV_TMP/refused.log" device="$pool"; then
    zv_pass "the import fails: $(grep 'is damaged' "$ZV_TMP/refused.log" | head -n 1)"
else
    zv_fail "the import fails with a log block damaged in the middle"
fi
check "the log names the damaged block" \
    grep -q "log block $seq4 ($pool offset $off4) is damaged" "$ZV_TMP/refused.log"
check "the log says which records are lost" \
    grep -q "acknowledged records between record .* are lost with it" "$ZV_TMP/refused.log"
check "the log says how many later records cannot be applied" \
    grep -q "4 record(s) of txg .* in 4 later block(s), 3 of them acknowledged" "$ZV_TMP/refused.log"
check "the log says how to import anyway" \
    grep -q "zil_recover=truncate keeps what precedes it (3 record(s).*zil_recover=discard drops the whole log (7 record(s)" \
    "$ZV_TMP/refused.log"

start_zvol "$sock" device="$pool" readonly=true ||
    die "a read-only import of the damaged pool"
py_checks "read-only: the synced data only" "$ZV_TMP/logdmg.py" "$uri" upto 0 || :
check "clean stop (read-only)" stop_zvol
check "read-only: the log reports the damage" \
    grep -q "a read-only import does not replay the log" <(last_log)

start_zvol "$sock" device="$pool" zil_recover=truncate ||
    die "import with zil_recover=truncate"
check "truncate: the log says what is replayed and dropped" \
    grep -q "zil_recover=truncate: replaying what precedes log block $seq4 (3 record(s)" <(last_log)
py_checks "truncate: the writes before the damage" "$ZV_TMP/logdmg.py" "$uri" upto 3 || :
check "clean stop (truncate)" stop_zvol
start_zvol "$sock" device="$pool" || die "import again without zil_recover"
py_checks "after a restart" "$ZV_TMP/logdmg.py" "$uri" upto 3 || :
check "clean stop (restart)" stop_zvol

cp --sparse=always "$ZV_TMP/pool.damaged" "$pool"
start_zvol "$sock" device="$pool" zil_recover=discard ||
    die "import with zil_recover=discard"
check "discard: the log says what is dropped" \
    grep -q "zil_recover=discard: dropping the whole log: 7 record(s)" <(last_log)
py_checks "discard: none of the log" "$ZV_TMP/logdmg.py" "$uri" upto 0 || :
check "clean stop (discard)" stop_zvol

zv_log "damage the newest log block ($seq8) instead: a torn tail"
cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
damage "$pool" $((off8 + 4096 + 200))
start_zvol "$sock" device="$pool" || die "import with the newest block damaged"
py_checks "torn tail: the first 7 writes" "$ZV_TMP/logdmg.py" "$uri" upto 7 || :
check "clean stop (torn tail)" stop_zvol

for bad in "device=$pool zil_recover=sometimes" \
           "device=$pool readonly=true zil_recover=discard" \
           "device=$ZV_TMP/new.img create=true size=64M zil_recover=truncate"; do
    # shellcheck disable=SC2086 # split into parameters on purpose
    if expect_start_failure "$ZV_TMP/bad.log" $bad; then
        zv_pass "refused: $bad: $(grep -m1 -o 'zil_recover.*' "$ZV_TMP/bad.log")"
    else
        zv_fail "refused: $bad"
    fi
done

zv_summary
