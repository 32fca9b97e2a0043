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

requires_plugin
requires_nbdfuse_ext4
requires nbdkit --version
requires_nbd_python
zv_setup
nbdfuse_setup || skip "$ZV_NBDFUSE_SKIP"

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
mnt=$ZV_MNT

zv_log "serve a 512 MiB volume"
start_zvol "$sock" device="$pool" create=true size=512M || die "create the pool"
nbdfuse_attach "$sock" || die "attach nbdfuse + loop"
check "mkfs.ext4" timeout 600 mkfs.ext4 -q -F "$LOOP"
check "mount" timeout 120 mount "$LOOP" "$mnt"
zv_log "generate ~50 MiB of files"
bytes=$(timeout 600 "$NBD_PY" "$ZV_TMP/mktree.py" "$mnt" "$ZVOL_TEST_SEED" one)
zv_log "wrote $bytes bytes in $(find "$mnt/one" -type f | wc -l) files"
ext4_sums one "$ZV_TMP/sums.one"
check "files read back through the page cache" ext4_sums_ok "$ZV_TMP/sums.one"
check "umount" timeout 300 umount "$mnt"
check "fsck.ext4 -fn is clean" ext4_fsck_clean
nbdfuse_teardown
check "clean stop of the server" stop_zvol

zv_log "import, attach again, verify"
start_zvol "$sock" device="$pool" || die "import the pool"
nbdfuse_attach "$sock" || die "attach again"
check "fsck.ext4 -fn is clean after the restart" ext4_fsck_clean
check "mount after the restart" timeout 120 mount "$LOOP" "$mnt"
check "sha256sum -c passes after the restart" ext4_sums_ok "$ZV_TMP/sums.one"

zv_log "write more, sync, kill -9 the server"
bytes=$(timeout 600 "$NBD_PY" "$ZV_TMP/mktree.py" "$mnt" $((ZVOL_TEST_SEED + 1)) two)
ext4_sums two "$ZV_TMP/sums.two"
rm -rf "$mnt/one/d1" "$mnt/one/d2"
grep -v ' one/d[12]/' "$ZV_TMP/sums.one" >"$ZV_TMP/sums.one2"
check "sync" timeout 300 sync -f "$mnt"
check "kill -9 the server" kill9_zvol
# the dead server fails I/O: the loop, FUSE and mount come down as they can
timeout 60 umount -l "$mnt" 2>/dev/null || :
nbdfuse_teardown
start_zvol "$sock" device="$pool" || die "import the pool after kill -9"
nbdfuse_attach "$sock" || die "attach after kill -9"
# mount first: it replays the ext4 journal (fsck -n would not)
check "mount after kill -9 (replays the ext4 journal)" timeout 120 mount "$LOOP" "$mnt"
check "the synced new files are intact after kill -9" ext4_sums_ok "$ZV_TMP/sums.two"
check "the first tree (minus the removed dirs) is intact after kill -9" ext4_sums_ok "$ZV_TMP/sums.one2"
check "the removed directories stay removed" test ! -e "$mnt/one/d1" -a ! -e "$mnt/one/d2"
check "umount" timeout 300 umount "$mnt"
check "fsck.ext4 -fn is clean after kill -9 and journal replay" ext4_fsck_clean
nbdfuse_teardown
check "clean stop of the server" stop_zvol

zv_summary
