"""Write a scripts/bench run's CSVs and gnuplot PNGs (see
scripts/analysis/analyze.py): the write step (load -> compute -> write).
It formats the run's one result, computed before it, which holds every
figure and verdict; it computes none. Also the formatting helpers of
bench_readme.py."""
import math
import os
import subprocess

from bench_load import INVERT_SUFFIXES, SAME_BOOT_STOCK, STALL_CONDS, rss_key, split_suffix

LAYOUTS = {"": "spread", "h": "heap", "p": "heap-swap", "u": "half-untouched",
           "s": "shmem-swap", "d": "dense", "a": "anon-4k", "m": "anon-mthp",
           "o": "one-vma-anon", "c": "one-vma-forked", "f": "one-vma-file"}


def ordered_conds(conds):
    """The conditions of CONDS in the tables' order: those without a suffix
    first, then +swap's, +move's and any combined, each in STALL_CONDS'
    order (others last)."""
    def key(cond):
        base, suffix = split_suffix(cond)
        group = ("",) + INVERT_SUFFIXES
        return (group.index(suffix) if suffix in group else len(group), suffix,
                STALL_CONDS.index(base) if base in STALL_CONDS else len(STALL_CONDS), base)
    return sorted(set(conds), key=key)


def fmt(x, digits=2):
    """A figure for the README: fewer decimals as it grows; – for none."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def csv_value(v):
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def verdict(met):
    return "met" if met else "MISSED"


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(csv_value(v) for v in row) + "\n")


def layout_of(rss):
    return LAYOUTS[rss_key(rss)[1]]


def size_label(vmas, rss):
    mib, layout = rss_key(rss)
    what = {"": "spread over the VMAs", "h": "the anonymous half in one VMA",
            "p": "the anonymous half in one VMA, every 64th page of it swapped out",
            "u": "half the VMAs untouched PROT_NONE reservations",
            "s": "half the shmem swapped out", "d": "every VMA resident",
            "a": "anonymous only, 4 KiB pages", "m": "anonymous only, 64 KiB folios",
            "o": "one private anonymous VMA", "c": "one anonymous VMA shared with a child",
            "f": "one VMA of a page cache file"}[layout]
    return f"{vmas} VMAs, {mib} MiB resident, {what}"


def cond_label(cond):
    return cond.replace(SAME_BOOT_STOCK, "stock file")


# ------------------------------------------------------------------- CSVs
def cost_columns(a):
    """cost.csv: (header, value of a row) pairs; the plots find columns by header."""
    def med(label):
        return lambda r: r["median"][label]

    def p90(label):
        return lambda r: r["p90"][label]
    columns = [
        ("vmas", lambda r: r["vmas"]), ("rss_mib", lambda r: rss_key(r["rss"])[0]),
        ("layout", lambda r: layout_of(r["rss"])), ("nvmas", lambda r: r["nvmas"]),
        ("rss_mib_actual", lambda r: round(r["rss_mib"], 1)),
        ("smaps_ms", med("smaps")), ("smaps_p90", p90("smaps")),
        ("awk_ms", med("awk")), ("awk_p90", p90("awk")),
        ("rollup_series_ms", med("series")), ("rollup_series_p90", p90("series")),
        ("rollup_stock_ms", med("stock")), ("rollup_stock_p90", p90("stock")),
        ("status_ms", med("status")), ("status_p90", p90("status")),
        ("maps_ms", med("maps")), ("rollup_stock_file_same_boot_ms", med("same_boot_stock")),
        ("smaps_over_rollup", lambda r: r["smaps_over_rollup"]),
        ("awk_over_rollup", lambda r: r["awk_over_rollup"]),
        ("series_over_stock", lambda r: r["series_over_stock"]),
        ("series_over_stock_ci05", lambda r: r["series_over_stock_ci"][0]),
        ("series_over_stock_ci95", lambda r: r["series_over_stock_ci"][1]),
        ("series_over_stock_fastest", lambda r: r["series_over_stock_fastest"]),
        ("rollup_over_status", lambda r: r["rollup_over_status"]),
        ("smaps_series_over_stock", lambda r: r["smaps_series_over_stock"]),
        ("maps_series_over_stock", lambda r: r["maps_series_over_stock"]),
        ("status_series_over_stock", lambda r: r["status_series_over_stock"]),
        ("same_boot_series_over_stock", lambda r: r["same_boot_series_over_stock"]),
    ]
    columns += [(f"series_over_stock_round{n}",
                 lambda r, n=n: r["series_over_stock_by_round"][n]) for n in a["run"].rounds]
    columns += [(k, lambda r, k=k: r[k]) for k in ("host_smaps_over_rollup",
                                                   "host_awk_over_rollup",
                                                   "host_rollup_over_status")]
    columns += [(f"{name}_series_over_stock", lambda r, name=name: r["sources"][name])
                for name in a["sources"]]
    return columns


def write_csvs(out, a):
    run, rows, rounds = a["run"], a["cost_rows"], a["run"].rounds
    write_csv(os.path.join(out, "cost-samples.csv"), ["kernel", "round", "vmas", "rss_mib",
                                                       "method", "ms"],
              [(k, r, v, rs, m, x) for (k, v, rs, m), by_round in sorted(run.cost.items())
               for r in sorted(by_round) for x in by_round[r]])
    write_csv(os.path.join(out, "cost-long.csv"), ["kernel", "vmas", "rss_mib", "nvmas", "rss_kb",
                                                    "method", "n", "median_ms", "p90_ms", "min_ms"],
              a["cost_long"])
    columns = cost_columns(a)
    write_csv(os.path.join(out, "cost.csv"), [h for h, _ in columns],
              [[get(r) for _, get in columns] for r in rows])
    fit_keys = ("kernel", "method", "per_vma_us", "vma_intercept_ms", "vma_r2", "vma_points",
                "per_gib_ms", "gib_intercept_ms", "gib_r2", "gib_points", "joint_intercept_ms",
                "joint_per_vma_us", "joint_per_gib_ms", "joint_r2")
    write_csv(os.path.join(out, "fit.csv"), fit_keys, [[x[k] for k in fit_keys] for x in a["fits"]])
    stall_keys = ("rounds", "ops", "p50", "p90", "p99", "p999", "max", "above_control",
                  "mmap_p99", "touch_p99", "munmap_p99", "reads", "read_p50_ms")
    write_csv(os.path.join(out, "stall.csv"),
              ["kernel", "vmas", "rss_mib", "condition"]
              + [k if k in ("rounds", "ops", "reads", "read_p50_ms") else f"{k}_us"
                 for k in stall_keys] + [f"p99_round{n}_us" for n in rounds],
              [list(key) + [s[k] for k in stall_keys]
               + [s["p99_by_round"].get(n, float("nan")) for n in rounds]
               for key, s in sorted(a["stall"].items())])
    invert_keys = ("readers", "runs", "ops", "mean", "max", "mmap_mean", "mmap_max",
                   "munmap_mean", "munmap_max", "reads")
    write_csv(os.path.join(out, "invert.csv"),
              ["kernel", "condition"] + [k if k in ("readers", "runs", "ops", "reads")
                                         else f"{k}_us" for k in invert_keys],
              [list(key) + [s[k] for k in invert_keys] for key, s in sorted(a["invert"].items())])
    write_invert_cells_csv(out, a)
    moves_keys = ("rss_kb", "rounds", "moves", "reads", "wrong", "over", "under", "share",
                  "min_kb", "max_kb", "read_p50_ms")
    write_csv(os.path.join(out, "moves.csv"),
              ["model", "kernel", "mover", "mib", "period_us", "method"] + list(moves_keys),
              [(m,) + key + tuple(s[k] for k in moves_keys)
               for m, f in a["per_model"].items() for key, s in sorted(f["moves"].items())])
    write_csv(os.path.join(out, "fleet.csv"), ["kernel", "method", "processes_spawned",
                                                "pids_swept", "pids_read", "sweeps",
                                                "median_ms", "p90_ms"],
              [(k, m) + tuple(s[x] for x in ("procs", "pids", "ok", "sweeps", "median_ms", "p90_ms"))
               for (k, m), s in sorted(a["fleet"].items())])


# invert-cells.csv: per figure (summary key), the columns of one verdict.
INVERT_CELL_WHICH = ("series", "stock_file", "stock", "plain")


def write_invert_cells_csv(out, a):
    """invert-cells.csv: every preemption model's inversion cells with a
    suffix (+swap, +move: their invert_cells), one row each:
    the series rollup's mean and median of per-run maxima and its status
    control's, the bars (empty: none), and over their controls the series
    rollup, stock's implementation in the same boot, the stock kernel's
    rollup and the series rollup without the suffix."""
    stats = ("mean", "max")
    header = ["model", "issue", "condition", "control", "readers", "bar_model", "judged"]
    for stat in stats:
        header += [f"series_{stat}_us", f"control_{stat}_us", f"bar_{stat}"]
        header += [f"{which}_{stat}_ratio" for which in INVERT_CELL_WHICH]
    header.append("met")
    rows = []
    for model, f in a["per_model"].items():
        for v in f["invert_cells"]:
            bars = dict(v.bars)
            row = [model, v.issue, v.cell, v.control, v.readers, v.bar_model,
                   "yes" if v.is_bar else "no"]
            for stat in stats:
                value, control = v.series.get(stat, (float("nan"), float("nan")))
                bar = bars.get(stat)
                row += [value, control, "" if bar is None else bar]
                row += [v.ratio(which, stat) for which in INVERT_CELL_WHICH]
            row.append("yes" if v.met else "no")
            rows.append(row)
    write_csv(os.path.join(out, "invert-cells.csv"), header, rows)


def write_model_csvs(out, models):
    """models-cost.csv, models-stall.csv, models-invert.csv: every
    preemption model's figures, one model column first."""
    cost_keys = ("series_over_stock", "maps_series_over_stock", "same_boot_series_over_stock")
    write_csv(os.path.join(out, "models-cost.csv"),
              ["model", "vmas", "rss_mib", "layout", "nvmas", "rss_mib_actual", "rollup_series_ms",
               "rollup_stock_ms", "maps_ms", "maps_stock_ms", "rollup_stock_file_same_boot_ms"]
              + list(cost_keys),
              [(m, r["vmas"], rss_key(r["rss"])[0], layout_of(r["rss"]), r["nvmas"],
                round(r["rss_mib"], 1), r["median"]["series"], r["median"]["stock"],
                r["median"]["maps"], r["median"]["maps_stock"], r["median"]["same_boot_stock"])
               + tuple(r[k] for k in cost_keys)
               for m, f in models.items() for r in f["cost_rows"]])
    stall_keys = ("ops", "p50", "p99", "max", "above_control", "reads")
    write_csv(os.path.join(out, "models-stall.csv"),
              ["model", "kernel", "vmas", "rss_mib", "condition"]
              + [k if k in ("ops", "reads") else f"{k}_us" for k in stall_keys],
              [(m,) + key + tuple(s[k] for k in stall_keys)
               for m, f in models.items() for key, s in sorted(f["stall"].items())])
    invert_keys = ("readers", "runs", "mean", "max")
    write_csv(os.path.join(out, "models-invert.csv"),
              ["model", "kernel", "condition", "readers", "runs", "mean_us", "max_us"],
              [(m,) + key + tuple(s[k] for k in invert_keys)
               for m, f in models.items() for key, s in sorted(f["invert"].items())])
    return ["models-cost.csv", "models-stall.csv", "models-invert.csv"]


# ------------------------------------------------------------------ plots
COST_LINES = (("smaps_ms", "1. smaps + C parser (series)", ""),
              ("awk_ms", "2. awk over smaps (series)", ""),
              ("rollup_series_ms", "3. smaps_rollup (series)", ""),
              ("rollup_stock_ms", "4. smaps_rollup (stock)", " dt 2"),
              ("status_ms", "5. status VmRSS (series)", ""))
STALL_BARS = (("p50", "stock", "#9ecae1"), ("p50", "series", "#fdae6b"),
              ("p99", "stock", "#3182bd"), ("p99", "series", "#e6550d"),
              ("max", "stock", "#08519c"), ("max", "series", "#a63603"))


def cost_plot(source, x, col):
    """A gnuplot plot command: every COST_LINES column of SOURCE against column X."""
    parts = []
    for i, (name, title, style) in enumerate(COST_LINES):
        src = f'"{source}"' if i == 0 else '""'
        parts.append(f'{src} using {x}:{col(name)} with linespoints{style} title "{title}"')
    return "plot " + ", ".join(parts)


def write_plots(out, raw, a):
    """gnuplot: cost against VMAs and RSS, and one stall chart per size of
    a["stall_charts"] (a size without a condition measured on both kernels,
    as in a run without the stock kernel, has none)."""
    header = [h for h, _ in cost_columns(a)]

    def col(name):
        return header.index(name) + 1
    csv_path = os.path.join(out, "cost.csv")
    spread = f'${col("layout")} ~ /^spread$/'
    vma_sweep = f"< awk -F, '{spread} && ${col('rss_mib')} == 16' {csv_path}"
    rss_sweep = f"< awk -F, '{spread} && ${col('vmas')} == 4000' {csv_path}"
    gp = ['set terminal pngcairo noenhanced size 900,600 font "sans,10"',
          'set datafile separator ","', "set key top left", "set grid", "set logscale y",
          'set ylabel "time per read (ms, median; TCG guest, emulated)"',
          f'set output "{out}/cost-vs-vmas.png"', "set logscale x",
          'set title "Cost of one read against VMAs (16 MiB resident)"',
          'set xlabel "VMAs in the target"', cost_plot(vma_sweep, col("nvmas"), col),
          f'set output "{out}/cost-vs-rss.png"',
          'set title "Cost of one read against resident memory (4,000 VMAs)"',
          'set xlabel "resident memory (MiB)"', cost_plot(rss_sweep, col("rss_mib_actual"), col)]
    plots = ["cost-vs-vmas.png", "cost-vs-rss.png"]
    if not any(not rss_key(r["rss"])[1] for r in a["cost_rows"]):
        gp, plots = gp[:5], []     # no spread cell: no cost plot
    dat_header = ["cond"] + [f"{k}_{stat}" for stat, k, _ in STALL_BARS]
    for (vmas, rss), conds in a["stall_charts"].items():
        dat = os.path.join(raw, f"stall-{vmas}-{rss}.dat")
        with open(dat, "w") as f:
            f.write("# " + " ".join(dat_header) + "\n")
            for cond in conds:
                f.write(f'"{cond}" ' + " ".join(f"{a['stall'][(k, vmas, rss, cond)][stat]:.1f}"
                                                for stat, k, _ in STALL_BARS) + "\n")
        name = f"stall-{vmas}-{rss}.png"
        bars = ", ".join(f'"{dat if i == 0 else ""}" using {dat_header.index(f"{k}_{stat}") + 1}'
                         + (":xtic(1)" if i == 0 else "") + f' title "{k} {stat}" lc rgb "{color}"'
                         for i, (stat, k, color) in enumerate(STALL_BARS))
        gp += [f'set output "{out}/{name}"', "unset logscale x", "set datafile separator whitespace",
               "set style data histogram", "set style histogram cluster gap 1",
               "set style fill solid 0.8 border -1", "set boxwidth 0.9",
               f'set title "Target (vCPU 0) mmap + touch 64 KiB + munmap, {size_label(vmas, rss)}, '
               'while N readers (vCPU 1) loop"',
               'set ylabel "latency per operation (us, log; TCG guest, emulated)"',
               'set xlabel "readers"', "plot " + bars, 'set datafile separator ","']
        plots.append(name)
    if not plots:
        return plots
    script = os.path.join(raw, "plots.gp")
    with open(script, "w") as f:
        f.write("\n".join(gp) + "\n")
    if subprocess.call(["gnuplot", script]) != 0:
        raise SystemExit("gnuplot failed")
    return plots
