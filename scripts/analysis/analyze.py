#!/usr/bin/env python3
"""Summarise a scripts/bench run: CSVs, gnuplot PNGs and README.md.

    scripts/analysis/analyze.py RAW_DIR RESULTS_DIR [--cost NAME=COST_CSV ...]

RAW_DIR is what the guests wrote (cost-*.csv, stall-*.csv and the stall
records stall-*.bin, invert-*.csv, moves-*.csv, fleet-*.csv, meta-*.txt,
run.txt). A run over several preemption models (scripts/bench PREEMPT=...)
is reported in full for its first model; every model's stall, inversion and
half-untouched and dense cost cells also go side by side into the
README's "Preemption models" section and models-*.csv, and every model's
moves into its section and moves.csv. Each --cost NAME=COST_CSV is another
source of cost figures: one boot's cost records (guest/bench/icount's, or
a native boot's), whose series/stock in that boot is a column "NAME
series/stock" of the README's cost tables (NAME_series_over_stock in
cost.csv). Medians and percentiles pool every read of a cell over the
rounds; the stock/series ratio also gets its value per round and a
bootstrap 90% interval, so that noise can be told from a difference.
Standard library only, plus gnuplot for the plots.

Load -> compute -> write: bench_load.py reads the raw files and COST_CSVs,
bench_stats.analyse computes every figure and verdict once, into one
result, which bench_report.py (CSVs, plots) and bench_readme.py only format.
"""
import argparse
import os

import bench_load
import bench_readme
import bench_report
import bench_stats


def main(raw, out, plots=True, costs=None):
    """Analyse RAW into OUT, with the other sources of cost figures COSTS
    ({name: cost CSV}); returns the run and the result (for the unit test)."""
    run = bench_load.load_run(raw)
    model_runs = ([run] + [bench_load.load_run(raw, m) for m in run.models[1:]]
                  if run.models != [bench_load.DEFAULT_MODEL] else [])
    sources = {name: bench_load.cost_file(path) for name, path in (costs or {}).items()}
    result = bench_stats.analyse(run, model_runs, sources)
    os.makedirs(out, exist_ok=True)
    bench_report.write_csvs(out, result)
    written = ["cost.csv", "cost-long.csv", "cost-samples.csv", "fit.csv", "stall.csv",
               "invert.csv", "invert-cells.csv", "moves.csv", "fleet.csv"]
    if "models" in result:
        written += bench_report.write_model_csvs(out, result["models"])
    if plots:
        written += bench_report.write_plots(out, raw, result)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(bench_readme.readme(result, out))
    print(f"analyze: wrote {out}/README.md, {', '.join(written)}")
    return run, result


def cost_source(arg):
    """--cost NAME=COST_CSV: (NAME, COST_CSV)."""
    name, _, path = arg.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"{arg}: not NAME=COST_CSV")
    return name, path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].strip())
    parser.add_argument("raw_dir")
    parser.add_argument("results_dir")
    parser.add_argument("--cost", type=cost_source, action="append", default=[],
                        metavar="NAME=COST_CSV")
    args = parser.parse_args()
    main(args.raw_dir, args.results_dir, costs=dict(args.cost))
