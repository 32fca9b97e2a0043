#!/usr/bin/env bash
# test-snapshots.sh: snapshots, clones and rollback through nbdkit and
# cmd/zvoladm, live (the server's control socket) and offline.
#
#  1. a client writes pattern A, flushes, and stays connected while
#     zvoladm snapshot takes POOL/db@one live; it then writes pattern B;
#     export "db@one" reads A (opened on demand, not listed until asked),
#     db reads B; a write to db@one fails (read-only export);
#  2. list -t all -H -p -o name,used,refer,written: the figures of the
#     snapshot and the volume in bytes;
#  3. rollback while a client has db open is refused (in use); with no
#     client it works live and db reads A again;
#  4. clone db@one to copy: served at once, reads A, takes its own
#     writes; destroy of db@one is refused while the clone exists;
#     destroy -Rn lists the clone, then the snapshot; destroy -R is
#     refused whole while a client has the clone open;
#  5. offline (server stopped): the same list, check clean;
#  6. send of a snapshot of the clone into another pool, a change, a live
#     snapshot and diff, an incremental send (small), a damaged stream
#     refused, the incremental received: the same bytes in both pools
#     (both served), the other pool checks clean; then destroy -r of db
#     and its snapshots after the clone, check clean again.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

zv_admin_setup
POOL=snaptest$$
zv_runtime_pool "$POOL"
pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
truncate -s 512M "$pool"
MiB=$((1 << 20))


"$ADM" create "$POOL" "$pool" || die "zvoladm create $POOL"
# Uncompressed: the figures below count the bytes written (repeated
# bytes, which compression would shrink to almost nothing).
"$ADM" create -V 64M -s -o compression=off "$POOL/db" || die "zvoladm create -V 64M $POOL/db"
# A second volume: with one only, it would be the server's default export,
# which its statistics writer holds (and a rollback needs it unheld).
"$ADM" create -V 16M -s "$POOL/aux" || die "zvoladm create -V 16M $POOL/aux"

zv_log "1. a live snapshot while a client is connected"
start_zvol "$sock" "$pool" || die "serve the pool"
# The client: writes A over 4 MiB, flushes, says so, waits for the
# snapshot, writes B over the first 2 MiB, flushes, says so, waits to go.
cat >"$ZV_TMP/writer.py" <<'EOF'
import nbd, os, sys, time
def wait(p):
    for _ in range(600):
        if os.path.exists(p):
            return
        time.sleep(0.1)
    sys.exit("timed out waiting for " + p)
h = nbd.NBD()
h.set_export_name("db")
h.connect_unix(sys.argv[1])
h.pwrite(b"\xaa" * (4 << 20), 0)
h.flush()
open(sys.argv[2] + ".a", "w").close()
wait(sys.argv[2] + ".snapped")
h.pwrite(b"\xbb" * (2 << 20), 0)
h.flush()
open(sys.argv[2] + ".b", "w").close()
wait(sys.argv[2] + ".release")
h.shutdown()
EOF
"$NBD_PY" "$ZV_TMP/writer.py" "$sock" "$ZV_TMP/w" &
track_pid $!
for _ in $(seq 300); do [ -e "$ZV_TMP/w.a" ] && break; sleep 0.1; done
check "the client wrote A and flushed" test -e "$ZV_TMP/w.a"
rc_is 0 "zvoladm snapshot $POOL/db@one, live, the client connected" \
    "$ADM" snapshot "$POOL/db@one"
touch "$ZV_TMP/w.snapped"
for _ in $(seq 300); do [ -e "$ZV_TMP/w.b" ] && break; sleep 0.1; done
check "the client wrote B after the snapshot" test -e "$ZV_TMP/w.b"
cat >"$ZV_TMP/read.py" <<'EOF'
import nbd, sys
h = nbd.NBD()
h.set_export_name("db@one")
h.connect_unix(sys.argv[1])
ok = h.get_size() == 64 << 20
print("PASS: db@one is 64M" if ok else "FAIL: db@one's size")
a = h.pread(4 << 20, 0)
print("PASS: db@one reads A" if a == b"\xaa" * (4 << 20) else "FAIL: db@one does not read A")
print("PASS: db@one is read-only" if h.is_read_only() else "FAIL: db@one is writable")
try:
    h.pwrite(b"\x01" * 4096, 0)
    print("FAIL: a write to db@one succeeded")
except nbd.Error as e:
    print("PASS: a write to db@one fails (%s)" % e.string.split("\n")[0])
h.shutdown()
h = nbd.NBD()
h.set_export_name("db")
h.connect_unix(sys.argv[1])
b = h.pread(2 << 20, 0)
a = h.pread(2 << 20, 2 << 20)
print("PASS: db reads B, then A" if b == b"\xbb" * (2 << 20) and a == b"\xaa" * (2 << 20)
      else "FAIL: db's data")
h.shutdown()
EOF
py_checks "the snapshot and the volume" "$ZV_TMP/read.py" "$sock" || :

zv_log "2. the listing"
# The figures are the last synced txg's (B is in the log until then).
for _ in $(seq 100); do
    "$ADM" list -t all -H -p -o name,type,used,refer,written "$POOL" \
        >"$ZV_TMP/adm.out" 2>&1 || :
    grep -qP "^$POOL/db\tvolume\t[0-9]+\t[0-9]+\t$((2 * MiB))$" "$ZV_TMP/adm.out" && break
    sleep 0.2
done
rc_is 0 "list -t all -H -p -o name,type,used,refer,written" \
    "$ADM" list -t all -H -p -o name,type,used,refer,written "$POOL"
cat "$ZV_TMP/adm.out"
check "db: 4M referenced, 2M written since the snapshot" \
    grep -qP "^$POOL/db\tvolume\t[0-9]+\t$((4 * MiB))\t$((2 * MiB))$" "$ZV_TMP/adm.out"
check "db@one: 2M its own (what B replaced), 4M referenced" \
    grep -qP "^$POOL/db@one\tsnapshot\t$((2 * MiB))\t$((4 * MiB))\t$((4 * MiB))$" "$ZV_TMP/adm.out"
rc_is 0 "list (volumes only, the default)" "$ADM" list -H "$POOL"
check "no snapshot in it" bash -c "! grep -q '@' '$ZV_TMP/adm.out'"

zv_log "3. rollback"
rc_is 1 "rollback while a client has db open" "$ADM" rollback "$POOL/db@one"
check "refused: in use" grep -q "in use" "$ZV_TMP/adm.err"
touch "$ZV_TMP/w.release"
# (The client's close reaches the server a moment after it goes.)
for _ in $(seq 50); do
    "$ADM" rollback "$POOL/db@one" >/dev/null 2>&1 && break
    sleep 0.2
done
rc_is 0 "rollback again with no client, live (to the newest: nothing new)" \
    "$ADM" rollback "$POOL/db@one"
cat >"$ZV_TMP/readA.py" <<'EOF'
import nbd, sys
h = nbd.NBD()
h.set_export_name(sys.argv[2])
h.connect_unix(sys.argv[1])
a = h.pread(4 << 20, 0)
print("PASS: %s reads A" % sys.argv[2] if a == b"\xaa" * (4 << 20) else "FAIL: %s does not read A" % sys.argv[2])
h.shutdown()
EOF
py_checks "db after the rollback" "$ZV_TMP/readA.py" "$sock" db || :

zv_log "4. a clone"
rc_is 0 "clone db@one to copy, live" "$ADM" clone "$POOL/db@one" "$POOL/copy"
py_checks "the clone" "$ZV_TMP/readA.py" "$sock" copy || :
cat >"$ZV_TMP/wcopy.py" <<'EOF'
import nbd, sys
h = nbd.NBD()
h.set_export_name("copy")
h.connect_unix(sys.argv[1])
h.pwrite(b"\xcc" * 65536, 0)
h.flush()
print("PASS: the clone takes its own writes" if h.pread(65536, 0) == b"\xcc" * 65536 else "FAIL: clone write")
h.shutdown()
EOF
py_checks "a write to the clone" "$ZV_TMP/wcopy.py" "$sock" || :
py_checks "the snapshot is unchanged" "$ZV_TMP/readA.py" "$sock" db@one || :
rc_is 0 "list -o name,origin" "$ADM" list -H -o name,origin "$POOL"
check "copy's origin is db@one" grep -qP "^$POOL/copy\t$POOL/db@one$" "$ZV_TMP/adm.out"
rc_is 1 "destroy db@one while its clone exists" "$ADM" destroy "$POOL/db@one"
check "refused: it has a clone" grep -q "has a clone" "$ZV_TMP/adm.err"
rc_is 0 "destroy -Rn db@one: a dry run, live" "$ADM" destroy -Rn "$POOL/db@one"
check "it would take the clone first, then the snapshot" \
    test "$(cat "$ZV_TMP/adm.out")" = "$(printf 'would destroy %s\nwould destroy %s' "$POOL/copy" "$POOL/db@one")"
# A client on the clone: destroy -R refuses the whole set.
zv_hold "$sock" copy
rc_is 1 "destroy -R db@one while a client has the clone open" "$ADM" destroy -R "$POOL/db@one"
check "refused: the clone is in use, nothing destroyed" \
    grep -q "'copy' of pool '$POOL' is in use .*nothing destroyed" "$ZV_TMP/adm.err"
rc_is 0 "list -t all" "$ADM" list -t all -H -o name "$POOL"
check "the clone and the snapshot are still there" \
    bash -c "grep -qx '$POOL/copy' '$ZV_TMP/adm.out' && grep -qx '$POOL/db@one' '$ZV_TMP/adm.out'"
zv_release
rc_is 1 "destroy db with a snapshot, not recursive" "$ADM" destroy "$POOL/db"
stop_zvol "$sock" || zv_fail "clean stop"

zv_log "5. offline"
rc_is 0 "list -t snapshot, offline" "$ADM" list -t snapshot -H -p -o name,used "$POOL"
check "db@one, 0 of its own now (rolled back, no change since)" \
    grep -qP "^$POOL/db@one\t0$" "$ZV_TMP/adm.out"
rc_is 0 "check: clean" "$ADM" check "$POOL"
rc_is 0 "status, offline" "$ADM" status "$POOL"
check "healthy, read-only import" grep -q "state: ONLINE (read-only)" "$ZV_TMP/adm.out"
check "3 volumes, 1 snapshot" grep -q "data: 3 volumes, 1 snapshots" "$ZV_TMP/adm.out"

zv_log "6. send and receive, offline, into another pool"
POOL2=snaprecv$$
pool2=$ZV_TMP/pool2.img
truncate -s 256M "$pool2"
"$ADM" create "$POOL2" "$pool2" || die "zvoladm create $POOL2"
rc_is 0 "snapshot copy@c1, offline" "$ADM" snapshot "$POOL/copy@c1"
rc_is 0 "send $POOL/copy@c1 > full" \
    bash -c "'$ADM' send '$POOL/copy@c1' > '$ZV_TMP/full.zs'"
rc_is 0 "receive it as $POOL2/back" \
    bash -c "'$ADM' receive '$POOL2/back' < '$ZV_TMP/full.zs'"
rc_is 0 "list -t all on the other pool" "$ADM" list -t all -H -o name "$POOL2"
check "back and back@c1" test "$(tr '\n' ' ' <"$ZV_TMP/adm.out")" = "$POOL2/back $POOL2/back@c1 "
# A change, a second snapshot, an incremental stream.
start_zvol "$sock" "$pool" || die "serve the pool again"
printf '%s\n' 'import nbd, sys' 'h = nbd.NBD()' 'h.set_export_name("copy")' \
    'h.connect_unix(sys.argv[1])' 'h.pwrite(b"\xdd" * (1 << 20), 8 << 20)' \
    'h.flush()' 'h.shutdown()' 'print("PASS: a second change to copy")' \
    >"$ZV_TMP/wc2.py"
py_checks "copy changes" "$ZV_TMP/wc2.py" "$sock" || :
rc_is 0 "snapshot copy@c2, live" "$ADM" snapshot "$POOL/copy@c2"
rc_is 0 "status, live" "$ADM" status "$POOL"
check "healthy, read-write" grep -q "state: ONLINE$" "$ZV_TMP/adm.out"
check "its device, no errors" grep -qP "^ +0 +0 +0 +0  \Q$pool\E$" "$ZV_TMP/adm.out"
check "errors: none" grep -q "^errors: none since the pool was opened$" "$ZV_TMP/adm.out"
rc_is 0 "diff copy@c1 copy@c2, live" "$ADM" diff "$POOL/copy@c1" "$POOL/copy@c2"
check "the changed range: written 8M+1M" grep -qP "^written\t$((8 * MiB))\t$((1 * MiB))$" "$ZV_TMP/adm.out"
stop_zvol "$sock" || zv_fail "clean stop"
rc_is 0 "send -i copy@c1 copy@c2 > incremental" \
    bash -c "'$ADM' send -i '$POOL/copy@c1' '$POOL/copy@c2' > '$ZV_TMP/inc.zs'"
check "the incremental stream is small (the 1M changed, not the volume)" \
    test "$(stat -c %s "$ZV_TMP/inc.zs")" -lt $((2 * MiB))
cp "$ZV_TMP/inc.zs" "$ZV_TMP/bad.zs"
printf '\x55' | dd of="$ZV_TMP/bad.zs" bs=1 seek=5000 conv=notrunc status=none
rc_is 1 "a damaged stream is refused" \
    bash -c "'$ADM' receive '$POOL2/back' < '$ZV_TMP/bad.zs'"
rc_is 0 "the incremental, received" \
    bash -c "'$ADM' receive '$POOL2/back' < '$ZV_TMP/inc.zs'"
sock2=$ZV_TMP/zvol2.sock
start_zvol "$sock2" "$pool2" || die "serve the other pool"
start_zvol "$sock" "$pool" || die "serve the pool"
printf '%s\n' 'import nbd, sys' 'def read(sock, name):' \
    '    h = nbd.NBD()' '    h.set_export_name(name)' '    h.connect_unix(sock)' \
    '    n = h.get_size()' \
    '    d = b"".join(h.pread(4 << 20, o) for o in range(0, n, 4 << 20))' \
    '    h.shutdown()' '    return d' \
    'a = read(sys.argv[1], "copy@c2")' 'b = read(sys.argv[2], "back@c2")' \
    'c = read(sys.argv[2], "back")' \
    'print("PASS: back@c2 has the bytes of copy@c2" if a == b else "FAIL: back@c2 differs")' \
    'print("PASS: back has them too" if a == c else "FAIL: back differs")' \
    >"$ZV_TMP/cmp.py"
py_checks "the same bytes in both pools" "$ZV_TMP/cmp.py" "$sock" "$sock2" || :
stop_zvol "$sock" || zv_fail "clean stop"
stop_zvol "$sock2" || zv_fail "clean stop of the other"
rc_is 0 "check the other pool: clean" "$ADM" check "$POOL2"
rc_is 0 "destroy copy's snapshots" "$ADM" destroy "$POOL/copy@c2"
rc_is 0 "and c1" "$ADM" destroy "$POOL/copy@c1"
rc_is 0 "destroy copy" "$ADM" destroy "$POOL/copy"
rc_is 0 "destroy -r db (its snapshot first)" "$ADM" destroy -r "$POOL/db"
rc_is 0 "list -t all" "$ADM" list -t all -H -o name "$POOL"
check "only aux is left" test "$(cat "$ZV_TMP/adm.out")" = "$POOL/aux"
rc_is 0 "check: clean, nothing leaked" "$ADM" check "$POOL"

zv_summary
