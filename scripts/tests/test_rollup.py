#!/usr/bin/python3
"""Unit test of guest/sample/rollup.py on smaps_rollup and smaps recorded
in real guests: the oracle's files of a `make test` run (stage oracle:
the sample on the stock and the series kernel), in testdata/oracle/.

  cd scripts/tests && python3 -m unittest -v test_rollup
"""
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "guest", "sample"))
import rollup  # noqa: E402

DATA = os.path.join(HERE, "testdata", "oracle")
FORMAT_H = rollup.format_header_path()


def read(*path):
    with open(os.path.join(DATA, *path)) as f:
        return f.read()


class Format(unittest.TestCase):
    """The field list and columns come from smaps_rollup_format.h."""

    def test_fields_are_the_headers(self):
        with open(FORMAT_H) as f:
            labels = re.findall(r'"([A-Za-z_]+):"', f.read())
        self.assertEqual(rollup.FIELDS, labels[:len(rollup.FIELDS)])
        self.assertEqual(len(rollup.FIELDS), 22)
        self.assertEqual(rollup.FIELDS[0], "Rss")
        self.assertEqual(rollup.FIELDS[-1], "Locked")

    def test_columns(self):
        # What stock 6.12 prints on 64-bit (fs/proc/task_mmu.c:
        # show_vma_header_prefix()'s seq_setwidth(m, 25 + sizeof(void *) * 6
        # - 1) before "[rollup]", SEQ_PUT_DEC's 8-wide numbers after a
        # 16-column label, Private_Hugetlb's 7-wide one).
        self.assertEqual(rollup.HEADER_COL, 73)
        self.assertEqual(rollup.NUMBER_END, 24)
        self.assertEqual(rollup.FIELD_LAYOUT["Private_Hugetlb"], (17, 7))
        self.assertEqual(rollup.FIELD_LAYOUT["Rss"], (16, 8))

    def test_recorded_lines_end_at_number_end(self):
        for kernel in ("stock", "series"):
            lines = read(kernel, "smaps_rollup").splitlines()
            self.assertEqual(lines[0].find("[rollup]"), rollup.HEADER_COL)
            for line in lines[1:]:
                self.assertEqual(len(line) - len(rollup.UNIT), rollup.NUMBER_END, line)

    def test_a_changed_header_changes_the_parser(self):
        with open(FORMAT_H) as f:
            text = f.read()
        fields, layout, col, end, unit = rollup.load_format(
            text.replace('"%-16s%8llu kB\\n"', '"%-18s%8llu kB\\n"'))
        self.assertEqual(end, 26)
        self.assertEqual(layout["Rss"], (18, 8))
        self.assertEqual(fields, rollup.FIELDS)


class Recorded(unittest.TestCase):
    """rollup.py on the sample's files from stock and series guests."""

    def test_parse_rollup(self):
        for kernel in ("stock", "series"):
            header, values, order = rollup.parse_rollup(read(kernel, "smaps_rollup"))
            self.assertIsNotNone(header)
            self.assertLess(header[0], header[1])
            self.assertEqual(order, rollup.FIELDS)
            self.assertGreater(values["Rss"], 32 * 1024)  # the sample maps 32 MiB

    def test_format_matches_stock(self):
        for kernel in ("stock", "series"):
            self.assertEqual(rollup.format_problems(read(kernel, "smaps_rollup")), [])

    def test_format_problems_found(self):
        text = read("series", "smaps_rollup")
        bad = text.replace("Rss:            ", "Rss:           \t", 1)
        self.assertTrue(rollup.format_problems(bad))
        lines = text.splitlines(True)
        self.assertTrue(rollup.format_problems("".join(lines[:1] + lines[2:])))
        self.assertTrue(rollup.format_problems(text.rstrip("\n")))

    def test_rollup_is_summed_smaps(self):
        # What `rollup-table` checks in the guest, on the recorded files.
        for kernel in ("stock", "series"):
            _, values, _ = rollup.parse_rollup(read(kernel, "smaps_rollup"))
            vmas = [v for v in rollup.parse_smaps(read(kernel, "smaps"))
                    if v["name"] != "[vsyscall]"]
            self.assertGreater(len(vmas), 5)
            for f in rollup.FIELDS:
                if f in rollup.ROLLUP_ONLY:
                    continue
                d = values[f] - sum(v["kB"].get(f, 0) for v in vmas)
                if f in rollup.ROUNDED:
                    self.assertTrue(0 <= d < len(vmas), (kernel, f, d))
                else:
                    self.assertEqual(d, 0, (kernel, f))

    def test_compare_stock_and_series(self):
        stock = os.path.join(DATA, "stock", "smaps_rollup")
        series = os.path.join(DATA, "series", "smaps_rollup")
        with open(os.devnull, "w") as null:
            out, sys.stdout = sys.stdout, null
            try:
                same = rollup.compare(stock, series)
                differ = rollup.compare(stock, os.path.join(DATA, "stock", "smaps"))
            finally:
                sys.stdout = out
        self.assertEqual(same, 0)
        self.assertEqual(differ, 1)


if __name__ == "__main__":
    unittest.main()
