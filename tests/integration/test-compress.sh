#!/usr/bin/env bash
# test-compress.sh: inline compression through nbdkit and the admin tool.
#
#  1. zvoladm: volumes with compression off, lz4 (the default) and zstd-3,
#     -o compression= refused with a bad value; get compression;
#  2. nbdkit: compressible data (text, and half noise) and noise written
#     to each volume with python libnbd, read back equal before and after
#     a restart; zvoladm list -o name,used,logicalused,compressratio:
#     above 1 for lz4 and zstd, 1.00x for off; the volume's stats file
#     has the figures;
#  3. set compression live through the control socket (a client writing),
#     get shows it; the data written before reads back unchanged;
#  4. an older build (ZVOL_OLD_ZVOLADM, optional: the previous release's
#     zvoladm) refuses this build's pool, saying why, and this build
#     reads that build's pool (its volumes uncompressed).
#
# The writes go in 16 KiB pieces: whole blocks of writes of 32 KiB and
# more that a flush catches before their txg syncs go to the intent log
# in place, uncompressed (docs/design.md, "Compression").

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

zv_admin_setup
POOL=comp$$
zv_runtime_pool "$POOL"
pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
truncate -s 512M "$pool"

zv_log "1. volumes and their property"
rc_is 0 "zvoladm create $POOL" "$ADM" create "$POOL" "$pool"
rc_is 0 "create off" "$ADM" create -V 32M -o compression=off "$POOL/off"
rc_is 0 "create (default: lz4)" "$ADM" create -V 32M "$POOL/lz4"
rc_is 0 "create zstd" "$ADM" create -V 32M -o compression=zstd "$POOL/zstd"
rc_is 1 "a bad value" "$ADM" create -V 32M -o compression=gzip "$POOL/bad"
check "refused, saying what is valid" grep -q "compression 'gzip' is invalid" "$ZV_TMP/adm.err"
rc_is 2 "usage: -o of another property" "$ADM" create -V 32M -o foo=bar "$POOL/bad"
rc_is 0 "get compression" "$ADM" get -H compression "$POOL/lz4"
check "lz4 by default" grep -qP "^$POOL/lz4\tcompression\tlz4$" "$ZV_TMP/adm.out"
rc_is 0 "get compression of zstd" "$ADM" get -H compression "$POOL/zstd"
check "zstd" grep -qP "^$POOL/zstd\tcompression\tzstd$" "$ZV_TMP/adm.out"

cat >"$ZV_TMP/comp.py" <<'PYEOF'
import random, sys
from zvtest import *
sock, op = sys.argv[1], sys.argv[2]
words = [b"block ", b"pointer ", b"txg ", b"volume ", b"sync ", b"the "]
def text(seed, n):
    r = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        out += r.choice(words)
    return bytes(out[:n])
def half(seed, n):
    r = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        out += r.randbytes(256) + bytes([len(out) // 512 % 256]) * 256
    return bytes(out[:n])
def noise(seed, n):
    return random.Random(seed).randbytes(n)
layout = [(0, text, 8 << 20), (8 << 20, half, 8 << 20), (16 << 20, noise, 2 << 20)]
for name in ["off", "lz4", "zstd"]:
    h = connect("nbd+unix:///%s?socket=%s" % (name, sock))
    for off, fn, n in layout:
        want = fn(name + str(off), n)
        if op == "write":
            for o in range(0, n, 16384):
                h.pwrite(want[o:o + 16384], off + o)
        else:
            ok(h.pread(n, off) == want,
               "%s: %s at %d reads back" % (name, fn.__name__, off))
    if op == "write":
        h.flush()
        ok(True, "%s: written" % name)
    h.shutdown()
finish()
PYEOF

zv_log "2. data through nbdkit"
start_zvol "$sock" "$pool" || die "serve the pool"
py_checks "write text, half noise and noise to each" "$ZV_TMP/comp.py" "$sock" write || :
py_checks "read it back" "$ZV_TMP/comp.py" "$sock" check || :
rc_is 0 "stats of lz4, live" "$ADM" stats "$POOL/lz4"
check "the stats file has the property" grep -q "^compression lz4$" "$ZV_TMP/adm.out"
check "and the ratio" grep -q "^compressratio [0-9.]*$" "$ZV_TMP/adm.out"
stop_zvol "$sock" || zv_fail "clean stop"
rc_is 0 "list -o name,used,logicalused,compressratio" \
    "$ADM" list -H -o name,used,logicalused,compressratio "$POOL"
cat "$ZV_TMP/adm.out"
ratio () { awk -F'\t' -v n="$POOL/$1" '$1 == n { sub("x", "", $4); print $4 }' "$ZV_TMP/adm.out"; }
check "off: 1.00x" test "$(ratio off)" = "1.00"
check "lz4: above 1.3x" awk -v r="$(ratio lz4)" 'BEGIN { exit !(r > 1.3) }'
check "zstd: above lz4" awk -v r="$(ratio zstd)" -v l="$(ratio lz4)" 'BEGIN { exit !(r > l) }'
rc_is 0 "list -p: logicalused in bytes" "$ADM" list -H -p -o name,used,logicalused "$POOL"
check "lz4: logicalused is the 18M written" \
    grep -qP "^$POOL/lz4\t[0-9]+\t$((18 << 20))$" "$ZV_TMP/adm.out"
start_zvol "$sock" "$pool" || die "restart"
py_checks "the data after a restart" "$ZV_TMP/comp.py" "$sock" check || :

zv_log "3. set, live"
rc_is 0 "set compression=zstd-9 live" "$ADM" set compression=zstd-9 "$POOL/off"
rc_is 0 "get it live" "$ADM" get -H compression "$POOL/off"
check "zstd-9" grep -qP "^$POOL/off\tcompression\tzstd-9$" "$ZV_TMP/adm.out"
rc_is 1 "set a bad value" "$ADM" set compression=zstd-40 "$POOL/off"
rc_is 2 "set another property" "$ADM" set volsize=1G "$POOL/off"
py_checks "the data written before is unchanged" "$ZV_TMP/comp.py" "$sock" check || :
stop_zvol "$sock" || zv_fail "clean stop"
rc_is 0 "get offline" "$ADM" get -H compression,compressratio "$POOL/off"
check "zstd-9 kept" grep -qP "^$POOL/off\tcompression\tzstd-9$" "$ZV_TMP/adm.out"
check "the old blocks still 1.00x" grep -qP "^$POOL/off\tcompressratio\t1.00x$" "$ZV_TMP/adm.out"

zv_log "4. an older build"
if [ -n "${ZVOL_OLD_ZVOLADM:-}" ] && [ -x "$ZVOL_OLD_ZVOLADM" ]; then
    old=$ZV_TMP/old.img
    truncate -s 256M "$old"
    rc=0
    ZVOLADM_CACHE=$ZV_TMP/oldcache "$ZVOL_OLD_ZVOLADM" list -d "$pool" \
        >"$ZV_TMP/old.out" 2>&1 || rc=$?
    cat "$ZV_TMP/old.out"
    check "the older build refuses this pool" test "$rc" -ne 0
    check "saying the label has a flag it does not know" \
        grep -q "unknown flags 0x2" "$ZV_TMP/old.out"
    ZVOLADM_CACHE=$ZV_TMP/oldcache "$ZVOL_OLD_ZVOLADM" create old "$old" \
        || zv_fail "older build: create"
    ZVOLADM_CACHE=$ZV_TMP/oldcache "$ZVOL_OLD_ZVOLADM" create -V 16M old/v \
        || zv_fail "older build: create a volume"
    rc_is 0 "this build lists the older pool" "$ADM" list -H -o name,compression,compressratio -d "$old"
    check "its volume, off" grep -qP "^old/v\toff\t1.00x$" "$ZV_TMP/adm.out"
    rc_is 0 "and sets its property" "$ADM" set -d "$old" compression=lz4 old/v
    rc=0
    ZVOLADM_CACHE=$ZV_TMP/oldcache "$ZVOL_OLD_ZVOLADM" list -d "$old" \
        >"$ZV_TMP/old.out" 2>&1 || rc=$?
    check "which the older build still reads" test "$rc" -eq 0
else
    zv_log "(ZVOL_OLD_ZVOLADM not set: the older build's checks are skipped)"
fi

zv_summary
