#!/usr/bin/env bash
# test-ctl.sh: the control socket of a running server, through nbdkit and
# cmd/zvoladm.
#
#  1. a server of pool POOL (a name of this run) puts its socket in the
#     pool's runtime directory (mode 0600); zvoladm finds it from the pool
#     name alone and goes live: list, stats (pool, volume, txgs) while a
#     client is connected to volume db;
#  2. create -V live: nbdinfo --list shows the new volume at once and a
#     client reads back what it wrote there; destroy of db, which a client
#     has open, is refused (in use, EBUSY) with the reason on zvoladm's
#     stderr and in the server's log; destroy of the new one, closed,
#     works and the export is gone;
#  3. refusals: another uid (setpriv, as root) cannot use the socket, a
#     garbage message gets "bad control message" and the server goes on;
#  4. the socket is removed at stop; offline zvoladm then prints what the
#     live one printed; control=PATH with -S and $ZVOLADM_SOCKET; kill -9
#     leaves a stale socket that the next server replaces; control=off
#     has none;
#  5. streams live: send of a snapshot of db while a client writes db,
#     received into a second served pool (served at once, the same
#     bytes), an incremental piped from one server to the other, progress
#     on stderr; a cut stream and a client killed mid-stream leave
#     nothing; check runs live and finds the pool clean;
#  6. statistics of every volume: DIR/volumes/NAME/stats for db and aux,
#     one created live appears, destroyed goes; the default export (held
#     by nobody between rounds) rolled back and destroyed live.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
requires nbdinfo --version
zv_setup

zv_admin_setup
POOL=ctltest$$
zv_runtime_pool "$POOL"
ctl=$rundir/$POOL/control
pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
truncate -s 512M "$pool"


"$ADM" create "$POOL" "$pool" || die "zvoladm create $POOL"
"$ADM" create -V 64M "$POOL/db" || die "zvoladm create -V 64M $POOL/db"

zv_log "1. the server's socket, found from the pool name"
start_zvol "$sock" "$pool" || die "serve the pool"
# (The server makes it after its fork, which may come after the NBD
# socket answers: a slow build, ASan, may take a moment.)
for _ in $(seq 50); do [ -S "$ctl" ] && break; sleep 0.1; done
check "the socket is in the pool's runtime directory" test -S "$ctl"
check "its mode is 0600" test "$(stat -c %a "$ctl")" = 600

# A client holds db open (connected, reading) until told to go.
zv_hold "$sock" db
check "a client has db open" test -e "$ZV_TMP/held"

rc_is 0 "zvoladm list -H -p $POOL, live" "$ADM" list -H -p "$POOL"
check "it lists db" grep -qP "^$POOL/db\t67108864\t" "$ZV_TMP/adm.out"
rc_is 0 "zvoladm list (the header), live" "$ADM" list "$POOL"
check "with the header" grep -q '^NAME .*USED .*AVAIL .*REFER .*VOLSIZE' "$ZV_TMP/adm.out"
rc_is 0 "zvoladm stats $POOL" "$ADM" stats "$POOL"
check "the pool's table" grep -q "^pool_name $POOL$" "$ZV_TMP/adm.out"
rc_is 0 "zvoladm stats $POOL/db" "$ADM" stats "$POOL/db"
check "the volume's figures" grep -q "^volume db$" "$ZV_TMP/adm.out"
rc_is 0 "zvoladm stats -t $POOL" "$ADM" stats -t "$POOL"
check "the txg history" grep -q "^txg .*birth .*state" "$ZV_TMP/adm.out"

zv_log "2. create and destroy while serving"
rc_is 0 "zvoladm create -V 32M $POOL/new, live" "$ADM" create -V 32M "$POOL/new"
nbdinfo --list "nbd+unix:///?socket=$sock" >"$ZV_TMP/exports" 2>&1 || :
check "nbdinfo --list shows it at once" grep -q 'export="new"' "$ZV_TMP/exports"
check "and db" grep -q 'export="db"' "$ZV_TMP/exports"
cat >"$ZV_TMP/rw.py" <<'EOF'
import nbd, sys
h = nbd.NBD()
h.set_export_name("new")
h.connect_unix(sys.argv[1])
ok = h.get_size() == 32 << 20
h.pwrite(b"\x5a" * 65536, 1 << 20)
h.flush()
ok = ok and h.pread(65536, 1 << 20) == b"\x5a" * 65536
h.shutdown()
print("PASS: new: 32M, a write reads back" if ok else "FAIL: new: size or data")
EOF
py_checks "a client writes the new volume" "$ZV_TMP/rw.py" "$sock" || :
rc_is 1 "destroy $POOL/db while a client has it open" "$ADM" destroy "$POOL/db"
check "zvoladm says it is in use" grep -q "zvoladm: volume 'db' of pool '$POOL' is in use" "$ZV_TMP/adm.err"
check "the server's log says so" grep -q "volume 'db' of pool '$POOL' is in use" "$ZV_LOG"
rc_is 0 "db is still there" "$ADM" list -H "$POOL"
check "listed" grep -q "^$POOL/db" "$ZV_TMP/adm.out"
rc_is 0 "destroy $POOL/new (no client)" "$ADM" destroy "$POOL/new"
nbdinfo --list "nbd+unix:///?socket=$sock" >"$ZV_TMP/exports" 2>&1 || :
check "the export is gone" bash -c "! grep -q 'export=\"new\"' '$ZV_TMP/exports'"
check_not "a client cannot open it" nbdinfo "nbd+unix:///new?socket=$sock"
rc_is 1 "a taken name, live" "$ADM" create -V 1M "$POOL/db"
check "the engine's reason on stderr" grep -q "zvoladm: pool '$POOL' has a volume 'db' already" "$ZV_TMP/adm.err"
rc_is 2 "a usage error, live or not" "$ADM" create -V 1M -s -r 1M "$POOL/x"

zv_log "3. refusals"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    rc_is 1 "another uid is refused" setpriv --reuid=65534 --regid=65534 \
        --clear-groups "$ADM" -S "$ctl" list "$POOL"
    check "permission denied" grep -q "Permission denied" "$ZV_TMP/adm.err"
else
    zv_log "not root (or no setpriv): the other-uid refusal is the unit test's (test_ctl)"
fi
cat >"$ZV_TMP/junk.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
ok = data[:4] == b"ZVCR" and b"bad control message: not a zvoladm request" in data
print("PASS: garbage gets a clear reply" if ok else "FAIL: reply %r" % data[:200])
EOF
py_checks "garbage on the socket" "$ZV_TMP/junk.py" "$ctl" || :
check "the log says who sent it" grep -q "a bad message from uid" "$ZV_LOG"
rc_is 0 "the server still answers" "$ADM" list -H "$POOL"

zv_release
rc_is 0 "zvoladm list -H -p $POOL, live, at the end" "$ADM" list -H -p "$POOL"
cp "$ZV_TMP/adm.out" "$ZV_TMP/live.list"
rc_is 0 "zvoladm list $POOL, live, at the end" "$ADM" list "$POOL"
cp "$ZV_TMP/adm.out" "$ZV_TMP/live.list2"

zv_log "4. stop, offline, control=PATH, stale sockets, control=off"
stop_zvol "$sock" || zv_fail "clean stop"
check "the socket is removed at stop" test ! -e "$ctl"
rc_is 0 "offline: zvoladm list -H -p $POOL" "$ADM" list -H -p "$POOL"
check "prints what the live one printed" diff "$ZV_TMP/adm.out" "$ZV_TMP/live.list"
rc_is 0 "offline: zvoladm list $POOL" "$ADM" list "$POOL"
check "the same with the header" diff "$ZV_TMP/adm.out" "$ZV_TMP/live.list2"

own=$ZV_TMP/own/control
start_zvol "$sock" "$pool" control="$own" || die "serve with control=$own"
check "control=PATH: the socket is there" test -S "$own"
check "its directory was made 0700" test "$(stat -c %a "$ZV_TMP/own")" = 700
check "nothing in the default place" test ! -e "$ctl"
rc_is 0 "zvoladm -S PATH" "$ADM" -S "$own" list -H "$POOL"
check "lists db" grep -q "^$POOL/db" "$ZV_TMP/adm.out"
rc_is 0 "ZVOLADM_SOCKET=PATH" env ZVOLADM_SOCKET="$own" "$ADM" stats "$POOL"
kill9_zvol "$sock" || zv_fail "kill -9"
check "kill -9 leaves the socket behind" test -S "$own"
rc_is 1 "-S on a dead server's socket fails, saying so" "$ADM" -S "$own" list "$POOL"
check "is the server running?" grep -q "is the server running" "$ZV_TMP/adm.err"
start_zvol "$sock" "$pool" control="$own" || die "restart over the stale socket"
rc_is 0 "the stale socket was replaced" "$ADM" -S "$own" list -H "$POOL"
check "a second server on the same path is refused" expect_start_failure \
    "$ZV_TMP/second.log" "$ZV_TMP/other.img" create=true size=16M control="$own"
check "saying another server answers there" grep -q "another server answers there" "$ZV_TMP/second.log"
stop_zvol "$sock" || zv_fail "clean stop"

start_zvol "$sock" "$pool" control=off || die "serve with control=off"
check "control=off: no socket" test ! -e "$ctl"
rc_is 1 "zvoladm then goes offline, and the device lock refuses it" "$ADM" list "$POOL"
check "saying the device is in use" grep -q "in use by another process" "$ZV_TMP/adm.err"
stop_zvol "$sock" || zv_fail "clean stop"

zv_log "5. send and receive live, through the control socket"
"$ADM" create -V 16M -s "$POOL/aux" || die "zvoladm create $POOL/aux"
POOL2=ctlrecv$$
zv_runtime_pool "$POOL2"
pool2=$ZV_TMP/pool2.img
sock2=$ZV_TMP/zvol2.sock
truncate -s 256M "$pool2"
"$ADM" create "$POOL2" "$pool2" || die "zvoladm create $POOL2"
"$ADM" create -V 8M "$POOL2/seed" || die "zvoladm create $POOL2/seed"
start_zvol "$sock" "$pool" || die "serve the pool"
start_zvol "$sock2" "$pool2" || die "serve the other pool"
log2=$ZV_LOG
# db gets a pattern; then a writer keeps writing it while it is sent.
cat >"$ZV_TMP/fill.py" <<'EOF'
import nbd, os, sys
h = nbd.NBD()
h.set_export_name("db")
h.connect_unix(sys.argv[1])
for i in range(16):
    h.pwrite(bytes([i + 1]) * (1 << 20), i * (2 << 20))
h.flush()
h.shutdown()
print("PASS: db filled")
EOF
cat >"$ZV_TMP/busy.py" <<'EOF'
import nbd, os, sys
h = nbd.NBD()
h.set_export_name("db")
h.connect_unix(sys.argv[1])
n = 0
while not os.path.exists(sys.argv[2]) and n < 100000:
    h.pwrite(bytes([0xee]) * 65536, (n % 64) * 65536 + (40 << 20))
    n += 1
h.flush()
h.shutdown()
EOF
cat >"$ZV_TMP/same.py" <<'EOF'
import hashlib, nbd, sys
def digest(sock, name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    n = h.get_size()
    d = hashlib.sha256()
    for o in range(0, n, 4 << 20):
        d.update(h.pread(min(4 << 20, n - o), o))
    h.shutdown()
    return n, d.hexdigest()
a = digest(sys.argv[1], sys.argv[2])
b = digest(sys.argv[3], sys.argv[4])
print(("PASS: %s and %s: the same bytes" if a == b
       else "FAIL: %s and %s differ") % (sys.argv[2], sys.argv[4]))
EOF
py_checks "a pattern in db" "$ZV_TMP/fill.py" "$sock" || :
rc_is 0 "snapshot $POOL/db@s1, live" "$ADM" snapshot "$POOL/db@s1"
rm -f "$ZV_TMP/busy.stop"
"$NBD_PY" "$ZV_TMP/busy.py" "$sock" "$ZV_TMP/busy.stop" &
busy_pid=$!
track_pid "$busy_pid"
rc_is 0 "send -v $POOL/db@s1 > s1.zs, live, while a client writes db" \
    bash -c "'$ADM' send -v '$POOL/db@s1' > '$ZV_TMP/s1.zs'"
check "progress on stderr" grep -q "^zvoladm: send: .* MiB (100%)$" "$ZV_TMP/adm.err"
rc_is 1 "send to a terminal is refused" \
    script -qec "'$ADM' send '$POOL/db@s1'" /dev/null
check "saying the stream is binary" grep -q "the stream is binary" "$ZV_TMP/adm.out"
rc_is 0 "receive -v $POOL2/copy < s1.zs, live into the other server" \
    bash -c "'$ADM' receive -v '$POOL2/copy' < '$ZV_TMP/s1.zs'"
check "receive's progress" grep -q "^zvoladm: receive: .* MiB (100%)$" "$ZV_TMP/adm.err"
nbdinfo --list "nbd+unix:///?socket=$sock2" >"$ZV_TMP/exports2" 2>&1 || :
check "the received volume is served at once" grep -q 'export="copy"' "$ZV_TMP/exports2"
py_checks "copy has db@s1's bytes" "$ZV_TMP/same.py" "$sock" db@s1 "$sock2" copy || :
# An incremental, piped from one server to the other (both live).
rc_is 0 "snapshot $POOL/db@s2, live, the writer still going" "$ADM" snapshot "$POOL/db@s2"
touch "$ZV_TMP/busy.stop"
wait "$busy_pid" || :
rc_is 0 "send -i db@s1 db@s2 | receive $POOL2/copy, live to live" \
    bash -c "set -o pipefail; '$ADM' send -i '$POOL/db@s1' '$POOL/db@s2' | '$ADM' receive '$POOL2/copy'"
py_checks "copy@s2 has db@s2's bytes" "$ZV_TMP/same.py" "$sock" db@s2 "$sock2" copy@s2 || :
py_checks "and copy too" "$ZV_TMP/same.py" "$sock" db@s2 "$sock2" copy || :
# A stream cut short: refused, nothing kept.
rc_is 1 "a stream cut at 300000 bytes is refused" \
    bash -c "head -c 300000 '$ZV_TMP/s1.zs' | '$ADM' receive '$POOL2/cut'"
check "saying it was truncated" grep -q "truncated" "$ZV_TMP/adm.err"
rc_is 0 "list -t all $POOL2" "$ADM" list -t all -H -o name "$POOL2"
check "nothing of it is left" bash -c "! grep -q cut '$ZV_TMP/adm.out'"
# The client killed mid-stream: the server stops the receive and undoes it.
mkfifo "$ZV_TMP/half.fifo"
(head -c 300000 "$ZV_TMP/s1.zs"; sleep 60) >"$ZV_TMP/half.fifo" &
feed_pid=$!
track_pid "$feed_pid"
"$ADM" receive "$POOL2/dead" <"$ZV_TMP/half.fifo" >/dev/null 2>&1 &
recv_pid=$!
for _ in $(seq 100); do
    "$ADM" list -H -o name "$POOL2" 2>/dev/null | grep -q dead && break
    sleep 0.1
done
check "the receive is under way" bash -c "'$ADM' list -H -o name '$POOL2' | grep -q dead"
kill "$recv_pid"
wait "$recv_pid" 2>/dev/null || :
kill "$feed_pid" 2>/dev/null || :
for _ in $(seq 100); do
    "$ADM" list -H -o name "$POOL2" 2>/dev/null | grep -q dead || break
    sleep 0.1
done
rc_is 0 "list $POOL2 after the client died" "$ADM" list -t all -H -o name "$POOL2"
check "the half-received volume is gone" bash -c "! grep -q dead '$ZV_TMP/adm.out'"
check "the server says why it stopped" grep -q "receive: stopped: the client is gone" "$log2"
rc_is 0 "check, live" "$ADM" check "$POOL2"
check "finds the pool clean" grep -q "^No problems found." "$ZV_TMP/adm.out"

zv_log "6. statistics of every volume; the default export changed live"
ks1=$rundir/$POOL
ks2=$rundir/$POOL2
sleep 1.5
check "kstat of db" grep -q "^volume db$" "$ks1/volumes/db/stats"
check "kstat of aux" grep -q "^volume aux$" "$ks1/volumes/aux/stats"
check "the received copy has its own" grep -q "^volume copy$" "$ks2/volumes/copy/stats"
rc_is 0 "zvoladm stats $POOL/aux, live" "$ADM" stats "$POOL/aux"
check "the second volume's figures" grep -q "^volume aux$" "$ZV_TMP/adm.out"
check "DIR/stats is still the default export's (seed)" grep -q "^volume seed$" "$ks2/stats"
rc_is 0 "create -V 4M $POOL2/fresh, live" "$ADM" create -V 4M "$POOL2/fresh"
for _ in $(seq 50); do [ -e "$ks2/volumes/fresh/stats" ] && break; sleep 0.1; done
check "a volume created live appears in the statistics" grep -q "^volume fresh$" "$ks2/volumes/fresh/stats"
rc_is 0 "destroy $POOL2/fresh, live" "$ADM" destroy "$POOL2/fresh"
for _ in $(seq 50); do [ -e "$ks2/volumes/fresh" ] || break; sleep 0.1; done
check "and goes when destroyed" test ! -e "$ks2/volumes/fresh"
rc_is 0 "snapshot the default export $POOL2/seed@r" "$ADM" snapshot "$POOL2/seed@r"
printf '%s\n' 'import nbd, sys' 'h = nbd.NBD()' 'h.set_export_name("")' \
    'h.connect_unix(sys.argv[1])' 'h.pwrite(b"\x77" * 65536, 0)' 'h.flush()' \
    'h.shutdown()' 'print("PASS: the default export written")' >"$ZV_TMP/dflt.py"
py_checks "a write to the default export" "$ZV_TMP/dflt.py" "$sock2" || :
sleep 1.2
rc_is 0 "rollback of the default export, live (no client)" "$ADM" rollback "$POOL2/seed@r"
printf '%s\n' 'import nbd, sys' 'h = nbd.NBD()' 'h.set_export_name("")' \
    'h.connect_unix(sys.argv[1])' 'ok = h.pread(65536, 0) == bytes(65536)' \
    'h.shutdown()' 'print("PASS: it reads the snapshot again" if ok else "FAIL: the write is still there")' \
    >"$ZV_TMP/dflt2.py"
py_checks "the default export rolled back" "$ZV_TMP/dflt2.py" "$sock2" || :
sleep 1.2
rc_is 0 "destroy -r of the default export, live" "$ADM" destroy -r "$POOL2/seed"
for _ in $(seq 50); do [ -e "$ks2/volumes/seed" ] || break; sleep 0.1; done
check "its statistics are gone" test ! -e "$ks2/volumes/seed"
sleep 1.2
check "DIR/stats has the pool's figures alone" bash -c "grep -q '^pool_name $POOL2$' '$ks2/stats' && ! grep -q '^volume ' '$ks2/stats'"
stop_zvol "$sock" || zv_fail "clean stop"
stop_zvol "$sock2" || zv_fail "clean stop of the other"
rc_is 0 "check the other pool offline: clean" "$ADM" check "$POOL2"

zv_summary
