"""The figures of a scripts/bench run: medians, ratios, fits, the stall,
inversion and moves summaries and the bars (see scripts/analysis/analyze.py).

Standard library only. Times: cost in ms, stall and inversion in µs.
"""
import math
import random
from dataclasses import dataclass

from bench_load import INVERT_MOVE_SUFFIX, INVERT_SWAP_SUFFIX, MOVERS

KERNELS = ("stock", "series")
# The stock implementation beside the series in a bench-only kernel: a
# cost method and a stall/inversion condition prefix (guest/bench/common.h).
SAME_BOOT_STOCK = "rollup=smaps_rollup_stock"

# The bars (the series issues' targets).
SPEEDUP_CELL = (4000, "16")     # bar 1 is judged at 4,000 VMAs, 16 MiB
MIN_SPEEDUP = 12                # bar 1: rollup >= 12x faster than smaps + C parser
MAX_SLOWDOWN = 1.05             # bar 2: series within 5% of stock
STALL_CONTROL_FACTOR = 1.3      # series p99 within 1.3x of the status control's
STALL_EXCESS_FACTOR = 10        # series p99 above control >= 10x lower than stock's
INVERT_MEAN_FACTOR = 1.2        # mapper mean within 1.2x of the status control's
# The cells with swap entries (issue #31): bench-invert's conditions with
# INVERT_SWAP_SUFFIX (every 64th page of the mapper's region kept paged
# out) and bench-target's layouts with swap, each with the layout it adds
# swap to: p (every 64th page of h's heap paged out), s (half the shmem of
# the spread layout). Their bars, judged under CONFIG_PREEMPT (model
# SWAP_BAR_MODEL; the other models' are for comparison): the stall's
# STALL_CONTROL_FACTOR, and these.
SWAP_LAYOUTS = {"p": "h", "s": ""}
SWAP_BAR_MODEL = "full"
SWAP_INVERT_MEAN_FACTOR = 1.1   # mapper mean within 1.1x of the status control's
SWAP_INVERT_MAX_FACTOR = 1.2    # median of the per-run maxima within 1.2x of the control's
# The inversion with UFFDIO_MOVE: bench-invert's conditions with
# INVERT_MOVE_SUFFIX (a thread of the mapper moves 8 MiB back and forth
# all along, as ART does). Its bar, judged under CONFIG_PREEMPT too: the
# mapper's mean; the median of the per-run maxima is reported beside it
# (no bar).
MOVE_BAR_MODEL = "full"
MOVE_INVERT_MEAN_FACTOR = 1.2   # mapper mean within 1.2x of the status control's
# bench-invert's condition suffixes, in the tables' order.
INVERT_SUFFIXES = (INVERT_SWAP_SUFFIX, INVERT_MOVE_SUFFIX)
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


def rss_key(rss):
    """RSS_MIB[LAYOUT] as bench-target takes it: (512, ''), (512, 'h')..."""
    mib = rss.rstrip("hpusdamocf")
    return int(mib), rss[len(mib):]


# ------------------------------------------------------------------ cost
def cost_row(run, vmas, rss):
    """One cost cell: per column its median, p90 and count, then the ratios."""
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
    row["host"] = {m: median(run.samples("host", vmas, rss, m)) for m in HOST_METHODS}
    return row


def cost_rows(run):
    """Every cell measured on the series kernel, plain layout first."""
    cells = {(k[1], k[2]) for k in run.cost if k[0] == "series"}
    layout_order = ("", "h", "p", "u", "s", "d", "a", "m", "o", "c", "f")
    ordered = sorted(cells, key=lambda c: (layout_order.index(rss_key(c[1])[1]), c[0],
                                           rss_key(c[1])[0]))
    return [cost_row(run, vmas, rss) for vmas, rss in ordered]


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
def split_suffix(cond):
    """(COND without its INVERT_SUFFIXES, those it had, as written):
    rollup:1+swap gives (rollup:1, +swap), status:2+move (status:2, +move),
    none+swap+move (none, +swap+move), rollup:1 (rollup:1, "")."""
    suffix = ""
    while True:
        found = next((s for s in INVERT_SUFFIXES if cond.endswith(s) and len(cond) > len(s)),
                     None)
        if not found:
            return cond, suffix
        cond, suffix = cond[:-len(found)], found + suffix


def readers_of(cond):
    """The reader count of a condition: none 0, status:2 2, rollup=FILE:1 1,
    rollup:1+swap 1."""
    cond = split_suffix(cond)[0]
    return int(cond.rsplit(":", 1)[1]) if ":" in cond else 0


def control_of(cond):
    """The status control of a condition: status:N, its suffixes (+swap,
    +move) kept."""
    base, suffix = split_suffix(cond)
    return f"status:{readers_of(base)}{suffix}"


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
    """(kernel, vmas, rss, cond) -> summary, with p99 above its status control."""
    summaries = {key: stall_summary(runs) for key, runs in run.stall.items()}
    for (kernel, vmas, rss, cond), s in summaries.items():
        control = summaries.get((kernel, vmas, rss, control_of(cond)))
        s["above_control"] = (s["p99"] - control["p99"]
                              if control and not cond.startswith("status") else NAN)
    return summaries


def stall_sizes(summaries):
    return sorted({(k[1], k[2]) for k in summaries}, key=lambda c: (c[0], rss_key(c[1])))


@dataclass
class StallVerdict:
    vmas: int
    rss: str
    readers: int
    series: dict
    stock: dict
    series_control: dict
    stock_control: dict
    same_boot: dict         # the stock file on the series kernel, or None

    @property
    def within_control(self):
        return self.series["p99"] <= STALL_CONTROL_FACTOR * self.series_control["p99"]

    @staticmethod
    def tenfold(stock_excess, series_excess):
        return stock_excess > 0 and STALL_EXCESS_FACTOR * series_excess <= stock_excess

    @property
    def excess_tenfold(self):
        return self.tenfold(self.stock["above_control"], self.series["above_control"])

    @property
    def same_boot_tenfold(self):
        return self.same_boot and self.tenfold(self.same_boot["above_control"],
                                               self.series["above_control"])

    @property
    def no_worse(self):
        return self.series["p99"] <= self.stock["p99"]


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
    """(kernel, cond) -> medians over the runs of the mapper's mean and max (µs)."""
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
    return out


def invert_verdicts(summaries):
    """Per kernel, rollup condition: (kernel, cond, it, its status control,
    mean within INVERT_MEAN_FACTOR of the control's, max no worse). Not the
    conditions with a suffix: swap_verdicts holds the +swap ones to issue
    #31's bars, move_verdicts the +move ones to the move bar."""
    verdicts = []
    for (kernel, cond), s in sorted(summaries.items()):
        control = summaries.get((kernel, control_of(cond)))
        if cond.startswith("status") or not control or split_suffix(cond)[1]:
            continue
        verdicts.append((kernel, cond, s, control,
                         s["mean"] <= INVERT_MEAN_FACTOR * control["mean"],
                         s["max"] <= control["max"]))
    return verdicts


# ------------------------------------------------------- swap and moves
# The figures each kind of swap cell is held to: (summary key, bar).
SWAP_BARS = {"invert": (("mean", SWAP_INVERT_MEAN_FACTOR), ("max", SWAP_INVERT_MAX_FACTOR)),
             "stall": (("p99", STALL_CONTROL_FACTOR),)}
# The inversion with UFFDIO_MOVE's: a bar of None is a figure reported
# beside the bar, not held to one.
MOVE_BARS = (("mean", MOVE_INVERT_MEAN_FACTOR), ("max", None))


@dataclass
class SwapVerdict:
    """A cell in one preemption model against its issue's bars: with swap
    entries (issue #31: the +swap inversion conditions, the stall layouts of
    SWAP_LAYOUTS) or, for the +move inversion conditions, with UFFDIO_MOVE
    (issue = "move"). Each of series, stock_file, stock and plain maps a
    figure of BARS to (its value, its status control's), or is empty when
    not measured: the series rollup (the bar), stock's implementation in the
    same boot, the stock kernel's rollup, the series rollup on the same cell
    without swap (without the moves)."""
    model: str
    kind: str           # invert or stall
    cell: str           # invert: the condition (rollup:1+swap); stall: VMAS:RSS (16000:128p)
    readers: int
    series: dict
    stock_file: dict
    stock: dict
    plain: dict
    issue: str = "swap"  # swap or move

    @property
    def bars(self):
        """(summary key, bar or None: reported only), in the report's order."""
        return MOVE_BARS if self.issue == "move" else SWAP_BARS[self.kind]

    @property
    def bar_model(self):
        return MOVE_BAR_MODEL if self.issue == "move" else SWAP_BAR_MODEL

    @property
    def is_bar(self):
        return self.model == self.bar_model

    def ratio(self, which, stat):
        pair = getattr(self, which).get(stat)
        return ratio(*pair) if pair else NAN

    @property
    def met(self):
        return all(self.ratio("series", stat) <= bar for stat, bar in self.bars
                   if bar is not None)


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
                invert("series", f"rollup:{n}", ""), issue))
    return verdicts


def swap_verdicts(model, figures):
    """The swap cells of one model's FIGURES (its stall and invert
    summaries): the +swap inversion conditions and the stall cells of
    SWAP_LAYOUTS, per reader count."""
    verdicts = invert_suffix_verdicts(model, figures["invert"], INVERT_SWAP_SUFFIX, "swap",
                                      [stat for stat, _ in SWAP_BARS["invert"]])
    st = figures["stall"]
    for vmas, rss in stall_sizes(st):
        mib, layout = rss_key(rss)
        if layout not in SWAP_LAYOUTS:
            continue
        for n in sorted({readers_of(k[3]) for k in st if k[1:3] == (vmas, rss)} - {0}):
            def stall(kernel, cond, cell=rss):
                return over_control(st, (kernel, vmas, cell, cond),
                                    (kernel, vmas, cell, f"status:{n}"), ["p99"])
            series = stall("series", f"rollup:{n}")
            if series:
                verdicts.append(SwapVerdict(
                    model, "stall", f"{vmas}:{rss}", n, series,
                    stall("series", f"{SAME_BOOT_STOCK}:{n}"), stall("stock", f"rollup:{n}"),
                    stall("series", f"rollup:{n}", f"{mib}{SWAP_LAYOUTS[layout]}")))
    return verdicts


def move_verdicts(model, figures):
    """The +move inversion conditions of one model's FIGURES, per reader
    count, against the move bar (MOVE_BARS)."""
    return invert_suffix_verdicts(model, figures["invert"], INVERT_MOVE_SUFFIX, "move",
                                  [stat for stat, _ in MOVE_BARS])


def invert_cell_verdicts(model, figures):
    """The inversion cells with a suffix of one model: +swap's, then +move's."""
    return [v for v in swap_verdicts(model, figures) if v.kind == "invert"] \
        + move_verdicts(model, figures)


# ------------------------------------------------------------------ moves
# bench-moves' methods, in the report's order: the series' file (on the
# stock kernel: stock's), stock's beside it, the status control.
MOVES_METHODS = ("rollup", SAME_BOOT_STOCK, "status")


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
    mover: str              # bench_load.MOVERS
    mib: int
    period_us: int
    series: dict
    stock: dict             # stock's implementation in the same boot, else the stock kernel's
    same_boot: bool

    @property
    def no_more_wrong(self):
        return self.series["share"] <= self.stock["share"]

    @property
    def none_under(self):
        return self.series["under"] == 0

    @property
    def met(self):
        return self.no_more_wrong and self.none_under


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


# ------------------------------------------------------- preemption models
# The layouts whose cost cells every preemption model runs (scripts/bench).
MODEL_LAYOUTS = ("u", "d")


def model_figures(run):
    """What a preemption model's boots show: stall, inversion and moves
    summaries, and the cost rows of the half-untouched and dense cells."""
    return dict(stall=stall_summaries(run), invert=invert_summaries(run),
                moves=moves_summaries(run),
                cost_rows=[r for r in cost_rows(run) if rss_key(r["rss"])[1] in MODEL_LAYOUTS])


def per_model(run, figures):
    """model -> its figures: every model's (figures["models"]), or the one
    model's of a run that had one."""
    return figures.get("models") or {run.model: figures}


# ------------------------------------------------------------------ fleet
def fleet_summaries(run):
    """Per (kernel, method): processes spawned, median PIDs swept and read,
    sweeps, median and p90 ms of a sweep."""
    return {key: dict(procs=d["procs"], pids=median(d["pids"]), ok=median(d["ok"]),
                      sweeps=len(d["ms"]), median_ms=median(d["ms"]),
                      p90_ms=percentile(d["ms"], 0.9))
            for key, d in run.fleet.items()}


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
