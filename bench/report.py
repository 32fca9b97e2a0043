#!/usr/bin/python3
"""report.py: the tables and charts of bench/run-bench.sh.

    report.py default OUT ROUNDS "TARGETS" JOB...   fio runs -> tables, PNGs
    report.py txg OUT TARGET...                     txg history -> TSV, PNG
    report.py core OUT A=TSV,...[@GLOB] [B=...]    core-bench -> table
    report.py cpubound OUT MBPS NCPU [BLOCK [SAVE_US]]
                                                    CPU bound of compressed
                                                    128 KiB writes (lz4 at MBPS),
                                                    and of 4 KiB random writes
                                                    against compression off
                                                    (SAVE_US: what compression
                                                    saves a block)

(core: each side a label, its core-bench -t outputs, and optionally a
glob of its callgrind dumps.)

OUT is the run's output directory (run-bench.sh -o).  What it reads:

  OUT/json/JOB.TARGET.ROUND.json   fio's JSON of one run
  OUT/runs.tsv                     job, target, round, start, end (epoch s)
  OUT/T.txgs.raw                   samples of a zvol target's kstat txgs
                                   file: "@ EPOCH" then the table
  OUT/T.start                      epoch s at which T's engine started
                                   (estimated; see txg_history)
  OUT/core/*.tsv, *.callgrind.*    core-bench output (-t) and dumps

and writes results.md, results.csv, runs.csv, txgs-T.tsv and the PNGs
(gnuplot, pngcairo) with their data and scripts under OUT/plot/, so a
chart can be redrawn by hand ("gnuplot OUT/plot/iops.gp").  Without
gnuplot the tables are still written and the charts are skipped with a
note.  Only the standard library: /usr/bin/python3 of Debian 12.
"""
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys

# Ceilings: what a target is compared with.
TRANSPORT = "null"      # NBD + fio, nothing stored: the protocol's ceiling
DEVICE = "raw"          # fio io_uring O_DIRECT on a file: the device's
BASELINE = "file"       # nbdkit file plugin (page cache)

# Targets compared pairwise, A/B, each pair in a table of its own when
# both ran: above 1 for IOPS (below for the latency), A is faster.
PAIRS = [
    ("zvol", "zvol-b", "Before/after (zvol = ZVOL_PLUGIN, zvol-b = ZVOL_PLUGIN_B)"),
    ("zvol-rados", "rbd", "This volume on RADOS against qemu-nbd's rbd driver on the same "
     "cluster (zvol-rados/rbd)"),
]

# Short names for the chart labels.
SHORT = {
    "seq-write-128k": "sw128k",
    "rand-write-4k-qd32": "rw4k",
    "rand-write-4k-qd1-fsync": "fsync-1j",
    "rand-write-4k-qd1-fsync-8j": "fsync-8j",
    "rand-read-4k-qd32": "rr4k",
    "seq-read-128k": "sr128k",
    "fill": "fill",
}

# One colour per target, the same in every chart.
COLOR = {"null": "#8c8c8c", "memory": "#2ca02c", "file": "#17becf", "qcow2": "#ff7f0e",
         "zvol": "#d62728", "zvol-b": "#9467bd", "zvol-txg": "#8c564b", "raw": "#1f77b4",
         "rbd": "#e377c2", "zvol-rados": "#7f0000", "zvol-snap": "#bcbd22",
         "zvol-cold": "#aec7e8"}


def color(t):
    return COLOR.get(t, "#bcbd22")


PNG = "set terminal pngcairo size %d,%d font 'DejaVu Sans,10' noenhanced\n"


def load_fio(path):
    """(IOPS, MiB/s, p99 us, fsync p99 us or None) of one fio run: the sums
    of reads and writes; the p99 of completion latency (the worse of read
    and write); the p99 of fsync/fdatasync/flush latency where there were
    any."""
    with open(path) as f:
        text = f.read()
    doc = json.loads(text[text.index("{"):])      # fio may print notes first
    iops = bw = 0.0
    lat = []
    sp99 = None
    for j in doc["jobs"]:
        for d in ("read", "write"):
            iops += j[d]["iops"]
            bw += j[d]["bw_bytes"]
            if j[d]["io_bytes"]:
                lat.append(j[d]["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1000)
        s = j.get("sync", {})
        # (fio counts io_uring's fdatasyncs in lat_ns but not in total_ios)
        if s.get("total_ios") or s.get("lat_ns", {}).get("N"):
            v = s.get("lat_ns", {}).get("percentile", {}).get("99.000000")
            if v is not None:
                sp99 = max(sp99 or 0, v / 1000)
    return iops, bw / 2**20, max(lat) if lat else None, sp99


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, f="%.0f"):
    return "-" if x is None else f % x


def have_gnuplot():
    return shutil.which("gnuplot") is not None


def gnuplot(out, name, script):
    """Write OUT/plot/NAME.gp and run it (it writes OUT/NAME.png)."""
    gp = os.path.join(out, "plot", name + ".gp")
    with open(gp, "w") as f:
        f.write(script)
    if not have_gnuplot():
        return False
    r = subprocess.run(["gnuplot", gp], cwd=os.path.join(out, "plot"),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("report: gnuplot %s failed:\n%s" % (gp, r.stdout), file=sys.stderr)
        return False
    return True


def gp_str(s):
    return "'" + s.replace("'", "''") + "'"


def markdown(header, rows, left=2):
    """A markdown table, padded so that it also reads as plain text; the
    first 'left' columns are names, the others right-aligned figures."""
    cells = [header] + rows
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    num = [i >= left for i in range(len(header))]

    def line(r):
        return "| " + " | ".join(c.rjust(w[i]) if num[i] else c.ljust(w[i])
                                 for i, c in enumerate(r)) + " |"
    sep = "|" + "|".join(("-" * (w[i] + 1) + ":") if num[i] else ("-" * (w[i] + 2))
                         for i in range(len(header))) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


# ---------------------------------------------------------------- default

def headline_latency(job, m):
    """The latency a job is about: the flush's p99 for a job that flushes
    after each write, else the completion p99."""
    return m["fsync_p99"] if m["fsync_p99"] is not None else m["p99"]


def tsv_rows(out, name):
    """The lines of OUT/name split at tabs ([] when there is no such
    file)."""
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [line.rstrip("\n").split("\t") for line in f]


def read_cpu(out):
    """(job, target, round) -> (busy share of all CPUs, number of CPUs)
    during that fio run, from runs.tsv's sixth and seventh columns (runs
    of an older bench have none)."""
    cpu = {}
    for w in tsv_rows(out, "runs.tsv"):
        if len(w) >= 7:
            try:
                cpu[w[0], w[1], w[2]] = (float(w[5]), int(w[6]))
            except ValueError:
                pass
    return cpu


def cmd_default(out, rounds, targets, jobs):
    rounds = int(rounds)
    targets = targets.split()
    os.makedirs(os.path.join(out, "plot"), exist_ok=True)
    res = {}            # (job, target) -> medians and per-round values
    runs_csv = []
    failures = []
    cpu = read_cpu(out)
    for job in jobs:
        for t in targets:
            per = []
            cpu_per = []    # (busy share, machine CPU us per I/O) per round
            for r in range(1, rounds + 1):
                p = os.path.join(out, "json", "%s.%s.%d.json" % (job, t, r))
                try:
                    x = load_fio(p)
                except (OSError, ValueError, KeyError) as e:
                    failures.append("%s on %s, round %d: %s" % (job, t, r, e))
                    continue
                per.append(x)
                c = cpu.get((job, t, str(r)))
                if c is not None and x[0]:
                    cpu_per.append((c[0], c[0] * c[1] * 1e6 / x[0]))
                runs_csv.append([job, t, r] + ["" if v is None else "%.3f" % v for v in x])
            res[job, t] = {
                "busy": med(c[0] for c in cpu_per), "cpu_us": med(c[1] for c in cpu_per),
                "iops": med(x[0] for x in per), "mib": med(x[1] for x in per),
                "p99": med(x[2] for x in per), "fsync_p99": med(x[3] for x in per),
                "per": [x[0] for x in per],
                "min": min((x[0] for x in per), default=None),
                "max": max((x[0] for x in per), default=None),
                "lat_per": [headline_latency(job, {"p99": x[2], "fsync_p99": x[3]}) for x in per],
            }

    header = ["job", "target", "IOPS", "MiB/s", "p99 us", "fsync p99 us",
              "% null", "% raw", "x file", "lat x null", "lat x raw", "CPU busy %",
              "CPU us/IO", "IOPS per round"]
    rows, csv_rows = [], []
    for job in jobs:
        ceil = {c: res.get((job, c)) for c in (TRANSPORT, DEVICE, BASELINE)}
        for t in targets:
            m = res[job, t]
            lat = headline_latency(job, m)

            def share(c, pct):
                if ceil[c] is None:
                    return None
                v = ratio(m["iops"], ceil[c]["iops"])
                return None if v is None else v * (100 if pct else 1)

            def lat_x(c):
                return None if ceil[c] is None else ratio(lat, headline_latency(job, ceil[c]))
            vals = [share(TRANSPORT, True), share(DEVICE, True), share(BASELINE, False),
                    lat_x(TRANSPORT), lat_x(DEVICE)]
            rows.append([job, t, fmt(m["iops"]), fmt(m["mib"], "%.1f"), fmt(m["p99"]),
                         fmt(m["fsync_p99"]), fmt(vals[0], "%.1f"), fmt(vals[1], "%.1f"),
                         fmt(vals[2], "%.2f"), fmt(vals[3], "%.2f"), fmt(vals[4], "%.2f"),
                         fmt(None if m["busy"] is None else 100 * m["busy"], "%.0f"),
                         fmt(m["cpu_us"], "%.1f"),
                         " ".join("%.0f" % x for x in m["per"])])
            csv_rows.append([job, t] + ["" if v is None else "%.3f" % v for v in
                                        [m["iops"], m["mib"], m["p99"], m["fsync_p99"]] + vals
                                        + [m["busy"], m["cpu_us"]]]
                            + [" ".join("%.0f" % x for x in m["per"])])

    text = []
    head = os.path.join(out, "header.txt")
    if os.path.exists(head):
        with open(head) as f:
            text += [f.read().rstrip("\n"), ""]
    text += [markdown(header, rows), ""]
    text.append("IOPS and MiB/s: medians over %d rounds (interleaved: each round runs every "
                "target once); p99: completion latency, the worse of read and write; fsync p99: "
                "the flush after each write (NBD_CMD_FLUSH; fdatasync for raw); %% null, %% raw: "
                "IOPS as a share of the transport ceiling (nbdkit null) and of the device "
                "ceiling (fio io_uring O_DIRECT on a file in the same directory); x file: IOPS / "
                "the file plugin's (it writes to the page cache); lat x: the job's latency (fsync "
                "p99 where it flushes, else p99) / the ceiling's; CPU busy %%: the share of "
                "all the machine's CPU time that was busy during the run (fio, the server and "
                "the kernel together, fio's start and ramp included); CPU us/IO: that busy "
                "time per I/O (busy share x CPUs / IOPS)." % rounds)
    for a_t, b_t, what in PAIRS:
        if a_t not in targets or b_t not in targets:
            continue
        bh = ["job", "%s/%s IOPS" % (a_t, b_t), "lat ratio", "IOPS ratio per round"]
        brows = []
        for job in jobs:
            a, b = res[job, a_t], res[job, b_t]
            per = [x / y for x, y in zip(a["per"], b["per"]) if y]
            la, lb = headline_latency(job, a), headline_latency(job, b)
            brows.append([job, fmt(med(per), "%.2fx"), fmt(ratio(la, lb), "%.2fx"),
                          " ".join("%.2f" % x for x in per)])
        text.append("")
        text.append("%s: the median of the per-round IOPS ratios (each pair ran in the same "
                    "round), and the ratio of the latencies (as lat x above):" % what)
        text.append("")
        text.append(markdown(bh, brows, left=1))
    if failures:
        text.append("")
        text.append("FAILED OR MISSING RUNS:")
        text.extend("  " + f for f in failures)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job", "target", "iops", "mib_s", "p99_us", "fsync_p99_us",
                    "pct_of_null", "pct_of_raw", "x_file", "lat_x_null", "lat_x_raw",
                    "cpu_busy", "cpu_us_per_io", "iops_per_round"])
        w.writerows(csv_rows)
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job", "target", "round", "iops", "mib_s", "p99_us", "fsync_p99_us"])
        w.writerows(runs_csv)
    print("\n".join(text))

    charts = chart_bars(out, rounds, targets, jobs, res)
    charts += chart_ceiling(out, targets, jobs, res)
    return charts, failures


def panel_layout(n):
    cols = 3 if n > 4 else 2 if n > 1 else 1
    return (n + cols - 1) // cols, cols


def chart_bars(out, rounds, targets, jobs, res):
    """iops.png and latency.png: one panel per job, a bar per target."""
    made = []
    for name, what, unit, key in (
            ("iops", "IOPS", "IOPS", "iops"),
            ("latency", "p99 latency (fsync p99 for the flushing jobs)", "microseconds", "lat")):
        nr, nc = panel_layout(len(jobs))
        gp = [PNG % (460 * nc, 340 * nr + 40), "set output '../%s.png'\n" % name,
              "set style fill solid 0.85 border -1\nset boxwidth 0.65\nset grid ytics\n",
              "set datafile missing '-'\nset xtics nomirror font ',9'\n",
              "set multiplot layout %d,%d title %s\n" % (
                  nr, nc, gp_str("%s per target: median of %d rounds (whiskers: lowest "
                                 "and highest round); higher is %s" % (
                                     what, rounds, "better" if key == "iops" else "worse")))]
        for job in jobs:
            data = os.path.join(out, "plot", "%s-%s.tsv" % (name, job))
            vals = []
            with open(data, "w") as f:
                f.write("target\tvalue\tlow\thigh\tcolor\n")
                for i, t in enumerate(targets):
                    m = res[job, t]
                    if key == "iops":
                        v, lo, hi = m["iops"], m["min"], m["max"]
                    else:
                        lp = [x for x in m["lat_per"] if x is not None]
                        v = headline_latency(job, m)
                        lo, hi = (min(lp), max(lp)) if lp else (None, None)
                    vals.append(v)
                    f.write("%s\t%s\t%s\t%s\t%d\n" % (t, fmt(v, "%.3f"), fmt(lo, "%.3f"),
                                                      fmt(hi, "%.3f"), int(color(t)[1:], 16)))
            pos = [v for v in vals if v]
            logy = pos and max(pos) / min(pos) > 20
            gp.append("set title %s\nset ylabel %s\n" % (
                gp_str(job), gp_str(unit + (" (log scale)" if logy else ""))))
            gp.append("set logscale y\nset yrange [*:*]\n" if logy else
                      "unset logscale y\nset yrange [0:*]\n")
            # The value above the bar or its whisker, whichever is higher.
            gp.append("plot %s using 0:2:5:xtic(1) with boxes lc rgb variable notitle, \\\n"
                      "  '' using 0:2:3:4 with yerrorbars lc rgb 'black' ps 0 notitle, \\\n"
                      "  '' using 0:($4 > $2 ? $4 : $2):(sprintf('%%.0f', $2)) with labels "
                      "offset 0,0.6 font ',8' notitle\n" % gp_str(os.path.basename(data)))
        gp.append("unset multiplot\n")
        if gnuplot(out, name, "".join(gp)):
            made.append(name + ".png")
    return made


def chart_ceiling(out, targets, jobs, res):
    """ceiling.png: each NBD target's IOPS as a share of the two ceilings."""
    shown = [t for t in targets if t not in (TRANSPORT, DEVICE)]
    panels = [c for c in (TRANSPORT, DEVICE) if c in targets]
    if not shown or not panels:
        return []
    gp = [PNG % (1250, 420 * len(panels) + 40), "set output '../ceiling.png'\n",
          "set style data histograms\nset style histogram clustered gap 1\n",
          "set style fill solid 0.85 border -1\nset grid ytics\nset datafile missing '-'\n",
          "set key outside right top\nset xtics nomirror font ',8'\nset yrange [0:*]\n",
          "set ylabel 'percent of the ceiling'\nset xrange [-0.6:%g]\n" % (len(jobs) - 0.4),
          "set arrow 1 from graph 0, first 100 to graph 1, first 100 nohead dt 2 lc rgb 'black' front\n",
          "set multiplot layout %d,1 title 'IOPS as a share of the ceilings "
          "(medians; 100 = as fast as the ceiling)'\n" % len(panels)]
    for c in panels:
        data = os.path.join(out, "plot", "ceiling-%s.tsv" % c)
        with open(data, "w") as f:
            f.write("job\t" + "\t".join(shown) + "\n")
            for job in jobs:
                ci = res[job, c]["iops"]
                f.write(job + "\t" + "\t".join(
                    fmt(None if ratio(res[job, t]["iops"], ci) is None
                        else 100 * ratio(res[job, t]["iops"], ci), "%.2f") for t in shown) + "\n")
        title = {"null": "vs nbdkit null: the transport ceiling (NBD + fio, nothing stored)",
                 "raw": "vs raw: the device ceiling (fio io_uring O_DIRECT on the backing "
                        "file system, no NBD)"}[c]
        gp.append("set title %s\n" % gp_str(title))
        gp.append("plot " + ", ".join(
            "%s using %d%s title columnheader(%d) lc rgb '%s'" % (
                gp_str(os.path.basename(data)) if i == 0 else "''", i + 2,
                ":xtic(1)" if i == 0 else "", i + 2, color(shown[i]))
            for i in range(len(shown))) + "\n")
    gp.append("unset multiplot\n")
    return ["ceiling.png"] if gnuplot(out, "ceiling", "".join(gp)) else []


# ---------------------------------------------------------------- txg

def txg_history(out, t):
    """Merge the samples of T's txgs file: each txg's newest row (a txg is
    sampled while open, again while syncing, last when committed).  Birth
    is in ns since the engine started; T.start is when that was, in epoch
    seconds (run-bench.sh takes the middle of the time between launching
    the server and its pid file appearing, so it is good to ~0.1 s)."""
    raw = os.path.join(out, t + ".txgs.raw")
    if not os.path.exists(raw):
        return None
    rows = {}
    cols = None
    with open(raw) as f:
        for line in f:
            w = line.split()
            if not w or w[0] == "@":
                continue
            if w[0] == "txg":
                cols = w
                continue
            if cols is None or len(w) != len(cols) or not w[0].isdigit():
                continue       # a torn or foreign line: the file is hostile too
            r = dict(zip(cols, w))
            try:
                txg = int(r["txg"])
                for k in cols:
                    if k != "state":
                        r[k] = int(r[k])
            except ValueError:
                continue
            old = rows.get(txg)
            order = "OQSC"
            if old is None or order.find(r["state"]) >= order.find(old["state"]):
                rows[txg] = r
    try:
        with open(os.path.join(out, t + ".start")) as f:
            start = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        start = None
    return start, [rows[k] for k in sorted(rows)]


def read_runs(out):
    runs = []
    for w in tsv_rows(out, "runs.tsv"):
        if len(w) >= 5:
            try:
                runs.append((w[0], w[1], w[2], float(w[3]), float(w[4])))
            except ValueError:
                pass
    return runs


def cmd_txg(out, targets):
    os.makedirs(os.path.join(out, "plot"), exist_ok=True)
    runs = read_runs(out)
    t0 = min([r[3] for r in runs] + [float("inf")])
    made = []
    for t in targets:
        h = txg_history(out, t)
        if h is None:
            continue
        start, rows = h
        if start is None:
            start = t0
        t0 = min(t0, start)
    for t in targets:
        h = txg_history(out, t)
        if h is None:
            print("report: no txg samples of %s" % t, file=sys.stderr)
            continue
        start, rows = h
        if start is None:
            start = t0
        committed = [r for r in rows if r["state"] == "C"]
        tsv = os.path.join(out, "txgs-%s.tsv" % t)
        with open(tsv, "w") as f:
            f.write("txg\tclose_s\tndirty\tnwritten\totime_ms\tqtime_ms\twtime_ms\tstime_ms"
                    "\treads\twrites\tbirth_s\n")
            for r in committed:
                birth = start + r["birth"] / 1e9 - t0
                f.write("%d\t%.3f\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%.3f\n" % (
                    r["txg"], birth + r["otime"] / 1e9, r["ndirty"], r["nwritten"],
                    r["otime"] / 1e6, r["qtime"] / 1e6, r["wtime"] / 1e6, r["stime"] / 1e6,
                    r["reads"], r["writes"], birth))
        shutil.copy(tsv, os.path.join(out, "plot", os.path.basename(tsv)))
        if not committed:
            print("report: %s: no committed txg in the samples" % t, file=sys.stderr)
            continue
        # Shading: each job's span over all targets (alternating greys,
        # named at the top), and this target's own runs (blue).
        spans = {}
        for job, tt, rnd, a, b in runs:
            s = spans.setdefault(job, [a, b])
            s[0], s[1] = min(s[0], a), max(s[1], b)
        obj = []
        n = 0
        for i, (job, (a, b)) in enumerate(sorted(spans.items(), key=lambda x: x[1][0])):
            n += 1
            obj.append("set object %d rect from %.2f, graph 0 to %.2f, graph 1 behind "
                       "fc rgb '%s' fs solid noborder\n" % (
                           n, a - t0, b - t0, "#f0f0f0" if i % 2 else "#e4e4e4"))
            obj.append("set label %d %s at %.2f, graph 0.99 rotate by 90 right "
                       "font ',8' front\n" % (n, gp_str(SHORT.get(job, job)), (a + b) / 2 - t0))
        for job, tt, rnd, a, b in runs:
            if tt == t:
                n += 1
                obj.append("set object %d rect from %.2f, graph 0 to %.2f, graph 1 behind "
                           "fc rgb '#c6dbef' fs solid noborder\n" % (n, a - t0, b - t0))
        base = gp_str(os.path.basename(tsv))
        end = max([b for _, _, _, _, b in runs] + [start + (committed[-1]["birth"]
                                                            + committed[-1]["otime"]) / 1e9]) - t0
        gp = [PNG % (1400, 900), "set output '../txg-%s.png'\n" % t,
              "set grid\nset key outside right top\nset xrange [0:%.1f]\n" % (end + 1),
              "set lmargin at screen 0.07\nset rmargin at screen 0.87\n",
              "set multiplot layout 2,1 title %s\n" % gp_str(
                  "%s: txg history, each txg where it closed (%d txgs; grey bands: the jobs, "
                  "over all targets; blue: %s's own runs)" % (t, len(committed), t))]
        gp.extend(obj)
        gp.append("set title 'dirty data when the txg closed, and bytes its sync wrote'\n"
                  "set ylabel 'MiB'\nset xlabel 'seconds since the first server started (txgs at their close)'\n"
                  "set yrange [0:*]\n")
        gp.append("plot %s using 2:($3/1048576) with impulses lw 2 lc rgb '#d62728' "
                  "title 'dirty (MiB)', \\\n"
                  "  '' using 2:($4/1048576) with points pt 7 ps 0.6 lc rgb '#1f77b4' "
                  "title 'written (MiB)'\n" % base)
        gp.append("unset label\n")
        gp.append("set title 'time each txg spent open, quiescing and syncing'\n"
                  "set ylabel 'milliseconds (log scale)'\nset logscale y\nset yrange [*:*]\n")
        gp.append("plot %s using 2:($5 > 0 ? $5 : 1/0) with points pt 7 ps 0.5 lc rgb '#2ca02c' "
                  "title 'open', \\\n"
                  "  '' using 2:($6 > 0 ? $6 : 1/0) with points pt 5 ps 0.5 lc rgb '#9467bd' "
                  "title 'quiesce', \\\n"
                  "  '' using 2:($8 > 0 ? $8 : 1/0) with points pt 9 ps 0.6 lc rgb '#ff7f0e' "
                  "title 'sync'\n" % base)
        gp.append("unset multiplot\n")
        if gnuplot(out, "txg-" + t, "".join(gp)):
            made.append("txg-%s.png" % t)
        syncs = [r["stime"] / 1e6 for r in committed]
        # The file holds the newest 100 txgs and is rewritten once a
        # second: more than 100 txgs in a second leave gaps.
        missed = committed[-1]["txg"] - committed[0]["txg"] + 1 - len(committed)
        print("txg %s: %d committed txgs, %.1f MiB written, sync time median %.1f ms, max %.1f ms%s"
              % (t, len(committed), sum(r["nwritten"] for r in committed) / 2**20,
                 statistics.median(syncs), max(syncs),
                 "; %d txgs between samples not seen (over 100 a second)" % missed
                 if missed > 0 else ""))
    return made


# ---------------------------------------------------------------- core

def load_core(path):
    """{op: (ops, instr/op or None, cpu, caller, wall, miss/op)} of one
    core-bench -t run."""
    d = {}
    with open(path) as f:
        for line in f:
            w = line.rstrip("\n").split("\t")
            if len(w) != 7 or line.startswith("#"):
                continue
            try:
                d[w[0]] = (int(w[1]), None if w[2] == "-" else float(w[2]),
                           float(w[3]), float(w[4]), float(w[5]), float(w[6]))
            except ValueError:
                continue
    return d


def load_callgrind(path_glob, ops):
    """{op: instructions/op} from callgrind's dumps, each named by the
    phase (core-bench dumps once per phase)."""
    d = {}
    for p in sorted(glob.glob(path_glob)):
        name = total = None
        with open(p, errors="replace") as f:
            for line in f:
                prefix = "desc: Trigger: Client Request: "
                if line.startswith(prefix):
                    name = line[len(prefix):].strip()
                elif line.startswith("summary:") or line.startswith("totals:"):
                    try:
                        total = int(line.split()[1])
                    except (IndexError, ValueError):
                        pass
                    if line.startswith("summary:"):
                        break
        if name and total is not None and ops.get(name):
            d[name] = total / ops[name]
    return d


def cmd_core(out, sides):
    """sides: [(label, [tsv...], callgrind glob or None)]."""
    per = {}
    order = []
    for label, files, cg in sides:
        runs = [load_core(p) for p in files]
        runs = [r for r in runs if r]
        ops = {}
        for r in runs:
            for op, v in r.items():
                if op not in order:
                    order.append(op)
                ops[op] = v[0]
        cgi = load_callgrind(cg, ops) if cg else {}
        m = {}
        for op in ops:
            xs = [r[op] for r in runs if op in r]
            instr = med(x[1] for x in xs)
            src = "perf"
            if instr is None and op in cgi:
                instr, src = cgi[op], "callgrind"
            m[op] = {"ops": ops[op], "instr": instr, "src": src if instr is not None else "-",
                     "cpu": med(x[2] for x in xs), "caller": med(x[3] for x in xs),
                     "wall": med(x[4] for x in xs), "miss": med(x[5] for x in xs),
                     "n": len(xs)}
        per[label] = m
    labels = [s[0] for s in sides]
    header = ["op", "ops"]
    for lab in labels:
        header += ["%s instr/op" % lab, "%s cpu us/op" % lab, "%s caller us/op" % lab]
    if len(labels) == 2:
        header += ["instr A/B", "cpu A/B"]
    header += ["miss/op"]
    rows, csv_rows = [], []
    for op in order:
        row = [op, fmt(per[labels[0]].get(op, {}).get("ops"), "%d")]
        for lab in labels:
            m = per[lab].get(op, {})
            row += [fmt(m.get("instr")), fmt(m.get("cpu"), "%.2f"), fmt(m.get("caller"), "%.2f")]
        if len(labels) == 2:
            a, b = per[labels[0]].get(op, {}), per[labels[1]].get(op, {})
            row += [fmt(ratio(a.get("instr"), b.get("instr")), "%.3f"),
                    fmt(ratio(a.get("cpu"), b.get("cpu")), "%.2f")]
        row.append(fmt(per[labels[0]].get(op, {}).get("miss"), "%.2f"))
        rows.append(row)
        for lab in labels:
            m = per[lab].get(op)
            if m:
                csv_rows.append([lab, op, m["ops"]] + ["" if m[k] is None else "%.3f" % m[k]
                                                      for k in ("instr", "cpu", "caller",
                                                                "wall", "miss")] + [m["src"]])
    srcs = sorted({m["src"] for lab in labels for m in per[lab].values() if m["src"] != "-"})
    text = [markdown(header, rows), ""]
    names = {"perf": "the hardware counter", "callgrind": "callgrind: user space only"}
    srcs = [names.get(x, x) for x in srcs]
    text.append("instr/op: instructions per operation, all threads (%s); cpu us/op: CPU time "
                "of all threads (getrusage), the txg sync that writes the phase's data "
                "included; caller us/op: the issuing thread alone (open context); medians of "
                "%s runs; miss/op: buffer-cache misses per operation." % (
                    " and ".join(srcs) if srcs else "not measured: no perf counter, no callgrind",
                    "/".join(str(max((m["n"] for m in per[lab].values()), default=0))
                             for lab in labels)))
    if len(labels) == 2:
        text.append("A/B: A's figure over B's (below 1: A is cheaper; with A this tree and B "
                    "the build before a change, below 1 is an improvement).")
    with open(os.path.join(out, "core.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(out, "core.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["build", "op", "ops", "instr_per_op", "cpu_us_per_op", "caller_us_per_op",
                    "wall_us_per_op", "miss_per_op", "instr_source"])
        w.writerows(csv_rows)
    print("\n".join(text))


def fio_usr_us(path):
    """fio's own user CPU time per I/O (us) in one run: what generating
    the requests (refilling buffers, its bookkeeping) cost it."""
    doc = load_json(path)
    iops = sum(j[d]["iops"] for j in doc["jobs"] for d in ("read", "write"))
    usr = sum(j["usr_cpu"] for j in doc["jobs"]) / 100.0
    return usr * 1e6 / iops if iops else None


def load_json(path):
    with open(path) as f:
        text = f.read()
    return json.loads(text[text.index("{"):])


def read_tried(out):
    """(job, target, round) -> blocks the target's compressor ran on
    between the sample before that run and the one after it (growth.tsv's
    twelfth column: the pool's compress_tried less compress_aborted, the
    blocks the early abort refused, after each run of a zvol target; the
    rows of one target in the order they were taken).  The
    stats file may be a second old and a txg's compressions come at its
    sync, so some of a run's land in the target's next interval: over
    the rounds of one job they mostly stay inside it."""
    tried = {}
    last = {}
    for w in tsv_rows(out, "growth.tsv"):
        if len(w) < 12:
            continue
        try:
            v = float(w[11])
        except ValueError:
            continue
        t = w[1]
        if t in last:
            tried[w[0], t, w[2]] = max(0.0, v - last[t])
        last[t] = v
    return tried


def read_comp(out, job):
    """target -> its volume's compression property during job
    (compress.tsv)."""
    comp = {}
    for w in tsv_rows(out, "compress.tsv"):
        if len(w) >= 4 and w[0] == job:
            comp[w[1]] = w[3]
    return comp


def run_writes(path):
    """Writes one fio run made, its ramp included (fio counts none of
    the ramp's: they are taken at the measured rate)."""
    doc = load_json(path)
    g = doc.get("global options", {})
    secs = float(g.get("runtime", 0) or 0) + float(g.get("ramp_time", 0) or 0)
    return sum(j["write"]["iops"] for j in doc["jobs"]) * secs


def cpubound_random(out, mbps, ncpu, blk, save=None):
    """What the processors allow a compressed volume's 4 KiB random
    writes against the same volume without compression, from the run's
    own figures: a write costs at least what it costs without
    compression (the off target's CPU per write), plus the compressions
    it leads to (blocks the compressor ran on per write, counted by the
    engine; a refusal by the early abort costs only its sample, left out)
    at lz4's own speed on a whole block.  What compression saves
    in return (a checksum of fewer bytes; the device's transfer, no CPU
    here) is a fraction of a microsecond a block, left out.  The ratio
    is the best lz4/off can reach where both keep the processors equally
    busy.

    With 'save' (microseconds of CPU that compression saves a block,
    measured by run-bench.sh's dev_saving on the device path and the
    checksum), a second line gives compression's net cost a block
    (t - save: above 0, it costs more CPU than it saves, whatever the
    engine, and pays for itself only where the device sets the rate),
    and what the model above predicts with the savings taken in and
    every CPU busy: c / (busy * (c + k * (t - save))) of off, where off
    ran busy of the time at c us a write."""
    job = "rand-write-4k-qd32"
    comp = read_comp(out, job)
    offs = [t for t, c in comp.items() if c == "off"]
    ons = [t for t, c in comp.items() if c not in ("off", "")]
    if not offs or not ons or mbps <= 0 or blk <= 0:
        return
    cpu = read_cpu(out)
    tried = read_tried(out)
    per = {}
    for (j, t, r), (busy, n) in cpu.items():
        if j != job or t not in comp:
            continue
        path = os.path.join(out, "json", "%s.%s.%s.json" % (j, t, r))
        try:
            x = load_fio(path)
            writes = run_writes(path)
        except (OSError, ValueError, KeyError):
            continue
        if not x[0]:
            continue
        d = per.setdefault(t, {"iops": [], "us": [], "round": {}, "tried": 0.0,
                               "writes": 0.0})
        d["iops"].append(x[0])
        d["round"][r] = x[0]
        d["us"].append(busy * n * 1e6 / x[0])
        d.setdefault("busy", []).append(busy)
        if (j, t, r) in tried:
            d["tried"] += tried[j, t, r]
            d["writes"] += writes
    o = offs[0]
    if o not in per:
        return
    c_off = med(per[o]["us"])
    t_blk = blk / mbps
    for t in sorted(ons):
        if t not in per or not per[t]["writes"]:
            continue
        k = per[t]["tried"] / per[t]["writes"]
        cost = c_off + k * t_blk
        got = med([per[t]["round"][r] / per[o]["round"][r]
                   for r in per[t]["round"] if per[o]["round"].get(r)])
        print("- CPU bound of compressed 4 KiB random writes (%s, %s): %d CPUs / (%.1f us, "
              "%s's CPU per write without compression, + %.2f compressions per write x "
              "%.1f us, lz4 alone on a %d-byte block) = %.0f IOPS; at equal CPU use, "
              "%s/%s can reach at most %.2fx; measured %s (median of per-round ratios; "
              "%.0f against %.0f IOPS, %.1f against %.1f us of CPU per write)"
              % (t, comp[t], ncpu, c_off, o, k, t_blk, blk, ncpu * 1e6 / cost,
                 t, o, c_off / cost, fmt(got, "%.2fx"),
                 med(per[t]["iops"]), med(per[o]["iops"]), med(per[t]["us"]), c_off))
        if save is None:
            continue
        busy = med(per[o]["busy"])
        net = t_blk - save
        if busy <= 0 or c_off + k * net <= 0:
            continue
        print("- Compression's net cost a block (%s, %s): lz4 %.1f us, saved on the device "
              "path and the checksum %.1f us: %.1f us more than it saves, whatever the "
              "engine%s; if each compression added that to a write's CPU and every CPU "
              "were busy (%s ran %.0f%% busy), %s/%s would reach "
              "%.1f / (%.2f x (%.1f + %.2f x %.1f)) = %.2fx (a model: a measured ratio above "
              "it means compressed writes cost less than it assumes)"
              % (t, comp[t], t_blk, save, net,
                 "" if net > 0 else " (it pays for itself: no bound below 1)",
                 o, 100 * busy, t, o, c_off, busy, c_off, k, net,
                 c_off / (busy * (c_off + k * net))))


def cmd_cpubound(out, mbps, ncpu, blk=16384, save=None):
    """What the processors allow compressed 128 KiB sequential writes at
    most, from the run's own figures (seq-write-128k on null and raw):
    a request costs at least the transport (null's CPU per request), the
    compression of 128 KiB at lz4's own speed, and its device write
    (raw's CPU per request less fio's own user time, which null's figure
    counts already).  The same without the compression bounds any
    volume's uncompressed writes, as a share of raw's rate.  Beside
    them, each zvol target's rate and cost."""
    job = "seq-write-128k"
    cpu = read_cpu(out)
    per = {}
    for (j, t, r), (busy, n) in cpu.items():
        if j != job:
            continue
        try:
            x = load_fio(os.path.join(out, "json", "%s.%s.%s.json" % (j, t, r)))
        except (OSError, ValueError, KeyError):
            continue
        if not x[0]:
            continue
        d = per.setdefault(t, {"iops": [], "us": [], "busy": [], "fio": []})
        d["iops"].append(x[0])
        d["us"].append(busy * n * 1e6 / x[0])
        d["busy"].append(busy)
        try:
            d["fio"].append(fio_usr_us(os.path.join(out, "json", "%s.%s.%s.json" % (j, t, r))))
        except (OSError, ValueError, KeyError):
            pass
    if "null" not in per or mbps <= 0:
        print("- CPU bound of compressed 128 KiB writes: not computed (no %s run on null)" % job)
        cpubound_random(out, mbps, ncpu, blk, save)
        return
    tr = med(per["null"]["us"])
    comp = 131072 / mbps
    dev = None
    if "raw" in per:
        dev = max(0.0, med(per["raw"]["us"]) - (med(per["raw"]["fio"]) or 0))
    cost = tr + comp + (dev or 0)
    ceil = med(per["null"]["iops"])
    if "raw" in per:
        ceil = min(ceil, med(per["raw"]["iops"]))
    print("- CPU bound of compressed 128 KiB sequential writes: %d CPUs / (%.0f us, null's CPU "
          "per request, + %.0f us, lz4 alone on 128 KiB%s) = %.0f IOPS; uncompressed ceiling "
          "(the lower of null and raw) %.0f IOPS"
          % (ncpu, tr, comp, "" if dev is None else
             ", + %.0f us, raw's CPU per request less fio's own user time" % dev,
             ncpu * 1e6 / cost, ceil))
    if dev is not None:
        # Without compression a volume's write still pays the transport
        # and its device write: the two ceilings' costs added.
        # (A volume that joins writes into larger device requests pays
        # less than raw per request; null's own rate bounds it anyway.)
        plain = ncpu * 1e6 / (tr + dev)
        raw = med(per["raw"]["iops"])
        print("- CPU bound of uncompressed 128 KiB sequential writes: %d CPUs / (%.0f us, "
              "null's CPU per request, + %.0f us, raw's less fio's own user time) = %.0f "
              "IOPS, %.2fx raw's %.0f, for a volume whose device writes cost what raw's do; "
              "the transport alone (null) reached %.0f, %.2fx raw: no volume served through "
              "it writes faster"
              % (ncpu, tr, dev, plain, plain / raw, raw, med(per["null"]["iops"]),
                 med(per["null"]["iops"]) / raw))
    for t in sorted(per):
        if t.startswith("zvol"):
            d = per[t]
            print("  - %s: %.0f IOPS, %.0f us of CPU per request, %.0f%% busy"
                  % (t, med(d["iops"]), med(d["us"]), 100 * med(d["busy"])))
    cpubound_random(out, mbps, ncpu, blk, save)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, out = argv[1], argv[2]
    if cmd == "default" and len(argv) >= 6:
        charts, failures = cmd_default(out, argv[3], argv[4], argv[5:])
        charts += cmd_txg(out, [t for t in argv[4].split() if t.startswith("zvol")])
        print_charts(out, charts)
        return 1 if failures else 0
    if cmd == "txg":
        print_charts(out, cmd_txg(out, argv[3:]))
        return 0
    if cmd == "cpubound" and len(argv) in (5, 6, 7):
        cmd_cpubound(out, float(argv[3]), int(argv[4]),
                     int(argv[5]) if len(argv) >= 6 else 16384,
                     float(argv[6]) if len(argv) == 7 else None)
        return 0
    if cmd == "core":
        # core OUT LABEL=tsv,tsv[@callgrind-glob] ...
        sides = []
        for spec in argv[3:]:
            label, rest = spec.split("=", 1)
            files, cg = (rest.split("@", 1) + [None])[:2]
            sides.append((label, [p for p in files.split(",") if p], cg))
        cmd_core(out, sides)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


def print_charts(out, charts):
    if charts:
        print("charts: " + " ".join(os.path.join(out, c) for c in charts))
    elif not have_gnuplot():
        print("charts: none (gnuplot not found: apt-get install gnuplot-nox; the data and "
              "scripts are in %s)" % os.path.join(out, "plot"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
