#!/usr/bin/env bash
# test-rados-io.sh: pools on RADOS devices served by nbdkit under real
# loads and cluster failures, on one throw-away cluster whose OSD is a
# bluestore on a sparse file (tests/ceph/ceph-cluster.sh with
# ZV_CEPH_STORE=bluestore: it keeps what it acknowledged across an OSD
# restart, which memstore does not):
#
# 1. fio verify over 256 MiB (the jobs of test-fio-verify.sh, smaller),
#    the intent log on RADOS too; kill -9 of the server, a takeover by a
#    second one, fio verifies everything again; again after a clean stop.
# 2. ext4 through nbdfuse + a loop device: mkfs, mount, a tree of files,
#    umount, fsck -fn clean; a clean stop and an import: fsck clean, every
#    file's checksum.  (Skipped with a note where FUSE or loop devices
#    are not available.)
# 3. The OSD killed (SIGKILL) and started again in the middle of writes
#    and flushes (rados_op_timeout=60): every request succeeds, some
#    flush waited through the outage, writes continue after it; every
#    flushed write reads back, live and after kill -9 of the server and
#    a takeover.
# 4. The cluster stopped under a running server (rados_op_timeout=3): a
#    FUA write and a flush fail with EIO within a bounded time, no hang;
#    the server's log says what happened; SIGTERM still ends it.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires_fio_nbd
zv_setup

export ZV_CEPH_STORE=bluestore
ceph_cluster_start

sock=$ZV_TMP/zvol.sock
sock2=$ZV_TMP/zvol2.sock
pool=$ZV_CEPH_POOL
conf=(ceph_conf="$CEPH_CONF")

# ---- 1. fio verify ----
zv_log "fio verify over 256 MiB of a 256 MiB volume on RADOS"
uri=$(nbd_uri "$sock")
export uri
fio_verify_setup 16 64 128
fio_dev=(device="rados:$pool/fio" log="rados:$pool/fio-log" "${conf[@]}" rados_op_timeout=30)
start_zvol "$sock" "${fio_dev[@]}" create=true size=256M log_size=64M ||
    die "create a pool on RADOS"
fio_verify write
check "server still running after fio" zvol_running
check "kill -9 after fio's end_fsync" kill9_zvol
start_zvol "$sock" "${fio_dev[@]}" takeover=true || die "take over after kill -9"
fio_verify verify
check "clean stop" stop_zvol
start_zvol "$sock" "${fio_dev[@]}" || die "import after a clean stop"
fio_verify verify2
check "clean stop" stop_zvol

# ---- 2. ext4 through nbdfuse + loop ----
if (requires_nbdfuse_ext4) >"$ZV_TMP/ext4.req" 2>&1; then
    requires_nbdfuse_ext4
    if nbdfuse_setup; then
        ext4_dev=(device="rados:$pool/ext4" "${conf[@]}")
        zv_log "ext4 on a 256 MiB volume on RADOS"
        start_zvol "$sock" "${ext4_dev[@]}" create=true size=256M ||
            die "create the ext4 pool"
        nbdfuse_attach "$sock" || die "attach nbdfuse + loop"
        check "mkfs.ext4" timeout 600 mkfs.ext4 -q -F "$LOOP"
        check "mount" timeout 120 mount "$LOOP" "$ZV_MNT"
        bytes=$(timeout 600 "$NBD_PY" "$ZV_TMP/mktree.py" "$ZV_MNT" "$ZVOL_TEST_SEED" one 20)
        zv_log "wrote $bytes bytes in $(find "$ZV_MNT/one" -type f | wc -l) files"
        ext4_sums one "$ZV_TMP/sums.one"
        check "umount" timeout 300 umount "$ZV_MNT"
        check "fsck.ext4 -fn is clean" ext4_fsck_clean
        nbdfuse_teardown
        check "clean stop of the server" stop_zvol
        start_zvol "$sock" "${ext4_dev[@]}" || die "import the ext4 pool"
        nbdfuse_attach "$sock" || die "attach again"
        check "fsck.ext4 -fn is clean after the import" ext4_fsck_clean
        check "mount after the import" timeout 120 mount "$LOOP" "$ZV_MNT"
        check "sha256sum -c passes after the import" ext4_sums_ok "$ZV_TMP/sums.one"
        check "umount" timeout 300 umount "$ZV_MNT"
        nbdfuse_teardown
        check "clean stop of the server" stop_zvol
    else
        zv_log "ext4 part skipped: $ZV_NBDFUSE_SKIP"
    fi
else
    zv_log "ext4 part skipped: $(grep SKIP "$ZV_TMP/ext4.req" || cat "$ZV_TMP/ext4.req")"
fi

# ---- 3. an OSD restart in the middle of writes ----
cat >"$ZV_TMP/writer.py" <<'EOF'
# Writes 64 KiB records, each to its own place, a flush after every
# fourth; after each flush the journal gets the records it covered.  Runs
# until RESTARTED exists and then for AFTER seconds more.  "check" reads
# every journaled record back.
import json, os, sys, time
from zvtest import *

uri, phase, journal = sys.argv[1], sys.argv[2], sys.argv[3]
h = connect(uri)
if phase == "write":
    restarted, after = sys.argv[4], float(sys.argv[5])
    done, pending, i, worst, t_end = [], [], 0, 0.0, None
    after_restart = 0
    while t_end is None or time.monotonic() < t_end:
        if t_end is None and os.path.exists(restarted):
            t_end = time.monotonic() + after
        off = (i * 65536 * 7) % (240 << 20)     # 7 is prime to 3840 slots
        h.pwrite(pattern("w%d" % i, 65536), off)
        pending.append((off, 65536, "w%d" % i))
        i += 1
        if i % 4 == 0:
            t0 = time.monotonic()
            h.flush()
            worst = max(worst, time.monotonic() - t0)
            done += pending
            pending = []
            if t_end is not None:
                after_restart += 1
            json.dump(done, open(journal + ".new", "w"))
            os.replace(journal + ".new", journal)
            time.sleep(0.03)            # a steady trickle, not a flood
        if i >= 3840:
            break
    h.flush()
    done += pending
    json.dump(done, open(journal, "w"))
    ok(i < 3840, "the writer ran until after the restart (%d records)" % i)
    ok(worst >= 1.0, "a flush waited through the OSD's outage (longest %.1f s)" % worst)
    ok(after_restart >= 2, "flushes succeed after the OSD restarted (%d)" % after_restart)
else:
    recs = json.load(open(journal))
    bad = [r for r in recs if h.pread(r[1], r[0]) != pattern(r[2], r[1])]
    ok(recs and not bad, "every flushed record reads back %s (%d, bad: %s)"
       % (sys.argv[4], len(recs), bad[:3]))
h.shutdown()
finish()
EOF
zv_log "an OSD restart in the middle of writes"
osd_dev=(device="rados:$pool/osd" log="rados:$pool/osd-log" "${conf[@]}" rados_op_timeout=60)
start_zvol "$sock" "${osd_dev[@]}" create=true size=256M log_size=64M ||
    die "create the pool of the OSD restart"
uri=$(nbd_uri "$sock")
rm -f "$ZV_TMP/restarted"
PYTHONPATH=$ZV_TMP timeout "$ZV_CLIENT_TIMEOUT" "$NBD_PY" "$ZV_TMP/writer.py" "$uri" write \
    "$ZV_TMP/journal.json" "$ZV_TMP/restarted" 4 >"$ZV_TMP/writer.out" 2>&1 &
writer=$!
track_pid "$writer"
sleep 3
check "the OSD is killed (SIGKILL) while the writer runs" "$ZV_CEPH" osd-kill "$ZV_CEPH_DIR"
sleep 3
check "the OSD starts again" "$ZV_CEPH" osd-start "$ZV_CEPH_DIR"
touch "$ZV_TMP/restarted"
_zv_wait_exit "$writer" "$ZV_CLIENT_TIMEOUT" || :
_zv_reap "$writer"
cat "$ZV_TMP/writer.out"
ZV_PASSED=$((ZV_PASSED + $(grep -c '^PASS: ' "$ZV_TMP/writer.out" || :)))
ZV_FAILED=$((ZV_FAILED + $(grep -c '^FAIL: ' "$ZV_TMP/writer.out" || :)))
check "the writer got no error (status $ZV_RC)" test "$ZV_RC" -eq 0
py_checks "flushed records, live" "$ZV_TMP/writer.py" "$uri" check "$ZV_TMP/journal.json" \
    "from the server that saw the restart" || :
check "kill -9 the server" kill9_zvol
start_zvol "$sock" "${osd_dev[@]}" takeover=true || die "take over after the OSD restart"
py_checks "flushed records after kill -9 and a takeover" "$ZV_TMP/writer.py" "$uri" check \
    "$ZV_TMP/journal.json" "after kill -9 and a takeover (read from the restarted OSD)" || :
check "clean stop" stop_zvol

# ---- 4. the cluster stopped under a running server ----
zv_log "the cluster stopped under a running server"
start_zvol "$sock" device="rados:$pool/down" "${conf[@]}" rados_op_timeout=3 \
    create=true size=64M || die "create the pool of the stopped cluster"
cat >"$ZV_TMP/down.py" <<'EOF'
import sys, time
from zvtest import *
uri, phase = sys.argv[1], sys.argv[2]
h = connect(uri)
if phase == "up":
    h.pwrite(pattern("up", 65536), 0, nbd.CMD_FLAG_FUA)
    h.flush()
    ok(h.pread(65536, 0) == pattern("up", 65536), "written while the cluster runs")
else:
    for what, fn, args in (
            ("a FUA write", h.pwrite, (pattern("down", 65536), 1 << 20, nbd.CMD_FLAG_FUA)),
            ("a flush", h.flush, ())):
        t0 = time.monotonic()
        expect_errno(what + " with the cluster stopped fails", errno.EIO, fn, *args)
        el = time.monotonic() - t0
        # rados_op_timeout=3: one timeout, then the device fails at once
        ok(el < 15, "%s failed within 15 s (%.1f s)" % (what, el))
finish()
EOF
py_checks "writes while the cluster runs" "$ZV_TMP/down.py" "$(nbd_uri "$sock")" up || :
check "the cluster is stopped" "$ZV_CEPH" stop "$ZV_CEPH_DIR"
py_checks "EIO, not a hang, with the cluster stopped" "$ZV_TMP/down.py" "$(nbd_uri "$sock")" down || :
check "the server's log says the cluster did not answer" \
    grep -q "rados:$pool/down: write of object down\.[0-9a-f]*: Connection timed out (the cluster did not answer within rados_op_timeout" "$ZV_LOG"
pid=$(_zv_pid_of "$sock")
kill -TERM "$pid"
check "SIGTERM ends the server within 60 s" _zv_wait_exit "$pid" 60
_zv_kill_reap "$pid"
unset "ZV_SRV_PID[$sock]"

zv_summary
