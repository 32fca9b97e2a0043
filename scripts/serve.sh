#!/bin/bash
# serve.sh: build nbdkit-zvol and serve a demo volume in the foreground.
#
#   scripts/serve.sh [NBDKIT-OPTIONS...] [-- PLUGIN-PARAMETERS...]
#
# The pool lives in demo/pool.img in the checkout: the first run creates
# it (a sparse file, a thin 4G volume named "demo"; ZVOL_SIZE=8G changes
# the size), later runs import it.  It is served on the Unix socket
# demo/zvol.sock; kstat files go to demo/kstat/.  Ctrl-C stops the server
# cleanly: nbdkit's cleanup syncs the pool before it exits.
#
# Examples:
#   scripts/serve.sh                      # serve
#   scripts/serve.sh -v                   # with debug messages
#   scripts/serve.sh -- txg_timeout=1     # extra plugin parameters
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

nbdkit_opts=()
plugin_params=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then
        shift
        plugin_params=("$@")
        break
    fi
    nbdkit_opts+=("$1")
    shift
done

bash scripts/setup.sh

plugin=$top/plugin/.libs/nbdkit-zvol-plugin.so
[ -f "$plugin" ] || { echo "serve: $plugin was not built" >&2; exit 1; }

demo=$top/demo
pool=$demo/pool.img
sock=$demo/zvol.sock
kstat=$demo/kstat
uri="nbd+unix:///?socket=$sock"
mkdir -p "$demo"

params=("device=$pool" "kstat=$kstat")
if [ -e "$pool" ]; then
    what="importing the pool in $pool"
else
    size=${ZVOL_SIZE:-4G}
    params+=(create=true "size=$size" name=demo)
    what="creating a thin $size volume in $pool (sparse file)"
fi
params+=("${plugin_params[@]}")

# A socket left by a server that was killed would make nbdkit fail.
if [ -S "$sock" ]; then
    if nbdinfo --size "$uri" >/dev/null 2>&1; then
        echo "serve: a server is already listening on $sock" >&2
        exit 1
    fi
    rm -f "$sock"
fi

cat <<MSG
serve: $what
serve: listening on $sock  (Ctrl-C to stop; the pool is synced on exit)

Connect with:
  nbdinfo '$uri'
  nbdinfo --map '$uri'

  # a file system, where the kernel has no nbd module (nbdfuse + loop):
  examples/nbdfuse-loop.sh '$uri' /mnt/zvol

  # the kernel NBD client, on a host with the nbd module (see examples/nbd-client.md):
  modprobe nbd && nbd-client -unix $sock /dev/nbd0 -b 4096 -C 4

  # fio through libnbd:
  uri='$uri' fio examples/fio/rand-write.fio

Transaction groups: watch -n1 tail $kstat/txgs   (space and cache: $kstat/stats)

MSG

exec nbdkit -f -U "$sock" -t 32 "${nbdkit_opts[@]}" "$plugin" "${params[@]}"
