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
requires fio --version
if ! fio --enghelp=nbd >/dev/null 2>&1; then
    skip "fio has no nbd engine"
fi
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")
export uri
FIO_TIMEOUT=${FIO_TIMEOUT:-1200}

# One job file; phase "write" writes and verifies, phase "verify" only
# reads and verifies what the same jobs wrote (same offsets and seeds).
cat >"$ZV_TMP/verify.fio" <<'EOF'
[global]
ioengine=nbd
uri=${uri}
verify=crc32c
verify_fatal=1
do_verify=1
randrepeat=1
end_fsync=1
verify_only=${VERIFY_ONLY}
group_reporting=0

[rand4k]
rw=randwrite
bs=4k
iodepth=32
numjobs=4
size=64M
offset=0
offset_increment=64M
verify_backlog=1024

[randmix]
rw=randwrite
bssplit=4k/50:64k/50
iodepth=32
numjobs=1
size=128M
offset=256M

[seq128k]
rw=write
bs=128k
iodepth=16
numjobs=1
size=256M
offset=512M
EOF

# fio_run PHASE EXTRA...: run the job file; check every job's error field
# and the amounts written/read from the JSON output.
fio_run ()
{
    local phase=$1; shift
    local out=$ZV_TMP/fio-$phase.json rc=0
    zv_log "fio ($phase): $*"
    VERIFY_ONLY=$([ "$phase" = write ] && echo 0 || echo 1) \
        timeout "$FIO_TIMEOUT" fio --output-format=json --output="$out" "$@" \
        "$ZV_TMP/verify.fio" || rc=$?
    if [ "$rc" -eq 124 ]; then
        zv_fail "fio ($phase) finished within ${FIO_TIMEOUT}s"
    else
        check "fio ($phase) exits 0 (got $rc)" test "$rc" -eq 0
    fi
    py_checks "fio ($phase) results" /dev/stdin "$out" "$phase" <<'EOF' || :
import json, sys
from zvtest import ok, finish
path, phase = sys.argv[1], sys.argv[2]
try:
    text = open(path).read()
    # fio may print messages before the JSON document
    doc = json.loads(text[text.index("{"):])
except Exception as e:
    ok(False, "fio %s wrote a JSON report (%s)" % (phase, e))
    finish()
sizes = {"rand4k": 64 << 20, "randmix": 128 << 20, "seq128k": 256 << 20}
seen = {}
for j in doc["jobs"]:
    name = j["jobname"]
    seen[name] = seen.get(name, 0) + 1
    w = j["write"]["io_bytes"]
    r = j["read"]["io_bytes"]
    ok(j["error"] == 0, "fio %s job %s: error=%d" % (phase, name, j["error"]))
    if phase == "write":
        ok(w >= sizes[name], "fio %s job %s wrote %d MiB" % (phase, name, w >> 20))
        print("  %s: write %.0f IOPS %.1f MiB/s" %
              (name, j["write"]["iops"], j["write"]["bw_bytes"] / 2**20))
    ok(r >= sizes[name], "fio %s job %s read back (verified) %d MiB" % (phase, name, r >> 20))
ok(seen == {"rand4k": 4, "randmix": 1, "seq128k": 1},
   "fio %s ran all jobs (%s)" % (phase, seen))
finish()
EOF
    if [ "$rc" -ne 0 ] || grep -qi 'verify.*fail\|bad magic\|crc32c.*mismatch' "$out"; then
        echo "---- fio output ($phase) ----"
        grep -v '^\s*$' "$out" | grep -iv '"' | head -n 40 || :
        grep -i 'verify\|error\|mismatch' "$out" | head -n 40 || :
    fi
}

zv_log "create a 1 GiB volume"
start_zvol "$sock" device="$pool" create=true size=1G || die "create the pool"
fio_run write
check "server still running after fio" zvol_running

zv_log "kill -9 after fio's end_fsync, import, verify everything again"
check "kill -9" kill9_zvol
start_zvol "$sock" device="$pool" || die "import after kill -9"
fio_run verify
check "clean stop" stop_zvol
start_zvol "$sock" device="$pool" || die "import after a clean stop"
fio_run verify2
check "clean stop" stop_zvol

zv_summary
