"""The figures and verdicts of a scripts/bench run, computed once: the
compute step of analyze.py (load -> compute -> write). analyse() turns the
loaded run (bench_load.RawRun, and one per preemption model) and any other
sources of cost figures into one result, a dict that bench_report.py and
bench_readme.py only format: the cost rows and their fits, the stall,
inversion, moves and fleet summaries, every bar's verdict and the bars
themselves (BARS). same_boot_cells is the figures of one boot's cost
records, for analyze.py --cost and icount.py alike.

Standard library only. Times: cost in ms, stall and inversion in µs.
"""
import math
import random
from collections import namedtuple
from dataclasses import dataclass
from types import SimpleNamespace

from bench_load import (INVERT_MOVE_SUFFIX, INVERT_SWAP_SUFFIX, KERNELS, MOVERS, SAME_BOOT_STOCK,
                        STALL_CONDS, control_of, readers_of, rss_key, split_suffix)

# The bars (the series issues' targets), which the README states.
BARS = SimpleNamespace(
    speedup_cell=(4000, "16"),  # bar 1 is judged at 4,000 VMAs, 16 MiB
    min_speedup=12,             # bar 1: rollup >= 12x faster than smaps + C parser
    max_slowdown=1.05,          # bar 2: series within 5% of stock
    stall_control=1.3,          # series p99 within 1.3x of the status control's
    stall_excess=10,            # series p99 above control >= 10x lower than stock's
    invert_mean=1.2,            # mapper mean within 1.2x of the status control's
    # The cells with swap entries (issue #31): bench-invert's conditions
    # with INVERT_SWAP_SUFFIX (every 64th page of the mapper's region kept
    # paged out) and bench-target's layouts with swap, each with the layout
    # it adds swap to: p (every 64th page of h's heap paged out), s (half
    # the shmem of the spread layout). Their bars, judged under
    # CONFIG_PREEMPT (model swap_model; the other models' are for
    # comparison): the stall's stall_control, and these.
    swap_layouts={"p": "h", "s": ""},
    swap_model="full",
    swap_invert_mean=1.1,       # mapper mean within 1.1x of the status control's
    swap_invert_max=1.2,        # median of the per-run maxima within 1.2x of the control's
    # The inversion with UFFDIO_MOVE: bench-invert's conditions with
    # INVERT_MOVE_SUFFIX (a thread of the mapper moves 8 MiB back and forth
    # all along, as ART does). Its bar, judged under CONFIG_PREEMPT too: the
    # mapper's mean; the median of the per-run maxima is reported beside it
    # (no bar).
    move_model="full",
    move_invert_mean=1.2,       # mapper mean within 1.2x of the status control's
    # Large folios (layout m): same boot, the series at most this fraction
    # of stock's cost.
    mthp_max_ratio=0.20,
    # One VMA of 4 KiB pages (layouts o, c, f), same boot: the series at
    # most this fraction of stock's cost (issue #32).
    pages_max_ratio={"o": 0.70, "c": 0.80, "f": 0.80})
# Fits: the VMA sweep is at this resident size, the resident sweep at this VMA count.
VMA_SWEEP_RSS = "16"
RSS_SWEEP_VMAS = 4000

BOOTSTRAP_ITERATIONS = 2000
CI_LOW, CI_HIGH = 0.05, 0.95    # the bootstrap's 90% interval
NAN = float("nan")

# Cost columns: label -> (kernel, method).
COST_COLUMNS = {
    "smaps": ("series", "smaps"), "awk": ("series", "awk"),
    "series": ("series", "rollup"), "stock": ("stock", "rollup"),
    "status": ("series", "status"), "maps": ("series", "maps"),
    "smaps_stock": ("stock", "smaps"), "status_stock": ("stock", "status"),
    "maps_stock": ("stock", "maps"), "same_boot_stock": ("series", SAME_BOOT_STOCK),
}
FITTED = (("series", "smaps", "1. smaps + C parser"), ("series", "awk", "2. awk over smaps"),
          ("series", "rollup", "3. series smaps_rollup"), ("stock", "rollup", "4. stock smaps_rollup"),
          ("series", "status", "5. status VmRSS"), ("host", "smaps", "host: smaps + C parser"),
          ("host", "rollup", "host: smaps_rollup"))
HOST_METHODS = ("smaps", "awk", "rollup", "status")
# The methods of one boot's cost records (guest/bench/icount): the series'
# file, stock's beside it, and the maps and status controls.
SAME_BOOT_METHODS = ("rollup", SAME_BOOT_STOCK, "maps", "status")


def percentile(values, q):
    """Nearest-rank Q-quantile of VALUES (unsorted)."""
    if not values:
        return NAN
    s = sorted(values)
    return s[max(1, min(len(s), math.ceil(q * len(s) - 1e-9))) - 1]


def median(values):
    """Median (mean of the middle two for an even count)."""
    if not values:
        return NAN
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def ratio(a, b):
    return a / b if b and not (math.isnan(a) or math.isnan(b)) else NAN


def least_squares(xs, ys):
    """y = a + b x; returns (a, b, r2)."""
    n = len(xs)
    if n < 2:
        return NAN, NAN, NAN
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    slope = sxy / sxx if sxx else NAN
    intercept = mean_y - slope * mean_x
    total = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    return intercept, slope, (1 - residual / total) if total else NAN


def least_squares2(x1, x2, ys):
    """y = a + b x1 + c x2 by the normal equations; returns (a, b, c, r2)."""
    n = len(ys)
    if n < 3:
        return NAN, NAN, NAN, NAN
    rows = [(1.0, p, q) for p, q in zip(x1, x2)]
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    v = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(3)]
    for i in range(3):  # Gaussian elimination with partial pivoting
        pivot = max(range(i, 3), key=lambda k: abs(m[k][i]))
        m[i], m[pivot] = m[pivot], m[i]
        v[i], v[pivot] = v[pivot], v[i]
        if abs(m[i][i]) < 1e-300:
            return NAN, NAN, NAN, NAN
        for k in range(i + 1, 3):
            f = m[k][i] / m[i][i]
            for j in range(i, 3):
                m[k][j] -= f * m[i][j]
            v[k] -= f * v[i]
    c = [0.0] * 3
    for i in (2, 1, 0):
        c[i] = (v[i] - sum(m[i][j] * c[j] for j in range(i + 1, 3))) / m[i][i]
    mean_y = sum(ys) / n
    total = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - c[0] - c[1] * p - c[2] * q) ** 2 for p, q, y in zip(x1, x2, ys))
    return c[0], c[1], c[2], (1 - residual / total) if total else NAN


def bootstrap_ratio(a, b, iterations=BOOTSTRAP_ITERATIONS, seed=1):
    """Bootstrap 90% interval of median(a) / median(b)."""
    if len(a) < 3 or len(b) < 3:
        return NAN, NAN
    rnd = random.Random(seed)
    ratios = [median([a[rnd.randrange(len(a))] for _ in a]) /
              median([b[rnd.randrange(len(b))] for _ in b]) for _ in range(iterations)]
    return percentile(ratios, CI_LOW), percentile(ratios, CI_HIGH)


# ------------------------------------------------------------------ cost
def same_boot_cells(reads):
    """The figures of one boot's cost records, READS (bench_load.cost_file:
    {cell: {method: [ns]}}): per cell, in order, the median of each
    SAME_BOOT_METHODS, the series' over stock's beside it, and the series'
    fastest and slowest read over its median. Fails on a cell without
    reads of one of the methods."""
    cells = {}
    for cell, by_method in reads.items():
        missing = [m for m in SAME_BOOT_METHODS if not by_method.get(m)]
        if missing:
            raise ValueError(f"cell {cell} has no reads of {', '.join(missing)}")
        med = {m: median(v) for m, v in by_method.items() if v}
        series = by_method["rollup"]
        cells[cell] = dict(median=med, series_over_stock=med["rollup"] / med[SAME_BOOT_STOCK],
                           spread=(min(series) / med["rollup"], max(series) / med["rollup"]))
    return cells


def rounds_cells(rounds):
    """Several rounds of same_boot_cells (ROUNDS, each a new target per
    cell) per cell, in the first round's order: the median over the rounds
    of each method's median and of the series' over stock's, that ratio's
    range, and its median with the status control's time taken off both
    reads (the read's fixed cost: under UML a system call is a ptrace stop
    of the host, tens of microseconds)."""
    cells = {}
    for cell in rounds[0]:
        per = [r[cell]["median"] for r in rounds if cell in r]
        ratios = [m["rollup"] / m[SAME_BOOT_STOCK] for m in per]
        # Not where stock's read is no dearer than status's.
        less = [(m["rollup"] - m["status"]) / (m[SAME_BOOT_STOCK] - m["status"])
                for m in per if m[SAME_BOOT_STOCK] > m["status"]]
        cells[cell] = dict(rounds=len(per), series_over_stock=median(ratios),
                           range=(min(ratios), max(ratios)),
                           less_status=median(less) if len(less) == len(per) else NAN,
                           median={k: median([m[k] for m in per]) for k in per[0]})
    return cells


def cost_row(run, vmas, rss, sources):
    """One cost cell: per column its median, p90 and count, then the ratios,
    and each source's series/stock in the same boot (NaN: not measured)."""
    info = run.cell_info.get(("series", vmas, rss)) or run.cell_info[("stock", vmas, rss)]
    row = {"vmas": vmas, "rss": rss, "nvmas": info[0], "rss_mib": info[1] / 1024,
           "median": {}, "p90": {}, "n": {}}
    for label, (kernel, method) in COST_COLUMNS.items():
        ms = run.samples(kernel, vmas, rss, method)
        row["median"][label] = median(ms)
        row["p90"][label] = percentile(ms, 0.9)
        row["n"][label] = len(ms)
    med = row["median"]
    row["smaps_over_rollup"] = ratio(med["smaps"], med["series"])
    row["awk_over_rollup"] = ratio(med["awk"], med["series"])
    row["rollup_over_status"] = ratio(med["series"], med["status"])
    row["series_over_stock"] = ratio(med["series"], med["stock"])
    row["smaps_series_over_stock"] = ratio(med["smaps"], med["smaps_stock"])
    row["maps_series_over_stock"] = ratio(med["maps"], med["maps_stock"])
    row["status_series_over_stock"] = ratio(med["status"], med["status_stock"])
    row["same_boot_series_over_stock"] = ratio(med["series"], med["same_boot_stock"])
    series, stock = (run.samples(k, vmas, rss, m) for k, m in (COST_COLUMNS["series"],
                                                               COST_COLUMNS["stock"]))
    row["series_over_stock_ci"] = bootstrap_ratio(series, stock)
    row["series_over_stock_fastest"] = ratio(min(series, default=NAN), min(stock, default=NAN))
    row["series_over_stock_by_round"] = {
        r: ratio(median(run.samples("series", vmas, rss, "rollup", r)),
                 median(run.samples("stock", vmas, rss, "rollup", r))) for r in run.rounds}
    row["same_boot_by_round"] = {
        r: ratio(median(run.samples("series", vmas, rss, "rollup", r)),
                 median(run.samples("series", vmas, rss, SAME_BOOT_STOCK, r))) for r in run.rounds}
    host = row["host"] = {m: median(run.samples("host", vmas, rss, m)) for m in HOST_METHODS}
    row["host_smaps_over_rollup"] = ratio(host["smaps"], host["rollup"])
    row["host_awk_over_rollup"] = ratio(host["awk"], host["rollup"])
    row["host_rollup_over_status"] = ratio(host["rollup"], host["status"])
    cell = f"{vmas}:{rss}"
    row["sources"] = {name: cells[cell]["series_over_stock"] if cell in cells else NAN
                      for name, cells in sources.items()}
    return row


def cost_rows(run, sources=None):
    """Every cell measured on the series kernel, plain layout first.
    SOURCES: {name: its same_boot_cells}."""
    cells = {(k[1], k[2]) for k in run.cost if k[0] == "series"}
    layout_order = ("", "h", "p", "u", "s", "d", "a", "m", "o", "c", "f")
    ordered = sorted(cells, key=lambda c: (layout_order.index(rss_key(c[1])[1]), c[0],
                                           rss_key(c[1])[0]))
    return [cost_row(run, vmas, rss, sources or {}) for vmas, rss in ordered]


def cost_long(run):
    """Every kernel, cell and method: (kernel, vmas, rss, nvmas, rss_kb,
    method, reads, median, p90, fastest), for cost-long.csv."""
    rows = []
    for kernel, vmas, rss, method in sorted(run.cost):
        ms = run.samples(kernel, vmas, rss, method)
        rows.append((kernel, vmas, rss, *run.cell_info[(kernel, vmas, rss)], method, len(ms),
                     median(ms), percentile(ms, 0.9), min(ms)))
    return rows


def layout_rows(rows, *layouts):
    return [r for r in rows if rss_key(r["rss"])[1] in layouts]


def speedup_bar(spread):
    """Bar 1 at BARS.speedup_cell, or None: the speedup, how far short of
    the bar, and the cells of as many VMAs with more memory."""
    cell = next((r for r in spread if (r["vmas"], r["rss"]) == BARS.speedup_cell), None)
    if not cell:
        return None
    speedup = cell["smaps_over_rollup"]
    return dict(row=cell, speedup=speedup, met=speedup >= BARS.min_speedup,
                short_by=BARS.min_speedup - speedup,
                short_pct=100 * (1 - speedup / BARS.min_speedup),
                more=[r for r in spread if r["vmas"] == cell["vmas"] and r is not cell])


def slowdown_bar(spread):
    """Bar 2 over the spread cells, or None: the lowest series/stock, the
    worst cell, those over the bar; no_stock without a stock kernel."""
    if not spread:
        return None
    over = [r for r in spread if r["series_over_stock"] > BARS.max_slowdown]
    return dict(no_stock=all(math.isnan(r["series_over_stock"]) for r in spread),
                lowest=min(r["series_over_stock"] for r in spread), over=over,
                worst=max(spread, key=lambda r: r["series_over_stock"]), met=not over)


def dense_bar(dense):
    """Bar 2 on the dense cells, or None, judged on the same-boot ratio
    where the series kernel had the stock file."""
    def judged(r):
        same_boot = r["same_boot_series_over_stock"]
        return r["series_over_stock"] if math.isnan(same_boot) else same_boot
    return dict(rows=dense, met=all(judged(r) <= BARS.max_slowdown for r in dense)) if dense \
        else None


def mthp_bar(mthp, pages):
    """The 64 KiB folio cells against stock's implementation in the same
    boot, or None; and pairs (folio row, 4 KiB pages row, folio/pages) with
    PAGES, the same memory in 4 KiB pages."""
    if not mthp:
        return None
    pages = {(r["vmas"], rss_key(r["rss"])[0]): r for r in pages}
    pairs = [(m, pages[(m["vmas"], rss_key(m["rss"])[0])]) for m in mthp
             if (m["vmas"], rss_key(m["rss"])[0]) in pages]
    return dict(rows=mthp,
                met=all(r["same_boot_series_over_stock"] <= BARS.mthp_max_ratio for r in mthp),
                pairs=[(m, p, m["median"]["series"] / p["median"]["series"]) for m, p in pairs],
                cheaper=all(m["median"]["series"] < p["median"]["series"] for m, p in pairs))


def pages_bars(rows):
    """The one-VMA cells against stock's implementation in the same boot:
    (row, its bar, measured, met)."""
    bars = []
    for r in rows:
        bar, same_boot = (BARS.pages_max_ratio.get(rss_key(r["rss"])[1]),
                          r["same_boot_series_over_stock"])
        if bar is not None:
            bars.append((r, bar, not math.isnan(same_boot), same_boot <= bar))
    return bars


def cost_bars(rows):
    """The cost bars' verdicts (each None, or empty, without its cells)."""
    spread = layout_rows(rows, "")
    return dict(speedup_bar=speedup_bar(spread), slowdown_bar=slowdown_bar(spread),
                dense_bar=dense_bar(layout_rows(rows, "d")),
                mthp_bar=mthp_bar(layout_rows(rows, "m"), layout_rows(rows, "a")),
                pages_bars=pages_bars(rows))


def example_cell(fields):
    """The cell whose fields the README shows: bar 1's, else the first; or None."""
    return (BARS.speedup_cell if BARS.speedup_cell in fields else min(fields)) if fields else None


def fits(run, rows):
    """Least squares over the medians: per VMA, per resident GiB, joint."""
    result = []
    plain = [r for r in rows if not rss_key(r["rss"])[1]]
    for kernel, method, label in FITTED:
        vma_x, vma_y, gib_x, gib_y, all_vmas, all_gib, all_ms = [], [], [], [], [], [], []
        for r in plain:
            ms = median(run.samples(kernel, r["vmas"], r["rss"], method))
            info = run.cell_info.get((kernel, r["vmas"], r["rss"]))
            if math.isnan(ms) or not info:
                continue
            nvmas, gib = info[0], info[1] / 1048576
            if r["rss"] == VMA_SWEEP_RSS:
                vma_x.append(nvmas), vma_y.append(ms)
            if r["vmas"] == RSS_SWEEP_VMAS:
                gib_x.append(gib), gib_y.append(ms)
            all_vmas.append(nvmas), all_gib.append(gib), all_ms.append(ms)
        if not all_ms:
            continue
        vma_icpt, vma_slope, vma_r2 = least_squares(vma_x, vma_y)
        gib_icpt, gib_slope, gib_r2 = least_squares(gib_x, gib_y)
        joint_icpt, joint_vma, joint_gib, joint_r2 = least_squares2(all_vmas, all_gib, all_ms)
        result.append(dict(kernel=kernel, method=method, label=label,
                           per_vma_us=vma_slope * 1000, vma_intercept_ms=vma_icpt,
                           vma_r2=vma_r2, vma_points=len(vma_x),
                           per_gib_ms=gib_slope, gib_intercept_ms=gib_icpt,
                           gib_r2=gib_r2, gib_points=len(gib_x),
                           joint_intercept_ms=joint_icpt, joint_per_vma_us=joint_vma * 1000,
                           joint_per_gib_ms=joint_gib, joint_r2=joint_r2))
    return result


# ------------------------------------------------------------------ stall
def stall_summary(runs):
    total = [x for r in runs for x in r.total_us]
    return dict(rounds=len(runs), ops=len(total),
                p50=percentile(total, 0.5), p90=percentile(total, 0.9),
                p99=percentile(total, 0.99), p999=percentile(total, 0.999),
                max=max(total, default=NAN),
                mmap_p99=percentile([x for r in runs for x in r.mmap_us], 0.99),
                touch_p99=percentile([x for r in runs for x in r.touch_us], 0.99),
                munmap_p99=percentile([x for r in runs for x in r.munmap_us], 0.99),
                p99_by_round={r.round: percentile(r.total_us, 0.99) for r in runs},
                reads=sum(r.reads for r in runs),
                read_p50_ms=median([r.read_p50_ms for r in runs if r.reads]))


def stall_summaries(run):
    """(kernel, vmas, rss, cond) -> summary, with p99 above and over its
    status control's."""
    summaries = {key: stall_summary(runs) for key, runs in run.stall.items()}
    for (kernel, vmas, rss, cond), s in summaries.items():
        control = summaries.get((kernel, vmas, rss, control_of(cond)))
        s["above_control"] = (s["p99"] - control["p99"]
                              if control and not cond.startswith("status") else NAN)
        s["p99_over_control"] = ratio(s["p99"], control["p99"]) if control else NAN
    return summaries


def stall_sizes(summaries):
    return sorted({(k[1], k[2]) for k in summaries}, key=lambda c: (c[0], rss_key(c[1])))


def stall_charts(summaries):
    """{(vmas, rss): the STALL_CONDS measured on both kernels}: the sizes
    with a chart, in order."""
    charts = {}
    for vmas, rss in stall_sizes(summaries):
        conds = [c for c in STALL_CONDS if all((k, vmas, rss, c) in summaries for k in KERNELS)]
        if conds:
            charts[(vmas, rss)] = conds
    return charts


def tenfold(stock_excess, series_excess):
    return stock_excess > 0 and BARS.stall_excess * series_excess <= stock_excess


@dataclass
class StallVerdict:
    """The stall bars at one size and reader count: within_control,
    excess_tenfold, same_boot_tenfold (None without same_boot), no_worse."""
    vmas: int
    rss: str
    readers: int
    series: dict
    stock: dict
    series_control: dict
    stock_control: dict
    same_boot: dict         # the stock file on the series kernel, or None

    def __post_init__(self):
        s, st, sb = self.series, self.stock, self.same_boot
        self.within_control = s["p99"] <= BARS.stall_control * self.series_control["p99"]
        self.excess_tenfold = tenfold(st["above_control"], s["above_control"])
        self.same_boot_tenfold = sb and tenfold(sb["above_control"], s["above_control"])
        self.no_worse = s["p99"] <= st["p99"]


def stall_verdicts(summaries):
    verdicts = []
    for vmas, rss in stall_sizes(summaries):
        for n in sorted({readers_of(k[3]) for k in summaries} - {0}):
            def get(kernel, cond):
                return summaries.get((kernel, vmas, rss, cond))
            parts = (get("series", f"rollup:{n}"), get("stock", f"rollup:{n}"),
                     get("series", f"status:{n}"), get("stock", f"status:{n}"))
            if all(parts):
                verdicts.append(StallVerdict(vmas, rss, n, *parts,
                                             get("series", f"{SAME_BOOT_STOCK}:{n}")))
    return verdicts


# -------------------------------------------------------------- inversion
def invert_summaries(run):
    """(kernel, cond) -> medians over the runs of the mapper's mean and max
    (µs), with its status control's and the mean over the control's."""
    out = {}
    for (kernel, cond), runs in run.invert.items():
        out[(kernel, cond)] = dict(
            runs=len(runs), readers=runs[0].readers, ops=median([r.ops for r in runs]),
            mean=median([(r.mmap_mean_us + r.munmap_mean_us) / 2 for r in runs]),
            max=median([max(r.mmap_max_us, r.munmap_max_us) for r in runs]),
            mmap_mean=median([r.mmap_mean_us for r in runs]),
            mmap_max=median([r.mmap_max_us for r in runs]),
            munmap_mean=median([r.munmap_mean_us for r in runs]),
            munmap_max=median([r.munmap_max_us for r in runs]),
            reads=median([r.reads for r in runs]))
    for (kernel, cond), s in out.items():
        control = out.get((kernel, control_of(cond)))
        s["control_mean"], s["control_max"] = (control["mean"], control["max"]) if control \
            else (NAN, NAN)
        s["mean_over_control"] = ratio(s["mean"], s["control_mean"])
    return out


# A rollup condition of one kernel against its status control: mean_ok
# (within BARS.invert_mean of the control's), max_ok (no worse), is_bar
# (the series kernel's rollup:N; the others for comparison).
InvertVerdict = namedtuple("InvertVerdict", "kernel cond summary control mean_ok max_ok is_bar")


def invert_verdicts(summaries):
    """Per kernel, rollup condition with a status control, an InvertVerdict.
    Not the conditions with a suffix: swap_verdicts holds the +swap ones to
    issue #31's bars, move_verdicts the +move ones to the move bar."""
    verdicts = []
    for (kernel, cond), s in sorted(summaries.items()):
        control = summaries.get((kernel, control_of(cond)))
        if cond.startswith("status") or not control or split_suffix(cond)[1]:
            continue
        verdicts.append(InvertVerdict(kernel, cond, s, control,
                                      s["mean"] <= BARS.invert_mean * control["mean"],
                                      s["max"] <= control["max"],
                                      kernel == "series" and cond.startswith("rollup:")))
    return verdicts


# ------------------------------------------------------- swap and moves
# The figures each kind of swap cell is held to: (summary key, bar).
SWAP_BARS = {"invert": (("mean", BARS.swap_invert_mean), ("max", BARS.swap_invert_max)),
             "stall": (("p99", BARS.stall_control),)}
# The inversion with UFFDIO_MOVE's: a bar of None is a figure reported
# beside the bar, not held to one.
MOVE_BARS = (("mean", BARS.move_invert_mean), ("max", None))
# What a swap or move verdict compares, each over its status control.
SWAP_WHICH = ("series", "stock_file", "stock", "plain")


@dataclass
class SwapVerdict:
    """A cell in one preemption model against its issue's bars: with swap
    entries (issue #31: the +swap inversion conditions, the stall layouts of
    BARS.swap_layouts) or, for the +move inversion conditions, with
    UFFDIO_MOVE (issue = "move"). Each of series, stock_file, stock and
    plain maps a figure of BARS to (its value, its status control's), or is
    empty when not measured: the series rollup (the bar), stock's
    implementation in the same boot, the stock kernel's rollup, the series
    rollup on the same cell without swap (without the moves), plain_cell.
    Its verdict: bars ((summary key, bar or None: reported only)), judged
    under bar_model (is_bar: this is that model), control (the status
    condition), ratios ({which: {stat: value over the control's}}), met."""
    model: str
    kind: str           # invert or stall
    cell: str           # invert: the condition (rollup:1+swap); stall: VMAS:RSS (16000:128p)
    readers: int
    series: dict
    stock_file: dict
    stock: dict
    plain: dict
    issue: str = "swap"  # swap or move
    plain_cell: str = ""

    def __post_init__(self):
        move = self.issue == "move"
        self.bars = MOVE_BARS if move else SWAP_BARS[self.kind]
        self.bar_model = BARS.move_model if move else BARS.swap_model
        self.is_bar = self.model == self.bar_model
        self.control = control_of(self.cell) if self.kind == "invert" else f"status:{self.readers}"
        self.ratios = {which: {stat: ratio(*pair) for stat, pair in getattr(self, which).items()}
                       for which in SWAP_WHICH}
        self.met = all(self.ratio("series", stat) <= bar for stat, bar in self.bars
                       if bar is not None)

    def ratio(self, which, stat):
        return self.ratios[which].get(stat, NAN)


def over_control(summaries, key, control_key, stats):
    """{stat: (summary at KEY, its control's at CONTROL_KEY)}, or {}."""
    s, c = summaries.get(key), summaries.get(control_key)
    return {stat: (s[stat], c[stat]) for stat in stats} if s and c else {}


def invert_suffix_verdicts(model, inv, suffix, issue, stats):
    """The inversion conditions of INV (one model's invert summaries) with
    SUFFIX alone, per reader count: rollup:N+SUFFIX over status:N+SUFFIX,
    beside stock's implementation, the stock kernel and rollup:N over
    status:N."""
    verdicts = []
    for n in sorted({readers_of(c) for _, c in inv if split_suffix(c)[1] == suffix} - {0}):
        def invert(kernel, cond, suffix=suffix):
            return over_control(inv, (kernel, cond + suffix),
                                (kernel, f"status:{n}{suffix}"), stats)
        series = invert("series", f"rollup:{n}")
        if series:
            verdicts.append(SwapVerdict(
                model, "invert", f"rollup:{n}{suffix}", n, series,
                invert("series", f"{SAME_BOOT_STOCK}:{n}"), invert("stock", f"rollup:{n}"),
                invert("series", f"rollup:{n}", ""), issue, plain_cell=f"rollup:{n}"))
    return verdicts


def swap_verdicts(model, figures):
    """The swap cells of one model's FIGURES (its stall and invert
    summaries): the +swap inversion conditions and the stall cells of
    BARS.swap_layouts, per reader count."""
    verdicts = invert_suffix_verdicts(model, figures["invert"], INVERT_SWAP_SUFFIX, "swap",
                                      [stat for stat, _ in SWAP_BARS["invert"]])
    st = figures["stall"]
    for vmas, rss in stall_sizes(st):
        mib, layout = rss_key(rss)
        if layout not in BARS.swap_layouts:
            continue
        plain_rss = f"{mib}{BARS.swap_layouts[layout]}"
        for n in sorted({readers_of(k[3]) for k in st if k[1:3] == (vmas, rss)} - {0}):
            def stall(kernel, cond, cell=rss):
                return over_control(st, (kernel, vmas, cell, cond),
                                    (kernel, vmas, cell, f"status:{n}"), ["p99"])
            series = stall("series", f"rollup:{n}")
            if series:
                verdicts.append(SwapVerdict(
                    model, "stall", f"{vmas}:{rss}", n, series,
                    stall("series", f"{SAME_BOOT_STOCK}:{n}"), stall("stock", f"rollup:{n}"),
                    stall("series", f"rollup:{n}", plain_rss), plain_cell=f"{vmas}:{plain_rss}"))
    return verdicts


def move_verdicts(model, figures):
    """The +move inversion conditions of one model's FIGURES, per reader
    count, against the move bar (MOVE_BARS)."""
    return invert_suffix_verdicts(model, figures["invert"], INVERT_MOVE_SUFFIX, "move",
                                  [stat for stat, _ in MOVE_BARS])


# ------------------------------------------------------------------ moves
def moves_summaries(run):
    """(kernel, mover, mib, period_us, method) -> reads, wrong, over, under summed
    over the rounds, the wrong share, and the median of the read medians."""
    out = {}
    for key, runs in run.moves.items():
        s = {k: sum(getattr(r, k) for r in runs) for k in ("moves", "reads", "wrong", "over",
                                                           "under")}
        s.update(rounds=len(runs), rss_kb=runs[0].rss_kb, share=ratio(s["wrong"], s["reads"]),
                 min_kb=min(r.min_kb for r in runs), max_kb=max(r.max_kb for r in runs),
                 read_p50_ms=median([r.read_p50_ms for r in runs]))
        out[key] = s
    return out


def moves_cells(summaries):
    """The (mover, mib, period_us) cells: mremap's first, then UFFDIO_MOVE's,
    each tight loop first, then by period, the larger mapping first."""
    return sorted({k[1:4] for k in summaries},
                  key=lambda c: (MOVERS.index(c[0]), c[2], -c[1]))


@dataclass
class MovesVerdict:
    """The moves bar on one cell: no_more_wrong, none_under, met (both)."""
    mover: str              # bench_load.MOVERS
    mib: int
    period_us: int
    series: dict
    stock: dict             # stock's implementation in the same boot, else the stock kernel's
    same_boot: bool

    def __post_init__(self):
        self.no_more_wrong = self.series["share"] <= self.stock["share"]
        self.none_under = self.series["under"] == 0
        self.met = self.no_more_wrong and self.none_under


def moves_verdicts(summaries):
    """The moves bar per cell: the series' wrong-read share at most stock's
    in the same boot (else the stock kernel's, same preemption model), and
    no series read under the true Rss."""
    verdicts = []
    for mover, mib, period in moves_cells(summaries):
        series = summaries.get(("series", mover, mib, period, "rollup"))
        same_boot = summaries.get(("series", mover, mib, period, SAME_BOOT_STOCK))
        stock = same_boot or summaries.get(("stock", mover, mib, period, "rollup"))
        if series and stock:
            verdicts.append(MovesVerdict(mover, mib, period, series, stock, bool(same_boot)))
    return verdicts


# ------------------------------------------------------------------ fleet
def fleet_summaries(run):
    """Per (kernel, method): processes spawned, median PIDs swept and read,
    sweeps, median and p90 ms of a sweep."""
    return {key: dict(procs=d["procs"], pids=median(d["pids"]), ok=median(d["ok"]),
                      sweeps=len(d["ms"]), median_ms=median(d["ms"]),
                      p90_ms=percentile(d["ms"], 0.9))
            for key, d in run.fleet.items()}


def fleet_figures(run):
    """The fleet summaries, series over stock per round (fleet_ratios) and
    pooled (fleet_series_over_stock, None without both kernels)."""
    fleet = fleet_summaries(run)
    stock, series = (fleet.get((k, "rollup")) for k in KERNELS)
    return dict(fleet=fleet, fleet_ratios=fleet_by_round_ratio(run),
                fleet_series_over_stock=series["median_ms"] / stock["median_ms"]
                if stock and series else None)


def fleet_by_round_ratio(run):
    """Series over stock rollup sweep, each divided by its boot's status sweep."""
    ratios = []
    for r in run.rounds:
        parts = [run.fleet_by_round.get((k, r, m)) for k in ("series", "stock")
                 for m in ("rollup", "status")]
        if all(parts):
            ratios.append((median(parts[0]) / median(parts[1])) /
                          (median(parts[2]) / median(parts[3])))
    return ratios


# ---------------------------------------------------------------- the run
# The layouts whose cost cells every preemption model runs (scripts/bench).
MODEL_LAYOUTS = ("u", "d")


def model_figures(run, rows):
    """What every preemption model's boots show: its cost ROWS, the stall,
    inversion and moves summaries and the verdicts on them."""
    f = dict(cost_rows=rows, stall=stall_summaries(run), invert=invert_summaries(run),
             moves=moves_summaries(run))
    f.update(stall_sizes=stall_sizes(f["stall"]),
             stall_readers=sorted({readers_of(k[3]) for k in f["stall"]} - {0}),
             swap_verdicts=swap_verdicts(run.model, f), move_verdicts=move_verdicts(run.model, f),
             moves_cells=moves_cells(f["moves"]), moves_verdicts=moves_verdicts(f["moves"]))
    # The inversion cells with a suffix: +swap's, then +move's.
    f["invert_cells"] = [v for v in f["swap_verdicts"] if v.kind == "invert"] + f["move_verdicts"]
    return f


def analyse(run, model_runs=(), sources=None):
    """The one result of a run: every figure and verdict the writers show.
    RUN: the run's first preemption model, the whole plan; MODEL_RUNS: every
    model's (RUN first) when the run had another than the default, whose
    half-untouched and dense cost cells, stall, inversion and moves go side
    by side; SOURCES: {name: one boot's cost records (bench_load.cost_file)}
    whose series/stock each cost row gets.

    The result holds RUN's model_figures and: run, bars (BARS), sources
    (their names), cost_long, fits, stall_verdicts, stall_charts,
    invert_verdicts, the cost_bars, example_cell, the fleet_figures;
    per_model, {model: its model_figures}; and models, the same, only when
    MODEL_RUNS."""
    cells = {name: same_boot_cells(reads) for name, reads in (sources or {}).items()}
    rows = cost_rows(run, cells)
    a = model_figures(run, rows)
    per_model = {run.model: a}
    if model_runs:
        per_model = {m.model: dict(a, cost_rows=layout_rows(rows, *MODEL_LAYOUTS)) if m is run
                     else model_figures(m, layout_rows(cost_rows(m), *MODEL_LAYOUTS))
                     for m in model_runs}
        a["models"] = per_model
    a.update(run=run, bars=BARS, sources=list(cells), per_model=per_model,
             cost_long=cost_long(run), fits=fits(run, rows),
             stall_verdicts=stall_verdicts(a["stall"]), stall_charts=stall_charts(a["stall"]),
             invert_verdicts=invert_verdicts(a["invert"]), example_cell=example_cell(run.fields),
             **cost_bars(rows), **fleet_figures(run))
    return a
