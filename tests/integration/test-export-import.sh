#!/usr/bin/env bash
# test-export-import.sh: a pool exported (clean stop) and imported again
# holds the same bytes; one damaged label (front or back) does not stop
# the import or change the content.
#
#  1. write ~64 MiB of random data with nbdcopy, plus a few scattered
#     patterns, hash the whole export, stop cleanly;
#  2. import, the same hash; import again, the same hash; write more,
#     stop, import, the expected new hash;
#  3. on copies of the exported device: zeros over the front label, random
#     bytes over the front label, zeros over the back label: each imports
#     with the same hash, and a clean stop + second import still works.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires nbdcopy --version
requires sha256sum
requires dd --version
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
LABEL=$((256 * 1024))
MiB=$((1024 * 1024))

# hash_export: sha256 of the whole export, read with nbdcopy.
hash_export ()
{
    timeout "$ZV_CLIENT_TIMEOUT" nbdcopy -- "$uri" - | sha256sum | cut -d' ' -f1
}

cat >"$ZV_TMP/scatter.py" <<'EOF'
# Write (or with "check", verify) patterns scattered over the volume.
import sys
from zvtest import *
uri, op, gen = sys.argv[1], sys.argv[2], sys.argv[3]
MiB = 1 << 20
spots = [(70 * MiB + 512, 4096), (100 * MiB, 16384), (150 * MiB + 12345, 99999),
         (200 * MiB, 3 * MiB), (256 * MiB - 8192, 8192)]
h = connect(uri, strict=False)
for i, (off, ln) in enumerate(spots):
    if op == "write":
        h.pwrite(pattern("scatter%s-%d" % (gen, i), ln), off)
    else:
        ok(h.pread(ln, off) == pattern("scatter%s-%d" % (gen, i), ln),
           "pattern %s-%d at %d (%d bytes) reads back" % (gen, i, off, ln))
if op == "write":
    h.flush()
    ok(True, "wrote %d scattered patterns (generation %s)" % (len(spots), gen))
finish()
EOF

zv_log "create a 256 MiB pool and write ~64 MiB of random data"
head -c $((64 * MiB)) /dev/urandom >"$ZV_TMP/random.bin"
start_zvol "$sock" device="$pool" create=true size=256M || die "create the pool"
check "nbdcopy writes 64 MiB" timeout "$ZV_CLIENT_TIMEOUT" nbdcopy --flush -- "$ZV_TMP/random.bin" "$uri"
py_checks "scattered writes" "$ZV_TMP/scatter.py" "$uri" write 1 || :
h0=$(hash_export)
zv_log "export hash while serving: $h0"
expected=$( { cat "$ZV_TMP/random.bin"; head -c $((192 * MiB)) /dev/zero; } |
    "$NBD_PY" -c '
import sys, hashlib
sys.path.insert(0, sys.argv[1])
from zvtest import pattern
MiB = 1 << 20
buf = bytearray(sys.stdin.buffer.read())
spots = [(70 * MiB + 512, 4096), (100 * MiB, 16384), (150 * MiB + 12345, 99999),
         (200 * MiB, 3 * MiB), (256 * MiB - 8192, 8192)]
for i, (off, ln) in enumerate(spots):
    buf[off:off + ln] = pattern("scatter1-%d" % i, ln)
print(hashlib.sha256(buf).hexdigest())' "$ZV_TMP")
check "export hash equals the hash of what was written" test "$h0" = "$expected"
check "clean stop" stop_zvol
devsize=$(stat -c %s "$pool")

zv_log "import and compare"
start_zvol "$sock" device="$pool" || die "import the pool"
check "after import: same hash" test "$(hash_export)" = "$h0"
check "clean stop" stop_zvol
start_zvol "$sock" device="$pool" || die "import the pool a second time"
check "after a second import: same hash" test "$(hash_export)" = "$h0"
py_checks "scattered patterns after two imports" "$ZV_TMP/scatter.py" "$uri" check 1 || :
py_checks "overwrite the scattered patterns" "$ZV_TMP/scatter.py" "$uri" write 2 || :
h1=$(hash_export)
check "clean stop" stop_zvol
start_zvol "$sock" device="$pool" || die "import the pool a third time"
check "after rewriting and a third import: the new hash" test "$(hash_export)" = "$h1"
py_checks "second-generation patterns after import" "$ZV_TMP/scatter.py" "$uri" check 2 || :
check "clean stop" stop_zvol
check "the device file kept its size" test "$(stat -c %s "$pool")" = "$devsize"

cp --sparse=always "$pool" "$ZV_TMP/pool.orig"
# The back label is the last 256 KiB of the device rounded down to 4 KiB
# (a device's size need not be a multiple of 4 KiB); zero from there to
# the end of the file.
back=$(( devsize / 4096 * 4096 - LABEL ))

# damaged_import DESC: import $pool (damaged by the caller), compare the
# hash, stop cleanly, import once more and compare again.
damaged_import ()
{
    local desc=$1
    if start_zvol "$sock" device="$pool"; then
        zv_pass "$desc: the pool imports"
        check "$desc: same hash" test "$(hash_export)" = "$h1"
        py_checks "$desc: scattered patterns" "$ZV_TMP/scatter.py" "$uri" write 3 || :
        check "$desc: clean stop" stop_zvol
        if start_zvol "$sock" device="$pool"; then
            zv_pass "$desc: the pool imports again after a clean stop"
            py_checks "$desc: patterns written after the damage" \
                "$ZV_TMP/scatter.py" "$uri" check 3 || :
            check "$desc: clean stop" stop_zvol
        else
            zv_fail "$desc: the pool imports again after a clean stop"
        fi
    else
        zv_fail "$desc: the pool imports"
    fi
}

zv_log "zeros over the front label (first 256 KiB)"
cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
dd if=/dev/zero of="$pool" bs=$LABEL count=1 conv=notrunc status=none
damaged_import "front label zeroed"

zv_log "random bytes over the front label"
cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
dd if=/dev/urandom of="$pool" bs=$LABEL count=1 conv=notrunc status=none
damaged_import "front label overwritten with random bytes"

zv_log "zeros over the back label (last 256 KiB, device offset $back)"
cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
dd if=/dev/zero of="$pool" bs=$LABEL seek=$back count=1 \
    oflag=seek_bytes conv=notrunc status=none
truncate -s "$devsize" "$pool"
check "device size unchanged by dd" test "$(stat -c %s "$pool")" = "$devsize"
damaged_import "back label zeroed"

zv_log "both labels zeroed: the import must fail, not serve garbage"
cp --sparse=always "$ZV_TMP/pool.orig" "$pool"
dd if=/dev/zero of="$pool" bs=$LABEL count=1 conv=notrunc status=none
dd if=/dev/zero of="$pool" bs=$LABEL seek=$back count=1 \
    oflag=seek_bytes conv=notrunc status=none
truncate -s "$devsize" "$pool"
check "both labels zeroed: nbdkit refuses to import" \
    expect_start_failure "$ZV_TMP/both.log" device="$pool"

zv_summary
