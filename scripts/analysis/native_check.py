#!/usr/bin/env python3
"""Check bench-read's cost records of quiescent targets: every read of
smaps_rollup and of stock's implementation beside it (smaps_rollup_stock)
of one target gave the same Pss.

    native_check.py COST_CSV...

The records are guest/bench/records.h's "cost" lines; a target's start
with its "fields" line. Targets are compared one by one, never with each
other: the Pss of another round's target may differ (a page shared with
a process that came or went). Exit status 0 when every target has reads
of both and one Pss among them all; one line says what was checked, or
what differed.
"""
import sys

import bench_load

METHODS = ('rollup', bench_load.SAME_BOOT_STOCK)


def targets(paths):
    """{(path, n, cell): {method: [Pss kB]}}, the Nth target of each file
    (bench_load.csv_records, by the names of records.h)."""
    found = {}
    for path in paths:
        n = 0
        for kind, rec in bench_load.csv_records(path, 'fields', 'cost'):
            if kind == 'fields':
                n += 1
            elif rec['method'] in METHODS:
                key = (path, n, '%s:%s' % (rec['vmas'], rec['rss_mib']))
                found.setdefault(key, {m: [] for m in METHODS})[rec['method']].append(
                    int(rec['pss_kb']))
    return found


def check(paths):
    found = targets(paths)
    if not found:
        return False, 'no cost records in %s' % ' '.join(paths)
    for (_, _, name), reads in found.items():
        if not all(reads.values()):
            return False, '%s: no read of %s' % (name, ' or '.join(m for m in METHODS if not reads[m]))
        seen = {m: sorted(set(v)) for m, v in reads.items()}
        if len(set(sum(seen.values(), []))) != 1:
            return False, '%s: Pss kB %s' % (name, ', '.join('%s %s' % kv for kv in seen.items()))
    cells = list(dict.fromkeys(k[2] for k in found))
    n = min(len(v) for reads in found.values() for v in reads.values())
    return True, '%d targets of %d cells (%s), at least %d reads of each, one Pss per target' % (
        len(found), len(cells), ' '.join(cells), n)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip())
    ok, text = check(sys.argv[1:])
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
