#!/usr/bin/python3
"""Count the lines that one patch of the series adds and a later one removes.

  series_churn.py KSRC BASE BRANCH [LIMIT]

For every commit of BASE..BRANCH in the git repository KSRC, each line it
removes is blamed in its parent: a line that an earlier commit of the
series added counts as churn. Prints one line per commit that has churn
and a total; exits 1 when the total exceeds LIMIT (default 20), 2 on a
usage or git error. Called by scripts/check-series.
"""
import re
import subprocess
import sys


def git(ksrc, *args):
    return subprocess.run(["git", "-C", ksrc, *args], check=True,
                          capture_output=True, text=True).stdout


def removed_lines(ksrc, commit):
    """{path: [line numbers in the parent]} of the lines COMMIT removes."""
    out = git(ksrc, "diff", "-U0", "--no-renames", commit + "~1", commit)
    removed, path = {}, None
    for line in out.splitlines():
        if line.startswith("--- "):
            path = None if line == "--- /dev/null" else line[len("--- a/"):]
        m = re.match(r"@@ -(\d+)(?:,(\d+))? ", line)
        if m and path:
            start, count = int(m.group(1)), int(m.group(2) or "1")
            removed.setdefault(path, []).extend(range(start, start + count))
    return removed


def blamed_commits(ksrc, commit, path, lines):
    """The commits that added LINES of PATH in COMMIT's parent."""
    out = git(ksrc, "blame", "--porcelain", commit + "~1", "--", path)
    by_line = {}
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]{40}) \d+ (\d+)", line)
        if m:
            by_line[int(m.group(2))] = m.group(1)
    return [by_line.get(n) for n in lines]


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__.strip().split("\n\n")[1])
    ksrc, base, branch = argv[:3]
    limit = int(argv[3]) if len(argv) == 4 else 20
    try:
        commits = git(ksrc, "rev-list", "--reverse", base + ".." + branch).split()
        subjects = {c: git(ksrc, "log", "-1", "--format=%s", c).strip() for c in commits}
        total = 0
        for i, commit in enumerate(commits):
            earlier = set(commits[:i])
            n = 0
            for path, lines in removed_lines(ksrc, commit).items():
                n += sum(1 for c in blamed_commits(ksrc, commit, path, lines) if c in earlier)
            if n:
                print(f"{n:5d} {subjects[commit]}")
            total += n
    except subprocess.CalledProcessError as e:
        print(f"series_churn: git {' '.join(e.cmd[3:])}: {e.stderr.strip()}", file=sys.stderr)
        return 2
    print(f"{total:5d} lines added by one patch and removed by a later one (at most {limit})")
    return 0 if total <= limit else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
