#!/bin/bash
# rados-serve.sh: serve a volume whose pool lives on a Ceph cluster, and
# fail it over to another server.
#
#   examples/rados-serve.sh serve CEPHPOOL NAME [SOCKET]
#       Serve the pool of RADOS devices NAME and NAME-log in CEPHPOOL on
#       the Unix socket SOCKET (default /run/zvol-NAME.sock), in the
#       foreground (librados does not survive nbdkit's fork).  With
#       SIZE=100G set, the pool is created first (create=true).  Refused,
#       naming the holder, while another server (on any host) holds it.
#   examples/rados-serve.sh takeover CEPHPOOL NAME [SOCKET]
#       The same on another host when the first server is gone (or must
#       go): takeover=true blocklists the holder's Ceph clients (fencing:
#       none of its writes lands any more, not even one on its way),
#       breaks its locks and replays the intent log: every write that
#       server acknowledged before a flush is there.
#   examples/rados-serve.sh status CEPHPOOL NAME
#       Who holds the devices' locks (rados lock info), and the
#       blocklist.
#   examples/rados-serve.sh demo
#       The whole failover on a throw-away cluster on this machine
#       (tests/ceph/ceph-cluster.sh, stopped at the end): server A writes
#       and flushes, is killed with SIGKILL, a plain start of B is
#       refused, B takes over and reads every flushed write back.
#
# Environment: CEPH_CONF (default /etc/ceph/ceph.conf), CEPH_USER (default
# admin; CEPH_KEYRING where auth is on), SIZE (serve: create the pool),
# ZVOL_PLUGIN (default: the build's plugin, else nbdkit's "zvol").
# Needs nbdkit, the plugin, ceph-common (rados); the demo also ceph-mon,
# ceph-osd and /usr/bin/python3 with the libnbd bindings (python3-libnbd).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
plugin=${ZVOL_PLUGIN:-}
if [ -z "$plugin" ]; then
    plugin=zvol
    for p in "$top/build/plugin/.libs/nbdkit-zvol-plugin.so" "$top/plugin/.libs/nbdkit-zvol-plugin.so"; do
        if [ -f "$p" ]; then plugin=$p; break; fi
    done
fi
conf=${CEPH_CONF:-/etc/ceph/ceph.conf}
user=${CEPH_USER:-admin}

usage () {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# nbdkit_args CEPHPOOL NAME: the plugin and its keys for the pool NAME.
nbdkit_args () {
    args=("$plugin" device="rados:$1/$2" log="rados:$1/$2-log"
          ceph_conf="$conf" ceph_user="$user")
    [ -z "${CEPH_KEYRING:-}" ] || args+=(ceph_keyring="$CEPH_KEYRING")
}

serve () {
    local pool=$1 name=$2 sock=${3:-/run/zvol-$2.sock} extra=("${@:4}")
    nbdkit_args "$pool" "$name"
    [ -z "${SIZE:-}" ] || extra+=(create=true size="$SIZE")
    echo "serving rados:$pool/$name on $sock (nbd+unix:///?socket=$sock)"
    exec nbdkit -f -U "$sock" "${args[@]}" "${extra[@]}"
}

status () {
    local pool=$1 name=$2 o
    for o in "$name" "$name-log"; do
        echo "== lock of rados:$pool/$o"
        rados -c "$conf" --id "$user" -p "$pool" lock info "$o" zvol || :
        echo
    done
    echo "== blocklist"
    ceph -c "$conf" --id "$user" osd blocklist ls 2>/dev/null || :
}

demo () {
    local rc=0
    work=$(mktemp -d /var/tmp/zvol-rados-demo.XXXXXX)
    # The cluster's daemons and the servers go by their PIDs, whatever
    # failed.
    trap '[ -z "${pid_b:-}" ] || kill "$pid_b" 2>/dev/null
          "$top/tests/ceph/ceph-cluster.sh" stop "$work/ceph"; rm -rf "$work"' EXIT
    "$top/tests/ceph/ceph-cluster.sh" start "$work/ceph" >/dev/null
    conf=$work/ceph/ceph.conf
    nbdkit_args zvtest demo

    echo "1. server A creates and serves the pool; a client writes, flushes"
    nbdkit -f -U "$work/a.sock" -P "$work/a.pid" "${args[@]}" create=true size=64M \
        >"$work/a.log" 2>&1 </dev/null &
    pid_a=$!
    wait_sock "$work/a.sock"
    /usr/bin/python3 - "nbd+unix:///?socket=$work/a.sock" <<'EOF'
import sys, nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(b"flushed before the crash\n" * 4096, 1 << 20)
h.flush()
h.pwrite(b"never flushed\n" * 4096, 8 << 20)   # may be lost: never acknowledged durable
print("   wrote and flushed 100 KiB at 1 MiB")
EOF
    echo "2. server A dies (SIGKILL): its locks stay in the cluster"
    kill -KILL "$pid_a"; wait "$pid_a" 2>/dev/null || :
    status zvtest demo | sed 's/^/   /' | grep -E 'client|cookie|==' || :

    echo "3. a plain start of server B is refused, naming the holder:"
    nbdkit -f -U "$work/b.sock" "${args[@]}" >"$work/b0.log" 2>&1 </dev/null || :
    grep -m1 -o 'in use by another server.*cookie[^)]*)' "$work/b0.log" | sed 's/^/   /'

    echo "4. server B takes over (fences A's clients, breaks the locks, replays the log)"
    nbdkit -f -U "$work/b.sock" "${args[@]}" takeover=true >"$work/b.log" 2>&1 </dev/null &
    pid_b=$!
    wait_sock "$work/b.sock"
    grep -o 'taking over from .*' "$work/b.log" | sed 's/^/   /'
    /usr/bin/python3 - "nbd+unix:///?socket=$work/b.sock" <<'EOF' || rc=$?
import sys, nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
ok = h.pread(100 << 10, 1 << 20) == b"flushed before the crash\n" * 4096
print("   the flushed write is there: %s" % ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
EOF
    kill -TERM "$pid_b"; wait "$pid_b" 2>/dev/null || :
    pid_b=
    return $rc
}

# wait_sock SOCK: until the server listens (30 s at most).
wait_sock () {
    for _ in $(seq 300); do
        [ -S "$1" ] && return 0
        sleep 0.1
    done
    echo "no server on $1 after 30 s" >&2
    return 1
}

[ $# -ge 1 ] || usage
case $1 in
serve) [ $# -ge 3 ] || usage; serve "$2" "$3" "${4:-}" ;;
takeover) [ $# -ge 3 ] || usage; serve "$2" "$3" "${4:-}" takeover=true ;;
status) [ $# -ge 3 ] || usage; status "$2" "$3" ;;
demo) demo ;;
*) usage ;;
esac
