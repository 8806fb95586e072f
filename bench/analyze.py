#!/usr/bin/env python3
"""Summarise a scripts/bench run: CSVs, gnuplot PNGs and README.md.

    bench/analyze.py RAW_DIR RESULTS_DIR

RAW_DIR is what the guests wrote (cost-*.csv, stall-*.csv and the stall
records stall-*.bin, fleet-*.csv, meta-*.txt, run.txt). Medians and
percentiles pool every read of a cell over the rounds; the stock/series
ratio also gets its value per round and a bootstrap 90% interval, so that
noise can be told from a difference. Standard library only, plus gnuplot.
"""
import array
import csv
import glob
import math
import os
import random
import re
import subprocess
import sys

RAW, OUT = sys.argv[1], sys.argv[2]
KERNELS = ("stock", "series")
METHODS = ("smaps", "awk", "rollup", "status", "maps")
COND_ORDER = ("none", "status:1", "status:2", "rollup:1", "rollup:2")


def pct(v, q):
    """Nearest-rank Q-quantile of V (unsorted)."""
    if not v:
        return float("nan")
    s = sorted(v)
    k = max(1, min(len(s), math.ceil(q * len(s) - 1e-9)))
    return s[k - 1]


def med(v):
    """Median (mean of the middle two for an even count)."""
    if not v:
        return float("nan")
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def fmt(x, nd=2):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.{nd}f}"


def lsq(xs, ys):
    """Least squares y = a + b x; returns (a, b, r2)."""
    n = len(xs)
    if n < 2:
        return (float("nan"),) * 3
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    b = sxy / sxx if sxx else float("nan")
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return a, b, (1 - res / ss) if ss else float("nan")


def lsq2(x1, x2, ys):
    """Least squares y = a + b x1 + c x2 (normal equations)."""
    n = len(ys)
    if n < 3:
        return (float("nan"),) * 4
    rows = [(1.0, p, q) for p, q in zip(x1, x2)]
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    v = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(3)]
    # Gaussian elimination with partial pivoting
    for i in range(3):
        p = max(range(i, 3), key=lambda k: abs(m[k][i]))
        m[i], m[p] = m[p], m[i]
        v[i], v[p] = v[p], v[i]
        if abs(m[i][i]) < 1e-300:
            return (float("nan"),) * 4
        for k in range(i + 1, 3):
            f = m[k][i] / m[i][i]
            for j in range(i, 3):
                m[k][j] -= f * m[i][j]
            v[k] -= f * v[i]
    c = [0.0] * 3
    for i in (2, 1, 0):
        c[i] = (v[i] - sum(m[i][j] * c[j] for j in range(i + 1, 3))) / m[i][i]
    my = sum(ys) / n
    ss = sum((y - my) ** 2 for y in ys)
    res = sum((y - c[0] - c[1] * p - c[2] * q) ** 2 for p, q, y in zip(x1, x2, ys))
    return c[0], c[1], c[2], (1 - res / ss) if ss else float("nan")


def boot_ratio(a, b, iters=2000, seed=1):
    """Bootstrap 90% interval of median(a) / median(b)."""
    if len(a) < 3 or len(b) < 3:
        return float("nan"), float("nan")
    rnd = random.Random(seed)
    rs = []
    for _ in range(iters):
        ra = med([a[rnd.randrange(len(a))] for _ in a])
        rb = med([b[rnd.randrange(len(b))] for _ in b])
        rs.append(ra / rb)
    return pct(rs, 0.05), pct(rs, 0.95)


def read_kv(path):
    """KEY,VALUE lines; "clock,NAME,VALUE" lines give NAME."""
    d = {}
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.rstrip("\n").partition(",")
            if k == "clock":
                k, _, v = v.partition(",")
            d.setdefault(k, v)
    return d


# ------------------------------------------------------------------ input
run = read_kv(os.path.join(RAW, "run.txt"))
loads = [l.rstrip("\n").split(",", 2)[1:] for l in open(os.path.join(RAW, "run.txt"))
         if l.startswith("load,")]
metas = {}
for p in sorted(glob.glob(os.path.join(RAW, "meta-*.txt"))):
    tag = os.path.basename(p)[5:-4]
    metas[tag] = read_kv(p)

# cost samples: key (kernel, vmas, rss, method) -> {round: [ms]}
cost = {}
cellinfo = {}  # (kernel, vmas, rss) -> (nvmas, rss_kb)
fields = {}    # (vmas, rss) -> dict of the rollup fields (series, round 1)
for p in sorted(glob.glob(os.path.join(RAW, "cost-*.csv"))):
    m = re.match(r"cost-(\w+)-r(\d+)\.csv", os.path.basename(p))
    kern, rnd = m.group(1), int(m.group(2))
    for row in csv.reader(open(p)):
        if row[0] == "fields" and kern == "series":
            fields.setdefault((int(row[1]), int(row[2])),
                              dict(f.split("=") for f in row[6:]))
        if row[0] != "cost":
            continue
        vm, rs, nv, rkb, meth, _, ns, _pss = row[1:]
        key = (kern, int(vm), int(rs), meth)
        cost.setdefault(key, {}).setdefault(rnd, []).append(int(ns) / 1e6)
        cellinfo[(kern, int(vm), int(rs))] = (int(nv), int(rkb))


def samples(kern, vm, rs, meth, rnd=None):
    d = cost.get((kern, vm, rs, meth), {})
    if rnd is not None:
        return d.get(rnd, [])
    return [x for r in sorted(d) for x in d[r]]


cells = sorted({(k[1], k[2]) for k in cost if k[0] == "series"})
rounds = sorted({r for d in cost.values() for r in d})
os.makedirs(OUT, exist_ok=True)

# ------------------------------------------------------------ cost tables
with open(os.path.join(OUT, "cost-samples.csv"), "w") as f:
    f.write("kernel,round,vmas,rss_mib,method,ms\n")
    for (kern, vm, rs, meth), d in sorted(cost.items()):
        for r in sorted(d):
            for x in d[r]:
                f.write(f"{kern},{r},{vm},{rs},{meth},{x:.4f}\n")

with open(os.path.join(OUT, "cost-long.csv"), "w") as f:
    f.write("kernel,vmas,rss_mib,nvmas,rss_kb,method,n,median_ms,p90_ms,min_ms\n")
    for (kern, vm, rs, meth) in sorted(cost):
        v = samples(kern, vm, rs, meth)
        nv, rkb = cellinfo[(kern, vm, rs)]
        f.write(f"{kern},{vm},{rs},{nv},{rkb},{meth},{len(v)},{med(v):.4f},"
                f"{pct(v, 0.9):.4f},{min(v):.4f}\n")

rows = []
for vm, rs in cells:
    nv, rkb = cellinfo[("series", vm, rs)]
    r = {"vmas": vm, "rss": rs, "nvmas": nv, "rss_mib": rkb / 1024}
    for name, kern, meth in (("smaps", "series", "smaps"), ("awk", "series", "awk"),
                             ("ser", "series", "rollup"), ("sto", "stock", "rollup"),
                             ("status", "series", "status"),
                             ("smaps_sto", "stock", "smaps"), ("awk_sto", "stock", "awk"),
                             ("status_sto", "stock", "status")):
        v = samples(kern, vm, rs, meth)
        r[name] = med(v)
        r[name + "_p90"] = pct(v, 0.9)
        r[name + "_n"] = len(v)
    r["r13"] = r["smaps"] / r["ser"]
    r["r23"] = r["awk"] / r["ser"]
    r["r34"] = r["ser"] / r["sto"]
    r["r35"] = r["ser"] / r["status"]
    r["r13_stock"] = r["smaps_sto"] / r["sto"]
    r["r34_round"] = {}
    for rd in rounds:
        a, b = samples("series", vm, rs, "rollup", rd), samples("stock", vm, rs, "rollup", rd)
        r["r34_round"][rd] = med(a) / med(b) if a and b else float("nan")
    r["r34_ci"] = boot_ratio(samples("series", vm, rs, "rollup"),
                             samples("stock", vm, rs, "rollup"))
    # The same ratio with each boot's speed divided out: rollup over maps
    # (code the series does not change) of the same cell and boot.
    r["r34n_round"] = {}
    for rd in rounds:
        a, am = samples("series", vm, rs, "rollup", rd), samples("series", vm, rs, "maps", rd)
        b, bm = samples("stock", vm, rs, "rollup", rd), samples("stock", vm, rs, "maps", rd)
        if a and am and b and bm:
            r["r34n_round"][rd] = (med(a) / med(am)) / (med(b) / med(bm))
    nr = list(r["r34n_round"].values())
    r["r34n"] = math.exp(sum(map(math.log, nr)) / len(nr)) if nr else float("nan")
    r["r34min"] = min(samples("series", vm, rs, "rollup")) / min(samples("stock", vm, rs, "rollup"))
    r["maps_ratio"] = med(samples("series", vm, rs, "maps")) / med(samples("stock", vm, rs, "maps"))
    host = {m: med(samples("host", vm, rs, m)) for m in METHODS}
    r["host"] = host
    rows.append(r)

with open(os.path.join(OUT, "cost.csv"), "w") as f:
    f.write("vmas,rss_mib,nvmas,rss_mib_actual,"
            "smaps_ms,smaps_p90,awk_ms,awk_p90,rollup_series_ms,rollup_series_p90,"
            "rollup_stock_ms,rollup_stock_p90,status_ms,status_p90,"
            "r13_smaps_over_rollup,r23_awk_over_rollup,r34_series_over_stock,"
            "r34_ci05,r34_ci95,r35_rollup_over_status,r34_maps_normalised,maps_series_over_stock,r34_fastest_read,"
            + ",".join(f"r34_round{rd}" for rd in rounds)
            + ",host_r13,host_r23,host_r35\n")
    for r in rows:
        h = r["host"]
        vals = [r["vmas"], r["rss"], r["nvmas"], round(r["rss_mib"], 1),
                r["smaps"], r["smaps_p90"], r["awk"], r["awk_p90"],
                r["ser"], r["ser_p90"], r["sto"], r["sto_p90"],
                r["status"], r["status_p90"], r["r13"], r["r23"], r["r34"],
                r["r34_ci"][0], r["r34_ci"][1], r["r35"], r["r34n"], r["maps_ratio"], r["r34min"]]
        vals += [r["r34_round"][rd] for rd in rounds]
        vals += [h["smaps"] / h["rollup"], h["awk"] / h["rollup"], h["rollup"] / h["status"]]
        f.write(",".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in vals) + "\n")

# ------------------------------------------------------------------- fits
fits = []
for kern, meth, label in (("series", "smaps", "1. smaps + C parser"),
                          ("series", "awk", "2. awk over smaps"),
                          ("series", "rollup", "3. series smaps_rollup"),
                          ("stock", "rollup", "4. stock smaps_rollup"),
                          ("series", "status", "5. status VmRSS"),
                          ("host", "smaps", "host: smaps + C parser"),
                          ("host", "rollup", "host: smaps_rollup")):
    vx, vy, gx, gy, ax, ag, ay = [], [], [], [], [], [], []
    for vm, rs in cells:
        v = samples(kern, vm, rs, meth)
        if not v or (kern, vm, rs) not in cellinfo:
            continue
        nv, rkb = cellinfo[(kern, vm, rs)]
        y = med(v)
        if rs == 16:
            vx.append(nv), vy.append(y)
        if vm == 4000:
            gx.append(rkb / 1048576), gy.append(y)
        ax.append(nv), ag.append(rkb / 1048576), ay.append(y)
    if not ay:
        continue
    a1, b1, r1 = lsq(vx, vy)
    a2, b2, r2 = lsq(gx, gy)
    a3, b3, c3, r3 = lsq2(ax, ag, ay)
    fits.append(dict(kern=kern, meth=meth, label=label,
                     vma_us=b1 * 1000, vma_icpt=a1, vma_r2=r1, vma_n=len(vx),
                     gib_ms=b2, gib_icpt=a2, gib_r2=r2, gib_n=len(gx),
                     j_icpt=a3, j_vma_us=b3 * 1000, j_gib_ms=c3, j_r2=r3))
with open(os.path.join(OUT, "fit.csv"), "w") as f:
    f.write("kernel,method,per_vma_us,vma_intercept_ms,vma_r2,vma_points,"
            "per_gib_ms,gib_intercept_ms,gib_r2,gib_points,"
            "joint_intercept_ms,joint_per_vma_us,joint_per_gib_ms,joint_r2\n")
    for x in fits:
        f.write(f"{x['kern']},{x['meth']},{x['vma_us']:.4f},{x['vma_icpt']:.4f},"
                f"{x['vma_r2']:.4f},{x['vma_n']},{x['gib_ms']:.4f},{x['gib_icpt']:.4f},"
                f"{x['gib_r2']:.4f},{x['gib_n']},{x['j_icpt']:.4f},{x['j_vma_us']:.4f},"
                f"{x['j_gib_ms']:.4f},{x['j_r2']:.4f}\n")

# ------------------------------------------------------------------ stall
stall_csv = {}  # (kern, vmas, rss, cond) -> list of per-round rows
for p in sorted(glob.glob(os.path.join(RAW, "stall-*.csv"))):
    m = re.match(r"stall-(\w+)-r(\d+)\.csv", os.path.basename(p))
    kern, rnd = m.group(1), int(m.group(2))
    for row in csv.reader(open(p)):
        if row[0] != "stall":
            continue
        vm, rs, nv, rkb, cond, nr, ops, p50, p99, mx, reads, rp50, rp99 = row[1:]
        stall_csv.setdefault((kern, int(vm), rs, cond), []).append(
            dict(round=rnd, nvmas=int(nv), rss_kb=int(rkb), ops=int(ops),
                 p99=int(p99) / 1e3, reads=int(reads), rp50=int(rp50) / 1e6,
                 rp99=int(rp99) / 1e6))

stall = []
for (kern, vm, rs, cond), lst in sorted(stall_csv.items()):
    tot, mm, tch, mu, per_round = [], [], [], [], {}
    for x in lst:
        path = os.path.join(RAW, f"stall-{kern}-r{x['round']}-{vm}-{rs}-{cond.replace(':', '_')}.bin")
        a = array.array("I")
        with open(path, "rb") as f:
            a.frombytes(f.read())
        t = [(a[i] + a[i + 1] + a[i + 2]) / 1e3 for i in range(0, len(a) - 2, 3)]
        tot += t
        mm += [a[i] / 1e3 for i in range(0, len(a) - 2, 3)]
        tch += [a[i + 1] / 1e3 for i in range(0, len(a) - 2, 3)]
        mu += [a[i + 2] / 1e3 for i in range(0, len(a) - 2, 3)]
        per_round[x["round"]] = pct(t, 0.99)
    stall.append(dict(kern=kern, vmas=vm, rss=rs, cond=cond, ops=len(tot),
                      p50=pct(tot, .5), p90=pct(tot, .9), p99=pct(tot, .99),
                      p999=pct(tot, .999), max=max(tot) if tot else float("nan"),
                      mmap_p99=pct(mm, .99), touch_p99=pct(tch, .99), munmap_p99=pct(mu, .99),
                      p99_round=per_round, reads=sum(x["reads"] for x in lst),
                      read_p50=med([x["rp50"] for x in lst if x["reads"]]),
                      rounds=len(lst)))
with open(os.path.join(OUT, "stall.csv"), "w") as f:
    f.write("kernel,vmas,rss_mib,condition,rounds,ops,p50_us,p90_us,p99_us,p999_us,max_us,"
            "mmap_p99_us,touch_p99_us,munmap_p99_us,reader_reads,reader_read_p50_ms,"
            + ",".join(f"p99_round{rd}_us" for rd in rounds) + "\n")
    for s in stall:
        f.write(f"{s['kern']},{s['vmas']},{s['rss']},{s['cond']},{s['rounds']},{s['ops']},"
                f"{s['p50']:.1f},{s['p90']:.1f},{s['p99']:.1f},{s['p999']:.1f},{s['max']:.1f},"
                f"{s['mmap_p99']:.1f},{s['touch_p99']:.1f},{s['munmap_p99']:.1f},"
                f"{s['reads']},{s['read_p50']:.3f},"
                + ",".join(f"{s['p99_round'].get(rd, float('nan')):.1f}" for rd in rounds) + "\n")


def stall_get(kern, vm, rs, cond):
    for s in stall:
        if (s["kern"], s["vmas"], s["rss"], s["cond"]) == (kern, vm, rs, cond):
            return s
    return None




def rss_key(rs):
    """RSS_MIB as bench-target takes it: 512, or 512h for a heap layout."""
    return (int(rs.rstrip("h")), rs.endswith("h"))


def size_label(vm, rs):
    mib = rs.rstrip("h")
    if rs.endswith("h"):
        return f"{vm} VMAs, {mib} MiB resident, the anonymous half in one VMA"
    return f"{vm} VMAs, {mib} MiB resident, spread over the VMAs"


def stall_pairs(vm, rs):
    """Per rollup condition: it, stock and series, and the status control."""
    for c in ("rollup:1", "rollup:2"):
        ctl = "status" + c[-2:]
        yield (c, stall_get("stock", vm, rs, c), stall_get("series", vm, rs, c),
               stall_get("stock", vm, rs, ctl), stall_get("series", vm, rs, ctl))


stall_sizes = sorted({(s["vmas"], s["rss"]) for s in stall},
                     key=lambda x: (x[0], rss_key(x[1])))

# ------------------------------------------------------------------ fleet
fleet = {}
fleet_round = {}  # (kernel, round, method) -> [ms]
for p in sorted(glob.glob(os.path.join(RAW, "fleet-*.csv"))):
    m = re.match(r"fleet-(\w+)-r(\d+)\.csv", os.path.basename(p))
    kern = m.group(1)
    for row in csv.reader(open(p)):
        if row[0] != "fleet":
            continue
        n, meth, _, ns, pids, ok = row[1:]
        fleet_round.setdefault((kern, int(m.group(2)), meth), []).append(int(ns) / 1e6)
        d = fleet.setdefault((kern, meth), dict(ms=[], pids=[], ok=[], n=int(n)))
        d["ms"].append(int(ns) / 1e6)
        d["pids"].append(int(pids))
        d["ok"].append(int(ok))
with open(os.path.join(OUT, "fleet.csv"), "w") as f:
    f.write("kernel,method,processes_spawned,pids_swept,pids_read,sweeps,median_ms,p90_ms\n")
    for (kern, meth), d in sorted(fleet.items()):
        f.write(f"{kern},{meth},{d['n']},{med(d['pids']):.0f},{med(d['ok']):.0f},"
                f"{len(d['ms'])},{med(d['ms']):.3f},{pct(d['ms'], 0.9):.3f}\n")

# ------------------------------------------------------------------ plots
plots = []
gp = os.path.join(RAW, "plots.gp")
stall_dat = []
for vm, rs in stall_sizes:
    dat = os.path.join(RAW, f"stall-{vm}-{rs}.dat")
    with open(dat, "w") as f:
        f.write("# cond stock_p50 series_p50 stock_p99 series_p99 stock_max series_max\n")
        for c in COND_ORDER:
            a, b = stall_get("stock", vm, rs, c), stall_get("series", vm, rs, c)
            if not a or not b:
                continue
            f.write(f'"{c}" {a["p50"]:.1f} {b["p50"]:.1f} {a["p99"]:.1f} {b["p99"]:.1f} '
                    f'{a["max"]:.1f} {b["max"]:.1f}\n')
    stall_dat.append((vm, rs, dat))
with open(gp, "w") as g:
    g.write('set terminal pngcairo noenhanced size 900,600 font "sans,10"\n'
            'set datafile separator ","\nset key top left\nset grid\n'
            'set logscale y\nset ylabel "time per read (ms, median; TCG guest)"\n')
    csvp = os.path.join(OUT, "cost.csv")
    lines = ('using {x}:5 with linespoints title "1. smaps + C parser (series)", '
             '"" using {x}:7 with linespoints title "2. awk over smaps (series)", '
             '"" using {x}:9 with linespoints title "3. smaps_rollup (series)", '
             '"" using {x}:11 with linespoints dt 2 title "4. smaps_rollup (stock)", '
             '"" using {x}:13 with linespoints title "5. status VmRSS (series)"')
    g.write(f'set output "{OUT}/cost-vs-vmas.png"\nset logscale x\n'
            'set title "Cost of one read against VMAs (16 MiB resident)"\n'
            'set xlabel "VMAs in the target"\n'
            f'plot "< awk -F, \'$2 == 16\' {csvp}" {lines.format(x=3)}\n')
    g.write(f'set output "{OUT}/cost-vs-rss.png"\n'
            'set title "Cost of one read against resident memory (4,000 VMAs)"\n'
            'set xlabel "resident memory (MiB)"\n'
            f'plot "< awk -F, \'$1 == 4000\' {csvp}" {lines.format(x=4)}\n')
    plots += ["cost-vs-vmas.png", "cost-vs-rss.png"]
    for vm, rs, dat in stall_dat:
        name = f"stall-{vm}-{rs}.png"
        g.write(f'set output "{OUT}/{name}"\nunset logscale x\nset datafile separator whitespace\n'
                'set style data histogram\nset style histogram cluster gap 1\n'
                'set style fill solid 0.8 border -1\nset boxwidth 0.9\nset key top left\n'
                f'set title "Target mmap + touch 64 KiB + munmap, {size_label(vm, rs)}, '
                'while N readers loop"\n'
                'set ylabel "latency per operation (us, log)"\nset xlabel "readers"\n'
                f'plot "{dat}" using 2:xtic(1) title "stock p50" lc rgb "#9ecae1", '
                '"" using 3 title "series p50" lc rgb "#fdae6b", '
                '"" using 4 title "stock p99" lc rgb "#3182bd", '
                '"" using 5 title "series p99" lc rgb "#e6550d", '
                '"" using 6 title "stock max" lc rgb "#08519c", '
                '"" using 7 title "series max" lc rgb "#a63603"\n'
                'set datafile separator ","\n')
        plots.append(name)
if subprocess.call(["gnuplot", gp]) != 0:
    sys.exit("gnuplot failed")

# ----------------------------------------------------------------- README
def cell_row(vm, rs):
    for r in rows:
        if (r["vmas"], r["rss"]) == (vm, rs):
            return r
    return None


out = []
w = out.append
w("# smaps_rollup benchmarks\n")
w("Generated by `bench/analyze.py` from one run of `scripts/bench` "
  f"(plan **{run.get('plan')}**, {run.get('rounds')} round(s), "
  f"{run.get('started')} to {run.get('finished', '?')}).\n")
w("**Every timing here was taken in a QEMU guest under TCG** (binary translation, "
  "no KVM), 2 vCPUs on a 2-core host that other builds share. TCG inflates "
  "kernel and user code by different, unknown factors, so absolute times are "
  "not hardware times: **only ratios measured in the same guest are meaningful**, "
  "and even they are distorted (see Caveats). The host-kernel reference column "
  "was measured natively on the host's own kernel for comparison.\n")
w("Reproduce: `make bench` (= `scripts/bench`, 20-25 min with 4 rounds on a loaded 2-core host), or "
  "`QUICK=1 scripts/bench` for a reduced smoke run (results in build/bench-quick). "
  "The CSVs and plots in this directory come from that command; the raw per-boot "
  "output stays in build/scratch/bench/RUN.\n")

w("## Setup\n")
w(f"- Kernels: stock `{run.get('stock_image', '?').split(',')[0]}`, "
  f"series `{run.get('series_image', '?').split(',')[0]}`.")
w(f"- Guest: `scripts/vm-run -m {run.get('guest_mem_mib')} -c 2`, TCG, `-cpu max`; "
  "the programs in bench/ are static (`gcc -static -O2`).")
w("- Boot order (interleaved): " + ", ".join(
    f"{t} (host load {l})" for t, l in loads) + ".")
w("- Target (bench/target.c): the VMA count includes the process's own few; "
  "resident memory is half anonymous (MADV_NOHUGEPAGE, so 4 KiB PTEs), a quarter "
  "file-backed (a sparse file on the 9p scratch mount, read-faulted), a quarter "
  "shmem (memfd). Each mapping is followed by a hole so none merge; with more "
  "mappings than resident pages the extra mappings stay empty.")
if fields:
    k = (4000, 16) if (4000, 16) in fields else sorted(fields)[0]
    f_ = fields[k]
    w(f"- Example, {k[0]} VMAs / {k[1]} MiB, series rollup: Rss {f_['Rss']} kB, "
      f"Pss_Anon {f_['Pss_Anon']}, Pss_File {f_['Pss_File']}, Pss_Shmem {f_['Pss_Shmem']} kB.")
w("- Methods: 1 = read /proc/PID/smaps in 256 KiB read()s and sum every rollup field "
  "with a hand-written C parser; 2 = fork+exec `awk` (mawk) summing every `kB` field "
  "of smaps (the 2016 method, process start included); 3/4 = read and parse "
  "smaps_rollup on the series/stock kernel; 5 = read /proc/PID/status and parse VmRSS. "
  "Reads of one cell alternate between methods. Medians and p90 pool all reads of "
  "all rounds (rounds after the first repeat only rollup, status and maps).\n")

w("### Guest clock\n")
w("| boot | kernel (uname -r -v) | clocksource | clock_getres | smallest delta | median delta | run s |")
w("|---|---|---|---|---|---|---:|")
for tag, m in sorted(metas.items()):
    w(f"| {tag} | {m.get('uname')} | {m.get('clocksource')} | {m.get('getres_ns')} ns | "
      f"{m.get('min_delta_ns')} ns | {m.get('median_delta_ns')} ns | {m.get('done', '?')} |")
w("")
w("The smallest observed delta between consecutive `clock_gettime(CLOCK_MONOTONIC)` "
  "calls is the effective resolution; it is far below the shortest operation timed "
  "here (the fastest, status, takes tenths of a millisecond under TCG).\n")

# bars
w("## Bars\n")
r4 = cell_row(4000, 16)
if r4:
    ok = r4["r13"] >= 12
    w(f"- **Bar 1: series rollup ≥ 12x faster than smaps + C parser at 4,000 VMAs**: "
      f"{'met' if ok else 'MISSED'}: {r4['r13']:.1f}x at 16 MiB resident"
      + (f" (short by {12 - r4['r13']:.1f}x, {100 * (1 - r4['r13'] / 12):.0f}%)" if not ok else "")
      + "; at 4,000 VMAs with more resident memory: "
      + ", ".join(f"{r['r13']:.1f}x at {r['rss']} MiB" for r in rows
                  if r["vmas"] == 4000 and r["rss"] != 16)
      + f". Host kernel, natively: {fmt(r4['host']['smaps'] / r4['host']['rollup'], 1)}x at 16 MiB.")
worst = max(rows, key=lambda r: r["r34"]) if rows else None
if worst:
    over = [r for r in rows if r["r34"] > 1.05]
    w(f"- **Bar 2: series within 5% of stock or faster at every size**: "
      f"{'met' if not over else 'MISSED'}: series/stock median ratio from "
      f"{min(r['r34'] for r in rows):.3f} to {worst['r34']:.3f} "
      f"(worst at {worst['vmas']} VMAs / {worst['rss']} MiB, bootstrap 90% interval "
      f"{worst['r34_ci'][0]:.3f}-{worst['r34_ci'][1]:.3f})"
      + ("" if not over else "; over 1.05 at " + ", ".join(
          f"{r['vmas']}/{r['rss']} MiB ({r['r34']:.3f}, rounds "
          + "/".join(f"{r['r34_round'][rd]:.3f}" for rd in rounds) + ")" for r in over))
      + ". Fastest read against fastest read: " + ", ".join(
          f"{r['vmas']}/{r['rss']} MiB {r['r34min']:.2f}" for r in rows)
      + ". Least squares: " + ", ".join(
          f"{x['kern']} {x['vma_us']:.2f} µs per VMA and {x['gib_ms']:.1f} ms per GiB"
          for x in fits if x["meth"] == "rollup" and x["kern"] in KERNELS)
      + ". Unchanged code as a noise control, /proc/PID/maps series/stock (pooled): "
      + ", ".join(f"{r['maps_ratio']:.2f}" for r in rows) + ".")
for vm, rs in stall_sizes:
    parts, bad = [], False
    for c, a, b, ca, cb in stall_pairs(vm, rs):
        if a and b:
            bad |= b["p99"] > a["p99"]

            def rd_(x):
                return "/".join(f"{x['p99_round'][k] / 1e3:.1f}" for k in sorted(x["p99_round"]))
            parts.append(f"{c[-1]} reader(s): series {b['p99'] / 1e3:.2f} ms (rounds {rd_(b)}) "
                         f"vs stock {a['p99'] / 1e3:.2f} ms (rounds {rd_(a)}), "
                         f"{b['p99'] / a['p99']:.2f}x; mmap p99 series {b['mmap_p99'] / 1e3:.2f} "
                         f"vs stock {a['mmap_p99'] / 1e3:.2f} ms"
                         + (f"; the status control: series {cb['p99'] / 1e3:.2f} vs stock "
                            f"{ca['p99'] / 1e3:.2f} ms" if ca and cb else ""))
    w(f"- **Bar 3: target p99 with series readers no worse than with stock readers** "
      f"({size_label(vm, rs)}): {'MISSED' if bad else 'met'}: " + "; ".join(parts) + ".")
for vm, rs in stall_sizes:
    parts, met = [], True
    for c, a, b, ca, cb in stall_pairs(vm, rs):
        if a and b:
            met &= a["p99"] >= 10 * b["p99"]
            part = (f"{c[-1]} reader(s): stock p99 {a['p99'] / 1e3:.2f} ms / series "
                    f"{b['p99'] / 1e3:.2f} ms = {a['p99'] / b['p99']:.1f}x, max "
                    f"{a['max'] / 1e3:.1f} / {b['max'] / 1e3:.1f} ms")
            if ca and cb:
                # What the rollup reader adds to the p99 over a status reader
                # (the CPU-competition control) of the same kernel.
                xa, xb = a["p99"] - ca["p99"], b["p99"] - cb["p99"]
                part += (f"; p99 above the status control: stock {xa / 1e3:.2f} ms, "
                         f"series {xb / 1e3:.2f} ms")
            parts.append(part)
    if parts:
        w(f"- **Stall bar: target p99 with series readers at least 10x lower than with stock "
          f"readers** ({size_label(vm, rs)}): {'met' if met else 'MISSED'}: "
          + "; ".join(parts) + ".")
w("")

w("## Cost per read (medians, ms; TCG guest)\n")
w("| VMAs | RSS MiB | 1. smaps+C | 2. awk | 3. series rollup | 4. stock rollup | 5. status | "
  "1/3 | 2/3 | 3/4 | 3/4 per round | 3/4 fastest reads | 3/5 | host 1/3 | host 2/3 |")
w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
for r in rows:
    h = r["host"]
    w(f"| {r['nvmas']} | {r['rss_mib']:.0f} | {fmt(r['smaps'])} | {fmt(r['awk'])} | "
      f"{fmt(r['ser'], 3)} | {fmt(r['sto'], 3)} | {fmt(r['status'], 3)} | "
      f"{r['r13']:.1f} | {r['r23']:.1f} | {r['r34']:.3f} | "
      + " / ".join(f"{r['r34_round'][rd]:.3f}" for rd in rounds)
      + f" | {r['r34min']:.3f} | {r['r35']:.0f} | {fmt(h['smaps'] / h['rollup'], 1)} | {fmt(h['awk'] / h['rollup'], 1)} |")
w("")
w("p90 (ms), same cells:\n")
w("| VMAs | RSS MiB | 1. smaps+C | 2. awk | 3. series rollup | 4. stock rollup | 5. status | reads (1/2/3/4/5) |")
w("|---:|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    w(f"| {r['nvmas']} | {r['rss_mib']:.0f} | {fmt(r['smaps_p90'])} | {fmt(r['awk_p90'])} | "
      f"{fmt(r['ser_p90'], 3)} | {fmt(r['sto_p90'], 3)} | {fmt(r['status_p90'], 3)} | "
      f"{r['smaps_n']}/{r['awk_n']}/{r['ser_n']}/{r['sto_n']}/{r['status_n']} |")
w("")
w("Ratios: 1/3 = smaps + C parser over series rollup, 2/3 = awk over series rollup, "
  "3/4 = series rollup over stock rollup (below 1: series faster), 3/5 = series rollup "
  "over status. 3/4 per round: the median ratio of each stock/series boot pair; it "
  "swings with how fast each boot ran on the shared host. 3/4 fastest reads: the "
  "fastest series read over the fastest stock read, the estimate least touched by "
  "host preemption of the vCPU threads. cost.csv also has a ratio normalised by a "
  "/proc/PID/maps read of the same target in the same boot (code the series does not "
  "change); it turned out too noisy to use (maps alone swings 0.2-1.9x series/stock "
  "between boots). "
  "VMAs and RSS are as measured in the target. Files: cost.csv (per cell), "
  "cost-long.csv (every kernel and method), cost-samples.csv (every read).\n")
w("![cost against VMAs](cost-vs-vmas.png)\n")
w("![cost against RSS](cost-vs-rss.png)\n")

w("## Where the time goes (least squares over the medians)\n")
w("| method | per VMA (µs) | R² | per resident GiB (ms) | R² | joint fit: per VMA µs, per GiB ms, R² |")
w("|---|---:|---:|---:|---:|---|")
for x in fits:
    w(f"| {x['label']} | {fmt(x['vma_us'])} | {x['vma_r2']:.3f} | {fmt(x['gib_ms'])} | "
      f"{x['gib_r2']:.3f} | {fmt(x['j_vma_us'])}, {fmt(x['j_gib_ms'])}, {x['j_r2']:.3f} |")
w("")
w("Per VMA: slope over the VMA sweep at 16 MiB resident; per GiB: slope over the "
  "resident sweep at 4,000 VMAs; joint: `t = a + b·VMAs + c·GiB` over every cell. "
  "The page walk is the floor of any format: about 22 ms of system time per GB was "
  "reported on hardware (process-exporter), 4-5 ms per GiB measured on this host "
  "class (NOTES.md §5, §7). The guest's per-GiB slope over a native one is roughly "
  "TCG's slowdown of the walk. File: fit.csv.\n")

w("## Target stall (mmap + touch 64 KiB + munmap, per operation)\n")
for vm, rs in stall_sizes:
    w(f"**{size_label(vm, rs)}**:\n")
    w("| readers | kernel | ops | p50 µs | p99 µs | max µs | p99 per round µs | "
      "p99 ÷ no-reader p50 | mmap p99 µs | munmap p99 µs | reader reads | reader read p50 ms |")
    w("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for c in COND_ORDER:
        for kern in KERNELS:
            s = stall_get(kern, vm, rs, c)
            base = stall_get(kern, vm, rs, "none")
            if not s:
                continue
            w(f"| {c} | {kern} | {s['ops']} | {s['p50']:.0f} | {s['p99']:.0f} | {s['max']:.0f} | "
              + " / ".join(f"{s['p99_round'][rd]:.0f}" for rd in sorted(s["p99_round"]))
              + f" | {s['p99'] / base['p50']:.1f} | {s['mmap_p99']:.0f} | {s['munmap_p99']:.0f} | {s['reads']} | "
              f"{fmt(s['read_p50'], 3)} |")
    w("")
    w(f"![stall {vm} {rs}](stall-{vm}-{rs}.png)\n")
w("`none` has no reader; `status:N` has N readers looping on /proc/PID/status "
  "(the CPU-competition control: 2 vCPUs, so 2 readers plus the target overcommit "
  "them); `rollup:N` has N readers looping on smaps_rollup. `p99 ÷ no-reader p50` "
  "expresses the p99 in units of the same kernel's typical operation without readers, "
  "which takes out how fast each boot ran. File: stall.csv "
  "(also p90, p99.9 and mmap/touch/munmap p99).\n")

w("## Fleet sweep (every /proc/PID, one read each)\n")
w("| kernel | method | processes swept | read OK | sweeps | median ms | p90 ms |")
w("|---|---|---:|---:|---:|---:|---:|")
for meth in ("rollup", "status", "smaps"):
    for kern in KERNELS:
        d = fleet.get((kern, meth))
        if d:
            w(f"| {kern} | {meth} | {med(d['pids']):.0f} | {med(d['ok']):.0f} | {len(d['ms'])} | "
              f"{med(d['ms']):.1f} | {pct(d['ms'], 0.9):.1f} |")
a, b = fleet.get(("stock", "rollup")), fleet.get(("series", "rollup"))
if a and b:
    fr = []
    for rd in rounds:
        x = [fleet_round.get((k, rd, mt)) for k in ("series", "stock") for mt in ("rollup", "status")]
        if all(x):
            fr.append((med(x[0]) / med(x[1])) / (med(x[2]) / med(x[3])))
    w(f"\nSeries over stock, rollup sweep: {med(b['ms']) / med(a['ms']):.3f} (pooled medians); "
      "divided by each boot's status sweep, per round: "
      + " / ".join(f"{x:.3f}" for x in fr) + ".")
w("\nThe guest runs "
  + (f"{a['n']} " if a else "")
  + "`/bin/cat` processes blocked on a pipe, plus its kernel threads (which have no "
  "mm: smaps_rollup fails on them with ESRCH, status has no VmRSS; `read OK` counts "
  "reads that gave a value). File: fleet.csv.\n")

# keep hand-written notes across regenerations
notes = ""
old = os.path.join(OUT, "README.md")
if os.path.exists(old):
    m = re.search(r"<!-- notes -->.*?<!-- /notes -->", open(old).read(), re.S)
    if m:
        notes = m.group(0)
w("## Caveats and analysis\n")
w(notes or "<!-- notes -->\n(no notes yet)\n<!-- /notes -->")
w("")
with open(old, "w") as f:
    f.write("\n".join(out) + "\n")
print(f"analyze: wrote {OUT}/README.md, cost.csv, cost-long.csv, cost-samples.csv, "
      f"fit.csv, stall.csv, fleet.csv and {', '.join(plots)}")
