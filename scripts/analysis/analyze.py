#!/usr/bin/env python3
"""Summarise a scripts/bench run: CSVs, gnuplot PNGs and README.md.

    scripts/analysis/analyze.py RAW_DIR RESULTS_DIR

RAW_DIR is what the guests wrote (cost-*.csv, stall-*.csv and the stall
records stall-*.bin, invert-*.csv, moves-*.csv, fleet-*.csv, meta-*.txt,
run.txt). A run over several preemption models (scripts/bench PREEMPT=...)
is reported in full for its first model; every model's stall, inversion and
half-untouched and dense cost cells also go side by side into the
README's "Preemption models" section and models-*.csv, and every model's
moves into its section and moves.csv.
Medians and percentiles pool every read of a cell over the rounds; the
stock/series ratio also gets its value per round and a bootstrap 90%
interval, so that noise can be told from a difference. Standard library
only, plus gnuplot for the plots. The parts: bench_load.py reads the raw
files, bench_stats.py computes the figures and the bars, bench_report.py
writes the CSVs and plots, bench_readme.py the README.
"""
import os
import sys

import bench_load
import bench_readme
import bench_report
import bench_stats


def analyse(run):
    """Every figure the report shows, from a bench_load.RawRun."""
    stall = bench_stats.stall_summaries(run)
    invert = bench_stats.invert_summaries(run)
    rows = bench_stats.cost_rows(run)
    return dict(cost_rows=rows, fits=bench_stats.fits(run, rows), stall=stall,
                stall_verdicts=bench_stats.stall_verdicts(stall), invert=invert,
                invert_verdicts=bench_stats.invert_verdicts(invert),
                moves=bench_stats.moves_summaries(run),
                fleet=bench_stats.fleet_summaries(run),
                fleet_ratios=bench_stats.fleet_by_round_ratio(run))


def main(raw, out, plots=True):
    """Analyse RAW into OUT; returns the analysis (for the unit test)."""
    run = bench_load.load_run(raw)
    figures = analyse(run)
    if run.models != [bench_load.DEFAULT_MODEL]:
        figures["models"] = {m: bench_stats.model_figures(bench_load.load_run(raw, m))
                             for m in run.models}
    os.makedirs(out, exist_ok=True)
    bench_report.write_csvs(out, run, figures)
    written = ["cost.csv", "cost-long.csv", "cost-samples.csv", "fit.csv", "stall.csv",
               "invert.csv", "invert-cells.csv", "moves.csv", "fleet.csv"]
    if "models" in figures:
        written += bench_report.write_model_csvs(out, figures["models"])
    if plots:
        written += bench_report.write_plots(out, raw, figures, run.rounds)
    text = bench_readme.readme(run, figures, out)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(text)
    print(f"analyze: wrote {out}/README.md, {', '.join(written)}")
    return run, figures


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2])
