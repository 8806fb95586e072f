#!/usr/bin/env python3
"""Summarise guest/bench/icount's records: instructions per read.

    icount.py COST_CSV

COST_CSV holds bench-read's cost records (guest/bench/records.h), timed by
a guest clock that counts one nanosecond per instruction (QEMU -icount
shift=0). Prints a Markdown table, one row per cell: the median
instructions of a read of smaps_rollup and of stock's implementation beside
it in the same boot, their ratio, the spread of the series' reads, and maps
and status as controls.
"""
import statistics
import sys

SERIES, STOCK = 'rollup', 'rollup=smaps_rollup_stock'
CONTROLS = ('maps', 'status')


def load(path):
    reads, order = {}, []
    try:
        f = open(path)
    except OSError as e:
        sys.exit('icount.py: %s' % e)
    with f:
        for line in f:
            rec = line.rstrip('\n').split(',')
            if rec[0] != 'cost' or len(rec) != 9:
                continue
            cell = rec[1] + ':' + rec[2]
            if cell not in order:
                order.append(cell)
            reads.setdefault((cell, rec[5]), []).append(int(rec[7]))
    return reads, order


def minstr(ns):
    return '%.2f' % (ns / 1e6)


def main(argv):
    if len(argv) != 2:
        sys.exit('usage: icount.py COST_CSV')
    reads, order = load(argv[1])
    if not order:
        sys.exit('icount.py: no cost records in %s' % argv[1])
    print('| cell | series, M instructions | stock | series / stock '
          '| series min-max / median | maps | status |')
    print('|---|---:|---:|---:|---|---:|---:|')
    for cell in order:
        missing = [m for m in (SERIES, STOCK) + CONTROLS
                   if not reads.get((cell, m))]
        if missing:
            sys.exit('icount.py: cell %s has no reads of %s'
                     % (cell, ', '.join(missing)))
        med = {m: statistics.median(reads[(cell, m)])
               for m in (SERIES, STOCK) + CONTROLS}
        s = reads[(cell, SERIES)]
        print('| %s | %s | %s | **%.3f** | %.3f-%.3f | %s | %s |' % (
            cell, minstr(med[SERIES]), minstr(med[STOCK]),
            med[SERIES] / med[STOCK], min(s) / med[SERIES],
            max(s) / med[SERIES], minstr(med['maps']),
            '%.0f k' % (med['status'] / 1e3)))


if __name__ == '__main__':
    main(sys.argv)
