#!/usr/bin/env bash
# test-loop-lock.sh: a pool file and a loop device over it are one pool.
#
# Issue 10: a server on the file and one on /dev/loopN over it both
# served (the file's flock did not see the loop device), and after an
# import one server's flushed writes were gone.  Now a server on a loop
# device locks the backing file too, so:
#
#  1. a server on the file: a second one on the loop device is refused,
#     with a message naming the file and the process that holds it;
#  2. a server on the loop device: one on the file is refused, naming
#     the process and the loop device it uses; so is one on a second
#     loop device over the same file;
#  3. the same with the holder forked into the background (as the
#     systemd unit runs nbdkit), where the lock names a parent that has
#     exited;
#  4. what each server wrote is there after the other's turn.
#
# Needs root and a loop device (skips with the reason otherwise).  The
# loop devices are detached at exit whatever happens.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_root
requires_plugin
requires_nbd_python
requires losetup
zv_setup

pool=$ZV_TMP/pool.img
sa=$ZV_TMP/a.sock
sb=$ZV_TMP/b.sock

cat >"$ZV_TMP/rw.py" <<'EOF'
# rw.py URI write|check TAG: write 1 MiB of TAG's pattern at 1 MiB and
# flush, or check that it is there.
import sys
from zvtest import *

uri, mode, tag = sys.argv[1:4]
h = connect(uri)
data = pattern(tag, 1 << 20)
if mode == "write":
    h.pwrite(data, 1 << 20)
    h.flush()
    ok(True, "wrote and flushed %s" % tag)
else:
    ok(h.pread(1 << 20, 1 << 20) == data, "the data written as %s is there" % tag)
h.shutdown()
finish()
EOF

# has_msg DESC LOG TEXT: the log holds TEXT (a fixed string).
has_msg ()
{
    if grep -qF -- "$3" "$2"; then
        zv_pass "$1: \"$3\""
    else
        zv_fail "$1: no line \"$3\" in the log"
        _zv_show_log "$2"
    fi
}

# attach FILE: a new loop device over FILE in $LOOP, detached at exit
# (not in a subshell: the exit hook must be this shell's).
attach ()
{
    if ! LOOP=$(losetup -f --show "$1" 2>"$ZV_TMP/losetup.err"); then
        skip "losetup -f --show failed: $(head -n 1 "$ZV_TMP/losetup.err")"
    fi
    on_exit "losetup -d $LOOP"
}

zv_log "create a 64 MiB pool on $pool"
start_zvol "$sa" device="$pool" create=true size=64M || die "create"
check "clean stop after create" stop_zvol "$sa"
# The kernel names a loop device's file by its real path.
real=$(realpath "$pool")
attach "$pool"
loop=$LOOP
zv_log "$loop is attached to $real"

# 1. The file first.
start_zvol "$sa" device="$pool" || die "a server on the file starts"
pid=$ZV_PID
has_msg "the server on the file warns of the loop device" "$ZV_LOG" \
    "$pool: it is the backing file of $loop"
py_checks "write through the server on the file" "$ZV_TMP/rw.py" \
    "$(nbd_uri "$sa")" write first || :
check "a server on $loop (the file is served) is refused" \
    expect_start_failure "$ZV_TMP/loop-second.log" device="$loop"
has_msg "the refusal says what holds the file" "$ZV_TMP/loop-second.log" \
    "$loop: in use by another process: its backing file $real is locked by process $pid (nbdkit)"
py_checks "the server on the file still serves" "$ZV_TMP/rw.py" \
    "$(nbd_uri "$sa")" check first || :
check "clean stop of the server on the file" stop_zvol "$sa"

# 2. The loop device first.
start_zvol "$sb" device="$loop" || die "a server on $loop starts"
pid=$ZV_PID
py_checks "the loop device's server sees what the file's server wrote" \
    "$ZV_TMP/rw.py" "$(nbd_uri "$sb")" check first || :
py_checks "write through the server on $loop" "$ZV_TMP/rw.py" \
    "$(nbd_uri "$sb")" write second || :
check "a server on the file ($loop is served) is refused" \
    expect_start_failure "$ZV_TMP/file-second.log" device="$pool"
has_msg "the refusal says who holds the file, through what" \
    "$ZV_TMP/file-second.log" \
    "$pool: in use by another process (device locked by process $pid (nbdkit), through $loop)"
attach "$pool"
loop2=$LOOP
check "a server on a second loop device $loop2 over the file is refused" \
    expect_start_failure "$ZV_TMP/loop2.log" device="$loop2"
has_msg "the refusal names the file, its holder and its loop device" \
    "$ZV_TMP/loop2.log" \
    "$loop2: in use by another process: its backing file $real is locked by process $pid (nbdkit), through $loop"
check "clean stop of the server on $loop" stop_zvol "$sb"

# 3. A server in the background, as the systemd unit runs it: nbdkit
# opens the pool, forks, and the parent (the lock's owner of record)
# exits.
zv_nbdkit_cmd
if ! "${ZV_NBDKIT[@]}" -U "$ZV_TMP/bg.sock" -P "$ZV_TMP/bg.pid" \
     "$ZVOL_PLUGIN" device="$loop" </dev/null >"$ZV_TMP/bg.log" 2>&1; then
    _zv_show_log "$ZV_TMP/bg.log"
    die "nbdkit in the background on $loop"
fi
# The parent may exit before the child has written its pid file (nbdkit
# writes it after the fork): wait for it, as start_zvol does.
tries=$(( ZV_START_TIMEOUT * 10 ))
while [ ! -s "$ZV_TMP/bg.pid" ] && [ "$tries" -gt 0 ]; do
    sleep 0.1
    tries=$((tries - 1))
done
[ -s "$ZV_TMP/bg.pid" ] || {
    _zv_show_log "$ZV_TMP/bg.log"
    die "nbdkit in the background on $loop wrote no pid file within ${ZV_START_TIMEOUT}s"
}
bgpid=$(cat "$ZV_TMP/bg.pid")
track_pid "$bgpid"
check "a server on the file (a background server on $loop) is refused" \
    expect_start_failure "$ZV_TMP/file-daemon.log" device="$pool"
has_msg "the refusal names the background server" \
    "$ZV_TMP/file-daemon.log" \
    "$pool: in use by another process (device locked by process $bgpid (nbdkit), through $loop)"
kill -TERM "$bgpid"
check "the background server exits on SIGTERM" _zv_wait_exit "$bgpid" "$ZV_STOP_TIMEOUT"

# 4. Nothing was lost: the file's server sees what the loop device's
# server wrote.
start_zvol "$sa" device="$pool" || die "the file is served again"
py_checks "the file's server sees what the loop device's server wrote" \
    "$ZV_TMP/rw.py" "$(nbd_uri "$sa")" check second || :
check "final clean stop" stop_zvol "$sa"

zv_summary
