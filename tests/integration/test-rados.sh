#!/usr/bin/env bash
# test-rados.sh: a pool on RADOS devices served by nbdkit: round trips
# through libnbd, a second server refused while the first runs (naming
# the holder), kill -9 of the server, then a plain import refused (with
# the lock-break hint) and a takeover by a second server: every write
# flushed before the kill is there; a takeover from a live server fences
# it (its writes fail with EIO and land nowhere).  The volume's data device and its log device both
# live on a throw-away cluster (tests/ceph/ceph-cluster.sh: one monitor,
# one memstore OSD on 127.0.0.1), stopped by PID when the test ends.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

ceph_cluster_start

sock=$ZV_TMP/zvol.sock
sock2=$ZV_TMP/zvol2.sock
uri=$(nbd_uri "$sock")
uri2=$(nbd_uri "$sock2")
dev=rados:$ZV_CEPH_POOL/vol
log=rados:$ZV_CEPH_POOL/vol-log
common=(ceph_conf="$CEPH_CONF" rados_op_timeout=10 log="$log")

cat >"$ZV_TMP/rt.py" <<'EOF'
# Phase "write": round trips, then flushed writes (the journal names
# them), then writes never flushed.  Phase "check": every flushed write
# reads back.
import json, sys
from zvtest import *

uri, phase, journal = sys.argv[1], sys.argv[2], sys.argv[3]
when = sys.argv[4] if len(sys.argv) > 4 else ""
h = connect(uri)
size = h.get_size()
if phase == "write":
    ok(size == 64 << 20, "volume size is 64 MiB (%d)" % size)
    ok(h.can_flush() and h.can_fua(), "flush and FUA offered")
    # Round trips across object boundaries (4 MiB) and unaligned edges.
    cases = [(0, 4096), ((4 << 20) - 8192, 16384), ((12 << 20) + 4096, 69632),
             (size - 65536, 65536)]
    for i, (off, n) in enumerate(cases):
        data = pattern("rt%d" % i, n)
        h.pwrite(data, off)
        ok(h.pread(n, off) == data, "round trip of %d bytes at %d" % (n, off))
    ok(h.pread(4096, 32 << 20) == bytes(4096), "never written reads as zeros")
    flushed = []
    for i in range(24):
        off, n = (1 << 20) * (i + 16) + 4096 * i, 4096 * (1 + i % 9)
        h.pwrite(pattern("f%d" % i, n), off, nbd.CMD_FLAG_FUA if i % 3 == 0 else 0)
        flushed.append((off, n, "f%d" % i))
    h.flush()
    flushed += [(off, n, "rt%d" % i) for i, (off, n) in enumerate(cases)]
    json.dump(flushed, open(journal, "w"))
    # Not flushed: may or may not survive, but must not break the import.
    for i in range(8):
        h.pwrite(pattern("u%d" % i, 8192), (45 << 20) + i * 8192)
    print("PASS: wrote %d flushed regions" % len(flushed))
else:
    flushed = json.load(open(journal))
    bad = [(off, n, t) for (off, n, t) in flushed if h.pread(n, off) != pattern(t, n)]
    ok(not bad, "every flushed write intact %s (%d regions, bad: %s)"
       % (when, len(flushed), bad[:3]))
h.shutdown()
sys.exit(1 if failed else 0)
EOF

start_zvol "$sock" device="$dev" create=true size=64M "${common[@]}" ||
    die "could not create a pool on $dev"
py_checks "round trips and flushed writes" "$ZV_TMP/rt.py" "$uri" write "$ZV_TMP/journal.json" || :

# A second server on the same devices is refused at once.
t0=$(date +%s%N)
check "a second server is refused while the first runs" \
    expect_start_failure "$ZV_TMP/second.log" device="$dev" "${common[@]}"
t1=$(date +%s%N)
check "the refusal names the holder" \
    grep -q "in use by another server (RADOS lock 'zvol' of object vol held by client\." "$ZV_TMP/second.log"
check "the refusal names the host and pid" \
    grep -q "cookie '$(hostname):$(_zv_pid_of "$sock"):" "$ZV_TMP/second.log"
check "the refusal takes under 5 s ($(( (t1 - t0) / 1000000 )) ms)" \
    test $(( (t1 - t0) / 1000000 )) -lt 5000

kill -KILL "$(_zv_pid_of "$sock")"
_zv_reap "$(_zv_pid_of "$sock")" || :
zv_log "killed the server with SIGKILL"

# The dead server's locks stay: a plain import is refused with the
# command that would break them by hand; takeover=true fences the dead
# server's clients (blocklist), breaks its locks and replays the log.
check "after kill -9, a plain import is refused, with the lock-break command" \
    expect_start_failure "$ZV_TMP/import.log" device="$dev" "${common[@]}"
check "the refusal says how to break the lock" \
    grep -q "rados -p $ZV_CEPH_POOL lock break vol zvol client\.[0-9]* --lock-cookie" "$ZV_TMP/import.log"
start_zvol "$sock2" device="$dev" "${common[@]}" takeover=true ||
    die "could not take over from the killed server"
check "the takeover fenced the old holder of both devices" \
    test "$(grep -c "taking over from client\..*blocklisting that client" "$sock2.log")" -eq 2
py_checks "flushed writes after kill -9" "$ZV_TMP/rt.py" "$uri2" check "$ZV_TMP/journal.json" \
    "after kill -9 and a takeover by another server" || :
check "a clean stop" stop_zvol "$sock2"

# After the clean export: imports again without any lock to break.
start_zvol "$sock2" device="$dev" "${common[@]}" || die "could not import after a clean stop"
py_checks "flushed writes after a clean export" "$ZV_TMP/rt.py" "$uri2" check "$ZV_TMP/journal.json" \
    "after a clean export" || :
check "a clean stop" stop_zvol "$sock2"

# Without -f the server would fork away from librados' threads: the
# forked server refuses to serve (its message goes to syslog: nbdkit
# closed stderr), and leaves no lock behind.
bg_refused ()
{
    local i
    zv_nbdkit_cmd
    "${ZV_NBDKIT[@]}" -U "$ZV_TMP/bg.sock" "$ZVOL_PLUGIN" \
        device="$dev" "${common[@]}" </dev/null >"$ZV_TMP/bg.log" 2>&1 || :
    for i in $(seq 100); do
        if ! "$NBD_PY" -c 'import nbd, sys; nbd.NBD().connect_uri(sys.argv[1])' \
               "$(nbd_uri "$ZV_TMP/bg.sock")" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}
check "a server without -f refuses to serve" bg_refused
start_zvol "$sock2" device="$dev" "${common[@]}" || die "its lock stayed behind"
py_checks "flushed writes after the refused server" "$ZV_TMP/rt.py" "$uri2" check "$ZV_TMP/journal.json" \
    "after the refused background server" || :
check "a clean stop" stop_zvol "$sock2"

# A takeover from a server that still runs: the new one serves every
# flushed write, the old one is fenced (its writes fail with EIO).
start_zvol "$sock" device="$dev" "${common[@]}" || die "import for the live takeover"
start_zvol "$sock2" device="$dev" "${common[@]}" takeover=true ||
    die "could not take over from a live server"
py_checks "flushed writes after a live takeover" "$ZV_TMP/rt.py" "$uri2" check "$ZV_TMP/journal.json" \
    "after a takeover from a live server" || :
cat >"$ZV_TMP/fenced.py" <<'EOF'
import sys
from zvtest import *
h = connect(sys.argv[1])
expect_errno("a FUA write to the fenced server fails", errno.EIO,
             h.pwrite, pattern("late", 65536), 16 << 20, nbd.CMD_FLAG_FUA)
sys.exit(1 if failed else 0)
EOF
py_checks "the old server is fenced" "$ZV_TMP/fenced.py" "$uri" || :
py_checks "the fenced write did not land" "$ZV_TMP/rt.py" "$uri2" check "$ZV_TMP/journal.json" \
    "after the fenced server's write" || :
check "a clean stop of the new server" stop_zvol "$sock2"

zv_summary
