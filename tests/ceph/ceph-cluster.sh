#!/bin/bash
# ceph-cluster.sh: a throw-away single-node Ceph cluster for the tests.
#
#   ceph-cluster.sh start DIR     start it in DIR (created; must be empty
#                                 or hold a stopped cluster of ours), wait
#                                 until DIR/env says how to reach it
#   ceph-cluster.sh stop DIR      stop every daemon it started, by PID
#   ceph-cluster.sh run DIR CMD.. start, run CMD with CEPH_CONF,
#                                 ZV_CEPH_POOL and ZV_CEPH_DIR set, stop
#                                 (also on a signal or an error); exits
#                                 with CMD's status (DIR is removed after
#                                 a success when ZV_CEPH_CLEANUP=1)
#   ceph-cluster.sh osd-kill DIR  SIGKILL the OSD (by its PID), wait until
#                                 it is gone
#   ceph-cluster.sh osd-start DIR start the OSD again (bluestore only:
#                                 memstore loses every object when its
#                                 OSD stops), wait until it is running
#
# One monitor and one OSD on 127.0.0.1, auth off, no systemd: each daemon
# is run directly with DIR/ceph.conf and writes DIR/<name>.pid.  The
# OSD's store is memstore (RAM, nothing on disk but the monitor's store)
# unless ZV_CEPH_STORE=bluestore: then a bluestore on a sparse file of
# ZV_CEPH_BLOCK_SIZE (default 4G) in DIR, which keeps what it
# acknowledged across an OSD restart (the OSD restart test needs that).  The pool
# "zvtest" (1 PG, size 1) is ready when a rados put/get round trip works.
# Exit status 77 (automake's skip) when the Ceph packages are missing.
# Memory and threads are kept small: the test machines have 2 cores.
#
# On ready, DIR/env holds shell assignments (CEPH_CONF, ZV_CEPH_POOL,
# ZV_CEPH_READY_MS: start-to-ready time) and DIR/ready exists.
set -euo pipefail

die () { echo "ceph-cluster: $*" >&2; exit 1; }
usage () { die "usage: $0 start|stop|osd-kill|osd-start DIR | run DIR CMD..."; }

[ $# -ge 2 ] || usage
cmd=$1 dir=$2
shift 2

# Milliseconds since the epoch.
now_ms () { date +%s%3N; }

# stop_daemons: SIGTERM every daemon we started (pid files), wait up to
# 1 s for all of them (the cluster is thrown away), then SIGKILL.  Only
# our own pids, each checked to be a ceph daemon still (a pid file left by a crash may name a reused pid).
stop_daemons ()
{
    local f pid tries pids=()
    for f in "$dir"/osd.0.pid "$dir"/mon.a.pid; do
        [ -s "$f" ] || continue
        pid=$(cat "$f")
        rm -f "$f"
        case $(cat "/proc/$pid/comm" 2>/dev/null) in
            ceph-mon|ceph-osd) pids+=("$pid") ;;
        esac
    done
    [ ${#pids[@]} -gt 0 ] || { rm -f "$dir/ready"; return 0; }
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do
        tries=10
        while [ $tries -gt 0 ] && [ -e "/proc/$pid" ]; do
            sleep 0.1; tries=$((tries - 1))
        done
        [ -e "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    done
    rm -f "$dir/ready"
}

# The objectstore's part of ceph.conf.
store_conf ()
{
    case ${ZV_CEPH_STORE:-memstore} in
    memstore)
        echo "osd objectstore = memstore"
        echo "memstore device bytes = 1073741824"
        ;;
    bluestore)
        # A sparse file created by mkfs; small caches, no fsck at each
        # mount, checksums on (the default) as a real cluster has them.
        echo "osd objectstore = bluestore"
        echo "bluestore block create = true"
        echo "bluestore block size = $(numfmt --from=iec "${ZV_CEPH_BLOCK_SIZE:-4G}")"
        echo "bluestore fsck on mount = false"
        echo "bluestore cache autotune = false"
        echo "bluestore cache size = 134217728"
        echo "bdev enable discard = false"
        ;;
    esac
}

# osd_pid: the running OSD's pid, or nothing.
osd_pid ()
{
    local pid
    [ -s "$dir/osd.0.pid" ] || return 0
    pid=$(cat "$dir/osd.0.pid")
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ceph-osd ] && echo "$pid"
    return 0
}

osd_kill ()
{
    local pid tries=100
    pid=$(osd_pid)
    [ -n "$pid" ] || die "no OSD running in $dir"
    kill -KILL "$pid"
    while [ $tries -gt 0 ] && [ -e "/proc/$pid" ]; do
        sleep 0.1; tries=$((tries - 1))
    done
    [ ! -e "/proc/$pid" ] || die "the OSD ($pid) survived SIGKILL for 10 s"
    rm -f "$dir/osd.0.pid"
}

osd_start ()
{
    local tries=100
    grep -q '^osd objectstore = bluestore' "$dir/ceph.conf" ||
        die "osd-start: only a bluestore OSD keeps its objects across a restart"
    [ -z "$(osd_pid)" ] || die "the OSD is running already"
    ceph-osd -c "$dir/ceph.conf" -i 0 >>"$dir/log/osd.out" 2>&1 ||
        { cat "$dir/log/osd.out" >&2; die "ceph-osd failed to start again"; }
    while [ $tries -gt 0 ] && [ -z "$(osd_pid)" ]; do
        sleep 0.1; tries=$((tries - 1))
    done
    [ -n "$(osd_pid)" ] || die "the OSD wrote no pid file within 10 s"
}

start_cluster ()
{
    local t0 port fsid tries mon_addr
    for p in ceph-mon ceph-osd ceph rados monmaptool; do
        command -v "$p" >/dev/null 2>&1 || {
            echo "ceph-cluster: $p not installed (apt-get install ceph-mon ceph-osd ceph-common)" >&2
            exit 77
        }
    done
    case ${ZV_CEPH_STORE:-memstore} in
    memstore|bluestore) ;;
    *) die "ZV_CEPH_STORE=${ZV_CEPH_STORE}: memstore or bluestore" ;;
    esac
    t0=$(now_ms)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    stop_daemons
    rm -rf "$dir/mon.a" "$dir/osd.0" "$dir/log" "$dir/run"
    mkdir -p "$dir/mon.a" "$dir/osd.0" "$dir/log" "$dir/run"
    # A free port on loopback: let the kernel pick one, then use it (the
    # window until the monitor binds it is short; a clash fails loudly).
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    fsid=$(cat /proc/sys/kernel/random/uuid)
    mon_addr="v2:127.0.0.1:$port"
    cat >"$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = [$mon_addr]
public network = 127.0.0.1/32
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
ms bind ipv4 = true
ms bind ipv6 = false
ms bind msgr1 = false
ms bind msgr2 = true
run dir = $dir/run
pid file = $dir/\$name.pid
log file = $dir/log/\$name.log
admin socket = $dir/run/\$name.asok
crash dir = $dir/crash
mon data = $dir/\$name
osd data = $dir/\$name
keyring = /dev/null
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon osd down out interval = 0
$(store_conf)
osd memory target = 268435456
osd op num shards = 1
osd op num threads per shard = 2
ms async op threads = 1
osd max object size = 134217728
osd heartbeat grace = 3600
debug ms = 0
CONF
    monmaptool --create --clobber --fsid "$fsid" --addv a "[$mon_addr]" \
        "$dir/monmap" >/dev/null
    ceph-mon -c "$dir/ceph.conf" -i a --mkfs --monmap "$dir/monmap" \
        >"$dir/log/mkfs-mon.log" 2>&1 || { cat "$dir/log/mkfs-mon.log" >&2; die "ceph-mon --mkfs failed"; }
    ceph-mon -c "$dir/ceph.conf" -i a >"$dir/log/mon.out" 2>&1 ||
        { cat "$dir/log/mon.out" >&2; die "ceph-mon failed to start"; }
    local osd_uuid id
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    id=$(ceph -c "$dir/ceph.conf" --connect-timeout 10 osd new "$osd_uuid") ||
        die "ceph osd new failed (monitor log: $dir/log/mon.a.log)"
    [ "$id" = 0 ] || die "osd new gave id $id, not 0"
    ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$osd_uuid" \
        >"$dir/log/mkfs-osd.log" 2>&1 || { cat "$dir/log/mkfs-osd.log" >&2; die "ceph-osd --mkfs failed"; }
    ceph-osd -c "$dir/ceph.conf" -i 0 >"$dir/log/osd.out" 2>&1 ||
        { cat "$dir/log/osd.out" >&2; die "ceph-osd failed to start"; }
    ceph -c "$dir/ceph.conf" --connect-timeout 10 osd pool create zvtest 1 1 \
        >/dev/null 2>&1 || die "ceph osd pool create failed"
    ceph -c "$dir/ceph.conf" --connect-timeout 10 osd pool application enable zvtest zvol \
        >/dev/null 2>&1 || true
    # Ready when an object round trip works (the OSD is up and the PG active).
    echo ready >"$dir/probe.in"
    tries=300
    while [ $tries -gt 0 ]; do
        if timeout 5 rados -c "$dir/ceph.conf" -p zvtest put zv-probe "$dir/probe.in" 2>/dev/null &&
           timeout 5 rados -c "$dir/ceph.conf" -p zvtest get zv-probe "$dir/probe.out" 2>/dev/null &&
           cmp -s "$dir/probe.in" "$dir/probe.out"; then
            break
        fi
        sleep 0.2; tries=$((tries - 1))
    done
    [ $tries -gt 0 ] || die "the pool did not become usable within 60 s (logs: $dir/log)"
    timeout 5 rados -c "$dir/ceph.conf" -p zvtest rm zv-probe 2>/dev/null || true
    cat >"$dir/env" <<ENV
CEPH_CONF=$dir/ceph.conf
ZV_CEPH_POOL=zvtest
ZV_CEPH_READY_MS=$(( $(now_ms) - t0 ))
ENV
    touch "$dir/ready"
}

case $cmd in
    start)
        trap 'rc=$?; [ $rc -eq 0 ] || [ $rc -eq 77 ] || stop_daemons; exit $rc' EXIT
        start_cluster
        cat "$dir/env"
        ;;
    stop)
        stop_daemons
        ;;
    osd-kill)
        dir=$(cd "$dir" && pwd)
        osd_kill
        ;;
    osd-start)
        dir=$(cd "$dir" && pwd)
        osd_start
        ;;
    run)
        [ $# -ge 1 ] || usage
        trap 'stop_daemons' EXIT
        trap 'exit 130' INT TERM
        start_cluster
        # shellcheck disable=SC1091
        . "$dir/env"
        export CEPH_CONF ZV_CEPH_POOL ZV_CEPH_READY_MS
        echo "ceph-cluster: ready in $ZV_CEPH_READY_MS ms" >&2
        export ZV_CEPH_DIR=$dir
        rc=0
        "$@" || rc=$?
        # A scratch directory the caller made for us goes once all passed
        # (the logs of a failure stay).
        if [ $rc -eq 0 ] && [ "${ZV_CEPH_CLEANUP:-}" = 1 ]; then
            stop_daemons
            rm -rf "$dir"
        fi
        exit $rc
        ;;
    *) usage ;;
esac
