"""Load the raw output of a scripts/bench run (see bench/analyze.py).

RAW_DIR holds, per boot TAG = KERNEL-rROUND: meta-TAG.txt, cost-TAG.csv,
stall-TAG.csv with the target's per-operation records
stall-TAG-VMAS-RSS-COND.bin, fleet-TAG.csv, invert-TAG.csv (round 1);
plus run.txt and cost-host-r1.csv (the host-kernel reference).
"""
import array
import csv
import glob
import os
import re
from dataclasses import dataclass, field

TAG_RE = re.compile(r"(?P<kind>cost|stall|fleet|invert)-(?P<kernel>\w+)-r(?P<round>\d+)\.csv$")


@dataclass
class StallRun:
    """One stall condition of one boot: its CSV line and its records (µs)."""
    round: int
    nvmas: int
    rss_kb: int
    reads: int
    read_p50_ms: float
    total_us: list
    mmap_us: list
    touch_us: list
    munmap_us: list


@dataclass
class InvertRun:
    """One run of bench-invert: the mapper's latencies (µs)."""
    round: int
    run: int
    readers: int
    ops: int
    mmap_mean_us: float
    mmap_max_us: float
    munmap_mean_us: float
    munmap_max_us: float
    reads: int


@dataclass
class RawRun:
    run_info: dict
    loads: list                 # [(boot tag, load averages)]
    metas: dict                 # boot tag -> {key: value}
    cost: dict = field(default_factory=dict)       # (kernel, vmas, rss, method) -> {round: [ms]}
    cell_info: dict = field(default_factory=dict)  # (kernel, vmas, rss) -> (nvmas, rss_kb)
    fields: dict = field(default_factory=dict)     # (vmas, rss) -> {field: kB}, series kernel
    stall: dict = field(default_factory=dict)      # (kernel, vmas, rss, cond) -> [StallRun]
    fleet: dict = field(default_factory=dict)      # (kernel, method) -> dict of lists
    fleet_by_round: dict = field(default_factory=dict)  # (kernel, round, method) -> [ms]
    invert: dict = field(default_factory=dict)     # (kernel, cond) -> [InvertRun]

    def samples(self, kernel, vmas, rss, method, round_=None):
        """Read times (ms) of one cell and method: one round's, or all rounds'."""
        by_round = self.cost.get((kernel, vmas, rss, method), {})
        if round_ is not None:
            return by_round.get(round_, [])
        return [x for r in sorted(by_round) for x in by_round[r]]

    @property
    def rounds(self):
        return sorted({r for by_round in self.cost.values() for r in by_round})


def read_kv(path):
    """KEY,VALUE lines; "clock,NAME,VALUE" lines give NAME."""
    kv = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(",")
                if key == "clock":
                    key, _, value = value.partition(",")
                kv.setdefault(key, value)
    return kv


def csv_rows(path, kind):
    with open(path, newline="") as f:
        return [row[1:] for row in csv.reader(f) if row and row[0] == kind]


def raw_files(raw, kind):
    """(path, kernel, round) of every KIND-KERNEL-rROUND.csv."""
    for path in sorted(glob.glob(os.path.join(raw, f"{kind}-*.csv"))):
        m = TAG_RE.match(os.path.basename(path))
        if m:
            yield path, m.group("kernel"), int(m.group("round"))


def record_path(raw, kernel, round_, vmas, rss, cond):
    name = cond.replace(":", "_").replace("=", "_")
    return os.path.join(raw, f"stall-{kernel}-r{round_}-{vmas}-{rss}-{name}.bin")


def read_records(path):
    """The target's records: 3 x uint32 ns (mmap, touch, munmap) per op, in µs."""
    words = array.array("I")
    with open(path, "rb") as f:
        words.frombytes(f.read())
    ops = range(0, len(words) - 2, 3)
    mmap_us = [words[i] / 1e3 for i in ops]
    touch_us = [words[i + 1] / 1e3 for i in ops]
    munmap_us = [words[i + 2] / 1e3 for i in ops]
    total_us = [a + b + c for a, b, c in zip(mmap_us, touch_us, munmap_us)]
    return total_us, mmap_us, touch_us, munmap_us


def load_cost(raw, run):
    for path, kernel, round_ in raw_files(raw, "cost"):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        for row in rows:
            if row[0] == "fields" and kernel == "series":
                run.fields.setdefault((int(row[1]), row[2]),
                                      dict(kv.split("=") for kv in row[6:]))
            if row[0] != "cost":
                continue
            vmas, rss, nvmas, rss_kb, method, _, ns, _pss = row[1:]
            key = (kernel, int(vmas), rss, method)
            run.cost.setdefault(key, {}).setdefault(round_, []).append(int(ns) / 1e6)
            run.cell_info[(kernel, int(vmas), rss)] = (int(nvmas), int(rss_kb))


def load_stall(raw, run):
    for path, kernel, round_ in raw_files(raw, "stall"):
        for row in csv_rows(path, "stall"):
            vmas, rss, nvmas, rss_kb, cond, _readers, _ops, _p50, _p99, _max, reads, read_p50, _ = row
            records = read_records(record_path(raw, kernel, round_, vmas, rss, cond))
            run.stall.setdefault((kernel, int(vmas), rss, cond), []).append(
                StallRun(round_, int(nvmas), int(rss_kb), int(reads), int(read_p50) / 1e6,
                         *records))


def load_fleet(raw, run):
    for path, kernel, round_ in raw_files(raw, "fleet"):
        for procs, method, _, ns, pids, read_ok in csv_rows(path, "fleet"):
            ms = int(ns) / 1e6
            run.fleet_by_round.setdefault((kernel, round_, method), []).append(ms)
            sweeps = run.fleet.setdefault((kernel, method),
                                          dict(ms=[], pids=[], ok=[], procs=int(procs)))
            sweeps["ms"].append(ms)
            sweeps["pids"].append(int(pids))
            sweeps["ok"].append(int(read_ok))


def load_invert(raw, run):
    for path, kernel, round_ in raw_files(raw, "invert"):
        for cond, readers, nrun, ops, *ns in csv_rows(path, "invert"):
            mmap_mean, mmap_max, munmap_mean, munmap_max, reads = (int(x) for x in ns)
            run.invert.setdefault((kernel, cond), []).append(
                InvertRun(round_, int(nrun), int(readers), int(ops), mmap_mean / 1e3,
                          mmap_max / 1e3, munmap_mean / 1e3, munmap_max / 1e3, reads))


def load_run(raw):
    """Everything a scripts/bench run wrote into RAW."""
    run_txt = os.path.join(raw, "run.txt")
    with open(run_txt) as f:
        loads = [tuple(line.rstrip("\n").split(",", 2)[1:]) for line in f
                 if line.startswith("load,")]
    metas = {os.path.basename(p)[len("meta-"):-len(".txt")]: read_kv(p)
             for p in sorted(glob.glob(os.path.join(raw, "meta-*.txt")))}
    run = RawRun(read_kv(run_txt), loads, metas)
    load_cost(raw, run)
    load_stall(raw, run)
    load_fleet(raw, run)
    load_invert(raw, run)
    return run
