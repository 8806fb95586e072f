"""results/README.md of a scripts/bench run (see scripts/analysis/analyze.py):
the README's part of the write step (load -> compute -> write). It formats
the run's one result, computed before it, which holds every figure and
verdict and the bars themselves (a["bars"]); it computes none."""
import math
import os

from bench_load import (DEFAULT_MODEL, KERNELS, MODEL_OPTIONS, MOVES_METHODS, SAME_BOOT_STOCK,
                        STALL_CONDS, rss_key)
from bench_report import cond_label, fmt, ordered_conds, size_label, verdict


TCG_NOTE = ("**Every timing here was taken in a QEMU guest under TCG** (binary translation, "
            "no KVM) on a 2-core host that other builds share. TCG inflates kernel and user "
            "code by different, unknown factors, so absolute times are emulated, not hardware "
            "times: **only ratios measured in the same run are meaningful**, and even they are "
            "distorted (see Caveats). The host-kernel reference column was measured natively "
            "on the host's own kernel for comparison.\n")


def ms(x):
    return f"{x / 1e3:.2f} ms"


def setup_section(w, a):
    run = a["run"]
    info = run.run_info
    w("## Setup\n")
    prefix = "" if run.model == DEFAULT_MODEL else f"-{run.model}"
    stock_image = info.get(f"stock{prefix}_image", "none (PREEMPT_STOCK=0)").split(",")[0]
    w(f"- Kernels: stock `{stock_image}`, "
      f"series `{info.get(f'series{prefix}_image', '?').split(',')[0]}`; preemption model "
      f"**{run.model}** ({MODEL_OPTIONS.get(run.model, '?')})"
      + (f"; also measured: {', '.join(m for m in run.models if m != run.model)} (see "
         "Preemption models)" if len(run.models) > 1 else "") + ".")
    cpus = sorted({m.get("cpus", "?") for m in run.metas.values()})
    w(f"- Guest: `scripts/vm-run -m {info.get('guest_mem_mib')} -c 2`, TCG, `-cpu max`; "
      f"CPUs online in the guest: {', '.join(cpus)}; the programs in guest/bench/ are static "
      "(guest/bench/Makefile).")
    if "1" in cpus:
        w("- **The guest saw one CPU**: nothing could be pinned, so the stall and inversion "
          "figures measure CPU sharing between target, readers and busy task as much as "
          "mmap_lock.")
    w("- Boot order (interleaved): " + ", ".join(f"{t} (host load {l})" for t, l in run.loads) + ".")
    same_boot = sorted(t for t, m in run.metas.items() if m.get("same_boot"))
    w("- Same-boot comparison (/proc/PID/smaps_rollup_stock, stock's implementation in the "
      "series kernel): " + (", ".join(same_boot) if same_boot else "not available in these kernels") + ".")
    w("- Target (guest/bench/target.c): the VMA count includes the process's own few; resident "
      "memory is half anonymous (MADV_NOHUGEPAGE, so 4 KiB PTEs), a quarter file-backed (a "
      "sparse file on the 9p scratch mount, read-faulted), a quarter shmem (memfd). Each "
      "mapping is followed by a hole so none merge; with more mappings than resident pages "
      "the extra mappings stay empty. Layouts: spread; heap (the anonymous half in one VMA); "
      "half-untouched (each hole a PROT_NONE reservation instead, never touched, no "
      "anon_vma); shmem-swap (half the shmem paged out to zram with MADV_PAGEOUT); "
      "heap-swap (stall only: heap, and every 64th page of the heap paged out to zram, "
      "swap entries amid its present PTEs); dense "
      "(every mapping holds resident pages, the budget spread evenly, at least one page "
      "each: at 16,000 VMAs about 63 MiB resident whatever the cell's size); anonymous only "
      "in 4 KiB pages or 64 KiB folios; one VMA (see the layout table).")
    if a["example_cell"]:
        key = a["example_cell"]
        f = run.fields[key]
        w(f"- Example, {key[0]} VMAs / {key[1]} MiB, series rollup: Rss {f['Rss']} kB, "
          f"Pss_Anon {f['Pss_Anon']}, Pss_File {f['Pss_File']}, Pss_Shmem {f['Pss_Shmem']} kB.")
    w("- Methods: 1 = read /proc/PID/smaps in 256 KiB read()s and sum every rollup field "
      "with the selftests' parser (smaps_rollup_format.h); 2 = fork+exec `awk` (mawk) "
      "summing every `kB` field of smaps (the 2016 method, process start included); 3/4 = "
      "read and parse smaps_rollup on the series/stock kernel; 5 = read /proc/PID/status and "
      "parse VmRSS. Reads of one cell alternate between methods. Medians and p90 pool all "
      "reads of all rounds (rounds after the first repeat only rollup, status and maps).\n")
    w("### Guest clock\n")
    w("| boot | kernel (uname -r -v) | clocksource | clock_getres | smallest delta | median delta | run s |")
    w("|---|---|---|---|---|---|---:|")
    for tag, m in sorted(run.metas.items()):
        w(f"| {tag} | {m.get('uname')} | {m.get('clocksource')} | {m.get('getres_ns')} ns | "
          f"{m.get('min_delta_ns')} ns | {m.get('median_delta_ns')} ns | {m.get('done', '?')} |")
    w("\nThe smallest observed delta between consecutive `clock_gettime(CLOCK_MONOTONIC)` "
      "calls is the effective resolution; it is far below the shortest operation timed "
      "here (the fastest, status, takes tenths of a millisecond under TCG).\n")


def cost_bars(w, a):
    rows = [r for r in a["cost_rows"] if not rss_key(r["rss"])[1]]
    b, bar = a["bars"], a["speedup_bar"]
    if bar:
        vmas, mib = b.speedup_cell
        short = (f" (short by {bar['short_by']:.1f}x, {bar['short_pct']:.0f}%)"
                 if not bar["met"] else "")
        more = ", ".join(f"{r['smaps_over_rollup']:.1f}x at {r['rss']} MiB" for r in bar["more"])
        w(f"- **Bar 1: series rollup ≥ {b.min_speedup}x faster than smaps + C parser at "
          f"{vmas:,} VMAs**: {verdict(bar['met'])}: {bar['speedup']:.1f}x at {mib} MiB "
          f"resident{short}"
          + (f"; at {vmas:,} VMAs with more resident memory: {more}" if more else "")
          + f". Host kernel, natively: {fmt(bar['row']['host_smaps_over_rollup'], 1)}x.")
    bar = a["slowdown_bar"]
    if bar and bar["no_stock"]:
        w(f"- **Bar 2: series within {100 * (b.max_slowdown - 1):.0f}% of stock or faster at "
          "every size**: no stock kernel in this run (PREEMPT_STOCK=0): see the same-boot "
          "comparison below.")
    elif bar:
        worst, over = bar["worst"], bar["over"]
        w(f"- **Bar 2: series within {100 * (b.max_slowdown - 1):.0f}% of stock or faster at "
          f"every size**: {verdict(bar['met'])}: series/stock median ratio from "
          f"{bar['lowest']:.3f} to {worst['series_over_stock']:.3f} "
          f"(worst at {worst['vmas']} VMAs / {worst['rss']} MiB, bootstrap 90% interval "
          f"{worst['series_over_stock_ci'][0]:.3f}-{worst['series_over_stock_ci'][1]:.3f})"
          + ("" if not over else f"; over {b.max_slowdown} at " + ", ".join(
              f"{r['vmas']}/{r['rss']} MiB ({r['series_over_stock']:.3f}, rounds "
              + "/".join(f"{x:.3f}" for x in r["series_over_stock_by_round"].values()) + ")"
              for r in over))
          + ". Fastest read against fastest read: " + ", ".join(
              f"{r['vmas']}/{r['rss']} MiB {r['series_over_stock_fastest']:.2f}" for r in rows)
          + ". Least squares: " + ", ".join(
              f"{x['kernel']} {fmt(x['per_vma_us'])} µs per VMA and {fmt(x['per_gib_ms'])} ms per GiB"
              for x in a["fits"] if x["method"] == "rollup" and x["kernel"] in KERNELS)
          + ". Unchanged code as noise controls, series/stock (pooled): /proc/PID/maps "
          + ", ".join(fmt(r["maps_series_over_stock"]) for r in rows)
          + "; /proc/PID/smaps " + ", ".join(fmt(r["smaps_series_over_stock"]) for r in rows) + ".")
    dense = a["dense_bar"]
    if dense:
        w(f"- **Bar 2 on dense targets (every VMA resident, none skipped as empty): series "
          f"within {100 * (b.max_slowdown - 1):.0f}% of stock or faster** (same boot where "
          f"available): {verdict(dense['met'])}: " + ", ".join(
              f"{r['vmas']}/{r['rss']} MiB ({r['rss_mib']:.0f} MiB resident): same boot "
              f"{fmt(r['same_boot_series_over_stock'], 3)}, across kernels "
              f"{fmt(r['series_over_stock'], 3)} (maps control {fmt(r['maps_series_over_stock'], 3)})"
              for r in dense["rows"]) + ".")
    mthp_bars(w, a)
    pages_bars(w, a)
    same = [r for r in a["cost_rows"] if r["n"]["same_boot_stock"]]
    if same:
        w("- **Same boot, series over stock's implementation (smaps_rollup / "
          "smaps_rollup_stock)**: " + ", ".join(
              f"{r['vmas']}/{r['rss']} MiB {r['same_boot_series_over_stock']:.3f}" for r in same)
          + ".")


def mthp_bars(w, a):
    """The 64 KiB folio cells (layout m) against stock's implementation in the
    same boot, and against the same memory in 4 KiB pages (layout a)."""
    bar = a["mthp_bar"]
    if not bar:
        return
    w(f"- **64 KiB folios, same boot: series at most {a['bars'].mthp_max_ratio:.2f} of stock's "
      f"implementation**: {verdict(bar['met'])}: " + ", ".join(
          f"{r['vmas']}/{r['rss']} MiB {fmt(r['same_boot_series_over_stock'], 3)} "
          f"(smaps series/stock kernel {fmt(r['smaps_series_over_stock'], 3)}, "
          f"maps control {fmt(r['maps_series_over_stock'], 3)})" for r in bar["rows"]) + ".")
    if bar["pairs"]:
        w("- **64 KiB folios cost less to read than the same memory in 4 KiB pages** "
          f"(series rollup, medians): {verdict(bar['cheaper'])}: " + ", ".join(
              f"{m['vmas']} VMAs / {rss_key(m['rss'])[0]} MiB: "
              f"{fmt(m['median']['series'], 3)} against {fmt(p['median']['series'], 3)} ms "
              f"({fmt(folio_over_pages, 3)}; stock's "
              f"implementation {fmt(m['median']['same_boot_stock'], 3)} against "
              f"{fmt(p['median']['same_boot_stock'], 3)} ms)"
              for m, p, folio_over_pages in bar["pairs"]) + ".")


def pages_bars(w, a):
    """The one-VMA cells against stock's implementation in the same boot,
    with the controls: maps and status in that boot (ms), and series/stock
    across kernels when the run had a stock kernel."""
    for r, bar, measured, met in a["pages_bars"]:
        m, same_boot = r["median"], r["same_boot_series_over_stock"]
        head = (f"- **{rss_key(r['rss'])[0]} MiB, {size_label(r['vmas'], r['rss']).split(', ', 2)[2]}, "
                f"same boot: series at most {bar:.2f} of stock's implementation** (TCG guest, "
                "emulated times): ")
        if not measured:
            w(head + "not measured: the series boot had no smaps_rollup_stock.")
            continue
        w(head + f"{verdict(met)}: {fmt(same_boot, 3)} (series "
          f"{fmt(m['series'], 3)} against {fmt(m['same_boot_stock'], 3)} ms, medians of "
          f"{r['n']['series']} and {r['n']['same_boot_stock']} reads; per round "
          + " / ".join(fmt(x, 3) for x in r["same_boot_by_round"].values())
          + f"); controls: maps {fmt(m['maps'], 3)} ms, status {fmt(m['status'], 3)} ms in that "
          "boot" + ("" if math.isnan(r["maps_series_over_stock"]) else
                    f", series/stock kernel maps {fmt(r['maps_series_over_stock'], 3)}, status "
                    f"{fmt(r['status_series_over_stock'], 3)}") + ".")


def stall_bars(w, a):
    for v in a["stall_verdicts"]:
        s, st, sc, stc, sb = v.series, v.stock, v.series_control, v.stock_control, v.same_boot
        head = f"({size_label(v.vmas, v.rss)}, {v.readers} reader(s))"
        w(f"- **Stall: series p99 within {a['bars'].stall_control}x of its status control** "
          f"{head}: {verdict(v.within_control)}: series {ms(s['p99'])} against the control's "
          f"{ms(sc['p99'])} ({s['p99_over_control']:.2f}x); stock {ms(st['p99'])} against "
          f"{ms(stc['p99'])} ({st['p99_over_control']:.2f}x).")
        w(f"- **Stall: series p99 above the control ≥ {a['bars'].stall_excess}x lower than "
          f"stock's** {head}: {verdict(v.excess_tenfold)}: series {ms(s['above_control'])}, "
          f"stock {ms(st['above_control'])}"
          + (f"; same boot, stock's implementation {ms(sb['above_control'])}: "
             f"{verdict(v.same_boot_tenfold)}" if sb else "") + ".")
        w(f"- **Bar 3: target p99 with series readers no worse than with stock readers** "
          f"{head}: {verdict(v.no_worse)}: series {ms(s['p99'])} (rounds "
          + "/".join(f"{x / 1e3:.1f}" for x in s["p99_by_round"].values())
          + f") against stock {ms(st['p99'])} (rounds "
          + "/".join(f"{x / 1e3:.1f}" for x in st["p99_by_round"].values())
          + f"); mmap p99 series {ms(s['mmap_p99'])}, stock {ms(st['mmap_p99'])}.")


def invert_bars(w, a):
    for v in a["invert_verdicts"]:
        s, control = v.summary, v.control
        what = "**Inversion bar**" if v.is_bar else "Inversion, for comparison"
        w(f"- {what} ({v.kernel} kernel, {cond_label(v.cond)}, {s['readers']} reader(s)): "
          f"mapper mean within {a['bars'].invert_mean}x of the status control: "
          f"{verdict(v.mean_ok)} ({fmt(s['mean'])} against {fmt(control['mean'])} µs, "
          f"{s['mean_over_control']:.2f}x); max no worse than the control's: "
          f"{verdict(v.max_ok)} ({fmt(s['max'])} against {fmt(control['max'])} µs).")


# How the swap verdicts name their figures: (label, unit).
SWAP_STATS = {"mean": ("mapper mean", "µs"), "max": ("median of per-run maxima", "µs"),
              "p99": ("target p99", "µs")}


def swap_ratios(v, which):
    """V's ratios over the control for WHICH (series, stock_file...), as
    "1.05x / 1.10x", or None when not measured."""
    if not getattr(v, which):
        return None
    return " / ".join(f"{fmt(v.ratio(which, stat))}x" for stat, _ in v.bars)


# What the mover adds to the inversion (bench-invert +move).
MOVE_WHAT = "a thread of the mapper moving 8 MiB back and forth with UFFDIO_MOVE"


def cell_bar(w, v):
    """One swap or move verdict V: the series rollup against its status
    control, stock's implementation and the cell without swap (without the
    moves) beside it."""
    if v.issue == "move":
        what = f"inversion, {MOVE_WHAT}, {v.cell}, control {v.control}"
        plain = f"the same without the moves ({v.plain_cell})"
        head = ("**Move bar (UFFDIO_MOVE)**" if v.is_bar else
                "Move cell against the UFFDIO_MOVE bar, for comparison")
        judged = "" if v.is_bar else f", the bar being judged under {v.bar_model}"
    else:
        if v.kind == "invert":
            what = (f"inversion, every 64th page of the mapper's region kept paged out, "
                    f"{v.cell}, control {v.control}")
            plain = f"the same without swap ({v.plain_cell})"
        else:
            vmas, rss = v.cell.split(":")
            what = f"stall, {size_label(int(vmas), rss)}, rollup:{v.readers}, control {v.control}"
            plain = f"the same cell without swap ({v.plain_cell})"
        head = ("**Swap bar (issue #31)**" if v.is_bar else
                "Swap cell against issue #31's bars, for comparison")
        judged = "" if v.is_bar else f", the bars being judged under {v.bar_model}"
    figures = "; ".join(
        f"{SWAP_STATS[stat][0]} {fmt(v.series[stat][0])} against "
        f"{fmt(v.series[stat][1])} {SWAP_STATS[stat][1]}, "
        f"{fmt(v.ratio('series', stat))}x (" + ("no bar" if bar is None else f"bar {bar}x") + ")"
        for stat, bar in v.bars)
    others = [("stock's implementation in the same boot", "stock_file"),
              ("the stock kernel's rollup", "stock"), (plain, "plain")]
    w(f"- {head} ({v.model} preemption{judged}; {what}; TCG guest, emulated): "
      f"{verdict(v.met)}: {figures}. Over their controls: "
      + "; ".join(f"{label} {swap_ratios(v, which)}" for label, which in others
                  if swap_ratios(v, which)) + ".")


def cell_bars(w, a, which):
    """The cells with swap entries (issue #31, WHICH swap_verdicts) or the
    inversion with UFFDIO_MOVE (+move, move_verdicts), per preemption model."""
    for f in a["per_model"].values():
        for v in f[which]:
            cell_bar(w, v)


# How the report names bench-moves' movers (bench_load.MOVERS).
MOVER_LABELS = {"mremap": "mremap", "uffd": "UFFDIO_MOVE"}


def moves_label(mover, mib, period_us):
    every = f"every {period_us / 1e3:g} ms" if period_us else "in a tight loop"
    return f"{mib} MiB moved with {MOVER_LABELS[mover]} {every}"


def share(s):
    return f"{fmt(100 * s['share'])}%"


def moves_bars(w, a):
    for model, f in a["per_model"].items():
        for v in f["moves_verdicts"]:
            s, st = v.series, v.stock
            control = f["moves"].get(("series", v.mover, v.mib, v.period_us, "status"))
            w(f"- **Moves bar: series' wrong-read share at most stock's in the same boot, no "
              f"read under the true Rss** ({moves_label(v.mover, v.mib, v.period_us)}, {model} "
              f"preemption): {verdict(v.met)}: series {s['wrong']} of {s['reads']} reads wrong "
              f"({share(s)}), {s['under']} under; "
              + ("stock's implementation in the same boot" if v.same_boot else
                 "the stock kernel's smaps_rollup (no stock file in the series boot)")
              + f" {st['wrong']} of {st['reads']} ({share(st)}), {st['under']} under"
              + (f"; status control {control['wrong']} of {control['reads']}" if control else "")
              + ". The goal: none wrong.")


def source_cells(a, r=None):
    """A column per other source of cost figures: its header, or row R's
    series/stock in that source."""
    return "".join(f" {name} series/stock |" if r is None else f" {fmt(r['sources'][name], 3)} |"
                   for name in a["sources"])


def source_note(w, a):
    if a["sources"]:
        w(" ".join(f"{name} series/stock: the series rollup over stock's implementation in the "
                   f"same boot, medians of the reads of `analyze.py --cost {name}=...`"
                   for name in a["sources"]) + " (– where that source has no such cell).\n")


def cost_section(w, a):
    rows = [r for r in a["cost_rows"] if not rss_key(r["rss"])[1]]
    w("## Cost per read (medians, ms; TCG guest, emulated times)\n")
    w("| VMAs | RSS MiB | 1. smaps+C | 2. awk | 3. series rollup | 4. stock rollup | 5. status | "
      "1/3 | 2/3 | 3/4 | 3/4 per round | 3/4 fastest reads | 3/5 | smaps series/stock | "
      "host 1/3 | host 2/3 |" + source_cells(a))
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
      + "---:|" * len(a["sources"]))
    for r in rows:
        m = r["median"]
        w(f"| {r['nvmas']} | {r['rss_mib']:.0f} | {fmt(m['smaps'])} | {fmt(m['awk'])} | "
          f"{fmt(m['series'], 3)} | {fmt(m['stock'], 3)} | {fmt(m['status'], 3)} | "
          f"{fmt(r['smaps_over_rollup'], 1)} | {fmt(r['awk_over_rollup'], 1)} | "
          f"{fmt(r['series_over_stock'], 3)} | "
          + " / ".join(f"{x:.3f}" for x in r["series_over_stock_by_round"].values())
          + f" | {fmt(r['series_over_stock_fastest'], 3)} | {fmt(r['rollup_over_status'], 0)} | "
          f"{fmt(r['smaps_series_over_stock'], 3)} | {fmt(r['host_smaps_over_rollup'], 1)} | "
          f"{fmt(r['host_awk_over_rollup'], 1)} |" + source_cells(a, r))
    w("\np90 (ms), same cells:\n")
    w("| VMAs | RSS MiB | 1. smaps+C | 2. awk | 3. series rollup | 4. stock rollup | 5. status | reads (1/2/3/4/5) |")
    w("|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        p, n = r["p90"], r["n"]
        w(f"| {r['nvmas']} | {r['rss_mib']:.0f} | {fmt(p['smaps'])} | {fmt(p['awk'])} | "
          f"{fmt(p['series'], 3)} | {fmt(p['stock'], 3)} | {fmt(p['status'], 3)} | "
          f"{n['smaps']}/{n['awk']}/{n['series']}/{n['stock']}/{n['status']} |")
    w("\nRatios: 1/3 = smaps + C parser over series rollup, 2/3 = awk over series rollup, "
      "3/4 = series rollup over stock rollup (below 1: series faster), 3/5 = series rollup "
      "over status. 3/4 per round: the median ratio of each stock/series boot pair; it "
      "swings with how fast each boot ran on the shared host. 3/4 fastest reads: the "
      "fastest series read over the fastest stock read, the estimate least touched by "
      "host preemption of the vCPU threads. smaps series/stock: /proc/PID/smaps, which the "
      "series must not change (about 1 but for boot-to-boot noise). VMAs and RSS are as "
      "measured in the target. Files: cost.csv (per cell), cost-long.csv (every kernel and "
      "method), cost-samples.csv (every read).\n")
    source_note(w, a)
    w("![cost against VMAs](cost-vs-vmas.png)\n")
    w("![cost against RSS](cost-vs-rss.png)\n")


def layout_section(w, a):
    rows = [r for r in a["cost_rows"] if rss_key(r["rss"])[1]]
    if not rows:
        return
    w("## Half-untouched, shmem-swap and dense targets (medians, ms; TCG guest, emulated times)\n")
    w("| layout | VMAs | RSS MiB | Swap kB | series rollup | stock rollup | series/stock | "
      "3/4 per round | maps series/stock | status series/stock | same boot: stock file | "
      "series/stock file | maps | status |" + source_cells(a))
    w("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
      + "---:|" * len(a["sources"]))
    for r in rows:
        m = r["median"]
        swap = a["run"].fields.get((r["vmas"], r["rss"]), {}).get("Swap", "–")
        w(f"| {size_label(r['vmas'], r['rss']).split(', ', 2)[2]} | {r['nvmas']} | "
          f"{r['rss_mib']:.0f} | {swap} | {fmt(m['series'], 3)} | {fmt(m['stock'], 3)} | "
          f"{fmt(r['series_over_stock'], 3)} | "
          + " / ".join(f"{x:.3f}" for x in r["series_over_stock_by_round"].values())
          + f" | {fmt(r['maps_series_over_stock'], 3)} | {fmt(r['status_series_over_stock'], 3)} | "
          f"{fmt(m['same_boot_stock'], 3)} | "
          f"{fmt(r['same_boot_series_over_stock'], 3)} | {fmt(m['maps'], 3)} | "
          f"{fmt(m['status'], 3)} |" + source_cells(a, r))
    w("\nHalf-untouched: each mapping is followed by a one-page PROT_NONE anonymous "
      "reservation that is never touched (no anon_vma), so half the VMAs have nothing "
      "to walk. Shmem-swap: half the memfd pages paged out to zram (Swap column: the "
      "series rollup's), so the shmem swap accounting runs. Dense: every VMA holds resident "
      "pages (RSS MiB as measured: one page per VMA at least), so no VMA can be skipped "
      "as empty. Anon-4k and anon-mthp: only private anonymous memory, written, in 4 KiB "
      "pages or in 64 KiB folios mapped by 16 PTEs each (PMD-sized THP off). One VMA: all "
      "of the cell's memory in one mapping of 4 KiB pages: private anonymous (written, "
      "MADV_NOHUGEPAGE), the same shared with a forked child (mapcount 2, Pss half of "
      "Rss), or a file written on the 9p scratch mount, mapped private read-only and "
      "read-faulted (page cache pages). "
      "maps and status series/stock: "
      "the controls, code the series does not change, across the two kernels. Same boot (a "
      "series kernel with /proc/PID/smaps_rollup_stock only): stock's implementation read "
      "in the series boot, the series rollup over it, and that boot's maps and status "
      "reads (ms) beside them.\n")
    source_note(w, a)


def fits_section(w, a):
    w("## Where the time goes (least squares over the medians)\n")
    w("| method | per VMA (µs) | R² | per resident GiB (ms) | R² | joint fit: per VMA µs, per GiB ms, R² |")
    w("|---|---:|---:|---:|---:|---|")
    for x in a["fits"]:
        w(f"| {x['label']} | {fmt(x['per_vma_us'])} | {x['vma_r2']:.3f} | {fmt(x['per_gib_ms'])} | "
          f"{x['gib_r2']:.3f} | {fmt(x['joint_per_vma_us'])}, {fmt(x['joint_per_gib_ms'])}, "
          f"{x['joint_r2']:.3f} |")
    w("\nPer VMA: slope over the VMA sweep at 16 MiB resident; per GiB: slope over the "
      "resident sweep at 4,000 VMAs; joint: `t = a + b·VMAs + c·GiB` over every spread cell. "
      "The page walk is the floor of any format: about 22 ms of system time per GB was "
      "reported on hardware (process-exporter), 4-5 ms per GiB measured natively on this "
      "host class. The guest's per-GiB slope over a native one is roughly TCG's slowdown of "
      "the walk. File: fit.csv.\n")


def stall_section(w, a):
    w("## Target stall (mmap + touch 64 KiB + munmap, per operation; µs, TCG guest, emulated)\n")
    for vmas, rss in a["stall_sizes"]:
        w(f"**{size_label(vmas, rss)}**:\n")
        w("| readers | kernel | ops | p50 | p99 | p99.9 | max | p99 above control | "
          "p99 per round | mmap p99 | munmap p99 | reader reads | reader read p50 ms |")
        w("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
        for cond in STALL_CONDS:
            for kernel in KERNELS:
                s = a["stall"].get((kernel, vmas, rss, cond))
                if not s:
                    continue
                w(f"| {cond_label(cond)} | {kernel} | {s['ops']} | {s['p50']:.0f} | "
                  f"{s['p99']:.0f} | {s['p999']:.0f} | {s['max']:.0f} | {fmt(s['above_control'], 0)} | "
                  + " / ".join(f"{x:.0f}" for x in s["p99_by_round"].values())
                  + f" | {s['mmap_p99']:.0f} | {s['munmap_p99']:.0f} | {s['reads']} | "
                  f"{fmt(s['read_p50_ms'], 3)} |")
        if (vmas, rss) in a["stall_charts"]:
            w(f"\n![stall {vmas} {rss}](stall-{vmas}-{rss}.png)\n")
        else:
            w("")
    w("The target runs pinned to vCPU 0 and its readers to vCPU 1 (when the guest has "
      "two CPUs, see Setup), so that they do not compete for a CPU. `none` has no reader; `status:N` has N readers looping on "
      "/proc/PID/status, the control (the same reader load without the page walk or "
      "mmap_lock); `rollup:N` N readers looping on smaps_rollup; `stock file:N` (a "
      "bench-only series kernel) on stock's implementation in the same boot. "
      "`p99 above control`: the p99 less the same kernel's status:N p99. Targets with "
      "swap: every 64th page of the heap (heap-swap) or half the shmem (shmem-swap) paged "
      "out to zram before the readers start; the target dies if a stall loop leaves it "
      "less than half that Swap. File: stall.csv (also p90 and touch p99).\n")


def invert_section(w, a):
    if not a["invert"]:
        return
    w("## Priority inversion (mapper's mmap/munmap latency, µs; TCG guest, emulated)\n")
    w("| kernel | readers | runs | ops | mean | max | mmap mean | mmap max | munmap mean | "
      "munmap max | reader reads |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cond in ordered_conds(c for _, c in a["invert"]):
        for kernel in KERNELS:
            s = a["invert"].get((kernel, cond))
            if s:
                w(f"| {kernel} | {cond_label(cond)} | {s['runs']} | {s['ops']:.0f} | "
                  f"{fmt(s['mean'])} | {fmt(s['max'])} | {fmt(s['mmap_mean'])} | "
                  f"{fmt(s['mmap_max'])} | {fmt(s['munmap_mean'])} | {fmt(s['munmap_max'])} | "
                  f"{s['reads']:.0f} |")
    w("\nA mapper pinned to vCPU 0 unmaps and maps back one random page of a populated "
      "128 MiB anonymous region, pausing 10 µs after each call; on vCPU 1 the readers "
      "loop at nice 15 beside a nice-0 task busy for 2 ms, asleep for 1 ms. Each figure is "
      "the median over the runs of a run's mean (or max) over all its mmap and munmap "
      "calls. `+swap`: every 64th page of the region paged out to zram (MADV_PAGEOUT) "
      "once populated, and those the mapper maps again paged out again every 5 ms by a "
      "thread of it on its vCPU, so that its page tables hold swap entries all along (its "
      "control: status:N+swap). `+move`: beside the mapper's loop, a thread of it on its "
      "vCPU moves 8 MiB of populated anonymous memory (4 KiB pages) to another area with "
      "UFFDIO_MOVE, then back, again and again, as ART's garbage collector does: the pages "
      "stay resident, so its Rss does not change (its control: status:N+move). File: "
      "invert.csv.\n")
    invert_cells_table(w, a)


def invert_cells_table(w, a):
    """The inversion cells with a suffix, every model: ratios over their
    status controls (invert-cells.csv)."""
    verdicts = [v for f in a["per_model"].values() for v in f["invert_cells"]]
    if not verdicts:
        return
    w("**With swap and with UFFDIO_MOVE, over their status controls** (mapper mean / median "
      "of per-run maxima; TCG guest, emulated):\n")
    w("| model | condition | control | series rollup | bars | verdict | same boot: stock file | "
      "stock kernel: rollup | series without the suffix |")
    w("|---|---|---|---|---|---|---|---|---|")
    for v in verdicts:
        bars = " / ".join("–" if bar is None else f"{bar}x" for _, bar in v.bars)
        judged = verdict(v.met) if v.is_bar else f"{verdict(v.met)} (judged under {v.bar_model})"
        w(f"| {v.model} | {cond_label(v.cell)} | {v.control} | "
          f"{swap_ratios(v, 'series')} | {bars} | {judged} | "
          + " | ".join(swap_ratios(v, which) or "–" for which in ("stock_file", "stock", "plain"))
          + " |")
    b = a["bars"]
    w(f"\nThe bars: +swap (issue #31) mean {b.swap_invert_mean}x and max "
      f"{b.swap_invert_max}x, judged under {b.swap_model}; +move mean "
      f"{b.move_invert_mean}x (the max reported, no bar), judged under {b.move_model}. "
      "Series without the suffix: rollup:N over status:N. File: invert-cells.csv.\n")


def moves_section(w, a):
    models = a["per_model"]
    if not any(f["moves"] for f in models.values()):
        return
    w("## Reads while the mapping moves (bench-moves)\n")
    w("| model | cell | kernel | method | quiescent Rss kB | moves | reads | wrong | over | "
      "under | wrong share | lowest / highest Rss read kB | read p50 ms |")
    w("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for model, f in models.items():
        for mover, mib, period in f["moves_cells"]:
            for kernel in KERNELS:
                for method in MOVES_METHODS:
                    s = f["moves"].get((kernel, mover, mib, period, method))
                    if s:
                        w(f"| {model} | {moves_label(mover, mib, period)} | {kernel} | "
                          f"{cond_label(method)} | {s['rss_kb']} | {s['moves']} | {s['reads']} | "
                          f"{s['wrong']} | {s['over']} | {s['under']} | {share(s)} | "
                          f"{s['min_kb']} / {s['max_kb']} | {fmt(s['read_p50_ms'], 3)} |")
    w("\nA target's thread, pinned to vCPU 0, moves its private anonymous memory "
      "(MADV_NOHUGEPAGE, every page written) back and forth between two addresses, PTE by "
      "PTE (the addresses differ in their offset within a PMD), in a tight loop or paced by "
      "clock_nanosleep: with mremap, the whole mapping with mremap(MREMAP_MAYMOVE | "
      "MREMAP_FIXED); with UFFDIO_MOVE (as Android's ART moves memory), its pages with one "
      "UFFDIO_MOVE from one of two mappings (two VMAs, a guard page apart, both registered "
      "with a userfaultfd) to the other. A reader pinned to vCPU 1 "
      "reads the methods in turn for a fixed time. Either mover keeps every page resident, so "
      "the target's Rss never changes: a read is wrong when its Rss differs from the method's "
      "quiescent one (read before the mover started, and read again after it stopped), over "
      "when above it (pages counted at both addresses), under when "
      "below (missed). `rollup` is the booted kernel's smaps_rollup, `stock file` stock's "
      "implementation beside the series in the same boot, `status` VmRSS, the control (mm "
      "counters, no walk). File: moves.csv (mover mremap or uffd, UFFDIO_MOVE).\n")


def models_section(w, a):
    """Every preemption model side by side: layout cells, stall, inversion."""
    models, run, b = a.get("models"), a["run"], a["bars"]
    if not models:
        return
    w("## Preemption models\n")
    w("The same cells on kernels that differ only by preemption model: "
      + ", ".join(f"{m} ({MODEL_OPTIONS.get(m, '?')})" for m in models)
      + ". The first model ran the whole plan (the sections above); the others ran the "
      "half-untouched and dense cost cells, the stall, and the inversion and the moves "
      "(round 1; the moves are in their own section). "
      f"Run with PREEMPT_STOCK={run.run_info.get('preempt_stock', '1')}"
      + (": the models other than voluntary have no stock kernel, only the same-boot "
         "comparison (stock's implementation beside the series)."
         if run.run_info.get("preempt_stock") == "0" else
         ": each model has its stock kernel (stock-MODEL) too.") + "\n")
    w("**Cost (medians, ms; TCG guest, emulated times)**:\n")
    w("| model | cell | VMAs | RSS MiB | series rollup | same boot: stock file | series/stock file | "
      "same boot maps | stock kernel rollup | series/stock | maps series/stock |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, f in models.items():
        for r in f["cost_rows"]:
            med = r["median"]
            w(f"| {m} | {r['vmas']}:{r['rss']} ({size_label(r['vmas'], r['rss']).split(', ', 2)[2]}) | "
              f"{r['nvmas']} | {r['rss_mib']:.0f} | {fmt(med['series'], 3)} | "
              f"{fmt(med['same_boot_stock'], 3)} | {fmt(r['same_boot_series_over_stock'], 3)} | "
              f"{fmt(med['maps'], 3)} | {fmt(med['stock'], 3)} | {fmt(r['series_over_stock'], 3)} | "
              f"{fmt(r['maps_series_over_stock'], 3)} |")
    w("\nseries/stock file: the series rollup over stock's implementation in the same boot "
      "(the bench-MODEL kernel); series/stock: over the stock-MODEL kernel's rollup, with "
      "/proc/PID/maps series/stock beside it as the control across the two kernels.\n")
    w("**Stall (target p99 per operation, µs; TCG guest, emulated)**:\n")
    w("| model | target | readers | status control | series rollup | series/control | "
      "series above control | same boot: stock file above control | stock kernel: control | "
      "stock kernel: rollup | stock above control |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, f in models.items():
        st = f["stall"]
        for vmas, rss in f["stall_sizes"]:
            for n in f["stall_readers"]:
                def get(kernel, cond, key="p99"):
                    s = st.get((kernel, vmas, rss, cond))
                    return s[key] if s else float("nan")
                w(f"| {m} | {vmas}:{rss} | {n} | {fmt(get('series', f'status:{n}'), 0)} | "
                  f"{fmt(get('series', f'rollup:{n}'), 0)} | "
                  f"{fmt(get('series', f'rollup:{n}', 'p99_over_control'))} | "
                  f"{fmt(get('series', f'rollup:{n}', 'above_control'), 0)} | "
                  f"{fmt(get('series', f'{SAME_BOOT_STOCK}:{n}', 'above_control'), 0)} | "
                  f"{fmt(get('stock', f'status:{n}'), 0)} | {fmt(get('stock', f'rollup:{n}'), 0)} | "
                  f"{fmt(get('stock', f'rollup:{n}', 'above_control'), 0)} |")
    w(f"\nseries/control: the bar is {b.stall_control}x; above control: the p99 less the "
      "same kernel's status:N p99 (the stock file's: in the series boot).\n")
    w("**Priority inversion (mapper's mean and max mmap/munmap latency, µs; TCG guest, "
      "emulated)**:\n")
    w("| model | kernel | condition | mean | control mean | mean/control | max | control max |")
    w("|---|---|---|---:|---:|---:|---:|---:|")
    for m, f in models.items():
        inv = f["invert"]
        for kernel in ("series", "stock"):
            for cond in ordered_conds(c for _, c in inv):
                s = inv.get((kernel, cond))
                if not s or cond.startswith("status"):
                    continue
                w(f"| {m} | {kernel} | {cond_label(cond)} | {fmt(s['mean'])} | "
                  f"{fmt(s['control_mean'])} | {fmt(s['mean_over_control'])} | {fmt(s['max'])} | "
                  f"{fmt(s['control_max'])} |")
    w(f"\nmean/control: the bar is {b.invert_mean}x; for the +swap conditions, against "
      f"status:N+swap, {b.swap_invert_mean}x, and max within {b.swap_invert_max}x of "
      f"control max (issue #31, see Bars); for the +move ones, against status:N+move, "
      f"{b.move_invert_mean}x (see Bars). Files: models-cost.csv, models-stall.csv, "
      "models-invert.csv, invert-cells.csv.\n")


def fleet_section(w, a):
    w("## Fleet sweep (every /proc/PID, one read each)\n")
    w("| kernel | method | processes swept | read OK | sweeps | median ms | p90 ms |")
    w("|---|---|---:|---:|---:|---:|---:|")
    fleet = a["fleet"]
    for method in ("rollup", "status", "smaps"):
        for kernel in KERNELS:
            s = fleet.get((kernel, method))
            if s:
                w(f"| {kernel} | {method} | {s['pids']:.0f} | {s['ok']:.0f} | "
                  f"{s['sweeps']} | {s['median_ms']:.1f} | {s['p90_ms']:.1f} |")
    stock = fleet.get(("stock", "rollup"))
    if a["fleet_series_over_stock"] is not None:
        w(f"\nSeries over stock, rollup sweep: {a['fleet_series_over_stock']:.3f} "
          "(pooled medians); divided by each boot's status sweep, per round: "
          + " / ".join(f"{x:.3f}" for x in a["fleet_ratios"]) + ".")
    w("\nThe guest runs " + (f"{stock['procs']} " if stock else "")
      + "`/bin/cat` processes blocked on a pipe, plus its kernel threads (which have no "
      "mm: smaps_rollup fails on them with ESRCH, status has no VmRSS; `read OK` counts "
      "reads that gave a value). File: fleet.csv.\n")


# The hand-written caveats and analysis of a run: a file of their own
# beside the README, which analyze.py never writes.
ANALYSIS = "analysis.md"


def readme(a, results_dir):
    """The README text of RESULTS_DIR from A, the run's result, wholly
    generated: it points to the hand-written analysis there (ANALYSIS) when
    there is one."""
    out = []
    w = out.append
    info = a["run"].run_info
    w("# smaps_rollup benchmarks\n")
    w("Generated by `scripts/analysis/analyze.py` from one run of `scripts/bench` "
      f"(plan **{info.get('plan')}**, {info.get('rounds')} round(s), "
      f"{info.get('started')} to {info.get('finished', '?')}).\n")
    w(TCG_NOTE)
    w("Reproduce: `make bench` (= `scripts/bench`), or `QUICK=1 scripts/bench` for a reduced "
      "smoke run (results in build/bench-quick). The CSVs and plots in this directory come "
      "from that command; the raw per-boot output stays in build/scratch/bench/RUN.\n")
    setup_section(w, a)
    w("## Bars\n")
    cost_bars(w, a)
    stall_bars(w, a)
    invert_bars(w, a)
    cell_bars(w, a, "swap_verdicts")
    cell_bars(w, a, "move_verdicts")
    moves_bars(w, a)
    w("")
    cost_section(w, a)
    layout_section(w, a)
    fits_section(w, a)
    stall_section(w, a)
    invert_section(w, a)
    moves_section(w, a)
    models_section(w, a)
    fleet_section(w, a)
    w("## Caveats and analysis\n")
    if os.path.exists(os.path.join(results_dir, ANALYSIS)):
        w(f"Hand-written, beside this file: [{ANALYSIS}]({ANALYSIS}) (scripts/analysis/analyze.py "
          "never writes it).")
    else:
        w(f"None written yet: hand-written notes on this run go into {ANALYSIS} beside this "
          "file (scripts/analysis/analyze.py never writes it).")
    return "\n".join(out) + "\n"
