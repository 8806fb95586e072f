"""Load the raw output of a scripts/bench run (see scripts/analysis/analyze.py).

RAW_DIR holds, per boot TAG = KERNEL-rROUND: meta-TAG.txt, cost-TAG.csv,
stall-TAG.csv with the target's per-operation records
stall-TAG-VMAS-RSS-COND.bin, fleet-TAG.csv, invert-TAG.csv and
moves-TAG.csv (round 1);
plus run.txt and cost-host-r1.csv (the host-kernel reference). A boot in
a preemption model other than voluntary (scripts/bench PREEMPT=...) has
TAG = KERNEL-MODEL-rROUND (series-full-r1); load_run loads one model's
boots at a time.
"""
import array
import csv
import glob
import os
import re
from dataclasses import dataclass, field

# The preemption models of scripts/bench; untagged files are voluntary's.
MODELS = ("voluntary", "full", "none")
DEFAULT_MODEL = "voluntary"
BOOT_RE = (r"(?P<kernel>[A-Za-z0-9_]+?)(?:-(?P<model>" + "|".join(MODELS)
           + r"))?-r(?P<round>\d+)")
TAG_RE = re.compile(r"(?P<kind>cost|stall|fleet|invert|moves)-" + BOOT_RE + r"\.csv$")
BOOT_TAG_RE = re.compile(BOOT_RE + "$")


def model_of(tag):
    """The preemption model of a boot tag (series-full-r1: full)."""
    m = BOOT_TAG_RE.match(tag)
    return (m.group("model") if m else None) or DEFAULT_MODEL


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
class MovesRun:
    """One method of one bench-moves cell of one boot (guest/bench/moves.c)."""
    round: int
    rss_kb: int                 # quiescent: the truth
    moves: int
    reads: int
    wrong: int
    over: int
    under: int
    min_kb: int
    max_kb: int
    read_p50_ms: float


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
    moves: dict = field(default_factory=dict)      # (kernel, mib, period_us, method) -> [MovesRun]
    model: str = DEFAULT_MODEL                     # the preemption model loaded
    models: list = field(default_factory=list)     # every model of the run, first first

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


def label(kernel, model):
    """How the raw files name KERNEL in MODEL: series, series-full..."""
    return kernel if model == DEFAULT_MODEL else f"{kernel}-{model}"


def raw_files(raw, kind, model=DEFAULT_MODEL):
    """(path, kernel, round) of every KIND-KERNEL[-MODEL]-rROUND.csv of MODEL."""
    for path in sorted(glob.glob(os.path.join(raw, f"{kind}-*.csv"))):
        m = TAG_RE.match(os.path.basename(path))
        # The host reference belongs to no model: every model gets it.
        if m and (m.group("kernel") == "host" or (m.group("model") or DEFAULT_MODEL) == model):
            yield path, m.group("kernel"), int(m.group("round"))


def record_path(raw, kernel, round_, vmas, rss, cond, model=DEFAULT_MODEL):
    name = cond.replace(":", "_").replace("=", "_")
    return os.path.join(raw, f"stall-{label(kernel, model)}-r{round_}-{vmas}-{rss}-{name}.bin")


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
    for path, kernel, round_ in raw_files(raw, "cost", run.model):
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
    for path, kernel, round_ in raw_files(raw, "stall", run.model):
        for row in csv_rows(path, "stall"):
            vmas, rss, nvmas, rss_kb, cond, _readers, _ops, _p50, _p99, _max, reads, read_p50, _ = row
            records = read_records(record_path(raw, kernel, round_, vmas, rss, cond, run.model))
            run.stall.setdefault((kernel, int(vmas), rss, cond), []).append(
                StallRun(round_, int(nvmas), int(rss_kb), int(reads), int(read_p50) / 1e6,
                         *records))


def load_fleet(raw, run):
    for path, kernel, round_ in raw_files(raw, "fleet", run.model):
        for procs, method, _, ns, pids, read_ok in csv_rows(path, "fleet"):
            ms = int(ns) / 1e6
            run.fleet_by_round.setdefault((kernel, round_, method), []).append(ms)
            sweeps = run.fleet.setdefault((kernel, method),
                                          dict(ms=[], pids=[], ok=[], procs=int(procs)))
            sweeps["ms"].append(ms)
            sweeps["pids"].append(int(pids))
            sweeps["ok"].append(int(read_ok))


def load_invert(raw, run):
    for path, kernel, round_ in raw_files(raw, "invert", run.model):
        for cond, readers, nrun, ops, *ns in csv_rows(path, "invert"):
            mmap_mean, mmap_max, munmap_mean, munmap_max, reads = (int(x) for x in ns)
            run.invert.setdefault((kernel, cond), []).append(
                InvertRun(round_, int(nrun), int(readers), int(ops), mmap_mean / 1e3,
                          mmap_max / 1e3, munmap_mean / 1e3, munmap_max / 1e3, reads))


def load_moves(raw, run):
    for path, kernel, round_ in raw_files(raw, "moves", run.model):
        for mib, period_us, method, *counts, p50_ns in csv_rows(path, "moves"):
            run.moves.setdefault((kernel, int(mib), int(period_us), method), []).append(
                MovesRun(round_, *(int(x) for x in counts), int(p50_ns) / 1e6))


def run_models(raw, run_info):
    """The run's preemption models, the first (the whole plan) first."""
    listed = run_info.get("models", "").split()
    found = {model_of(os.path.basename(p)[len("meta-"):-len(".txt")])
             for p in glob.glob(os.path.join(raw, "meta-*.txt"))}
    return listed + sorted(found - set(listed), key=MODELS.index) or [DEFAULT_MODEL]


def load_run(raw, model=None):
    """Everything a scripts/bench run wrote into RAW, of one preemption
    model (default: the run's first)."""
    run_txt = os.path.join(raw, "run.txt")
    run_info = read_kv(run_txt)
    models = run_models(raw, run_info)
    model = model or models[0]
    with open(run_txt) as f:
        loads = [tuple(line.rstrip("\n").split(",", 2)[1:]) for line in f
                 if line.startswith("load,")]
    loads = [x for x in loads if model_of(x[0]) == model]
    metas = {os.path.basename(p)[len("meta-"):-len(".txt")]: read_kv(p)
             for p in sorted(glob.glob(os.path.join(raw, "meta-*.txt")))}
    metas = {tag: m for tag, m in metas.items() if model_of(tag) == model}
    run = RawRun(run_info, loads, metas, model=model, models=models)
    load_cost(raw, run)
    load_stall(raw, run)
    load_fleet(raw, run)
    load_invert(raw, run)
    load_moves(raw, run)
    return run
