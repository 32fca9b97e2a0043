#!/usr/bin/env bash
# test-snapshot-crash.sh: kill -9 of the server during live snapshot,
# clone, rollback and destroy (also destroy -R); after each crash every
# acknowledged write, every snapshot and clone zvoladm reported, and the
# checker's space accounting hold.
#
# The pool has two volumes: "live", written all the time by a client
# (writer.py: up to 8 asynchronous writes of 1-8 4 KiB blocks over its
# first 4 MiB, a flush every 8-40 completions), and "idle", which only
# the admin driver writes (driver.py), one client at a time, so that it
# can be rolled back (a rollback refuses a volume a client has open).
# The driver runs zvoladm against the server's control socket in a loop:
# snapshots of live (taken while the writer writes), clones of them,
# writes to clones and snapshots of clones, writes to idle and snapshots
# of it, rollbacks of idle (to the newest, or -r to an older one),
# destroys of snapshots and clones, and destroy -R of a snapshot with its
# clones.  Each round the driver itself kills the server with SIGKILL at
# a chosen moment: a few milliseconds after it starts a command of the
# round's kind (snapshot, clone, rollback, destroy, destroy -R, a write
# of idle or of a clone, a snapshot of a clone), between two commands,
# or at any command.  Then:
#   - zvoladm check on the pool as the crash left it (read-only import,
#     no log replayed): no leak, no double allocation, no bad block;
#   - a new server imports it (the logs replay) and checker.py checks:
#       live: every 4 KiB block holds the last write that a returned
#         flush covered, or a later one (issued, acknowledged or not),
#         never an older one, never a torn or foreign block;
#       every snapshot of live holds, per block, a write no older than
#         the last one acknowledged before its zvoladm started, and none
#         issued after zvoladm returned (the promise of zvol.h);
#       every dataset the driver created (zvoladm returned 0) exists,
#         every one it destroyed is gone, nothing else exists; the one
#         command the kill cut may have happened or not, and a cut
#         destroy -R left its set destroyed in order (dependents first:
#         what is gone is a prefix of its order);
#       a clone reads its origin's blocks except what the driver wrote
#         to it, a snapshot of a clone or of idle reads what the driver
#         had written when it took it, idle reads its last write or the
#         snapshot it was rolled back to (the cut command: either);
#       a command that failed before the kill is a failure (but "in
#         use": a client's close reaches the server a moment after the
#         client goes, and the driver retries);
#   - a clean stop, and zvoladm check again.
# What the checker read is the next round's starting point.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires_plugin
requires_nbd_python
zv_setup

zv_admin_setup
POOL=snapcrash$$
zv_runtime_pool "$POOL"
pool=$ZV_TMP/pool.img
sock=$ZV_TMP/zvol.sock
ctl=$rundir/$POOL/control
ROUNDS=${ZVOL_CRASH_ROUNDS:-10}
KINDS=(snap clone rollback destroy destroyR bwrite cwrite csnap between any)

cat >"$ZV_TMP/sclib.py" <<'EOF'
import hashlib, struct
BS = 4096
LIVE_BLOCKS = 1024          # live's first 4 MiB: its clones' and snapshots'
IDLE_BLOCKS = 64            # idle's first 256 KiB
DRIVER_ID0 = 1 << 40        # ids of the driver's writes (the writer's: 1..)

def block_value(vid, blk):
    """The 4 KiB that write vid puts into block blk."""
    hdr = struct.pack("<QQ", vid, blk) + b"ZVSNAPCR"
    return hdr + hashlib.shake_128(hdr).digest(BS - len(hdr))

def identify(data, blk):
    """The id a block holds: 0 for zeros, None for anything else."""
    if data == bytes(BS):
        return 0
    vid, b = struct.unpack_from("<QQ", data)
    if b == blk and data == block_value(vid, blk):
        return vid
    return None

def nblocks(name):
    return IDLE_BLOCKS if name.split("@")[0] == "idle" else LIVE_BLOCKS

def order_key(name):
    """Creation order: the driver numbers every name it makes."""
    tail = name.split("@")[-1].lstrip("cs")
    return int(tail) if tail.isdigit() else 0

def read_ids(h, n):
    ids = []
    for c in range(0, n, 256):
        k = min(256, n - c)
        data = h.pread(k * BS, c * BS)
        ids += [identify(data[i * BS:(i + 1) * BS], c + i) for i in range(k)]
    return ids
EOF

cat >"$ZV_TMP/writer.py" <<'EOF'
# The client of "live": writes until the server dies.  Journal: "W id
# blk n t" (sent at t or later), "A id t" (acknowledged by t), "E id
# errno t", "F seq t" (flush sent), "D seq t" (returned), "X seq errno t".
import os, random, sys, time
import nbd
from sclib import *

sock, journal, seed, first_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
QD, MAXTIME = 8, 30.0
fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
def log(s):
    os.write(fd, ("%s %.6f\n" % (s, time.time())).encode())

h = nbd.NBD()
h.set_export_name("live")
h.connect_unix(sock)
busy, inflight = set(), {}
next_id, flush_seq, since_flush, nflush = first_id, 0, 0, 0
start, dead = time.time(), False

def on_write(wid):
    def cb(err):
        global since_flush
        log(("A %d" % wid) if err.value == 0 else ("E %d %d" % (wid, err.value)))
        busy.difference_update(inflight.pop(wid)[0])
        since_flush += 1
        return 1
    return cb

def on_flush(seq):
    def cb(err):
        global nflush
        log(("D %d" % seq) if err.value == 0 else ("X %d %d" % (seq, err.value)))
        nflush -= 1
        return 1
    return cb

try:
    while time.time() - start < MAXTIME:
        while len(inflight) < QD:
            n = rng.choice([1, 1, 2, 4, 8])
            for _ in range(20):
                blk = rng.randrange(0, LIVE_BLOCKS - n + 1)
                blocks = set(range(blk, blk + n))
                if not blocks & busy:
                    break
            else:
                break
            wid, next_id = next_id, next_id + 1
            buf = nbd.Buffer.from_bytearray(
                b"".join(block_value(wid, b) for b in range(blk, blk + n)))
            busy |= blocks
            inflight[wid] = (blocks, buf)
            log("W %d %d %d" % (wid, blk, n))
            h.aio_pwrite(buf, blk * BS, completion=on_write(wid))
        if since_flush >= rng.randrange(8, 40) and nflush < 2:
            flush_seq, since_flush = flush_seq + 1, 0
            nflush += 1
            log("F %d" % flush_seq)
            h.aio_flush(completion=on_flush(flush_seq))
        h.poll(1000)
except nbd.Error as e:
    dead = True
print("writer: %d writes, %d flushes, %s" % (next_id - first_id, flush_seq,
      "the server died" if dead else "time is up"))
EOF

cat >"$ZV_TMP/driver.py" <<'EOF'
# The admin driver: zvoladm commands and writes of idle and clones, one
# at a time, each journaled (JSON lines) as {"b": seq, "op", "args", "t"}
# before and {"e": seq, "rc", "t", "err"} after; it kills the server
# ({"kill": t} first) at the moment the round asks for.
import json, os, random, signal, subprocess, sys, threading, time
import nbd
from sclib import *

(sock, ctl, adm, pool, statef, journal, seed, spid, kind, t_min) = sys.argv[1:11]
rng = random.Random(int(seed))
spid, t_min = int(spid), float(t_min)
st = json.load(open(statef))
fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
lock = threading.Lock()
def J(**kw):
    with lock:
        os.write(fd, (json.dumps(kw) + "\n").encode())

# The driver's view: name -> origin ("" for a volume that is no clone,
# None for a snapshot), in creation order.
ds = {n: v["origin"] for n, v in sorted(st["datasets"].items(), key=lambda x: order_key(x[0]))}
killed = threading.Event()

def kill_now():
    if not killed.is_set():
        J(kill=time.time())
        killed.set()
        os.kill(spid, signal.SIGKILL)

def kill_after(d):
    threading.Timer(d, kill_now).start()

def snaps_of(v):
    return [n for n in ds if n.startswith(v + "@")]
def clones_of(s):
    return [n for n, o in ds.items() if o == s]
def live_snaps():
    return snaps_of("live")
def clones():
    return [n for n, o in ds.items() if o]
def clone_snaps():
    return [n for n in ds if "@" in n and n.split("@")[0] in clones()]
def fresh(prefix):
    st["next_name"] += 1
    return "%s%d" % (prefix, st["next_name"])
def fresh_id():
    st["next_did"] += 1
    return st["next_did"]

def zvoladm(*args):
    """Run it; retry while the target is still held by a client that
    just went (its close reaches the server a moment later)."""
    for _ in range(40):
        # -S: the server's socket or nothing (no offline fallback once
        # it is dead: a command cut by the kill stays cut)
        p = subprocess.run([adm, "-S", ctl] + list(args), capture_output=True, text=True,
                           timeout=60)
        if p.returncode == 0 or "in use" not in p.stderr or killed.is_set():
            break
        time.sleep(0.025)
    return p.returncode, p.stderr.strip()

def nbd_write(name, blk, n, vid):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    h.pwrite(b"".join(block_value(vid, b) for b in range(blk, blk + n)), blk * BS)
    h.flush()
    h.shutdown()
    return 0, ""

seq = 0
def run(op, args, fn):
    global seq
    seq += 1
    J(b=seq, op=op, args=args, t=time.time())
    try:
        rc, err = fn()
    except nbd.Error as e:
        rc, err = -1, e.string
    except subprocess.TimeoutExpired:
        rc, err = -2, "timed out"
    J(e=seq, rc=rc, t=time.time(), err=err[:300])
    return rc == 0

def op_snap():
    s = "live@" + fresh("s")
    if run("snap", [s], lambda: zvoladm("snapshot", pool + "/" + s)):
        ds[s] = None
def op_clone():
    s = rng.choice(live_snaps() + clone_snaps())
    c = fresh("c")
    if run("clone", [s, c], lambda: zvoladm("clone", pool + "/" + s, pool + "/" + c)):
        ds[c] = s
def op_cwrite():
    c = rng.choice(clones())
    n = rng.choice([1, 4, 16, 64])
    blk = rng.randrange(0, LIVE_BLOCKS - n + 1)
    vid = fresh_id()
    run("cwrite", [c, blk, n, vid], lambda: nbd_write(c, blk, n, vid))
def op_csnap():
    c = rng.choice(clones())
    s = c + "@" + fresh("s")
    if run("csnap", [s], lambda: zvoladm("snapshot", pool + "/" + s)):
        ds[s] = None
def op_bwrite():
    vid = fresh_id()
    run("bwrite", [vid], lambda: nbd_write("idle", 0, IDLE_BLOCKS, vid))
def op_bsnap():
    s = "idle@" + fresh("s")
    if run("bsnap", [s], lambda: zvoladm("snapshot", pool + "/" + s)):
        ds[s] = None
def op_rollback():
    ss = snaps_of("idle")
    k = rng.randrange(len(ss)) if rng.random() < 0.3 else len(ss) - 1
    newer = ss[k + 1:]
    args = (["-r"] if newer else []) + [pool + "/" + ss[k]]
    if run("rollback", [ss[k], newer], lambda: zvoladm("rollback", *args)):
        for n in newer:
            del ds[n]
def destroyable():
    out = [s for s in live_snaps() + clone_snaps() if not clones_of(s)]
    out += [c for c in clones() if not snaps_of(c)]
    return out + snaps_of("idle")
def op_destroy():
    x = rng.choice(destroyable())
    if run("destroy", [x], lambda: zvoladm("destroy", pool + "/" + x)):
        del ds[x]
def rtargets():
    return [s for s in live_snaps() + clone_snaps() if clones_of(s)] + \
        [c for c in clones() if snaps_of(c)]
def op_destroyR():
    x = rng.choice(rtargets())
    if run("destroyR", [x], lambda: zvoladm("destroy", "-R", pool + "/" + x)):
        gone = {x}
        while True:
            more = {n for n, o in ds.items() if n not in gone and
                    (o in gone or ("@" in n and n.split("@")[0] in gone))}
            if not more:
                break
            gone |= more
        for n in gone:
            del ds[n]

OPS = {
    "snap": (op_snap, 3, lambda: len(live_snaps()) < 5),
    "clone": (op_clone, 2, lambda: live_snaps() and len(clones()) < 3),
    "cwrite": (op_cwrite, 2, lambda: clones()),
    "csnap": (op_csnap, 1, lambda: clones() and len(clone_snaps()) < 3),
    "bwrite": (op_bwrite, 2, lambda: True),
    "bsnap": (op_bsnap, 2, lambda: len(snaps_of("idle")) < 4),
    "rollback": (op_rollback, 2, lambda: snaps_of("idle")),
    "destroy": (op_destroy, 3, lambda: len(ds) > 6 and destroyable()),
    "destroyR": (op_destroyR, 1, lambda: rtargets()),
}

start = time.time()
nops = 0
while not killed.is_set():
    now = time.time() - start
    if now > t_min + 4:
        kill_now()                   # the round's kind never came: now
        break
    valid = [k for k, (_, _, ok) in OPS.items() if ok()]
    armed = now >= t_min
    if armed and kind in valid and rng.random() < 0.7:
        k = kind
    else:
        k = rng.choices(valid, weights=[OPS[v][1] for v in valid])[0]
    if armed and kind == "between" and nops > 0:
        kill_now()                   # no command running
        break
    if armed and (k == kind or kind == "any"):
        kill_after(rng.uniform(0.0, 0.05))
    OPS[k][0]()
    nops += 1
    if armed and (k == kind or kind == "any"):
        killed.wait(1.0)
print("driver: %d commands and writes, kill during '%s'" % (nops, kind))
EOF

cat >"$ZV_TMP/checker.py" <<'EOF'
# The checker: replay both journals over the state the last round left,
# read every dataset through the new server, check the model (the top
# of the test), write the next round's state.
import json, subprocess, sys
import nbd
from zvtest import ok, finish
from sclib import *

sock, adm, pool, statef, wjournal, djournal, rnd = sys.argv[1:8]
st = json.load(open(statef))
INF = float("inf")

# ---- the writer's journal: live's history per block
base = st["live"]
hist = [[(v, -INF, -INF)] for v in base]      # (value, sent, acknowledged)
pos, flushes, acked = {}, {}, {}
durable = [0] * LIVE_BLOCKS
nw = na = nd = 0
for line in open(wjournal):
    f = line.split()
    if not f:
        continue
    t = float(f[-1])
    if f[0] == "W":
        wid, blk, n = int(f[1]), int(f[2]), int(f[3])
        pos[wid] = {}
        for b in range(blk, blk + n):
            hist[b].append([wid, t, None])
            pos[wid][b] = len(hist[b]) - 1
        st["next_id"] = max(st["next_id"], wid + 1)
        nw += 1
    elif f[0] == "A":
        na += 1
        for b, i in pos[int(f[1])].items():
            hist[b][i][2] = t
            acked[b] = i
    elif f[0] == "F":
        flushes[int(f[1])] = dict(acked)
    elif f[0] == "D":
        nd += 1
        for b, i in flushes.pop(int(f[1])).items():
            durable[b] = max(durable[b], i)

def live_snap_allowed(b, t0, t1):
    """Block b of a snapshot of live whose zvoladm ran from t0 to t1."""
    h = hist[b]
    lo = max(k for k in range(len(h)) if h[k][2] is not None and h[k][2] < t0)
    hi = max(k for k in range(len(h)) if h[k][1] <= t1)
    return {h[k][0] for k in range(lo, hi + 1)}

# ---- the driver's journal: what exists, what each holds
class Content:
    """A dataset's blocks: a base (a list of sets of ids, or the name of a
    snapshot whose blocks as read are the base) and what was written over
    it (block -> set of ids; "B" in it: or the base's)."""
    def __init__(self, base, over=None):
        self.base, self.over = base, dict(over or {})
    def copy(self):
        return Content(self.base, {b: set(v) for b, v in self.over.items()})
    def write(self, blk, n, vid, certain):
        for b in range(blk, blk + n):
            self.over[b] = {vid} if certain else self.over.get(b, {"B"}) | {vid}
    def sets(self, n):
        """With a base of sets: each block's allowed ids."""
        return [(self.over.get(b, {"B"}) - {"B"}) |
                (self.base[b] if "B" in self.over.get(b, {"B"}) else set())
                for b in range(n)]

exist, origin, content = {}, {}, {}
for n, v in st["datasets"].items():
    exist[n], origin[n] = True, v["origin"]
    content[n] = Content([{x} for x in v["ids"]])
livesnap = {}                                  # name -> (t0, t1)
prefix_checks = []                             # (op, plan) of a cut destroy -R
unexpected = []                                # commands failed before the kill
ops = []
t_kill, begun = INF, {}
for line in open(djournal):
    j = json.loads(line)
    if "kill" in j:
        t_kill = j["kill"]
    elif "b" in j:
        begun[j["b"]] = j
    else:
        b = begun.pop(j["e"])
        ops.append((b, j))
for b in begun.values():                       # no end: the driver died with it
    ops.append((b, {"rc": -3, "t": INF, "err": "no end"}))
for b, e in ops:                                # the names and ids it used
    for a in b["args"]:
        for x in (a if isinstance(a, list) else [a]):
            if isinstance(x, str):
                st["next_name"] = max(st["next_name"], order_key(x))
    if b["op"] in ("cwrite", "bwrite"):
        st["next_did"] = max(st["next_did"], b["args"][-1])

def plan_of(x):
    """What destroy -R x takes (those the model knows, maybe existing),
    dependents first."""
    out = []
    def vol(v):
        for s in sorted((n for n in exist if exist[n] is not False and
                         n.startswith(v + "@")), key=order_key):
            snap(s)
        out.append(v)
    def snap(s):
        for c in sorted((n for n in exist if exist[n] is not False and
                         origin.get(n) == s), key=order_key):
            vol(c)
        out.append(s)
    (snap if "@" in x else vol)(x)
    return out

def settle(names, outcome):
    for n in names:
        exist[n] = outcome

nops = {}
cut = None
for seqn, (b, e) in enumerate(ops):
    op, args, t0, t1, rc = b["op"], b["args"], b["t"], e["t"], e["rc"]
    done = rc == 0
    unknown = not done and t1 >= t_kill
    if not done and not unknown:
        unexpected.append("%s %s: rc %d: %s" % (op, args, rc, e["err"]))
        continue
    if unknown:
        cut = "%s %s" % (op, " ".join(str(a) for a in args))
    nops[op] = nops.get(op, 0) + 1
    outcome = True if done else None
    if op in ("snap", "csnap", "bsnap"):
        s = args[0]
        v = s.split("@")[0]
        exist[s], origin[s] = outcome, None
        if op == "snap":
            livesnap[s] = (t0, t1 if done else INF)
        else:
            content[s] = content[v].copy()
    elif op == "clone":
        s, c = args
        exist[c], origin[c] = outcome, s
        content[c] = Content(s)
    elif op == "cwrite":
        c, blk, n, vid = args
        content[c].write(blk, n, vid, done)
    elif op == "bwrite":
        content["idle"].write(0, IDLE_BLOCKS, args[0], done)
    elif op == "rollback":
        s, newer = args
        new = content[s].copy()
        if not done:
            # either: the blocks as they were, or the snapshot's
            new = Content([a | b for a, b in zip(content["idle"].sets(IDLE_BLOCKS),
                                                 new.sets(IDLE_BLOCKS))])
        content["idle"] = new
        settle(newer, False if done else None)
    elif op == "destroy":
        settle(args, False if done else None)
    elif op == "destroyR":
        plan = plan_of(args[0])
        if not done:
            prefix_checks.append((args[0], {m: plan_of(m) for m in plan}))
        settle(plan, False if done else None)

# ---- what the server shows
p = subprocess.run([adm, "list", "-t", "all", "-H", "-o", "name,origin", pool],
                   capture_output=True, text=True, timeout=60)
ok(p.returncode == 0, "round %s: zvoladm list works after the crash (%s)"
   % (rnd, p.stderr.strip()))
listed = {}
for line in p.stdout.splitlines():
    n, o = line.split("\t")
    n = n.split("/", 1)[1]
    listed[n] = "" if o == "-" else o.split("/", 1)[1]
print("round %s: %d writes sent, %d acknowledged, %d flushes returned; "
      "commands done: %s; cut by the kill: %s"
      % (rnd, nw, na, nd, ", ".join("%s %d" % kv for kv in sorted(nops.items())),
         cut or "none"))
ok(not unexpected, "round %s: no command failed before the kill%s"
   % (rnd, "".join("\n    " + u for u in unexpected)))
bad = []
for n, x in exist.items():
    if x is True and n not in listed:
        bad.append("%s: created (or kept) and acknowledged, but missing" % n)
    if x is False and n in listed:
        bad.append("%s: destroyed and acknowledged, but still there" % n)
for n in listed:
    if n not in exist and n != "live":
        bad.append("%s: exists, but nobody made it" % n)
    elif n in origin and origin[n] is not None and listed[n] != origin[n]:
        bad.append("%s: origin %s, want %s" % (n, listed[n] or "none", origin[n]))
    elif n in origin and origin[n] is None and listed[n]:
        bad.append("%s: a snapshot with an origin %s" % (n, listed[n]))
ok(not bad, "round %s: every acknowledged snapshot, clone and destroy holds "
   "(%d datasets)%s" % (rnd, len(listed), "".join("\n    " + x for x in bad)))
for x, sub in prefix_checks:
    wrong = ["%s gone, %s left" % (m, d) for m in sub if m not in listed
             for d in sub[m] if d in listed]
    ok(not wrong, "round %s: the cut destroy -R %s destroyed dependents first "
       "(gone: %s)%s" % (rnd, x, [m for m in sub if m not in listed],
                         "".join("\n    " + w for w in wrong)))

# ---- every dataset's blocks
ids = {}
def read(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    r = read_ids(h, nblocks(name))
    h.shutdown()
    return r
for n in ["live"] + sorted(listed):
    if n not in ids:
        ids[n] = read(n)

def verdict(name, allowed_of):
    """Check name's blocks read against allowed_of(b): the bad ones."""
    out = []
    for b, v in enumerate(ids[name]):
        a = allowed_of(b)
        if v is None:
            out.append("block %d: torn or garbage" % b)
        elif a is not None and v not in a:
            out.append("block %d holds %d, allowed %s" % (b, v, sorted(a)[:6]))
    return out

r = verdict("live", lambda b: {x[0] for x in hist[b][durable[b]:]})
ok(not r, "round %s: live: every block holds its flushed write or a later one "
   "(%d bad)%s" % (rnd, len(r), "".join("\n    " + x for x in r[:8])))

def allowed(name):
    """allowed_of for a dataset of the model, or None if it has no base
    to compare with (its origin is gone: a failure said above)."""
    if name in livesnap:
        t0, t1 = livesnap[name]
        return lambda b: live_snap_allowed(b, t0, t1)
    c = content[name]
    if isinstance(c.base, str):
        if c.base not in ids:
            return None
        base = [{x} for x in ids[c.base]]
    else:
        base = c.base
    def f(b):
        o = c.over.get(b, {"B"})
        return (o - {"B"}) | (base[b] if "B" in o else set())
    return f

nchecked = 0
for n in sorted(listed):
    if n not in exist:
        continue
    f = allowed(n)
    if f is None:
        ok(False, "round %s: %s: its origin %s is gone" % (rnd, n, content[n].base))
        continue
    r = verdict(n, f)
    nchecked += 1
    if r:
        ok(False, "round %s: %s reads what it should (%d bad blocks)%s"
           % (rnd, n, len(r), "".join("\n    " + x for x in r[:8])))
ok(True, "round %s: the blocks of %d datasets checked" % (rnd, nchecked))

st["live"] = [0 if v is None else v for v in ids["live"]]
st["datasets"] = {n: {"origin": listed[n], "ids": [0 if v is None else v for v in ids[n]]}
                  for n in listed if n != "live"}
json.dump(st, open(statef, "w"))
finish()
EOF

zv_log "a pool with two volumes: live (a client writes it) and idle"
truncate -s 512M "$pool"
"$ADM" create "$POOL" "$pool" >/dev/null || die "zvoladm create $POOL"
"$ADM" create -V 64M -s "$POOL/live" || die "create live"
"$ADM" create -V 16M -s "$POOL/idle" || die "create idle"
"$NBD_PY" - "$ZV_TMP/state.json" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
from sclib import *
json.dump({"live": [0] * LIVE_BLOCKS, "next_id": 1, "next_did": DRIVER_ID0,
           "next_name": 0,
           "datasets": {"idle": {"origin": "", "ids": [0] * IDLE_BLOCKS}}},
          open(sys.argv[1], "w"))
EOF

t_start=$SECONDS
for (( r = 1; r <= ROUNDS; r++ )); do
    kind=${KINDS[$(( (r - 1) % ${#KINDS[@]} ))]}
    t_min=$("$NBD_PY" -c "import random; print('%.2f' % random.Random($ZVOL_TEST_SEED * 100 + $r).uniform(0.3, 1.2))")
    zv_log "round $r: kill -9 during '$kind' (armed after ${t_min}s)"
    start_zvol "$sock" "$pool" || die "round $r: import"
    wj=$ZV_TMP/writer.$r
    dj=$ZV_TMP/driver.$r
    : >"$wj"
    : >"$dj"
    next_id=$("$NBD_PY" -c "import json; print(json.load(open('$ZV_TMP/state.json'))['next_id'])")
    PYTHONPATH=$ZV_TMP timeout 120 "$NBD_PY" "$ZV_TMP/writer.py" "$sock" "$wj" \
        $((ZVOL_TEST_SEED + r)) "$next_id" &
    wpid=$!
    track_pid "$wpid"
    for (( i = 0; i < 300; i++ )); do
        [ -s "$wj" ] && break
        sleep 0.05
    done
    PYTHONPATH=$ZV_TMP timeout 120 "$NBD_PY" "$ZV_TMP/driver.py" "$sock" "$ctl" "$ADM" \
        "$POOL" "$ZV_TMP/state.json" "$dj" $((ZVOL_TEST_SEED * 7 + r)) "$ZV_PID" \
        "$kind" "$t_min" &
    dpid=$!
    track_pid "$dpid"
    _zv_wait_exit "$dpid" 110 || :
    _zv_reap "$dpid"
    check "round $r: the driver ended normally (status $ZV_RC)" test "$ZV_RC" -eq 0
    _zv_wait_exit "$wpid" 60 || :
    _zv_reap "$wpid"
    check "round $r: the writer ended normally (status $ZV_RC)" test "$ZV_RC" -eq 0
    check "round $r: the server was killed" kill9_zvol
    rc_is 0 "round $r: zvoladm check of the pool as the crash left it" "$ADM" check "$POOL"
    check "round $r: no leak, no double allocation" \
        grep -q "leaked 0B in 0 extents, doubly allocated 0B in 0 extents, pointers at free space 0" "$ZV_TMP/adm.out"
    start_zvol "$sock" "$pool" || die "round $r: import after kill -9"
    py_checks "round $r: check everything" "$ZV_TMP/checker.py" "$sock" "$ADM" "$POOL" \
        "$ZV_TMP/state.json" "$wj" "$dj" "$r" || :
    check "round $r: clean stop" stop_zvol
    rc_is 0 "round $r: zvoladm check after the replay and a clean stop" "$ADM" check "$POOL"
    check "round $r: still no leak, no double allocation" \
        grep -q "leaked 0B in 0 extents, doubly allocated 0B in 0 extents, pointers at free space 0" "$ZV_TMP/adm.out"
done
zv_log "$ROUNDS rounds in $(( SECONDS - t_start ))s"

zv_summary
