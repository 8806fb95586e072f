#!/usr/bin/python3
"""Fill in the cover letter that git format-patch --cover-letter wrote.

  cover_letter.py COVER SOURCE DATE

COVER is the cover letter patch, rewritten in place: its Date: becomes
DATE (the tip commit's, so that an unchanged branch gives byte-identical
patches), *** SUBJECT HERE *** the first line of SOURCE
(series/cover-letter.txt) and *** BLURB HERE *** the rest of it.
Called by scripts/make-patches.
"""
import re
import sys


def fill(text, source, date):
    """The cover letter TEXT with DATE, and the subject and blurb of SOURCE."""
    subject, _, blurb = source.partition("\n")
    text = re.sub(r"^Date: .*$", lambda _: "Date: " + date, text, count=1, flags=re.M)
    text = text.replace("*** SUBJECT HERE ***", subject.strip())
    return text.replace("*** BLURB HERE ***", blurb.strip("\n"))


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().split("\n\n")[1])
    path, src, date = argv
    with open(src) as f:
        source = f.read()
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(fill(text, source, date))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
