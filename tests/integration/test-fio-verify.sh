#!/usr/bin/env bash
# test-fio-verify.sh: fio's nbd engine writes with crc32c verification
# (verify_fatal=1) over 512 MiB of a 1 GiB volume; after end_fsync, kill -9
# and an import, fio verifies everything again (verify_only).
#
# Jobs (all ioengine=nbd, one connection per job):
#   rand4k   randwrite 4k, QD32, 4 jobs x 64 MiB (offset_increment), verify
#            backlog 1024 while writing, then a full verify pass;
#   randmix  randwrite 4k/64k mix, QD32, 128 MiB, verify;
#   seq128k  sequential write 128k, QD16, 256 MiB, then read + verify.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires_fio_nbd
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
export uri
fio_verify_setup 64 128 256

zv_log "create a 1 GiB volume"
start_zvol "$sock" device="$pool" create=true size=1G || die "create the pool"
fio_verify write
check "server still running after fio" zvol_running

zv_log "kill -9 after fio's end_fsync, import, verify everything again"
check "kill -9" kill9_zvol
start_zvol "$sock" device="$pool" || die "import after kill -9"
fio_verify verify
check "clean stop" stop_zvol
start_zvol "$sock" device="$pool" || die "import after a clean stop"
fio_verify verify2
check "clean stop" stop_zvol

zv_summary
