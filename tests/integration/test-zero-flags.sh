#!/usr/bin/env bash
# test-zero-flags.sh: the flags of NBD write zeroes through nbdkit.
#
#  1. NO_HOLE (nbdkit leaves out MAY_TRIM): the range reads as zeros and
#     block status reports it as data, over data and over holes, aligned
#     and not, before and after a flush, after a restart (export and
#     import) and after kill -9 following a flush (intent-log replay);
#  2. without NO_HOLE: whole volblocks become holes, also where a NO_HOLE
#     zero had allocated them;
#  3. FAST_ZERO: succeeds without NO_HOLE (blocks are only freed); with
#     NO_HOLE it fails with ENOTSUP and changes nothing;
#  4. space: the stats file's space in use (space_allocated less
#     space_deferred) grows by the allocated zeros and not by the holes.
#
# Space is read from the stats file a freshly started server writes: a
# clean stop syncs everything, and the import's figures are exact.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
kstat=$ZV_TMP/kstat
uri=$(nbd_uri "$sock")

cat >"$ZV_TMP/zero.py" <<'EOF'
# One phase of the test (argv: uri phase).
import errno, sys
import nbd
from zvtest import *

uri, phase = sys.argv[1], sys.argv[2]
MiB = 1 << 20
VBS = 16384
DATA = 8 * MiB                      # data written at 0 by phase "data"
HOLE, DATA_EXT = 3, 0               # base:allocation flags: hole|zero, data

def layout(crashed):
    """(offset, length, kind) of every range the zeros made or kept."""
    lay = [
        (0, MiB, "data"),                       # untouched data
        (MiB, MiB, "data"),                     # NO_HOLE over data
        (2 * MiB, MiB, "hole"),                 # ... then zeroed again
        (4 * MiB, 64 * 1024, "data"),           # unaligned NO_HOLE
        (5 * MiB, MiB, "hole"),                 # plain zero over data
        (6 * MiB, MiB, "hole"),                 # FAST_ZERO over data
        (7 * MiB, MiB, "data"),                 # FAST_ZERO|NO_HOLE refused
        (64 * MiB, 16 * MiB, "data"),           # NO_HOLE over holes
        (100 * MiB - VBS, VBS, "hole"),
        (100 * MiB, VBS, "data"),               # unaligned, inside a hole
        (100 * MiB + VBS, VBS, "hole"),
        (128 * MiB, 16 * MiB, "hole"),          # plain zero over holes
        (160 * MiB, 16 * MiB, "hole"),          # FAST_ZERO over holes
    ]
    if crashed:
        lay[0] = (512 * 1024, 512 * 1024, "data")
        lay += [(0, 512 * 1024, "hole"),        # plain zero, replayed
                (3 * MiB, MiB, "data"),         # unaligned NO_HOLE, replayed
                (200 * MiB, 2 * MiB, "data")]   # NO_HOLE, replayed
    return lay

def model(crashed):
    """The expected content of [0, DATA)."""
    m = bytearray(pattern("data", DATA))
    for (o, l) in [(MiB, 2 * MiB), (4 * MiB + 1000, 50000),
                   (5 * MiB, 2 * MiB)]:
        m[o:o + l] = bytes(l)
    if crashed:
        m[0:512 * 1024] = bytes(512 * 1024)
        m[3 * MiB + 777:3 * MiB + 5777] = bytes(5000)
    return m

def check_all(h, when, crashed):
    m = model(crashed)
    got = b"".join(h.pread(MiB, o) for o in range(0, DATA, MiB))
    ok(got == m, "%s: the first 8 MiB read as expected" % when)
    for (o, l, kind) in layout(crashed):
        if o >= DATA:
            ok(h.pread(l, o) == bytes(l), "%s: %d+%d reads as zeros" % (when, o, l))
        ext = extents(h, o, l)
        want = {DATA_EXT} if kind == "data" else {HOLE}
        ok(covered(ext, o, l) and flags_at(ext, o, l) == want,
           "%s: %d+%d is reported as %s (got %s)" % (when, o, l, kind, ext[:4]))

def zero_refused(h, l, o, when):
    before = h.pread(l, o)
    expect_errno("%s: FAST_ZERO|NO_HOLE at %d+%d fails with ENOTSUP" % (when, o, l),
                 (errno.ENOTSUP, errno.EOPNOTSUPP),
                 h.zero, l, o, nbd.CMD_FLAG_FAST_ZERO | nbd.CMD_FLAG_NO_HOLE)
    ok(h.pread(l, o) == before, "%s: the refused zero changed nothing" % when)

h = connect(uri, strict=False)      # unaligned requests too
if phase == "data":
    ok(h.can_zero() and h.can_fast_zero(), "write zeroes and fast zero are advertised")
    h.pwrite(pattern("data", DATA), 0)
    h.flush()
    ext = extents(h, 0, DATA)
    ok(covered(ext, 0, DATA) and flags_at(ext, 0, DATA) == {DATA_EXT},
       "the written 8 MiB are data")

elif phase == "zero":
    h.zero(2 * MiB, MiB, nbd.CMD_FLAG_NO_HOLE)
    ok(h.pread(2 * MiB, MiB) == bytes(2 * MiB), "NO_HOLE zero over data reads zeros")
    ext = extents(h, MiB, 2 * MiB)
    ok(covered(ext, MiB, 2 * MiB) and flags_at(ext, MiB, 2 * MiB) == {DATA_EXT},
       "NO_HOLE zero over data is reported as data, not a hole (got %s)" % ext[:4])
    h.zero(MiB, 2 * MiB)
    h.zero(50000, 4 * MiB + 1000, nbd.CMD_FLAG_NO_HOLE)
    h.zero(MiB, 5 * MiB)
    h.zero(MiB, 6 * MiB, nbd.CMD_FLAG_FAST_ZERO)
    zero_refused(h, MiB, 7 * MiB, "aligned")
    zero_refused(h, 300, 7 * MiB + 100, "unaligned")
    h.zero(16 * MiB, 64 * MiB, nbd.CMD_FLAG_NO_HOLE)
    h.zero(700, 100 * MiB + 3000, nbd.CMD_FLAG_NO_HOLE)
    h.zero(16 * MiB, 128 * MiB)
    h.zero(16 * MiB, 160 * MiB, nbd.CMD_FLAG_FAST_ZERO)
    check_all(h, "before a flush", False)
    h.flush()
    check_all(h, "after a flush", False)

elif phase == "check":
    check_all(h, "after a restart", False)

elif phase == "crash":
    # The first flush after an import waits for a txg, whose sync puts
    # the log's fresh chain on disk; the zeros after it are only in the
    # log when the server is killed.
    h.pwrite(pattern("warm", 4096), 240 * MiB)
    h.flush()
    h.zero(2 * MiB, 200 * MiB, nbd.CMD_FLAG_NO_HOLE)
    h.zero(512 * 1024, 0)
    h.zero(5000, 3 * MiB + 777, nbd.CMD_FLAG_NO_HOLE)
    h.flush()
    check_all(h, "before kill -9", True)

elif phase == "replayed":
    check_all(h, "after kill -9 and replay", True)
    ok(h.pread(4096, 240 * MiB) == pattern("warm", 4096),
       "after kill -9 and replay the write before the zeros is there")
h.shutdown()
finish()
EOF

# space_in_use: the live bytes of the pool (allocated less deferred) from
# the stats file of the server just started (waits for its first write).
space_in_use ()
{
    local tries=100 a d
    while [ "$tries" -gt 0 ]; do
        if [ -s "$kstat/stats" ]; then
            a=$(awk '$1 == "space_allocated" { print $2 }' "$kstat/stats")
            d=$(awk '$1 == "space_deferred" { print $2 }' "$kstat/stats")
            if [ -n "$a" ] && [ -n "$d" ]; then
                echo $((a - d))
                return 0
            fi
        fi
        sleep 0.1
        tries=$((tries - 1))
    done
    echo "no stats file in $kstat" >&2
    return 1
}

# last_log: the log of the last server started (each start appends to
# the socket's log after a "=== ..." line).
last_log ()
{
    awk '/^=== / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$ZV_LOG"
}

# log_replayed: did the last server's import replay the intent log?
log_replayed ()
{
    last_log | grep "intent log: replayed" >/dev/null
}

# start ARGS...: a server on the pool with the kstat directory, after
# removing the stats file a previous server left.
start ()
{
    rm -f "$kstat/stats"
    start_zvol "$sock" device="$pool" kstat="$kstat" "$@"
}

zv_log "create a 256 MiB volume (volblocksize 16K), write 8 MiB of data"
start create=true size=256M volblocksize=16K || die "server starts with create=true"
py_checks "data" "$ZV_TMP/zero.py" "$uri" data || :
check "clean stop" stop_zvol

zv_log "import; zero with and without NO_HOLE and FAST_ZERO"
start || die "server imports the pool"
s0=$(space_in_use) || die "the stats file shows the space in use"
py_checks "zeros" "$ZV_TMP/zero.py" "$uri" zero || :
check "clean stop" stop_zvol

zv_log "import again: the zeros as they were, and the space they take"
start txg_timeout=3600 || die "server imports the pool again"
s1=$(space_in_use) || die "the stats file shows the space in use"
MiB=$((1024 * 1024))
# 16 MiB + one volblock allocated on holes; 3 MiB of data freed.
zv_log "space in use: $s0 before the zeros, $s1 after (a change of $(( (s1 - s0) / 1024 )) KiB)"
check "allocated zeros take space: 16 MiB of NO_HOLE zeros less 3 MiB freed (got $(( (s1 - s0) / 1024 )) KiB)" \
    test $((s1 - s0)) -ge $((25 * MiB / 2))
check "holes take none: 32 MiB of zeros without NO_HOLE added nothing (got $(( (s1 - s0) / 1024 )) KiB)" \
    test $((s1 - s0)) -le $((29 * MiB / 2))
py_checks "after a restart" "$ZV_TMP/zero.py" "$uri" check || :

zv_log "zeros, a flush, kill -9, import: the intent log replays them"
py_checks "zeros before kill -9" "$ZV_TMP/zero.py" "$uri" crash || :
check "kill -9 the server" kill9_zvol
# (-v: the engine's "replayed" message is a debug message)
# shellcheck disable=SC2034 # read by start_zvol
ZV_NBDKIT_OPTS=(-v)
start || die "server imports the pool after kill -9"
# shellcheck disable=SC2034
ZV_NBDKIT_OPTS=()
check "the import replayed the intent log" log_replayed
s2=$(space_in_use) || die "the stats file shows the space in use"
zv_log "space in use after replay: $s2 (a change of $(( (s2 - s1) / 1024 )) KiB)"
check "replayed NO_HOLE zeros take space: 2 MiB less 512 KiB freed (got $(( (s2 - s1) / 1024 )) KiB)" \
    test $((s2 - s1)) -ge $MiB
py_checks "after replay" "$ZV_TMP/zero.py" "$uri" replayed || :
check "clean stop" stop_zvol

zv_summary
