#!/usr/bin/env bash
# test-rewind.sh: an import that would lose a txg refuses, with a message
# that says what and how to accept it (rewind=true); with rewind=true it
# serves the newest intact txg, warns, and replays that txg's own log
# chain as far as it goes.
#
#  1. create a pool, write A, flush, clean stop;
#  2. the finding: import (no timed txg), write B and flush (the first
#     commit after an import waits for the txg that carries the log's new
#     chain: B is synced in txg N), write C (64 KiB writes: logged in
#     place) and flush, kill -9; zero N's uberblock slot in both labels;
#  3. import: refused, naming txg N, its slot and rewind=true, the device
#     unchanged; readonly=true: refused too;
#  4. readonly=true rewind=true: serves A, warns, the device unchanged;
#  5. rewind=true: serves A and warns once; B and C are gone (zeros, never
#     anything else): B was only in txg N, and C in the chain the import
#     began, which only N's header named (N-1's names the first
#     session's); a plain import then serves the same, without a word;
#  6. again in one session with txg_timeout=5: X flushed (its txg carries
#     the new chain), B2 flushed and synced by a later txg, C2 flushed,
#     kill -9, the newest slot zeroed: refused; with rewind=true the
#     chain of the txg before (this session's) brings back X, B2 and C2.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires sha256sum
zv_setup

pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
uri=$(nbd_uri "$sock")

cat >"$ZV_TMP/data.py" <<'EOF'
# data.py URI OP TAG...: write (and flush), check, or check the absence
# (zeros) of the regions named by each TAG, in 64 KiB pieces of pattern
# TAG-i.
import sys
from zvtest import *
uri, op, tags = sys.argv[1], sys.argv[2], sys.argv[3:]
MiB, PIECE = 1 << 20, 64 << 10
REGION = {"A": (0, MiB), "B": (8 * MiB, MiB), "C": (16 * MiB, 4 * MiB),
          "X": (24 * MiB, MiB), "B2": (32 * MiB, MiB),
          "C2": (40 * MiB, 4 * MiB)}
h = connect(uri)
for tag in tags:
    off, size = REGION[tag]
    pieces = range(size // PIECE)
    if op == "write":
        for i in pieces:
            h.pwrite(pattern("%s-%d" % (tag, i), PIECE), off + i * PIECE)
        h.flush()
        ok(True, "wrote and flushed %s (%d KiB)" % (tag, size // 1024))
    elif op == "check":
        bad = [i for i in pieces
               if h.pread(PIECE, off + i * PIECE) != pattern("%s-%d" % (tag, i), PIECE)]
        ok(not bad, "%s reads back (%d of %d pieces wrong)" % (tag, len(bad), len(pieces)))
    elif op == "absent":
        ok(h.pread(size, off) == bytes(size), "%s is not there (zeros)" % tag)
finish()
EOF

cat >"$ZV_TMP/newest.py" <<'EOF'
# newest.py DEV: print the newest txg of the uberblock rings and its slot
# (magic, version, flags 0, txg in its own slot; checksums not checked:
# the device is this test's own).
import struct, sys
LABEL, RING, UB, COUNT = 256 << 10, 16 << 10, 4096, 60
data = open(sys.argv[1], "rb").read()
end = len(data) // 4096 * 4096
best = 0
for base in (0, end - LABEL):
    for s in range(COUNT):
        o = base + RING + s * UB
        magic, version, flags, txg = struct.unpack_from("<QIIQ", data, o)
        if magic == 0x00ba5eb10c5a0000 and version == 1 and flags == 0 \
           and txg % COUNT == s:
            best = max(best, txg)
print(best, best % COUNT)
EOF

# zero_slot DEV SLOT: zeros over that uberblock slot in both labels.
zero_slot ()
{
    local dev=$1 slot=$2 size back
    size=$(stat -c %s "$dev")
    back=$(( size / 4096 * 4096 - 256 * 1024 ))
    for base in 0 "$back"; do
        dd if=/dev/zero of="$dev" bs=4096 count=1 conv=notrunc status=none \
           seek=$(( (base + 16384) / 4096 + slot ))
    done
}

# newest_txg: the newest txg in the pool's rings.
newest_txg ()
{
    local t s
    read -r t s < <("$NBD_PY" "$ZV_TMP/newest.py" "$pool")
    echo "$t"
}

# refusal N TAG: the import and a read-only import are refused, saying
# that txg N (slot N % 60) may be lost and how to accept it, and write
# nothing.
refusal ()
{
    local n=$1 tag=$2 sum msg
    sum=$(sha256sum <"$pool")
    if expect_start_failure "$ZV_TMP/refused-$tag.log" device="$pool"; then
        zv_pass "$tag: import with the newest slot zeroed is refused"
    else
        zv_fail "$tag: import with the newest slot zeroed is refused"
    fi
    msg=$(grep -E "Refusing to import" "$ZV_TMP/refused-$tag.log" | head -n 1 || :)
    zv_log "message: $msg"
    check "$tag: the refusal names txg $n as maybe lost" \
        grep -qE "would lose txg $n, which may have committed" <<<"$msg"
    check "$tag: the refusal names the damaged slot $((n % 60))" \
        grep -qE "uberblock slot, $((n % 60)), is damaged in every copy" <<<"$msg"
    check "$tag: the refusal says how to accept the loss (rewind=true)" \
        grep -qE "pass rewind=true" <<<"$msg"
    check "$tag: the import fails with EIO" \
        grep -qE "could not import the pool.*Input/output error" "$ZV_TMP/refused-$tag.log"
    check "$tag: the refused import wrote nothing" test "$(sha256sum <"$pool")" = "$sum"
    if expect_start_failure "$ZV_TMP/refused-ro-$tag.log" device="$pool" readonly=true; then
        zv_pass "$tag: readonly=true is refused too"
    else
        zv_fail "$tag: readonly=true is refused too"
    fi
    check "$tag: the read-only refusal says rewind=true" \
        grep -q "pass rewind=true" "$ZV_TMP/refused-ro-$tag.log"
}

# warned N: the last server's log holds exactly one warning, that it
# rewound to txg N - 1 and lost txg N.
warned ()
{
    test "$(grep -c "warning:" "$ZV_LOG")" = 1 &&
        grep -qE "warning: pool '[^']*': rewound to txg $(($1 - 1)) \(rewind=true\), losing txg $1," "$ZV_LOG"
}

zv_log "create a pool, write A, clean stop"
start_zvol "$sock" device="$pool" create=true size=256M || die "create the pool"
py_checks "write A" "$ZV_TMP/data.py" "$uri" write A || :
check "clean stop" stop_zvol
t0=$(newest_txg)

zv_log "the finding: import at txg $t0, write B, write C, kill -9"
start_zvol "$sock" device="$pool" txg_timeout=3600 || die "import"
py_checks "write B" "$ZV_TMP/data.py" "$uri" write B || :
py_checks "write C" "$ZV_TMP/data.py" "$uri" write C || :
check "kill -9 with C flushed only into the log" kill9_zvol
n=$(newest_txg)
check "B's flush synced txg $((t0 + 1)), the newest" test "$n" = $((t0 + 1))
zv_log "zeroing the uberblock slot of txg $n in both labels"
zero_slot "$pool" $((n % 60))
check "the newest intact txg is now $((n - 1))" test "$(newest_txg)" = $((n - 1))
refusal "$n" finding

sum=$(sha256sum <"$pool")
start_zvol "$sock" device="$pool" readonly=true rewind=true ||
    die "readonly=true rewind=true imports"
check "readonly=true rewind=true warns that it rewound" warned "$n"
py_checks "A is served read-only" "$ZV_TMP/data.py" "$uri" check A || :
py_checks "B and C are not" "$ZV_TMP/data.py" "$uri" absent B C || :
check "clean stop" stop_zvol
check "readonly=true rewind=true wrote nothing" test "$(sha256sum <"$pool")" = "$sum"

: >"$sock.log"
start_zvol "$sock" device="$pool" rewind=true || die "rewind=true imports"
check "rewind=true warns once, naming the txg taken and the one lost" warned "$n"
py_checks "A is served after the rewind" "$ZV_TMP/data.py" "$uri" check A || :
py_checks "B and C, only in txg $n and the chain its header named, are gone" \
    "$ZV_TMP/data.py" "$uri" absent B C || :
check "clean stop" stop_zvol
: >"$sock.log"
start_zvol "$sock" device="$pool" || die "plain import after the rewind"
check "a plain import after it neither warns nor refuses" \
    test "$(grep -cE "warning:|Refusing" "$ZV_LOG")" = 0
py_checks "A is still served" "$ZV_TMP/data.py" "$uri" check A || :
py_checks "B and C are still gone" "$ZV_TMP/data.py" "$uri" absent B C || :
check "clean stop" stop_zvol

zv_log "one session: X, B2 synced by a later txg, C2; kill -9"
# txg_timeout=5: B2's txg syncs by the timeout, and C2, written at once
# after that sync, is done long before the next one (with 1 s, a txg
# sometimes took part of C2, which the rewind then rightly lost).  On a
# loaded machine C2 can still take longer than that: then the session
# is run again (the same pieces, the same bytes), up to 3 times, since
# the scenario needs C2 in the log only.
for attempt in 1 2 3; do
    start_zvol "$sock" device="$pool" txg_timeout=5 || die "import"
    py_checks "write X" "$ZV_TMP/data.py" "$uri" write X || :
    t2=$(newest_txg)
    py_checks "write B2" "$ZV_TMP/data.py" "$uri" write B2 || :
    for _ in $(seq 1 150); do
        [ "$(newest_txg)" -gt "$t2" ] && break
        sleep 0.1
    done
    t3=$(newest_txg)
    py_checks "write C2" "$ZV_TMP/data.py" "$uri" write C2 || :
    check "kill -9 with C2 flushed only into the log" kill9_zvol
    n=$(newest_txg)
    [ "$n" = "$t3" ] && break
    zv_log "attempt $attempt: txg $n synced part of C2 (the machine was slow); again"
done
check "a txg after X's ($t2) synced B2 (newest: $n)" test "$n" -gt "$t2"
check "no txg synced C2 (newest $n, $t3 before C2): it is only in the log" \
    test "$n" = "$t3"
zero_slot "$pool" $((n % 60))
refusal "$n" session
: >"$sock.log"
start_zvol "$sock" device="$pool" rewind=true || die "rewind=true imports"
check "rewind=true warns once" warned "$n"
py_checks "A, X, B2 and C2 are served: txg $((n - 1))'s chain reaches them" \
    "$ZV_TMP/data.py" "$uri" check A X B2 C2 || :
py_checks "B and C are still gone" "$ZV_TMP/data.py" "$uri" absent B C || :
check "clean stop" stop_zvol

zv_summary
