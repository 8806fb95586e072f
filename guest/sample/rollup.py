#!/usr/bin/python3
"""Parse /proc/PID/smaps_rollup and /proc/PID/smaps; check one against the other.

  rollup.py table PID [--save DIR]
  rollup.py table --sample BIN [--save DIR]
  rollup.py compare STOCK_ROLLUP SERIES_ROLLUP

table:   print the rollup verbatim, then field | rollup | sum over smaps |
         verdict, and check the rollup's format against stock 6.12's
         (show_smaps_rollup() in fs/proc/task_mmu.c, see FORMAT below).
         With --sample it starts BIN (guest/sample), waits for its "ready",
         also checks the sizes BIN reports, and ends BIN afterwards.
         Exit 0 all agree, 1 something differs, 2 error, 3 no smaps_rollup.
compare: the oracle: line-by-line shape of two saved rollups, and their
         values (see FIXED).  Exit 0 same, 1 differ.

Called by guest/rollup-table (in the guest) and scripts/oracle (on the host); keep it to the system
python3 and its standard library.
"""
import errno
import os
import re
import subprocess
import sys


def fail(msg, code=2):
    print(f"rollup: {msg}", file=sys.stderr)
    sys.exit(code)


# FORMAT: the format is stock 6.12's, as show_smaps_rollup() and
# __show_smap() print it in fs/proc/task_mmu.c (the file since upstream
# commit 493b0e9d945f "mm: add /proc/pid/smaps_rollup", Linux 4.14;
# Documentation/ABI/testing/procfs-smaps_rollup). It is read from the C
# header that the selftests, the stress and the bench programs share,
# smaps_rollup_format.h, found where guest/format.mk says (SMAPS_FORMAT_DIR;
# the environment variable of that name overrides it, as it does for
# make): labels in order, each padded to a fixed prefix; the number
# right-aligned to a fixed width so that it ends at one column, then " kB";
# the header's "[rollup]" at a fixed column.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def format_header_path():
    """smaps_rollup_format.h as guest/format.mk locates it."""
    if os.environ.get("SMAPS_FORMAT_DIR"):
        d = os.environ["SMAPS_FORMAT_DIR"]
    else:
        with open(os.path.join(ROOT, "guest", "format.mk")) as f:
            m = re.search(r"^SMAPS_FORMAT_DIR \?= \$\(REPO_TOP\)/(\S+)$", f.read(), re.M)
        if not m:
            fail("guest/format.mk has no line SMAPS_FORMAT_DIR ?= $(REPO_TOP)/DIR")
        d = os.path.join(ROOT, m.group(1))
    return os.path.join(d, "smaps_rollup_format.h")


def load_format(text):
    """What the C header says of the format: (labels in order without the
    colon, {label: (prefix, width)} of the field lines, the header's
    "[rollup]" column, the column where the numbers end, the unit)."""
    def need(pattern, what):
        m = re.search(pattern, text, re.S)
        if not m:
            fail(f"smaps_rollup_format.h: cannot find {what}")
        return m
    enum = need(r"enum sr_field \{(.*?)\}", "enum sr_field").group(1)
    names = re.findall(r"\b(SR_[A-Z_]+)\b", enum)
    body = need(r"sr_label\[SR_NR_FIELDS\] = \{(.*?)\};", "sr_label[]").group(1)
    labels = [x.rstrip(":") for x in re.findall(r'"([^"]+)"', body)]
    if names[:-1] != names[:len(labels)] or len(labels) != len(names) - 1:
        fail("smaps_rollup_format.h: sr_label[] does not match enum sr_field")
    # "%-16s%8llu kB\n": label padded to 16, number 8 wide.
    m = need(r'return snprintf\(buf, size, "%-(\d+)s%(\d+)llu( kB)\\n"', "the field format")
    prefix, width, unit = int(m.group(1)), int(m.group(2)), m.group(3)
    layout = {label: (prefix, width) for label in labels}
    # if (f == SR_X) return snprintf(buf, size, "%s %7llu kB\n", ...): one field
    # whose label is too long for the prefix.
    for name, spaces, w in re.findall(
            r'if \(f == (SR_[A-Z_]+)\)\s*return snprintf\(buf, size, "%s( *)%(\d+)llu', text):
        label = labels[names.index(name)]
        layout[label] = (len(label) + 1 + len(spaces), int(w))
    # pad_until = 25 + 6 * sizeof(void *) - 1, then " [rollup]" (64-bit).
    m = need(r"pad_until = (\d+) \+ (\d+) \* sizeof\(void \*\) - (\d+);", "pad_until")
    header_col = int(m.group(1)) + int(m.group(2)) * 8 - int(m.group(3)) + 1
    return labels, layout, header_col, prefix + width, unit


def _load():
    path = format_header_path()
    try:
        with open(path) as f:
            return load_format(f.read())
    except OSError as e:
        fail(f"cannot read the format header {path}: {e.strerror}")


FIELDS, FIELD_LAYOUT, HEADER_COL, NUMBER_END, UNIT = _load()
FIELD_RE = re.compile(r"^([A-Za-z_]+):( +)([0-9]+)%s$" % re.escape(UNIT))
ROLLUP_ONLY = {"Pss_Anon", "Pss_File", "Pss_Shmem"}
# Accumulated in fixed point and truncated to kB per VMA in smaps, once in
# the rollup: summed smaps may fall short by less than 1 kB per VMA.
ROUNDED = {"Pss", "Pss_Dirty", "SwapPss", "Locked"}
HEADER_RE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ")

# Fields the oracle compares by value. The sample runs the same static
# binary without randomisation, without THP, without its [vdso] (whose Pss
# depends on how many processes exist) and with all its file pages mapped
# (fault-around alone maps a timing-dependent subset), so on two kernels that
# differ only in smaps_rollup every field comes out the same: stock and
# series boots, as root and as uid 65534, gave identical rollups. Should a
# field ever prove unstable, list it in REPORT_ONLY: compare() then shows
# its differences without failing.
REPORT_ONLY = set()
FIXED = [f for f in ["header"] + FIELDS if f not in REPORT_ONLY]


def parse_rollup(text):
    """Return (header (start, end) or None, {field: kB}, [field order])."""
    header, values, order = None, {}, []
    for line in text.splitlines():
        m = HEADER_RE.match(line)
        if m and header is None and not order:
            header = (int(m.group(1), 16), int(m.group(2), 16))
            continue
        m = FIELD_RE.match(line)
        if m:
            values[m.group(1)] = int(m.group(3))
            order.append(m.group(1))
    return header, values, order


def parse_smaps(text):
    """Return a list of VMAs: dicts with start, end, name and the kB fields."""
    vmas = []
    for line in text.splitlines():
        m = HEADER_RE.match(line)
        if m:
            parts = line.split(None, 5)
            vmas.append({"start": int(m.group(1), 16), "end": int(m.group(2), 16),
                         "name": parts[5] if len(parts) > 5 else "", "kB": {}})
            continue
        m = FIELD_RE.match(line)
        if m and vmas:
            vmas[-1]["kB"][m.group(1)] = int(m.group(3))
    return vmas


def line_shape(line):
    """Abstract a rollup line to what parsers depend on, not the values."""
    m = HEADER_RE.match(line)
    if m:
        return ("header", len(m.group(1)) >= 8, len(m.group(2)) >= 8,
                line[m.end():].split("[")[0].rstrip() + " ",
                line.find("[rollup]"), line.endswith("[rollup]"))
    m = FIELD_RE.match(line)
    if m:
        return ("field", m.group(1), len(line) - len(" kB"))
    return ("other", line)


def format_problems(text):
    """Check a rollup against the stock 6.12 format (see FORMAT above)."""
    problems = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    else:
        problems.append("does not end with a newline")
    if "\t" in text:
        problems.append("contains a tab")
    if not lines:
        return problems + ["is empty"]
    hdr = lines[0]
    if not re.match(r"^[0-9a-f]{8,}-[0-9a-f]{8,} ---p 00000000 00:00 0 +\[rollup\]$", hdr):
        problems.append(f"line 1 is not a rollup header: {hdr!r}")
    elif hdr.find("[rollup]") != HEADER_COL:
        problems.append(f"[rollup] at column {hdr.find('[rollup]')}, stock has {HEADER_COL}")
    labels = []
    for i, line in enumerate(lines[1:], 2):
        m = FIELD_RE.match(line)
        if not m:
            problems.append(f"line {i} is not a field line: {line!r}")
            continue
        label, value = m.group(1), m.group(3)
        labels.append(label)
        prefix, width = FIELD_LAYOUT.get(label, (NUMBER_END - 8, 8))
        want = f"{label}:".ljust(prefix) + value.rjust(width) + UNIT
        if line != want:
            problems.append(f"line {i} is {line!r}, stock would print {want!r}")
    if labels != FIELDS:
        problems.append(f"fields are {labels}, stock has {FIELDS}")
    return problems


def read_proc(pid, name):
    """Return the text of /proc/PID/NAME, or None on ENOENT."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read().decode()
    except FileNotFoundError:
        return None
    except OSError as e:
        fail(f"cannot read /proc/{pid}/{name}: {e.strerror} ({errno.errorcode.get(e.errno, e.errno)})")


def start_sample(binary):
    """Start the sample, wait until it is ready; return (proc, info dict)."""
    proc = subprocess.Popen([binary], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    info = {}
    for line in proc.stdout:
        line = line.strip()
        if line == "ready":
            return proc, info
        key, _, value = line.partition(":")
        info[key.strip()] = int(value)
    proc.wait()
    fail(f"the sample {binary} exited ({proc.returncode}) before it was ready")


def sample_checks(info):
    """What the rollup must show given the sizes the sample controls."""
    anon, filep = info["anon_private_kb"], info["file_private_kb"]
    memfd, shared = info["memfd_shmem_kb"], info["shared_anon_kb"]
    mappers = info["shared_anon_mappers"]
    # (field, relation, expected kB, what the sample contributes)
    return [
        ("Rss", ">=", anon + filep + memfd + shared, "all four regions resident"),
        ("Anonymous", ">=", anon, "private anon (shared anon is shmem)"),
        ("Pss_Anon", ">=", anon, "private anon, sole mapper"),
        ("Pss_File", ">=", filep, "private file mapping, sole mapper"),
        ("Pss_Shmem", "==", memfd + shared // mappers,
         f"memfd + shared anon / {mappers} mappers; nothing else is shmem"),
        ("Private_Dirty", ">=", anon + memfd, "written private anon + memfd"),
        ("Private_Clean", ">=", filep, "clean file pages, sole mapper"),
        ("Shared_Dirty", ">=", shared, "shared anon, mapped by the child too"),
    ]


def table(pid, save=None, info=None):
    # The two files are read one after the other: read the rollup again
    # afterwards, and start over if it changed meanwhile.
    for attempt in range(5):
        rollup_text = read_proc(pid, "smaps_rollup")
        smaps_text = read_proc(pid, "smaps")
        if read_proc(pid, "smaps_rollup") == rollup_text:
            break
    else:
        print(f"warning: /proc/{pid}/smaps_rollup changed while it was read 5 times; "
              "the target is not quiescent")
    if smaps_text is None:
        fail(f"/proc/{pid}/smaps does not exist: no such process, or no PROC_PAGE_MONITOR")
    if save:
        os.makedirs(save, exist_ok=True)
        for name, text in (("smaps_rollup", rollup_text), ("smaps", smaps_text)):
            if text is not None:
                with open(os.path.join(save, name), "w") as f:
                    f.write(text)

    vmas = [v for v in parse_smaps(smaps_text) if v["name"] != "[vsyscall]"]
    nvma = len(vmas)
    summed = {f: sum(v["kB"].get(f, 0) for v in vmas) for f in FIELDS if f not in ROLLUP_ONLY}
    span = (vmas[0]["start"], vmas[-1]["end"]) if vmas else (0, 0)
    bad = 0

    if rollup_text is None:
        print(f"/proc/{pid}/smaps_rollup does not exist on this kernel (ENOENT)")
        print(f"\nsum over /proc/{pid}/smaps ({nvma} VMAs, gate VMA excluded):")
        print(f"{'field':<22} {'smaps sum':>21}")
        print(f"{'header':<22} {f'{span[0]:08x}-{span[1]:08x}':>21}")
        for f, kb in summed.items():
            print(f"{f:<22} {f'{kb} kB':>21}")
        rollup = None
    else:
        print(f"/proc/{pid}/smaps_rollup:")
        sys.stdout.write(rollup_text)
        header, rollup, _ = parse_rollup(rollup_text)
        print(f"\n{'field':<22} {'rollup':>21} {'smaps sum':>21}  verdict "
              f"(smaps: {nvma} VMAs, gate VMA excluded)")

        def row(name, left, right, verdict):
            nonlocal bad
            bad += verdict.startswith("DIFFER")
            print(f"{name:<22} {left:>21} {right:>21}  {verdict}")

        hdr = f"{header[0]:08x}-{header[1]:08x}" if header else "missing"
        row("header", hdr, f"{span[0]:08x}-{span[1]:08x}",
            "agree" if header == span else "DIFFER (first VMA start - last VMA end)")
        for f in FIELDS:
            if f not in rollup:
                row(f, "missing", "", "DIFFER (field missing)")
            elif f in ROLLUP_ONLY:
                row(f, f"{rollup[f]} kB", "-", "rollup only")
            else:
                d = rollup[f] - summed[f]
                if d == 0:
                    verdict = "agree"
                elif f in ROUNDED and 0 < d < max(nvma, 1):
                    verdict = f"agree (within rounding: {d} kB < 1 kB x {nvma} VMAs)"
                else:
                    verdict = f"DIFFER by {d:+} kB"
                row(f, f"{rollup[f]} kB", f"{summed[f]} kB", verdict)
        for f in rollup:
            if f not in FIELDS:
                row(f, f"{rollup[f]} kB", "", "DIFFER (not a stock field)")
        if all(f in rollup for f in ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")):
            parts = rollup["Pss_Anon"] + rollup["Pss_File"] + rollup["Pss_Shmem"]
            d = rollup["Pss"] - parts
            # Each of the four is truncated once from the same fixed-point sum.
            verdict = ("agree" if d == 0 else
                       f"agree (within rounding: {d} kB, at most 2)" if 0 < d <= 2 else
                       f"DIFFER by {-d:+} kB")
            row("Pss_Anon+_File+_Shmem", f"{parts} kB", f"Pss {rollup['Pss']} kB", verdict)
        problems = format_problems(rollup_text)
        for p in problems:
            print(f"format: DIFFER from stock 6.12: {p}")
        if not problems:
            print(f"format: matches stock 6.12 (header [rollup] at column {HEADER_COL}, "
                  f"{len(FIELDS)} fields in stock order, numbers end at column {NUMBER_END})")
        bad += len(problems)

    if info:
        print(f"\nsample pid {pid} controls: {info['anon_private_kb']} kB private anon, "
              f"{info['file_private_kb']} kB private file (read), "
              f"{info['memfd_shmem_kb']} kB memfd shmem, {info['shared_anon_kb']} kB shared anon "
              f"({info['shared_anon_mappers']} mappers)")
        src = "rollup" if rollup is not None else "smaps sum"
        values = rollup if rollup is not None else summed
        for f, rel, want, why in sample_checks(info):
            if f not in values:
                continue
            got = values[f]
            ok = got >= want if rel == ">=" else got == want
            bad += not ok
            print(f"  {f:<14} {src} {got:>8} kB {rel} {want:>6} kB  "
                  f"{'ok' if ok else 'DIFFER'}  ({why})")
    if rollup is None:
        print(f"\nresult: no smaps_rollup on this kernel"
              + ("" if not bad else f"; {bad} difference(s) from the sample's sizes"))
    else:
        print(f"\nresult: {'all agree' if not bad else f'{bad} difference(s)'}")
    if bad:
        return 1
    return 0 if rollup is not None else 3


def compare(stock_path, series_path):
    with open(stock_path) as f:
        stock = f.read()
    with open(series_path) as f:
        series = f.read()
    bad = 0
    a, b = stock.splitlines(), series.splitlines()
    print(f"oracle: shape of {len(a)} stock lines against {len(b)} series lines")
    for i in range(max(len(a), len(b))):
        la = a[i] if i < len(a) else None
        lb = b[i] if i < len(b) else None
        sa = line_shape(la) if la is not None else None
        sb = line_shape(lb) if lb is not None else None
        if sa != sb:
            bad += 1
            print(f"  line {i + 1}: shape differs\n    stock:  {la!r}\n    series: {lb!r}")
    for p in format_problems(series):
        bad += 1
        print(f"  series format: {p}")
    ha, va, _ = parse_rollup(stock)
    hb, vb, _ = parse_rollup(series)
    va["header"], vb["header"] = ha, hb
    print("oracle: values (fixed: must be equal; other: reported only)")
    print(f"  {'field':<16} {'':<6} {'stock':>22} {'series':>22}")
    for f in ["header"] + FIELDS:
        x, y = va.get(f), vb.get(f)
        fixed = f in FIXED
        if f == "header":
            x = f"{x[0]:x}-{x[1]:x}" if x else None
            y = f"{y[0]:x}-{y[1]:x}" if y else None
        same = x == y
        bad += fixed and not same
        verdict = "same" if same else ("DIFFER" if fixed else "differ (not fixed by the workload)")
        print(f"  {f:<16} {'fixed' if fixed else 'other':<6} {str(x):>22} {str(y):>22}  {verdict}")
    print(f"oracle: {'stock and series agree' if not bad else f'{bad} difference(s)'}")
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "compare":
        if len(argv) != 3:
            fail("usage: rollup.py compare STOCK_ROLLUP SERIES_ROLLUP")
        return compare(argv[1], argv[2])
    if not argv or argv[0] != "table":
        fail(__doc__.strip().split("\n\n")[1])
    args, opts = [], {}
    it = iter(argv[1:])
    for a in it:
        if a in ("--save", "--sample"):
            opts[a] = next(it, None) or fail(f"{a} needs an argument")
        else:
            args.append(a)
    if "--sample" in opts:
        if args:
            fail("give either PID or --sample, not both")
        proc, info = start_sample(opts["--sample"])
        try:
            return table(info["pid"], opts.get("--save"), info)
        finally:
            proc.stdin.close()
            proc.wait()
    if len(args) != 1 or not args[0].isdigit():
        fail("usage: rollup.py table PID [--save DIR]")
    return table(int(args[0]), opts.get("--save"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
