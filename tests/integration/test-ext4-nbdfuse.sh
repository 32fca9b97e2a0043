#!/usr/bin/env bash
# test-ext4-nbdfuse.sh: ext4 on the zvol through nbdfuse + a loop device.
#
# Serve a 512 MiB volume; nbdfuse turns it into a file; losetup makes a
# block device of it; mkfs.ext4, mount, copy a generated tree of files
# (~50 MiB: a few large, many small, nested), record sha256sums, unmount,
# fsck -fn must be clean; take everything down, stop the server cleanly,
# start it again (import), attach, fsck clean, mount, sha256sum -c passes.
# Then once more after writing more files and a kill -9 after sync(1).

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_root
requires_plugin
requires nbdfuse --version
requires losetup --version
requires mkfs.ext4 -V
requires fsck.ext4 -V
requires mount --version
requires umount --version
requires sha256sum --version
requires nbdkit --version
if command -v fusermount3 >/dev/null 2>&1; then
    FUSERMOUNT=fusermount3
elif command -v fusermount >/dev/null 2>&1; then
    FUSERMOUNT=fusermount
else
    skip "neither fusermount3 nor fusermount found"
fi
if [ ! -c /dev/fuse ]; then
    skip "/dev/fuse is missing"
fi
if ! losetup -f >/dev/null 2>&1; then
    skip "'losetup -f' finds no free loop device (no loop support here?)"
fi
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
fusedir=$ZV_TMP/fuse
mnt=$ZV_TMP/mnt
mkdir -p "$fusedir" "$mnt"
LOOP=
FUSE_PID=

# Cleanup, also on failure: unmount, detach, unmount FUSE, in that order.
ext4_teardown ()
{
    if mountpoint -q "$mnt" 2>/dev/null; then
        timeout 60 umount "$mnt" || timeout 30 umount -l "$mnt" || :
    fi
    if [ -n "$LOOP" ]; then
        timeout 60 losetup -d "$LOOP" || :
        LOOP=
    fi
    if [ -n "$FUSE_PID" ]; then
        timeout 30 "$FUSERMOUNT" -u "$fusedir" 2>/dev/null ||
            timeout 30 "$FUSERMOUNT" -u -z "$fusedir" 2>/dev/null || :
        _zv_wait_exit "$FUSE_PID" 30 || kill -KILL "$FUSE_PID" 2>/dev/null || :
        _zv_wait_exit "$FUSE_PID" 10 || :
        _zv_reap "$FUSE_PID"
        FUSE_PID=
    fi
}
on_exit ext4_teardown

# fuse_up DIR URI-ARGS...: start nbdfuse on DIR/nbd; wait for its pidfile.
fuse_up ()
{
    local dir=$1; shift
    local pidfile=$ZV_TMP/nbdfuse.pid tries=300
    rm -f "$pidfile"
    nbdfuse -P "$pidfile" "$dir" "$@" </dev/null >>"$ZV_TMP/nbdfuse.log" 2>&1 &
    FUSE_PID=$!
    track_pid "$FUSE_PID"
    while [ "$tries" -gt 0 ]; do
        if [ -s "$pidfile" ] && [ -e "$dir/nbd" ]; then
            return 0
        fi
        if ! _zv_alive "$FUSE_PID"; then
            _zv_reap "$FUSE_PID"
            FUSE_PID=
            echo "nbdfuse exited (status $ZV_RC):"
            tail -n 20 "$ZV_TMP/nbdfuse.log" | sed 's/^/    /'
            return 1
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "nbdfuse did not come up within 30s"
    return 1
}

# Probe the environment (FUSE mounts, loop devices over a FUSE file)
# with nbdkit's memory plugin; skip if the kernel or container can't.
zv_log "probe: can this machine do nbdfuse + loop?"
if ! fuse_up "$fusedir" --command nbdkit -s --exit-with-parent memory 16M; then
    skip "nbdfuse cannot mount here (FUSE not permitted?); see above"
fi
if ! LOOP=$(timeout 60 losetup -f --show "$fusedir/nbd" 2>"$ZV_TMP/losetup.err"); then
    LOOP=
    reason=$(head -n 1 "$ZV_TMP/losetup.err")
    ext4_teardown
    skip "cannot attach a loop device to a FUSE file: $reason"
fi
ext4_teardown

# attach: serve, nbdfuse, loop device.  detach: the reverse.
attach ()
{
    fuse_up "$fusedir" --unix "$sock" || return 1
    LOOP=$(timeout 60 losetup -f --show "$fusedir/nbd") || { LOOP=; return 1; }
    zv_log "attached $LOOP -> $fusedir/nbd -> $sock"
}

# The tree: deterministic pseudo-random files, nested.
cat >"$ZV_TMP/mktree.py" <<'EOF'
import os, random, sys
root, seed, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)
total = 0
for i in range(4):                       # large files
    n = rng.randrange(4 << 20, 8 << 20)
    d = os.path.join(root, tag, "big")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d.bin" % i), "wb") as f:
        f.write(rng.randbytes(n))
    total += n
while total < (50 << 20):                # nested small and medium files
    d = os.path.join(root, tag, "d%d" % rng.randrange(20), "e%d" % rng.randrange(10))
    os.makedirs(d, exist_ok=True)
    n = rng.choice([0, 1, 100, 4095, 4096, 4097, rng.randrange(1, 300000)])
    with open(os.path.join(d, "f%d" % rng.randrange(1 << 30)), "wb") as f:
        f.write(rng.randbytes(n))
    total += n
os.symlink("big/f0.bin", os.path.join(root, tag, "link"))
print(total)
EOF

# sums_ok LIST: sha256sum -c over the mount.
sums_ok ()
{
    (cd "$mnt" && timeout 600 sha256sum -c --quiet "$1")
}

fsck_clean ()
{
    timeout 600 fsck.ext4 -fn "$LOOP" >"$ZV_TMP/fsck.log" 2>&1 || {
        cat "$ZV_TMP/fsck.log"
        return 1
    }
}

zv_log "serve a 512 MiB volume"
start_zvol "$sock" device="$pool" create=true size=512M || die "create the pool"
attach || die "attach nbdfuse + loop"
check "mkfs.ext4" timeout 600 mkfs.ext4 -q -F "$LOOP"
check "mount" timeout 120 mount "$LOOP" "$mnt"
zv_log "generate ~50 MiB of files"
bytes=$(timeout 600 "$NBD_PY" "$ZV_TMP/mktree.py" "$mnt" "$ZVOL_TEST_SEED" one)
zv_log "wrote $bytes bytes in $(find "$mnt/one" -type f | wc -l) files"
(cd "$mnt" && find one -type f -print0 | sort -z | xargs -0 sha256sum) >"$ZV_TMP/sums.one"
check "files read back through the page cache" sums_ok "$ZV_TMP/sums.one"
check "umount" timeout 300 umount "$mnt"
check "fsck.ext4 -fn is clean" fsck_clean
ext4_teardown
check "clean stop of the server" stop_zvol

zv_log "import, attach again, verify"
start_zvol "$sock" device="$pool" || die "import the pool"
attach || die "attach again"
check "fsck.ext4 -fn is clean after the restart" fsck_clean
check "mount after the restart" timeout 120 mount "$LOOP" "$mnt"
check "sha256sum -c passes after the restart" sums_ok "$ZV_TMP/sums.one"

zv_log "write more, sync, kill -9 the server"
bytes=$(timeout 600 "$NBD_PY" "$ZV_TMP/mktree.py" "$mnt" $((ZVOL_TEST_SEED + 1)) two)
(cd "$mnt" && find two -type f -print0 | sort -z | xargs -0 sha256sum) >"$ZV_TMP/sums.two"
rm -rf "$mnt/one/d1" "$mnt/one/d2"
grep -v ' one/d[12]/' "$ZV_TMP/sums.one" >"$ZV_TMP/sums.one2"
check "sync" timeout 300 sync -f "$mnt"
check "kill -9 the server" kill9_zvol
# the dead server fails I/O: the loop, FUSE and mount come down as they can
timeout 60 umount -l "$mnt" 2>/dev/null || :
ext4_teardown
start_zvol "$sock" device="$pool" || die "import the pool after kill -9"
attach || die "attach after kill -9"
# mount first: it replays the ext4 journal (fsck -n would not)
check "mount after kill -9 (replays the ext4 journal)" timeout 120 mount "$LOOP" "$mnt"
check "the synced new files are intact after kill -9" sums_ok "$ZV_TMP/sums.two"
check "the first tree (minus the removed dirs) is intact after kill -9" sums_ok "$ZV_TMP/sums.one2"
check "the removed directories stay removed" test ! -e "$mnt/one/d1" -a ! -e "$mnt/one/d2"
check "umount" timeout 300 umount "$mnt"
check "fsck.ext4 -fn is clean after kill -9 and journal replay" fsck_clean
ext4_teardown
check "clean stop of the server" stop_zvol

zv_summary
