#!/usr/bin/env bash
# test-bad-config.sh: bad configurations are refused before serving.
#
# For each case nbdkit must exit non-zero before it serves, print a
# readable message (matched against a keyword), and leave the device
# files exactly as they were (same sha256, or still absent).

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires sha256sum
zv_setup

ncase=0
WATCH=()   # files whose state must not change in the current case

# Print the state (sha256 and size, or absence) of each file.
state_of ()
{
    local f
    for f in "$@"; do
        if [ -e "$f" ]; then
            echo "$f $(stat -c %s "$f") $(sha256sum <"$f" | cut -d' ' -f1)"
        else
            echo "$f absent"
        fi
    done
}

# refused DESC REGEX ARGS...: nbdkit with plugin ARGS must fail before
# serving, with a message matching REGEX (grep -Ei), and leave every file
# in WATCH unchanged.
refused ()
{
    local desc=$1 re=$2; shift 2
    local log before after msg f
    ncase=$((ncase + 1))
    log=$ZV_TMP/case$ncase.log
    zv_log "case $ncase: $desc: nbdkit ... $*"
    before=$(state_of ${WATCH[@]+"${WATCH[@]}"})
    if expect_start_failure "$log" "$@"; then
        zv_pass "$desc: nbdkit exits non-zero before serving"
    else
        zv_fail "$desc: nbdkit exits non-zero before serving"
        _zv_show_log "$log"
    fi
    msg=$(grep -Ei -- "$re" "$log" | head -n 1 || :)
    if [ -n "$msg" ]; then
        zv_pass "$desc: message matches /$re/: $msg"
    else
        zv_fail "$desc: no message matching /$re/ in stderr"
        _zv_show_log "$log"
    fi
    after=$(state_of ${WATCH[@]+"${WATCH[@]}"})
    if [ "$before" = "$after" ]; then
        zv_pass "$desc: device files unchanged"
    else
        zv_fail "$desc: device files changed"
        diff <(echo "$before") <(echo "$after") | sed 's/^/    /' || :
    fi
    # a file that should not exist and was created: remove it, so that
    # the next case starts from the same state
    for f in ${WATCH[@]+"${WATCH[@]}"}; do
        if grep -qxF "$f absent" <<<"$before" && [ -e "$f" ]; then
            rm -f "$f"
        fi
    done
}

# write_tag URI OFF TAG: write a 64 KiB pattern; check_tag reads it back.
cat >"$ZV_TMP/tag.py" <<'EOF'
import sys
from zvtest import *
uri, op, off, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
h = connect(uri)
if op == "write":
    h.pwrite(pattern(tag, 65536), off)
    h.flush()
    ok(True, "wrote 64 KiB tag %s at %d" % (tag, off))
else:
    ok(h.pread(65536, off) == pattern(tag, 65536),
       "tag %s at %d reads back" % (tag, off))
finish()
EOF
tag () { py_checks "$1" "$ZV_TMP/tag.py" "$(nbd_uri "$2")" "$3" "$4" "$5"; }

sock=$ZV_TMP/a.sock
new=$ZV_TMP/new.img      # never created
WATCH=("$new")

# --- configuration errors (nothing on disk yet) ---
refused "no device" 'device' create=true size=1G
refused "no device, no arguments" 'device'
refused "create without size" 'size' device="$new" create=true
refused "size=abc" 'size' device="$new" create=true size=abc
refused "size=0" 'size' device="$new" create=true size=0
refused "size=-1" 'size' device="$new" create=true size=-1
refused "size=1.5M" 'size' device="$new" create=true size=1.5M
refused "volblocksize=3000" 'volblocksize|block ?size' \
    device="$new" create=true size=64M volblocksize=3000
refused "volblocksize=256K" 'volblocksize|block ?size' \
    device="$new" create=true size=64M volblocksize=256K
refused "volblocksize=2K (below 4K)" 'volblocksize|block ?size' \
    device="$new" create=true size=64M volblocksize=2K
refused "volblocksize=abc" 'volblocksize|block ?size' \
    device="$new" create=true size=64M volblocksize=abc
refused "create=maybe" 'create|bool' device="$new" create=maybe size=64M
refused "rewind= with create=true" 'rewind=.*import' \
    device="$new" create=true size=64M rewind=true
refused "verify= with create=true" 'verify=.*import' \
    device="$new" create=true size=64M verify=full
refused "unknown parameter" 'unknown|parameter|frobnicate|invalid' \
    device="$new" create=true size=64M frobnicate=1
refused "txg_timeout=abc" 'txg|timeout|invalid' \
    device="$new" create=true size=64M txg_timeout=abc
refused "a pool name with a newline" 'pool name.*printable' \
    device="$new" create=true size=64M name=$'a\nb'
# --- a key given twice (device= is the one repeatable key) ---
refused "size= given twice" 'size=.*(twice|once)' \
    device="$new" create=true size=64M size=32M
refused "name= given twice" 'name=.*(twice|once)' \
    device="$new" create=true size=64M name=a name=b
refused "a tunable given twice" 'txg_timeout=.*(twice|once)' \
    device="$new" create=true size=64M txg_timeout=5 txg_timeout=6
refused "kstat= given twice" 'kstat=.*(twice|once)' \
    device="$new" create=true size=64M kstat="$ZV_TMP/k1" kstat=none
check "no kstat directory was made" test ! -e "$ZV_TMP/k1"
refused "log= given twice" 'log=.*(twice|once)' \
    device="$new" create=true size=64M log="$ZV_TMP/l1" log="$ZV_TMP/l2"
# --- the intent log's size ---
refused "zil_size=1" 'zil_size=1\b.*512K' \
    device="$new" create=true size=64M zil_size=1
refused "zil_size=1 with log=" 'zil_size=1\b.*512K' \
    device="$new" create=true size=64M zil_size=1 log="$ZV_TMP/l1"
# (dirty_max=16M: the created file is 64M + 16M + 128M + 2 x 16M, whatever
# the machine's memory, so a quarter of it is well below 1G)
refused "zil_size=1G, more than the pool allows" 'zil_size=1G.*(512K|at most)' \
    device="$new" create=true size=64M dirty_max=16M zil_size=1G
WATCH=()
refused "device in a missing directory" 'no such|exist|open|device' \
    device="$ZV_TMP/no/such/dir/pool.img" create=true size=64M
check "nothing was created in the missing directory" test ! -e "$ZV_TMP/no"

# --- files that are not pools ---
rnd=$ZV_TMP/random.img
# larger than the smallest pool device, so that the labels are examined
head -c $((32 * 1024 * 1024)) /dev/urandom >"$rnd"
WATCH=("$rnd")
refused "import a file of random bytes" 'label|pool|magic|not a|invalid|corrupt|uberblock' \
    device="$rnd"
small=$ZV_TMP/small.img
head -c $((1024 * 1024)) /dev/urandom >"$small"
WATCH=("$small")
refused "create 1G on an existing 1 MiB file" 'small|size|space|large|fit' \
    device="$small" create=true size=1G
zero=$ZV_TMP/empty.img
: >"$zero"
WATCH=("$zero")
refused "import an empty file" 'label|pool|small|size|magic|invalid|empty' \
    device="$zero"

# --- an existing pool ---
pool=$ZV_TMP/pool.img
start_zvol "$sock" device="$pool" create=true size=64M || die "create a pool"
tag "write a tag into the pool" "$sock" write $((5 * 1048576)) one || :
check "clean stop" stop_zvol "$sock"
WATCH=("$pool")
refused "create=true on an existing pool" 'exist|pool|label|already|in use' \
    device="$pool" create=true size=64M
refused "create=true on an existing pool with another size" 'exist|pool|label|already|in use' \
    device="$pool" create=true size=32M
refused "readonly=true readonly=false" 'readonly=.*(twice|once)' \
    device="$pool" readonly=true readonly=false
refused "create=true create=false" 'create=.*(twice|once)' \
    device="$pool" create=true create=false
refused "sparse= on import" 'sparse=.*create=true' \
    device="$pool" sparse=true
refused "rewind=maybe" 'rewind=maybe.*true or false' \
    device="$pool" rewind=maybe
refused "rewind= given twice" 'rewind=.*(twice|once)' \
    device="$pool" rewind=true rewind=false
refused "sparse=false on import" 'sparse=.*create=true' \
    device="$pool" sparse=false
refused "preallocate= on import" 'preallocate=.*create=true' \
    device="$pool" preallocate=true
refused "preallocate=maybe" 'preallocate=maybe.*true or false' \
    device="$new" create=true size=64M preallocate=maybe
refused "preallocate=true over a file that is not empty" 'preallocate=true: .* not an empty file' \
    device="$pool" create=true size=64M preallocate=true
refused "preallocate=true with two devices" 'preallocate=true is only used with one device' \
    device="$new" device="$ZV_TMP/other.img" create=true size=64M preallocate=true
refused "preallocate=true on RADOS" 'preallocate=true is only used with one device' \
    device=rados:p/v create=true size=64M preallocate=true
refused "verify=maybe" 'verify=maybe.*lazy or full' \
    device="$pool" verify=maybe
refused "verify= given twice" 'verify=.*(twice|once)' \
    device="$pool" verify=full verify=lazy
refused "zil_size= on import" 'zil_size=.*create=true' \
    device="$pool" zil_size=1M
refused "the pool's device as its log device on import" 'log device.*separate|separate.*device' \
    device="$pool" log="$pool"
# RADOS keys without a RADOS device, or on import; a pool of mixed kinds
# (refused before any cluster is asked: none runs here).
refused "ceph_conf= without a RADOS device" 'ceph_conf=.*only used with RADOS' \
    device="$pool" ceph_conf=/etc/ceph/ceph.conf
refused "device_size= on import" 'device_size=.*create=true' \
    device=rados:p/v device_size=1G
refused "a file pool with a RADOS log device" 'is a RADOS device and .* all RADOS devices or all files' \
    device="$pool" log=rados:p/log
refused "a bad RADOS device name" 'not a RADOS device name' \
    device=rados:p create=true size=64M
refused "takeover=true with create" 'takeover=true is only used on import' \
    device=rados:p/v create=true size=64M takeover=true
refused "takeover=true without a RADOS device" 'takeover= is only used with RADOS' \
    device="$pool" takeover=true
start_zvol "$sock" device="$pool" verify=full || die "the pool still imports after refused creates"
tag "the pool's data is intact after refused creates" "$sock" check $((5 * 1048576)) one || :
check "clean stop" stop_zvol "$sock"
start_zvol "$sock" device="$pool" verify=lazy || die "the pool imports with verify=lazy"
tag "the pool's data reads with verify=lazy" "$sock" check $((5 * 1048576)) one || :

# --- a second server on the same pool ---
WATCH=()
refused "second server on the same pool (import)" 'lock|busy|in use|use' \
    device="$pool"
refused "second server on the same pool (create)" 'lock|busy|in use|use|exist|pool' \
    device="$pool" create=true size=64M
check "first server still runs" zvol_running "$sock"
tag "first server still serves" "$sock" check $((5 * 1048576)) one || :
tag "first server still writes" "$sock" write $((9 * 1048576)) two || :
check "clean stop" stop_zvol "$sock"

# --- multi-device pools ---
a=$ZV_TMP/a.img b=$ZV_TMP/b.img c=$ZV_TMP/c.img d=$ZV_TMP/d.img
# with several devices, create=true wants the files to exist already
truncate -s 128M "$a" "$b" "$c" "$d"
start_zvol "$sock" device="$a" device="$b" create=true size=64M ||
    die "create a two-device pool"
tag "write tags into the two-device pool" "$sock" write $((50 * 1048576)) ab || :
check "clean stop" stop_zvol "$sock"
start_zvol "$sock" device="$c" device="$d" create=true size=64M name=other ||
    die "create a second two-device pool"
check "clean stop" stop_zvol "$sock"
WATCH=("$a" "$b" "$c" "$d")
refused "first device of a two-device pool alone" 'missing|device|expected|found' \
    device="$a"
refused "second device of a two-device pool alone" 'missing|device|expected|found' \
    device="$b"
refused "devices of two different pools" 'pool|guid|different|mismatch|belong|missing' \
    device="$a" device="$d"
refused "the same device twice" 'duplicate|twice|same|missing|device|lock|busy|use' \
    device="$a" device="$a"
refused "a foreign pool's device added to a whole pool" 'pool|guid|different|mismatch|belong|extra|device' \
    device="$a" device="$b" device="$c"
refused "a random file added to a whole pool" 'label|pool|magic|not a|invalid|corrupt|device' \
    device="$a" device="$b" device="$rnd"
ln "$a" "$ZV_TMP/a-hard.img"
ln -s "$a" "$ZV_TMP/a-sym.img"
refused "a device and a hard link to it" 'same (device|file)|given twice' \
    device="$a" device="$b" device="$ZV_TMP/a-hard.img"
refused "a data device as the log device on import" 'log device.*separate' \
    device="$a" device="$b" log="$a"
refused "a hard link to a data device as the log device" 'log device.*separate' \
    device="$a" device="$b" log="$ZV_TMP/a-hard.img"
e=$ZV_TMP/e.img
truncate -s 128M "$e"
ln -s "$e" "$ZV_TMP/e-sym.img"
ln "$e" "$ZV_TMP/e-hard.img"
WATCH=("$e")
refused "create: the data device as the log device" 'log device.*separate' \
    device="$e" create=true size=64M log="$e"
refused "create: a symlink to the data device as the log device" 'log device.*separate' \
    device="$e" create=true size=64M log="$ZV_TMP/e-sym.img"
refused "create: a hard link to the data device as the log device" 'log device.*separate' \
    device="$e" create=true size=64M log="$ZV_TMP/e-hard.img"
lg=$ZV_TMP/lg.img
truncate -s 64M "$lg"
WATCH=("$e" "$lg")
refused "create: zil_size= with log=" 'zil_size=.*log' \
    device="$e" create=true size=64M zil_size=1M log="$lg"
WATCH=("$a" "$b" "$c" "$d")
start_zvol "$sock" device="$a" device="$b" ||
    die "the two-device pool imports after the refused imports"
tag "the two-device pool's data is intact" "$sock" check $((50 * 1048576)) ab || :
check "clean stop" stop_zvol "$sock"

zv_summary
