#!/bin/bash
# nbdfuse-loop.sh: put an ext4 file system on an NBD volume and mount it,
# on a host whose kernel has no nbd module.  nbdfuse shows the volume as a
# file, a loop device turns that file into a block device.
#
#   examples/nbdfuse-loop.sh [URI] [MOUNTPOINT]
#
# URI defaults to scripts/serve.sh's socket, MOUNTPOINT to /mnt/zvol.
# Makes a file system only when the volume holds none yet.  Once mounted it
# writes a test file, then (if stdin is a terminal) waits for Enter; then
# unmounts, checks the file system with e2fsck and detaches everything.
# Needs root (losetup, mount), nbdfuse (libnbd-bin), fuse3, e2fsprogs.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
uri=${1:-"nbd+unix:///?socket=$top/demo/zvol.sock"}
mnt=${2:-/mnt/zvol}

work=$(mktemp -d /var/tmp/zvol-fuse.XXXXXX)
fusedir=$work/fuse
pidfile=$work/nbdfuse.pid
mkdir -p "$fusedir" "$mnt"
loop=
fusepid=
mounted=no

# Undo everything, in reverse order, whatever step failed.
cleanup () {
    set +e
    if [ "$mounted" = yes ]; then
        umount "$mnt"
    fi
    if [ -n "$loop" ]; then
        echo "e2fsck -fn $loop"
        e2fsck -fn "$loop"
        losetup -d "$loop"
    fi
    if mountpoint -q "$fusedir"; then
        fusermount3 -u "$fusedir"
    fi
    # nbdfuse exits by itself once unmounted.
    if [ -n "$fusepid" ]; then
        for _ in $(seq 50); do
            kill -0 "$fusepid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "nbdfuse $fusedir/disk $uri"
nbdfuse -P "$pidfile" "$fusedir/disk" "$uri" &
fusepid=$!
for _ in $(seq 100); do
    [ -s "$pidfile" ] && break
    kill -0 "$fusepid" 2>/dev/null || { echo "nbdfuse failed" >&2; exit 1; }
    sleep 0.1
done
[ -s "$pidfile" ] || { echo "nbdfuse did not start" >&2; exit 1; }

loop=$(losetup -f --show "$fusedir/disk")
echo "loop device: $loop"

if ! blkid -p "$loop" >/dev/null 2>&1; then
    echo "mkfs.ext4 $loop"
    mkfs.ext4 -q "$loop"
fi
mount "$loop" "$mnt"
mounted=yes
echo "mounted on $mnt"

dd if=/dev/urandom of="$mnt/zvol-test" bs=1M count=16 status=none
sync
df -h "$mnt"
sha256sum "$mnt/zvol-test"

if [ -t 0 ]; then
    read -r -p "Press Enter to unmount and detach... " _
fi
