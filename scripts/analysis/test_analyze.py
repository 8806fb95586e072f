#!/usr/bin/env python3
"""Unit test of analyze.py on testdata/run, a small raw run whose figures
testdata/synthesise.py chose (see its docstring), and on testdata/quick,
the raw output of a real `QUICK=1 scripts/bench` (guest/bench/measure in
real guests, the kernel copies left out): the figures
analyze.py derives from it are checked against the raw CSVs read here
with the csv module, so that the real format drifting from what
bench_load.py reads fails here. testdata/native/cost.csv, a native boot's
cost records (synthesise.py too), is another source of cost figures.

    cd scripts/analysis && python3 -m unittest -v test_analyze     (or scripts/tests/run)
"""
import contextlib
import csv
import io
import math
import os
import shutil
import statistics
import tempfile
import unittest

import analyze
import bench_load
import bench_stats
import icount

TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
RAW = os.path.join(TESTDATA, "run")
RECORDED = os.path.join(TESTDATA, "quick")
NATIVE = os.path.join(TESTDATA, "native", "cost.csv")


def analyse_copy(raw_dir, tmp, costs=None):
    """analyze.main on a copy of RAW_DIR (the plots' data files go into the
    raw directory), with the cost sources COSTS: (raw run, figures, README
    text, output directory)."""
    raw = os.path.join(tmp, "raw")
    shutil.copytree(raw_dir, raw)
    out = os.path.join(tmp, "results")
    with contextlib.redirect_stdout(io.StringIO()):
        raw_run, figures = analyze.main(raw, out, plots=shutil.which("gnuplot") is not None,
                                        costs=costs)
    with open(os.path.join(out, "README.md")) as f:
        return raw_run, figures, f.read(), out


class Analysed(unittest.TestCase):
    """analyze.main run once on a copy of the class's RAW_DIR."""
    RAW_DIR, COSTS = RAW, None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bench-analyze-")
        cls.raw_run, cls.figures, cls.readme, cls.out = analyse_copy(cls.RAW_DIR, cls.tmp,
                                                                     cls.COSTS)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)


class AnalyzeTest(Analysed):

    def row(self, vmas, rss):
        return next(r for r in self.figures["cost_rows"] if (r["vmas"], r["rss"]) == (vmas, rss))

    def test_cost_ratios(self):
        row = self.row(4000, "16")
        self.assertAlmostEqual(row["median"]["series"], 2.0)
        self.assertAlmostEqual(row["series_over_stock"], 1.25)
        self.assertAlmostEqual(row["smaps_over_rollup"], 30.0)
        self.assertAlmostEqual(row["smaps_series_over_stock"], 1.25)
        self.assertAlmostEqual(row["same_boot_series_over_stock"], 1.25)
        self.assertAlmostEqual(row["series_over_stock_by_round"][1], 1.25)
        self.assertAlmostEqual(self.row(4000, "16u")["series_over_stock"], 1.0)
        self.assertTrue(math.isnan(row["host"]["rollup"]))

    def test_fit_per_vma(self):
        series = next(x for x in self.figures["fits"]
                      if (x["kernel"], x["method"]) == ("series", "rollup"))
        self.assertAlmostEqual(series["per_vma_us"], 0.5)
        self.assertEqual(series["vma_points"], 2)

    def test_stall(self):
        stall = self.figures["stall"]
        series = stall[("series", 16000, "128h", "rollup:1")]
        self.assertEqual(series["ops"], 20)
        self.assertAlmostEqual(series["p50"], 100.0)
        self.assertAlmostEqual(series["p99"], 1100.0)
        self.assertAlmostEqual(series["above_control"], 100.0)
        self.assertAlmostEqual(stall[("stock", 16000, "128h", "rollup:1")]["above_control"], 2000.0)
        verdicts = {v.rss: v for v in self.figures["stall_verdicts"]}
        self.assertEqual(set(verdicts), {"128h", "128p"})
        verdict = verdicts["128h"]
        self.assertTrue(verdict.within_control)
        self.assertTrue(verdict.excess_tenfold)
        self.assertTrue(verdict.same_boot_tenfold)
        self.assertAlmostEqual(verdict.same_boot["above_control"], 1500.0)

    def test_invert(self):
        series = self.figures["invert"][("series", "rollup:1")]
        self.assertAlmostEqual(series["mean"], 55.0)
        self.assertAlmostEqual(series["max"], 450.0)
        verdicts = {(v.kernel, v.cond): (v.mean_ok, v.max_ok)
                    for v in self.figures["invert_verdicts"]}
        self.assertEqual(verdicts[("series", "rollup:1")], (True, True))
        self.assertEqual(verdicts[("stock", "rollup:1")], (False, False))
        # The +swap conditions are swap_verdicts', the +move ones move_verdicts'.
        self.assertEqual(set(verdicts), {("series", "rollup:1"), ("stock", "rollup:1")})
        self.assertEqual(bench_stats.readers_of("rollup=smaps_rollup_stock:2+swap"), 2)
        self.assertEqual(bench_stats.control_of("rollup:2+swap"), "status:2+swap")
        self.assertEqual(bench_stats.readers_of("rollup=smaps_rollup_stock:2+move"), 2)
        self.assertEqual(bench_stats.control_of("rollup:2+move"), "status:2+move")
        self.assertEqual(bench_stats.split_suffix("rollup:1+swap+move"),
                         ("rollup:1", "+swap+move"))
        self.assertEqual(bench_stats.control_of("rollup:1+swap+move"), "status:1+swap+move")
        self.assertEqual(bench_stats.split_suffix("none+move"), ("none", "+move"))
        self.assertEqual(bench_stats.readers_of("none+move"), 0)
        self.assertEqual(bench_stats.split_suffix("rollup:1"), ("rollup:1", ""))

    def test_swap(self):
        models = self.figures["models"]
        voluntary = {(v.kind, v.cell): v for v in bench_stats.swap_verdicts("voluntary",
                                                                           models["voluntary"])}
        self.assertEqual(set(voluntary), {("invert", "rollup:1+swap"), ("stall", "16000:128p")})
        invert = voluntary[("invert", "rollup:1+swap")]
        self.assertEqual((invert.readers, invert.is_bar, invert.met), (1, False, True))
        self.assertAlmostEqual(invert.ratio("series", "mean"), 1.06)
        self.assertAlmostEqual(invert.ratio("series", "max"), 1.12)
        self.assertAlmostEqual(invert.ratio("stock_file", "mean"), 10.0)
        self.assertAlmostEqual(invert.ratio("stock", "mean"), 4.0)
        self.assertAlmostEqual(invert.ratio("plain", "mean"), 1.1)
        stall = voluntary[("stall", "16000:128p")]
        self.assertAlmostEqual(stall.ratio("series", "p99"), 1.2)
        self.assertAlmostEqual(stall.ratio("plain", "p99"), 1.1)
        self.assertAlmostEqual(stall.ratio("stock", "p99"), 3.5)
        self.assertTrue(stall.met)
        full = {(v.kind, v.cell): v for v in bench_stats.swap_verdicts("full", models["full"])}
        invert, stall = full[("invert", "rollup:1+swap")], full[("stall", "16000:128p")]
        self.assertTrue(invert.is_bar and stall.is_bar)
        self.assertFalse(invert.met or stall.met)
        self.assertEqual(invert.stock, {})
        self.assertIn("- **Swap bar (issue #31)** (full preemption; inversion, every 64th page "
                      "of the mapper's region kept paged out, rollup:1+swap, control "
                      "status:1+swap; TCG guest, emulated): MISSED: mapper mean 60.0 against "
                      "50.0 µs, 1.20x (bar 1.1x); median of per-run maxima 650 against 500 µs, "
                      "1.30x (bar 1.2x). Over their controls: stock's implementation in the "
                      "same boot 8.00x / 8.00x; the same without swap (rollup:1) 1.20x / 1.20x.",
                      self.readme)
        self.assertIn("- **Swap bar (issue #31)** (full preemption; stall, 16000 VMAs, 128 MiB "
                      "resident, the anonymous half in one VMA, every 64th page of it swapped "
                      "out, rollup:1, control status:1; TCG guest, emulated): MISSED: target p99 "
                      "1400 against 1000 µs, 1.40x (bar 1.3x). Over their controls: stock's "
                      "implementation in the same boot 2.00x; the same cell without swap "
                      "(16000:128h) 1.20x.", self.readme)
        self.assertIn("- Swap cell against issue #31's bars, for comparison (voluntary "
                      "preemption, the bars being judged under full; inversion", self.readme)
        self.assertIn("| series | rollup:1+swap | 3 | 1000 | 53.0 | 560 |", self.readme)
        self.assertIn("| full | series | rollup:1+swap | 60.0 | 50.0 | 1.20 | 650 | 500 |",
                      self.readme)

    def test_move(self):
        """The +move conditions (UFFDIO_MOVE beside the mapper): the move
        bar, judged under full, and their rows in the tables and CSVs."""
        models = self.figures["models"]
        self.assertAlmostEqual(self.figures["invert"][("series", "rollup:1+move")]["mean"], 110.0)
        self.assertAlmostEqual(self.figures["invert"][("series", "rollup:1+move")]["max"], 1100.0)
        (voluntary,) = bench_stats.move_verdicts("voluntary", models["voluntary"])
        self.assertEqual((voluntary.kind, voluntary.cell, voluntary.issue, voluntary.readers),
                         ("invert", "rollup:1+move", "move", 1))
        self.assertEqual((voluntary.is_bar, voluntary.met), (False, True))
        for which, mean, peak in (("series", 1.1, 1.1), ("stock_file", 16.0, 20.0),
                                  ("stock", 19.5, 24.0), ("plain", 1.1, 0.9)):
            self.assertAlmostEqual(voluntary.ratio(which, "mean"), mean, msg=which)
            self.assertAlmostEqual(voluntary.ratio(which, "max"), peak, msg=which)
        (full,) = bench_stats.move_verdicts("full", models["full"])
        self.assertTrue(full.is_bar)
        self.assertFalse(full.met)
        self.assertAlmostEqual(full.ratio("series", "mean"), 1.3)
        self.assertAlmostEqual(full.ratio("stock", "mean"), 19.5)
        # The +move cells are not swap cells.
        self.assertNotIn("rollup:1+move", {v.cell for v in bench_stats.swap_verdicts(
            "full", models["full"])})
        self.assertIn("- **Move bar (UFFDIO_MOVE)** (full preemption; inversion, a thread of "
                      "the mapper moving 8 MiB back and forth with UFFDIO_MOVE, rollup:1+move, "
                      "control status:1+move; TCG guest, emulated): MISSED: mapper mean 130 "
                      "against 100 µs, 1.30x (bar 1.2x); median of per-run maxima 1100 against "
                      "1000 µs, 1.10x (no bar). Over their controls: stock's implementation in "
                      "the same boot 16.0x / 24.0x; the stock kernel's rollup 19.5x / 24.0x; the "
                      "same without the moves (rollup:1) 1.20x / 1.20x.", self.readme)
        self.assertIn("- Move cell against the UFFDIO_MOVE bar, for comparison (voluntary "
                      "preemption, the bar being judged under full; inversion", self.readme)
        self.assertIn("| series | rollup:1+move | 3 | 1000 | 110 | 1100 |", self.readme)
        self.assertIn("| series | stock file:1+move | 3 | 1000 | 1600 | 20000 |", self.readme)
        self.assertIn("| full | series | rollup:1+move | 130 | 100 | 1.30 | 1100 | 1000 |",
                      self.readme)
        self.assertIn("| full | rollup:1+move | status:1+move | 1.30x / 1.10x | 1.2x / – | MISSED "
                      "| 16.0x / 24.0x | 19.5x / 24.0x | 1.20x / 1.20x |", self.readme)
        self.assertIn("| voluntary | rollup:1+swap | status:1+swap | 1.06x / 1.12x | 1.1x / 1.2x "
                      "| met (judged under full) |", self.readme)
        with open(os.path.join(self.out, "invert-cells.csv")) as f:
            rows = {(r["model"], r["condition"]): r for r in csv.DictReader(f)}
        self.assertEqual(set(rows), {(m, f"rollup:1{s}") for m in ("voluntary", "full")
                                     for s in ("+swap", "+move")})
        row = rows[("full", "rollup:1+move")]
        self.assertEqual((row["issue"], row["control"], row["judged"], row["met"], row["bar_max"]),
                         ("move", "status:1+move", "yes", "no", ""))
        self.assertAlmostEqual(float(row["series_mean_ratio"]), 1.3)
        self.assertAlmostEqual(float(row["stock_file_max_ratio"]), 24.0)
        self.assertAlmostEqual(float(rows[("voluntary", "rollup:1+swap")]["bar_mean"]), 1.1)
        with open(os.path.join(self.out, "invert.csv")) as f:
            conds = {(r["kernel"], r["condition"]) for r in csv.DictReader(f)}
        self.assertLessEqual({("series", "status:1+move"), ("series", "rollup:1+move"),
                              ("series", "rollup=smaps_rollup_stock:1+move"),
                              ("stock", "status:1+move"), ("stock", "rollup:1+move")}, conds)

    def test_fleet(self):
        self.assertAlmostEqual(self.figures["fleet_ratios"][0], 1.1)

    def test_readme_bars(self):
        self.assertIn("Bar 1: series rollup ≥ 12x faster than smaps + C parser at 4,000 "
                      "VMAs**: met: 30.0x", self.readme)
        self.assertIn("within 5% of stock or faster at every size**: MISSED", self.readme)
        self.assertIn("same boot, stock's implementation 1.50 ms: met", self.readme)
        self.assertIn("(series kernel, rollup:1, 1 reader(s)): mapper mean within 1.2x of "
                      "the status control: met (55.0 against 50.0 µs", self.readme)
        self.assertIn("None written yet: hand-written notes on this run go into analysis.md",
                      self.readme)
        self.assertNotIn("NOTES.md", self.readme)

    def test_csv_headers(self):
        with open(os.path.join(self.out, "cost.csv")) as f:
            header = f.readline().rstrip("\n").split(",")
        self.assertIn("series_over_stock", header)
        self.assertNotIn("r34_maps_normalised", header)
        self.assertEqual(header.index("layout"), 2)

    def test_dense_cell(self):
        row = self.row(4000, "16d")
        self.assertAlmostEqual(row["series_over_stock"], 1.2)
        self.assertAlmostEqual(row["same_boot_series_over_stock"], 1.25)
        self.assertAlmostEqual(row["maps_series_over_stock"], 1.0)
        self.assertIn("| every VMA resident | 3999 |", self.readme)
        self.assertIn("Bar 2 on dense targets (every VMA resident, none skipped as empty): "
                      "series within 5% of stock or faster** (same boot where available): "
                      "MISSED: 4000/16d MiB (17 MiB resident): same boot 1.250, across kernels "
                      "1.200 (maps control 1.000).", self.readme)

    def test_one_vma_cells(self):
        for rss, same_boot in (("256o", 0.6), ("256c", 0.9), ("256f", 0.7)):
            row = self.row(1, rss)
            self.assertAlmostEqual(row["same_boot_series_over_stock"], same_boot)
            self.assertAlmostEqual(row["same_boot_by_round"][1], same_boot)
            self.assertAlmostEqual(row["series_over_stock"], same_boot)
        self.assertIn("- **256 MiB, one private anonymous VMA, same boot: series at most 0.70 "
                      "of stock's implementation** (TCG guest, emulated times): met: 0.600 "
                      "(series 6.000 against 10.0 ms, medians of 3 and 3 reads; per round "
                      "0.600); controls: maps 1.000 ms, status 0.100 ms in that boot, "
                      "series/stock kernel maps 1.000, status 1.000.", self.readme)
        self.assertIn("one anonymous VMA shared with a child, same boot: series at most 0.80 "
                      "of stock's implementation** (TCG guest, emulated times): MISSED: 0.900",
                      self.readme)
        self.assertIn("one VMA of a page cache file, same boot: series at most 0.80 of "
                      "stock's implementation** (TCG guest, emulated times): met: 0.700",
                      self.readme)
        self.assertIn("| one private anonymous VMA | 13 | 257 |", self.readme)

    def test_models(self):
        self.assertEqual(self.raw_run.models, ["voluntary", "full"])
        self.assertEqual(self.raw_run.model, "voluntary")
        models = self.figures["models"]
        self.assertEqual(set(models), {"voluntary", "full"})
        full = models["full"]
        self.assertEqual([(r["vmas"], r["rss"]) for r in full["cost_rows"]],
                         [(4000, "16u"), (4000, "16d")])
        for r in full["cost_rows"]:
            self.assertAlmostEqual(r["series_over_stock"], 0.75)
            self.assertAlmostEqual(r["same_boot_series_over_stock"], 0.9)
            self.assertAlmostEqual(r["maps_series_over_stock"], 1.0)
        self.assertAlmostEqual(full["stall"][("series", 16000, "128h", "rollup:1")]["above_control"],
                               200.0)
        self.assertAlmostEqual(full["invert"][("series", "rollup:1")]["mean"], 60.0)
        # The voluntary model's own figures are not mixed with full's.
        self.assertAlmostEqual(self.row(4000, "16u")["series_over_stock"], 1.0)
        self.assertIn("## Preemption models", self.readme)
        self.assertIn("| full | 4000:16d (every VMA resident) | 3999 | 17 | 0.900 | 1.000 | 0.900 |",
                      self.readme)
        self.assertIn("| full | 16000:128h | 1 | 1000 | 1200 | 1.20 | 200 | 1000 |", self.readme)
        self.assertTrue(os.path.exists(os.path.join(self.out, "models-stall.csv")))

    def test_moves(self):
        moves = self.figures["moves"]
        stock_file = moves[("series", "mremap", 64, 0, bench_stats.SAME_BOOT_STOCK)]
        self.assertEqual((stock_file["reads"], stock_file["wrong"], stock_file["over"],
                          stock_file["under"]), (1000, 10, 6, 4))
        self.assertAlmostEqual(stock_file["share"], 0.01)
        self.assertAlmostEqual(stock_file["read_p50_ms"], 1.5)
        self.assertEqual(moves[("stock", "mremap", 64, 0, "rollup")]["under"], 5)
        verdicts = {(v.mover, v.mib, v.period_us): v for v in bench_stats.moves_verdicts(moves)}
        self.assertEqual(set(verdicts), {("mremap", 64, 0), ("mremap", 16, 1000),
                                         ("uffd", 64, 0)})
        self.assertTrue(verdicts[("mremap", 64, 0)].met and verdicts[("mremap", 64, 0)].same_boot)
        self.assertFalse(verdicts[("mremap", 16, 1000)].no_more_wrong)
        self.assertTrue(verdicts[("mremap", 16, 1000)].none_under)
        full = {v.mover: v
                for v in bench_stats.moves_verdicts(self.figures["models"]["full"]["moves"])}
        self.assertEqual(set(full), {"mremap", "uffd"})
        self.assertEqual((full["mremap"].series["under"], full["mremap"].met), (1, False))
        self.assertIn("- **Moves bar: series' wrong-read share at most stock's in the same "
                      "boot, no read under the true Rss** (64 MiB moved with mremap in a tight "
                      "loop, voluntary preemption): met: series 0 of 1000 reads wrong (0.00%), 0 "
                      "under; stock's implementation in the same boot 10 of 1000 (1.00%), 4 "
                      "under; status control 0 of 1000.", self.readme)
        self.assertIn("(16 MiB moved with mremap every 1 ms, voluntary preemption): MISSED",
                      self.readme)
        self.assertIn("(64 MiB moved with mremap in a tight loop, full preemption): MISSED",
                      self.readme)
        self.assertIn("| full | 64 MiB moved with mremap in a tight loop | series | rollup | "
                      "66588 | 1600 | 800 | 8 | 7 | 1 | 1.00% | 1052 / 132124 | 1.500 |",
                      self.readme)
        with open(os.path.join(self.out, "moves.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 19)
        self.assertEqual({r["model"] for r in rows}, {"voluntary", "full"})
        self.assertEqual({r["mover"] for r in rows}, {"mremap", "uffd"})
        self.assertEqual({r["method"] for r in rows},
                         {"rollup", bench_stats.SAME_BOOT_STOCK, "status"})

    def test_moves_uffd(self):
        """The UFFDIO_MOVE cells (rollup+uffd...) are cells of their own,
        reported as the mremap ones are, labelled UFFDIO_MOVE."""
        moves = self.figures["moves"]
        series = moves[("series", "uffd", 64, 0, "rollup")]
        stock_file = moves[("series", "uffd", 64, 0, bench_stats.SAME_BOOT_STOCK)]
        self.assertEqual((series["reads"], series["wrong"]), (1000, 0))
        self.assertEqual((stock_file["reads"], stock_file["wrong"], stock_file["over"],
                          stock_file["under"]), (1000, 50, 30, 20))
        self.assertAlmostEqual(stock_file["share"], 0.05)
        self.assertEqual(moves[("stock", "uffd", 64, 0, "rollup")]["under"], 15)
        # The mremap cell of the same size and period is not mixed in.
        self.assertEqual(moves[("series", "mremap", 64, 0, bench_stats.SAME_BOOT_STOCK)]["wrong"],
                         10)
        self.assertEqual(bench_stats.moves_cells(moves),
                         [("mremap", 64, 0), ("mremap", 16, 1000), ("uffd", 64, 0)])
        (v,) = [v for v in bench_stats.moves_verdicts(moves) if v.mover == "uffd"]
        self.assertTrue(v.met and v.same_boot)
        self.assertIn("- **Moves bar: series' wrong-read share at most stock's in the same "
                      "boot, no read under the true Rss** (64 MiB moved with UFFDIO_MOVE in a "
                      "tight loop, voluntary preemption): met: series 0 of 1000 reads wrong "
                      "(0.00%), 0 under; stock's implementation in the same boot 50 of 1000 "
                      "(5.00%), 20 under; status control 0 of 1000.", self.readme)
        self.assertIn("(64 MiB moved with UFFDIO_MOVE in a tight loop, full preemption): met",
                      self.readme)
        self.assertIn("| voluntary | 64 MiB moved with UFFDIO_MOVE in a tight loop | stock | "
                      "rollup | 66588 | 1000 | 500 | 25 | 10 | 15 | 5.00% | 1052 / 132124 | "
                      "1.500 |", self.readme)
        self.assertIn("| full | 64 MiB moved with UFFDIO_MOVE in a tight loop | series | "
                      "stock file |", self.readme)

    def test_moves_mover(self):
        self.assertEqual(bench_load.moves_mover("rollup+uffd"), ("uffd", "rollup"))
        self.assertEqual(bench_load.moves_mover(bench_stats.SAME_BOOT_STOCK + "+uffd"),
                         ("uffd", bench_stats.SAME_BOOT_STOCK))
        self.assertEqual(bench_load.moves_mover("status"), ("mremap", "status"))
        self.assertEqual(bench_load.moves_mover("+uffd"), ("mremap", "+uffd"))
        self.assertEqual(bench_load.MOVES_UFFD_SUFFIX, "+uffd")

    def test_percentile(self):
        self.assertEqual(bench_stats.percentile([3, 1, 2, 4], 0.5), 2)
        self.assertEqual(bench_stats.percentile(list(range(1, 101)), 0.99), 99)
        self.assertEqual(bench_stats.median([1, 2, 3, 10]), 2.5)


class NativeCostTest(Analysed):
    """testdata/run with a native boot's cost records as another source of
    cost figures (testdata/native/cost.csv, see testdata/synthesise.py):
    analyze.py --cost native=..., and icount.py --label native on it."""
    COSTS = {"native": NATIVE}

    def test_readme_column(self):
        lines = self.readme.splitlines()
        self.assertIn("| VMAs | RSS MiB | 1. smaps+C | 2. awk | 3. series rollup | 4. stock rollup "
                      "| 5. status | 1/3 | 2/3 | 3/4 | 3/4 per round | 3/4 fastest reads | 3/5 | "
                      "smaps series/stock | host 1/3 | host 2/3 | native series/stock |", lines)
        self.assertIn("| 3999 | 17 | 60.0 | 200 | 2.000 | 1.600 | 0.100 | 30.0 | 100 | 1.250 | "
                      "1.250 | 1.250 | 20.0 | 1.250 | – | – | 0.750 |", lines)
        self.assertIn("| 15999 | 17 | 240 | 800 | 8.000 | 6.400 | 0.100 | 30.0 | 100 | 1.250 | "
                      "1.250 | 1.250 | 80.0 | 1.250 | – | – | – |", lines)
        self.assertIn("| every VMA resident | 3999 | 17 | 0 | 3.000 | 2.500 | 1.200 | 1.200 | "
                      "1.000 | 1.000 | 2.400 | 1.250 | 1.000 | 0.100 | 1.250 |", lines)
        self.assertEqual({(r["vmas"], r["rss"]): r["sources"]["native"]
                          for r in self.figures["cost_rows"]
                          if not math.isnan(r["sources"]["native"])},
                         {(4000, "16"): 0.75, (4000, "16d"): 1.25})
        with open(os.path.join(self.out, "cost.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["native_series_over_stock"] for r in rows][:2], ["0.7500", "nan"])

    def test_icount_label_native(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            icount.main(["icount.py", "--label", "native", NATIVE])
        self.assertEqual(out.getvalue(),
                         "| cell | series, M ns | stock | series / stock | series min-max / median "
                         "| maps | status |\n"
                         "|---|---:|---:|---:|---|---:|---:|\n"
                         "| 4000:16 | 0.30 | 0.40 | **0.750** | 0.967-1.033 | 0.20 | 5 k |\n"
                         "| 4000:16d | 0.51 | 0.41 | **1.250** | 0.980-1.020 | 0.20 | 5 k |\n"
                         "| 100:16 | 0.01 | 0.02 | **0.500** | 1.000-1.000 | 0.00 | 5 k |\n")


def raw_rows(name, kind):
    """The KIND rows of the recorded run's NAME.csv, without the kind."""
    with open(os.path.join(RECORDED, name + ".csv"), newline="") as f:
        return [row[1:] for row in csv.reader(f) if row and row[0] == kind]


def raw_median_ms(name, vmas, rss, method):
    """The median read time (ms) of one cost cell and method, from the CSV."""
    return statistics.median(int(r[6]) / 1e6 for r in raw_rows(name, "cost")
                             if (r[0], r[1], r[4]) == (str(vmas), rss, method))


class RecordedRunTest(Analysed):
    """analyze.py on a real QUICK=1 run (testdata/quick)."""
    RAW_DIR = RECORDED

    def test_run_file(self):
        info = self.raw_run.run_info
        self.assertEqual((info["plan"], info["series_variant"]), ("quick", "bench"))
        self.assertEqual(self.raw_run.models, ["voluntary"])
        self.assertEqual(self.raw_run.metas["series-r1"]["same_boot"],
                         "rollup=smaps_rollup_stock")

    def test_every_cost_cell_is_a_row(self):
        cells = {(int(r[0]), r[1]) for r in raw_rows("cost-stock-r1", "cost")}
        self.assertEqual(cells, {(int(r[0]), r[1]) for r in raw_rows("cost-series-r1", "cost")})
        rows = {(r["vmas"], r["rss"]) for r in self.figures["cost_rows"]}
        self.assertEqual(rows, cells)

    def test_cost_medians_and_ratios(self):
        row = next(r for r in self.figures["cost_rows"] if (r["vmas"], r["rss"]) == (4000, "16"))
        series = raw_median_ms("cost-series-r1", 4000, "16", "rollup")
        stock = raw_median_ms("cost-stock-r1", 4000, "16", "rollup")
        same_boot = raw_median_ms("cost-series-r1", 4000, "16", "rollup=smaps_rollup_stock")
        self.assertAlmostEqual(row["median"]["series"], series)
        self.assertAlmostEqual(row["series_over_stock"], series / stock)
        self.assertAlmostEqual(row["same_boot_series_over_stock"], series / same_boot)
        self.assertAlmostEqual(row["smaps_over_rollup"],
                               raw_median_ms("cost-series-r1", 4000, "16", "smaps") / series)

    def test_fields_line(self):
        (line,) = [r for r in raw_rows("cost-series-r1", "fields") if r[:2] == ["4000", "16"]]
        fields = self.raw_run.fields[(4000, "16")]
        self.assertEqual(fields, dict(kv.split("=") for kv in line[5:]))
        self.assertEqual(int(fields["Rss"]), sum(int(fields[f]) for f in (
            "Shared_Clean", "Shared_Dirty", "Private_Clean", "Private_Dirty")))

    def test_stall_records_match_the_guest_summary(self):
        """The .bin records give the ops and p99 the guest printed."""
        for kernel in ("stock", "series"):
            for vmas, rss, _, _, cond, _, ops, _, p99_ns, *_ in raw_rows(f"stall-{kernel}-r1",
                                                                         "stall"):
                s = self.figures["stall"][(kernel, int(vmas), rss, cond)]
                self.assertEqual(s["ops"], int(ops), (kernel, rss, cond))
                self.assertAlmostEqual(s["p99"], int(p99_ns) / 1e3, delta=1,
                                       msg=(kernel, rss, cond))

    def test_invert_mean_and_max(self):
        (row,) = [r for r in raw_rows("invert-series-r1", "invert") if r[0] == "rollup:1"]
        mmap_mean, mmap_max, munmap_mean, munmap_max = (int(x) / 1e3 for x in row[4:8])
        invert = self.figures["invert"][("series", "rollup:1")]
        self.assertAlmostEqual(invert["mean"], (mmap_mean + munmap_mean) / 2)
        self.assertAlmostEqual(invert["max"], max(mmap_max, munmap_max))

    def test_moves_match_the_guest_lines(self):
        """Every bench-moves line, same-boot stock file included, is a summary."""
        lines = 0
        for kernel in ("stock", "series"):
            for mib, period, method, _, _, *counts, _, _, _ in raw_rows(f"moves-{kernel}-r1",
                                                                        "moves"):
                mover = "uffd" if method.endswith("+uffd") else "mremap"
                method = method[:-len("+uffd")] if mover == "uffd" else method
                s = self.figures["moves"][(kernel, mover, int(mib), int(period), method)]
                self.assertEqual([s[k] for k in ("reads", "wrong", "over", "under")],
                                 [int(x) for x in counts], (kernel, mib, method))
                lines += 1
        self.assertEqual(lines, len(self.figures["moves"]))
        self.assertIn(("series", "mremap", 64, 0, bench_stats.SAME_BOOT_STOCK),
                      self.figures["moves"])
        self.assertEqual(len(bench_stats.moves_verdicts(self.figures["moves"])), 2)

    def test_readme(self):
        self.assertIn("plan **quick**, 1 round(s)", self.readme)
        self.assertIn("| series-r1 | 6.12.117-bench #1", self.readme)
        self.assertTrue(os.path.exists(os.path.join(self.out, "fleet.csv")))


if __name__ == "__main__":
    unittest.main()
