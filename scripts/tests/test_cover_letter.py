#!/usr/bin/python3
"""Unit test of scripts/cover_letter.py on the cover letter git
format-patch writes (its template lines) and the series' own
series/cover-letter.txt; the result must be patches/' cover letter but for
the headers git puts there.

  cd scripts/tests && python3 -m unittest -v test_cover_letter
"""
import glob
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import cover_letter  # noqa: E402

TEMPLATE = """From 0 Mon Sep 17 00:00:00 2001
From: A <a@example.org>
Date: Thu, 1 Jan 2026 00:00:00 +0000
Subject: [PATCH v3 0/2] *** SUBJECT HERE ***

*** BLURB HERE ***

A (2):
"""


class CoverLetter(unittest.TestCase):
    def test_fill(self):
        out = cover_letter.fill(TEMPLATE, "the subject\nthe blurb\\1\n\n",
                                "Fri, 2 Jan 2026 10:00:00 +0100")
        self.assertIn("\nDate: Fri, 2 Jan 2026 10:00:00 +0100\n", out)
        self.assertIn("Subject: [PATCH v3 0/2] the subject\n", out)
        self.assertIn("\nthe blurb\\1\n\nA (2):", out)
        self.assertNotIn("***", out)

    def test_the_series_cover_letter(self):
        with open(os.path.join(REPO, "series", "cover-letter.txt")) as f:
            source = f.read()
        cover = glob.glob(os.path.join(REPO, "patches", "*-0000-cover-letter.patch"))
        self.assertEqual(len(cover), 1)
        with open(cover[0]) as f:
            want = f.read()
        subject = source.partition("\n")[0].strip()
        patches = len(glob.glob(os.path.join(REPO, "patches", "*.patch"))) - 1
        self.assertRegex(want, rf"\[PATCH v\d+ 0+/{patches}\] {re.escape(subject)}\n")
        out = cover_letter.fill(TEMPLATE, source, "D")
        self.assertIn(source.partition("\n")[2].strip("\n"), want)
        self.assertIn(source.partition("\n")[2].strip("\n"), out)


if __name__ == "__main__":
    unittest.main()
