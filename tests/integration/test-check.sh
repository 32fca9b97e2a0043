#!/usr/bin/env bash
# test-check.sh: zvoladm check, the offline checker, on a pool nbdkit
# wrote: clean (exit 0, a summary, progress on stderr with -v), then with
# a data block damaged on disk (exit 1, the checksum error named with
# its volume, level, block, device and offset), and usage (exit 2).

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
