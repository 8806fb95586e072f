#!/usr/bin/env python3
"""Check bench-read's cost records of quiescent targets: in each cell,
every read of smaps_rollup and of stock's implementation beside it
(smaps_rollup_stock) gave the same Pss.

    native_check.py COST_CSV...

The records are guest/bench/records.h's "cost" lines. Exit status 0 when
every cell has reads of both and one Pss among them all; one line says
what was checked, or what differed.
"""
import sys

METHODS = ('rollup', 'rollup=smaps_rollup_stock')


def check(paths):
    cells = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                rec = line.rstrip('\n').split(',')
                if rec[0] == 'cost' and len(rec) == 9 and rec[5] in METHODS:
                    cell = cells.setdefault('%s:%s' % (rec[1], rec[2]), {m: [] for m in METHODS})
                    cell[rec[5]].append(int(rec[8]))
    if not cells:
        return False, 'no cost records in %s' % ' '.join(paths)
    for name, reads in cells.items():
        if not all(reads.values()):
            return False, '%s: no read of %s' % (name, ' or '.join(m for m in METHODS if not reads[m]))
        seen = {m: sorted(set(v)) for m, v in reads.items()}
        if len(set(sum(seen.values(), []))) != 1:
            return False, '%s: Pss kB %s' % (name, ', '.join('%s %s' % kv for kv in seen.items()))
    n = min(len(v) for reads in cells.values() for v in reads.values())
    return True, '%d cells (%s), at least %d reads of each, one Pss per cell' % (
        len(cells), ' '.join(cells), n)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip())
    ok, text = check(sys.argv[1:])
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
