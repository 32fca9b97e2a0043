#!/usr/bin/env bash
# test-volumes.sh: several volumes in one pool, through the admin tool
# (cmd/zvoladm, offline) and nbdkit (each volume an export of its name).
#
#  1. zvoladm: create a pool, three volumes (thick, thin, -r), refusals
#     with their exit codes (a taken name, a bad name, a reservation the
#     pool cannot keep, usage), list -H -p;
#  2. nbdkit zvol pool.img: nbdinfo --list shows the three exports; each
#     export is its volume (size, data written to one is not in another);
#     an unknown name and the empty name (several volumes, no volume=)
#     are refused with a message in the log; volume=NAME makes the empty
#     name that volume; volume= of no volume refuses to start;
#  3. the data survives a restart; zvoladm destroy gives the space back
#     and the export is gone; while a server with no control socket has
#     the pool open, zvoladm is refused;
#  4. the quick start (create=true size=) still serves one volume as the
#     default export.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires nbdinfo --version
zv_setup

zv_admin_setup
pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
MiB=$((1024 * 1024))
truncate -s 512M "$pool"

# rc_is WANT DESC CMD...: CMD exits with status WANT.
rc_is ()
{
    local want=$1 desc=$2 rc=0; shift 2
    "$@" >"$ZV_TMP/adm.out" 2>&1 || rc=$?
    if [ "$rc" -eq "$want" ]; then
        zv_pass "$desc (exit $rc)"
    else
        zv_fail "$desc: exit $rc, expected $want"
        cat "$ZV_TMP/adm.out"
    fi
}

zv_log "zvoladm: a pool and its volumes"
rc_is 0 "zvoladm create tank POOL" "$ADM" create tank "$pool"
rc_is 0 "create a thick 64M volume" "$ADM" create -V 64M tank/db
rc_is 0 "create a thin 1T volume, 4K blocks" "$ADM" create -V 1T -b 4K -s tank/scratch
rc_is 0 "create 32M with a 16M reservation" "$ADM" create -V 32M -r 16M tank/web
rc_is 1 "a taken name" "$ADM" create -V 1M tank/db
check "the message names it" grep -q "has a volume 'db' already" "$ZV_TMP/adm.out"
rc_is 1 "a bad name" "$ADM" create -V 1M 'tank/a@b'
check "the message says so" grep -q "is invalid" "$ZV_TMP/adm.out"
rc_is 1 "a reservation the pool cannot keep" "$ADM" create -V 2T tank/huge
check "ENOSPC, saying so" grep -q "no room for volume 'huge'" "$ZV_TMP/adm.out"
rc_is 2 "usage: no POOL/VOL" "$ADM" create -V 1M tank
rc_is 2 "usage: -s with -r" "$ADM" create -V 1M -s -r 1M tank/x
rc_is 2 "usage: an unknown command" "$ADM" frobnicate
rc_is 1 "a pool not in the cache" "$ADM" list nosuch
rc_is 0 "list -H -p" "$ADM" list -H -p tank
cp "$ZV_TMP/adm.out" "$ZV_TMP/list1"
cat "$ZV_TMP/list1"
check "three volumes listed" test "$(wc -l <"$ZV_TMP/list1")" -eq 3
check "db: used = its 64M reservation, volsize 64M" \
    grep -qP "^tank/db\t$((64 * MiB))\t[0-9]+\t0\t$((64 * MiB))$" "$ZV_TMP/list1"
check "scratch: thin, 1T" grep -qP "^tank/scratch\t0\t[0-9]+\t0\t1099511627776$" "$ZV_TMP/list1"
check "web: used = 16M" grep -qP "^tank/web\t$((16 * MiB))\t" "$ZV_TMP/list1"
rc_is 0 "list with a header, sizes for people" "$ADM" list
check "the header" grep -q "^NAME .*USED .*AVAIL .*REFER .*VOLSIZE" "$ZV_TMP/adm.out"
check "64M shown as 64.0M" grep -q "tank/db .* 64.0M" "$ZV_TMP/adm.out"

zv_log "nbdkit: every volume an export"
# control=off: zvoladm then has no live path (test-ctl.sh tests that one)
# and meets the devices' lock.
start_zvol "$sock" "$pool" control=off || die "serve the pool"
nbdinfo --list "nbd+unix:///?socket=$sock" >"$ZV_TMP/exports" 2>&1 || :
check "nbdinfo --list: db" grep -q "export=\"db\"\|^export: *db\|db" "$ZV_TMP/exports"
for v in db scratch web; do
    check "nbdinfo --list shows $v" grep -qw "$v" "$ZV_TMP/exports"
done
cat >"$ZV_TMP/vols.py" <<'PYEOF'
import sys
from zvtest import *
sock, op = sys.argv[1], sys.argv[2]
def uri(name):
    return "nbd+unix:///%s?socket=%s" % (name, sock)
sizes = {"db": 64 << 20, "scratch": 1 << 40, "web": 32 << 20}
for name, size in sizes.items():
    h = connect(uri(name))
    ok(h.get_size() == size, "%s: size %d" % (name, size))
    if op == "write":
        h.pwrite(pattern(name, 1 << 20), 0)
        h.pwrite(pattern(name + "-end", 65536), size - 65536)
        h.flush()
    else:
        ok(h.pread(1 << 20, 0) == pattern(name, 1 << 20),
           "%s: its data at 0" % name)
        ok(h.pread(65536, size - 65536) == pattern(name + "-end", 65536),
           "%s: its data at the end" % name)
    h.shutdown()
for bad in ["nosuch", "x" * 300, "db@snap"]:
    h = nbd.NBD()
    h.set_export_name(bad)
    try:
        h.connect_unix(sock)
        ok(False, "export %r refused" % bad[:20])
    except nbd.Error:
        ok(True, "export %r refused" % bad[:20])
h = nbd.NBD()
try:
    h.connect_unix(sock)
    ok(sys.argv[3] != "none", "the default export opens (%s)" % sys.argv[3])
    if sys.argv[3] != "none":
        ok(h.get_size() == sizes[sys.argv[3]], "the default is %s" % sys.argv[3])
except nbd.Error:
    ok(sys.argv[3] == "none", "no default export: the empty name is refused")
finish()
PYEOF
py_checks "write each volume, check sizes and refusals" "$ZV_TMP/vols.py" "$sock" write none || :
check "the log names the unknown volume" grep -q "has no volume 'nosuch'" "$ZV_LOG"
check "the log says a 300-byte name escaped and cut" grep -q "has no volume 'xxxxxxxx.*\.\.\.'" "$ZV_LOG"
check "the log says there is no default export" grep -q "no default export" "$ZV_LOG"
rc_is 1 "zvoladm refused while nbdkit (control=off) has the pool" "$ADM" create -V 1M tank/busy
stop_zvol "$sock" || zv_fail "clean stop"

zv_log "volume=: the default export; data after a restart"
start_zvol "$sock" "$pool" volume=web || die "serve with volume=web"
py_checks "every volume's data after a restart; default web" "$ZV_TMP/vols.py" "$sock" check web || :
stop_zvol "$sock" || zv_fail "clean stop"
check "volume= of no volume refuses to start" expect_start_failure "$ZV_TMP/fail.log" "$pool" volume=nosuch
check "saying so" grep -q "volume=nosuch: pool tank has no such volume" "$ZV_TMP/fail.log"

zv_log "destroy"
rc_is 0 "list before" "$ADM" list -H -p tank
avail_before=$(awk -F'\t' '$1 == "tank/scratch" { print $3 }' "$ZV_TMP/adm.out")
rc_is 0 "destroy tank/db" "$ADM" destroy tank/db
rc_is 1 "destroy it again" "$ADM" destroy tank/db
rc_is 0 "list after" "$ADM" list -H -p tank
avail_after=$(awk -F'\t' '$1 == "tank/scratch" { print $3 }' "$ZV_TMP/adm.out")
check "two volumes left" test "$(wc -l <"$ZV_TMP/adm.out")" -eq 2
check "its 64M came back ($avail_before -> $avail_after)" \
    test "$avail_after" -ge $((avail_before + 64 * MiB))
start_zvol "$sock" "$pool" || die "serve after destroy"
nbdinfo --list "nbd+unix:///?socket=$sock" >"$ZV_TMP/exports" 2>&1 || :
check_not "db is no export any more" grep -qw "db" "$ZV_TMP/exports"
check "scratch still is" grep -qw "scratch" "$ZV_TMP/exports"
stop_zvol "$sock" || zv_fail "clean stop"

zv_log "the quick start: create=true size= serves one volume"
start_zvol "$sock" "$ZV_TMP/quick.img" create=true size=64M || die "quick start"
cat >"$ZV_TMP/quick.py" <<'PYEOF'
import sys
from zvtest import *
h = connect("nbd+unix:///?socket=%s" % sys.argv[1])
ok(h.get_size() == 64 << 20, "the default export is the 64M volume")
h.pwrite(pattern("q", 4096), 0)
h.flush()
ok(h.pread(4096, 0) == pattern("q", 4096), "it reads back")
h2 = connect("nbd+unix:///zvol?socket=%s" % sys.argv[1])
ok(h2.pread(4096, 0) == pattern("q", 4096), "and is the export 'zvol'")
finish()
PYEOF
py_checks "quick start" "$ZV_TMP/quick.py" "$sock" || :
stop_zvol "$sock" || zv_fail "clean stop"

zv_summary
