#!/usr/bin/env python3
"""Unit test of native_check.py on small records written here.

    cd scripts/analysis && python3 -m unittest -v test_native_check
"""
import os
import tempfile
import unittest

import native_check


def records(*rows):
    """A cost CSV of ROWS (method, pss_kb), all of cell 100:16."""
    f = tempfile.NamedTemporaryFile('w', suffix='.csv', delete=False)
    with f:
        f.write('fields,100,16,101,16400,rollup,Rss=16400\n')
        for i, (method, pss) in enumerate(rows):
            f.write('cost,100,16,101,16400,%s,%d,250000,%d\n' % (method, i, pss))
    return f.name


class NativeCheck(unittest.TestCase):
    def run_check(self, *rows):
        path = records(*rows)
        try:
            return native_check.check([path])
        finally:
            os.unlink(path)

    def test_equal_pss_passes(self):
        ok, text = self.run_check(('rollup', 16384), ('rollup=smaps_rollup_stock', 16384),
                                  ('maps', 101), ('rollup', 16384))
        self.assertTrue(ok, text)
        self.assertEqual(text, '1 targets of 1 cells (100:16), at least 1 reads of each, '
                         'one Pss per target')

    def test_a_differing_read_fails(self):
        ok, text = self.run_check(('rollup', 16384), ('rollup=smaps_rollup_stock', 16384),
                                  ('rollup', 16380))
        self.assertFalse(ok)
        self.assertIn('100:16: Pss kB rollup [16380, 16384]', text)

    def test_targets_are_compared_one_by_one(self):
        path = records(('rollup', 16384), ('rollup=smaps_rollup_stock', 16384))
        other = records(('rollup', 16380), ('rollup=smaps_rollup_stock', 16380))
        try:
            ok, text = native_check.check([path, other])
        finally:
            os.unlink(path)
            os.unlink(other)
        self.assertTrue(ok, text)
        self.assertTrue(text.startswith('2 targets of 1 cells (100:16)'), text)

    def test_a_missing_method_fails(self):
        ok, text = self.run_check(('rollup', 16384), ('status', 16400))
        self.assertFalse(ok)
        self.assertEqual(text, '100:16: no read of rollup=smaps_rollup_stock')


if __name__ == '__main__':
    unittest.main()
