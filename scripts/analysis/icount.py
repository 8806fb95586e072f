#!/usr/bin/env python3
"""Summarise one boot's bench-read cost records: the cost of a read.

    icount.py [--label icount|native] COST_CSV
    icount.py [--label icount|native] COST_CSV COST_CSV...

COST_CSV holds bench-read's cost records (guest/bench/records.h). Label
icount (the default): guest/bench/icount's, timed by a guest clock that
counts one nanosecond per instruction (QEMU -icount shift=0); native: the
same records timed in nanoseconds on a natively booted kernel. Prints a
Markdown table, one row per cell: the median instructions (ns) of a read
of smaps_rollup and of stock's implementation beside it in the same boot,
their ratio, the spread of the series' reads, and maps and status as
controls. Several COST_CSVs are rounds (guest/bench/native's cost-rR.csv,
a new target per cell in each): the table then gives the medians over the
rounds of each round's medians and ratio, the ratio's range, and the ratio
with the status control's time taken off both reads. Load
(bench_load.cost_file) -> compute (bench_stats.same_boot_cells, which
analyze.py --cost uses too, and rounds_cells) -> write.
"""
import math
import sys

import bench_load
import bench_stats

SERIES, STOCK = 'rollup', bench_stats.SAME_BOOT_STOCK
# What a label's records count.
UNITS = {'icount': 'instructions', 'native': 'ns'}
USAGE = 'usage: icount.py [--label %s] COST_CSV...' % '|'.join(UNITS)


def minstr(ns):
    return '%.2f' % (ns / 1e6)


def main(argv):
    args, label = argv[1:], 'icount'
    if args[:1] == ['--label'] and len(args) >= 3 and args[1] in UNITS:
        label, args = args[1], args[2:]
    if not args or args[0].startswith('-'):
        sys.exit(USAGE)
    try:
        rounds = [bench_stats.same_boot_cells(bench_load.cost_file(a)) for a in args]
    except (OSError, ValueError) as e:
        sys.exit('icount.py: %s' % e)
    for path, cells in zip(args, rounds):
        if not cells:
            sys.exit('icount.py: no cost records in %s' % path)
    if len(rounds) > 1:
        rounds_table(bench_stats.rounds_cells(rounds), UNITS[label])
        return
    cells = rounds[0]
    print('| cell | series, M %s | stock | series / stock '
          '| series min-max / median | maps | status |' % UNITS[label])
    print('|---|---:|---:|---:|---|---:|---:|')
    for cell, c in cells.items():
        med, (low, high) = c['median'], c['spread']
        print('| %s | %s | %s | **%.3f** | %.3f-%.3f | %s | %s |' % (
            cell, minstr(med[SERIES]), minstr(med[STOCK]), c['series_over_stock'],
            low, high, minstr(med['maps']), '%.0f k' % (med['status'] / 1e3)))


def rounds_table(cells, unit):
    print('| cell | rounds | series, M %s | stock | series / stock | min-max over rounds '
          '| less status | smaps | maps | status |' % unit)
    print('|---|---:|---:|---:|---:|---|---:|---:|---:|---:|')
    for cell, c in cells.items():
        med, (low, high) = c['median'], c['range']
        smaps = minstr(med['smaps']) if 'smaps' in med else '–'
        less = '–' if math.isnan(c['less_status']) else '%.3f' % c['less_status']
        print('| %s | %d | %s | %s | **%.3f** | %.3f-%.3f | %s | %s | %s | %s |' % (
            cell, c['rounds'], minstr(med[SERIES]), minstr(med[STOCK]), c['series_over_stock'],
            low, high, less, smaps, minstr(med['maps']),
            '%.0f k' % (med['status'] / 1e3)))


if __name__ == '__main__':
    main(sys.argv)
