"""Tests of icount.py on records written here, with known medians."""
import contextlib
import io
import os
import tempfile
import unittest

import icount


def records(cell, method, values):
    vmas, rss = cell.split(':')
    return ''.join('cost,%s,%s,%s,17000,%s,%d,%d,1000\n'
                   % (vmas, rss, vmas, method, i, v)
                   for i, v in enumerate(values))


class IcountTest(unittest.TestCase):
    def run_on(self, *texts, label=()):
        paths = []
        for text in texts:
            with tempfile.NamedTemporaryFile('w', suffix='.csv',
                                             delete=False) as f:
                f.write(text)
            self.addCleanup(os.unlink, f.name)
            paths.append(f.name)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            icount.main(['icount.py', *label, *paths])
        return out.getvalue().splitlines()

    def test_ratio_of_medians_per_cell_in_order(self):
        text = ('fields,4000,16d,ignored\n'
                + records('4000:16d', 'rollup', [3000000, 2900000, 9000000])
                + records('4000:16d', 'rollup=smaps_rollup_stock',
                          [2000000, 2000000, 1000000])
                + records('4000:16d', 'maps', [10000000])
                + records('4000:16d', 'status', [30000])
                + records('1:256o', 'rollup', [600000])
                + records('1:256o', 'rollup=smaps_rollup_stock', [1200000])
                + records('1:256o', 'maps', [40000])
                + records('1:256o', 'status', [30000]))
        rows = self.run_on(text)
        self.assertEqual(len(rows), 4)
        self.assertTrue(rows[2].startswith('| 4000:16d | 3.00 | 2.00 | **1.500** '
                                           '| 0.967-3.000 | 10.00 | 30 k |'),
                        rows[2])
        self.assertIn('| 1:256o | 0.60 | 1.20 | **0.500** |', rows[3])

    def test_rounds_give_the_median_ratio_its_range_and_less_status(self):
        def round_(series, stock):
            return (records('1:256o', 'rollup', [series])
                    + records('1:256o', 'rollup=smaps_rollup_stock', [stock])
                    + records('1:256o', 'maps', [80000])
                    + records('1:256o', 'status', [100000]))
        # ratios 0.5, 0.8, 1.1; less status 0.4/0.9, 0.7/0.9, 1.0/0.9
        rows = self.run_on(round_(500000, 1000000), round_(800000, 1000000),
                           round_(1100000, 1000000), label=('--label', 'native'))
        self.assertEqual(len(rows), 3)
        self.assertIn('| series, M ns |', rows[0])
        self.assertEqual(rows[2], '| 1:256o | 3 | 0.80 | 1.00 | **0.800** | 0.500-1.100 '
                         '| 0.778 | – | 0.08 | 100 k |')

    def test_a_cell_without_stock_reads_is_an_error(self):
        text = (records('100:16', 'rollup', [1])
                + records('100:16', 'maps', [1])
                + records('100:16', 'status', [1]))
        with self.assertRaises(SystemExit) as e:
            self.run_on(text)
        self.assertIn('rollup=smaps_rollup_stock', str(e.exception))

    def test_no_records_is_an_error(self):
        with self.assertRaises(SystemExit) as e:
            self.run_on('fields,1,2\n')
        self.assertIn('no cost records', str(e.exception))


if __name__ == '__main__':
    unittest.main()
