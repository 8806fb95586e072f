"""Load the raw output of a scripts/bench run (see scripts/analysis/analyze.py).

RAW_DIR holds, per boot TAG = KERNEL-rROUND: meta-TAG.txt, cost-TAG.csv,
stall-TAG.csv with the target's per-operation records
stall-TAG-VMAS-RSS-COND.bin, fleet-TAG.csv, invert-TAG.csv and
moves-TAG.csv (round 1);
plus run.txt and cost-host-r1.csv (the host-kernel reference). A boot in
a preemption model other than the default (scripts/bench PREEMPT=...) has
TAG = KERNEL-MODEL-rROUND (series-full-r1); load_run loads one model's
boots at a time.

The records' fields, the stall records' file name and layout, the
suffixes of bench-invert's swap and UFFDIO_MOVE conditions and that of
bench-moves' methods of a UFFDIO_MOVE mover are read from the bench
programs' header, guest/bench/records.h; the preemption models from
kernels/models.

The load step (load -> compute -> write); cost_file reads another
source's cost records (analyze.py --cost, icount.py). Also the names of the
raw files' kernels, cells, conditions and methods, for the later steps.
"""
import array
import csv
import glob
import os
import re
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDS_H = os.path.join(REPO, "guest", "bench", "records.h")
MODELS_TABLE = os.path.join(REPO, "kernels", "models")


def read_models(path=MODELS_TABLE):
    """kernels/models: {model: its kconfig option}, the default first."""
    with open(path) as f:
        rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
    return {name: option for name, option in rows}


def read_records_header(path=RECORDS_H):
    """records.h: ({kind: field names} of the CSV records, {name: value}
    of its other definitions: STALL_OPS_*, INVERT_SWAP_SUFFIX...). Fails when
    a record's names and the conversions of its format differ in number."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    defs = {}
    for name, value in re.findall(r"^#define (\w+)[ \t]+(.+?)[ \t]*$", text, re.M):
        strings = re.findall(r'"((?:[^"\\]|\\.)*)"', value)
        defs[name] = "".join(strings) if strings else value
    records = {}
    for key in re.findall(r"^RECORD_(\w+)_FIELDS$", "\n".join(defs), re.M):
        names = tuple(defs[f"RECORD_{key}_FIELDS"].split(","))
        fmt = defs[f"RECORD_{key}_FORMAT"]
        conversions = re.findall(r"%[-#0 +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t)?[diouxXfgsc]", fmt)
        if len(conversions) != len(names):
            raise ValueError(f"{path}: RECORD_{key}: {len(names)} field names, "
                             f"{len(conversions)} conversions in its format")
        records[fmt.split(",")[0]] = names
    return records, {k: v for k, v in defs.items() if not k.startswith("RECORD_")}


# The preemption models of scripts/bench; untagged files are the default's.
MODEL_OPTIONS = read_models()
MODELS = tuple(MODEL_OPTIONS)
DEFAULT_MODEL = MODELS[0]
RECORDS, HEADER_DEFS = read_records_header()
STALL_OPS = {k: v for k, v in HEADER_DEFS.items() if k.startswith("STALL_OPS_")}
# The suffix of bench-invert's conditions with swap (rollup:1+swap).
INVERT_SWAP_SUFFIX = HEADER_DEFS["INVERT_SWAP_SUFFIX"]
# The suffix of its conditions with UFFDIO_MOVE (rollup:1+move).
INVERT_MOVE_SUFFIX = HEADER_DEFS["INVERT_MOVE_SUFFIX"]
# The suffix of bench-moves' methods when its mover used UFFDIO_MOVE
# (rollup+uffd); without it, mremap.
MOVES_UFFD_SUFFIX = HEADER_DEFS["MOVES_UFFD_SUFFIX"]
# bench-moves' movers (its -m), in the report's order.
MOVERS = ("mremap", "uffd")
STALL_OPS_FIELDS = STALL_OPS["STALL_OPS_FIELDS"].split(",")
if len(STALL_OPS_FIELDS) != int(STALL_OPS["STALL_OPS_WORDS"]):
    raise ValueError(f"{RECORDS_H}: STALL_OPS_FIELDS and STALL_OPS_WORDS differ")
# The kernels of a run, in the tables' order.
KERNELS = ("stock", "series")
# The stock implementation beside the series in a bench-only kernel: a
# cost method and a stall/inversion condition prefix (guest/bench/common.h).
SAME_BOOT_STOCK = "rollup=smaps_rollup_stock"
# bench-invert's condition suffixes, in the tables' order.
INVERT_SUFFIXES = (INVERT_SWAP_SUFFIX, INVERT_MOVE_SUFFIX)
# bench-stall's conditions, in the tables' order.
STALL_CONDS = ("none", "status:1", "rollup:1", f"{SAME_BOOT_STOCK}:1",
               "status:2", "rollup:2", f"{SAME_BOOT_STOCK}:2")
# bench-moves' methods, in the report's order: the series' file (on the
# stock kernel: stock's), stock's beside it, the status control.
MOVES_METHODS = ("rollup", SAME_BOOT_STOCK, "status")
BOOT_RE = (r"(?P<kernel>[A-Za-z0-9_]+?)(?:-(?P<model>" + "|".join(MODELS)
           + r"))?-r(?P<round>\d+)")
TAG_RE = re.compile(r"(?P<kind>cost|stall|fleet|invert|moves)-" + BOOT_RE + r"\.csv$")
BOOT_TAG_RE = re.compile(BOOT_RE + "$")


def model_of(tag):
    """The preemption model of a boot tag (series-full-r1: full)."""
    m = BOOT_TAG_RE.match(tag)
    return (m.group("model") if m else None) or DEFAULT_MODEL


def rss_key(rss):
    """RSS_MIB[LAYOUT] as bench-target takes it: (512, ''), (512, 'h')..."""
    mib = rss.rstrip("hpusdamocf")
    return int(mib), rss[len(mib):]


def split_suffix(cond):
    """(COND without its INVERT_SUFFIXES, those it had, as written):
    rollup:1+swap gives (rollup:1, +swap), status:2+move (status:2, +move),
    none+swap+move (none, +swap+move), rollup:1 (rollup:1, "")."""
    suffix = ""
    while True:
        found = next((s for s in INVERT_SUFFIXES if cond.endswith(s) and len(cond) > len(s)),
                     None)
        if not found:
            return cond, suffix
        cond, suffix = cond[:-len(found)], found + suffix


def readers_of(cond):
    """The reader count of a condition: none 0, status:2 2, rollup=FILE:1 1,
    rollup:1+swap 1."""
    cond = split_suffix(cond)[0]
    return int(cond.rsplit(":", 1)[1]) if ":" in cond else 0


def control_of(cond):
    """The status control of a condition: status:N, its suffixes (+swap,
    +move) kept."""
    base, suffix = split_suffix(cond)
    return f"status:{readers_of(base)}{suffix}"


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
    moves: dict = field(default_factory=dict)      # (kernel, mover, mib, period_us, method) -> [MovesRun]
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


def csv_records(path, *kinds):
    """The records of KINDS in the CSV file PATH, in order, as (kind, {field
    name: value}) by the names of records.h; the values past the names
    (the totals' Name=KB pairs) as a list under "more". A record with
    fewer values than names fails."""
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row or row[0] not in kinds:
                continue
            names = RECORDS[row[0]]
            if len(row) - 1 < len(names) or (len(row) - 1 > len(names) and row[0] != "fields"):
                raise ValueError(f"{path}: a {row[0]} record of {len(row) - 1} fields, "
                                 f"records.h names {len(names)}")
            rec = dict(zip(names, row[1:]))
            rec["more"] = row[1 + len(names):]
            yield row[0], rec


def csv_rows(path, kind):
    """The records of KIND in PATH, as dicts by field name (csv_records)."""
    return [rec for _, rec in csv_records(path, kind)]


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
    """The stall records of one condition (records.h STALL_OPS_FILE)."""
    for c in STALL_OPS["STALL_OPS_UNSAFE"]:
        cond = cond.replace(c, "_")
    return os.path.join(raw, STALL_OPS["STALL_OPS_FILE"] % (
        f"{label(kernel, model)}-r{round_}", vmas, rss, cond))


def read_records(path):
    """The target's records (records.h: a uint32 ns per name of
    STALL_OPS_FIELDS per op), in µs: {NAME_us: [...]} and total_us, their
    sum per op."""
    words = array.array("I")
    with open(path, "rb") as f:
        words.frombytes(f.read())
    n = len(STALL_OPS_FIELDS)
    ops = range(0, len(words) - n + 1, n)
    times = {f"{name}_us": [words[i + k] / 1e3 for i in ops]
             for k, name in enumerate(STALL_OPS_FIELDS)}
    times["total_us"] = [sum(x) for x in zip(*times.values())]
    return times


def load_cost(raw, run):
    for path, kernel, round_ in raw_files(raw, "cost", run.model):
        for kind, r in csv_records(path, "fields", "cost"):
            if kind == "fields":
                if kernel == "series":
                    run.fields.setdefault((int(r["vmas"]), r["rss_mib"]),
                                          dict(kv.split("=") for kv in r["more"]))
                continue
            key = (kernel, int(r["vmas"]), r["rss_mib"], r["method"])
            run.cost.setdefault(key, {}).setdefault(round_, []).append(int(r["ns"]) / 1e6)
            run.cell_info[(kernel, int(r["vmas"]), r["rss_mib"])] = (int(r["nvmas"]),
                                                                    int(r["rss_kb"]))


def cost_file(path):
    """One boot's cost records (bench-read cost; guest/bench/icount's
    cost.csv): {VMAS:RSS cell: {method: [ns]}}, cells in the file's order."""
    cells = {}
    for _, r in csv_records(path, "cost"):
        cells.setdefault(f"{r['vmas']}:{r['rss_mib']}", {}).setdefault(r["method"], []).append(
            int(r["ns"]))
    return cells


def load_stall(raw, run):
    for path, kernel, round_ in raw_files(raw, "stall", run.model):
        for r in csv_rows(path, "stall"):
            records = read_records(record_path(raw, kernel, round_, r["vmas"], r["rss_mib"],
                                               r["cond"], run.model))
            run.stall.setdefault((kernel, int(r["vmas"]), r["rss_mib"], r["cond"]), []).append(
                StallRun(round_, int(r["nvmas"]), int(r["rss_kb"]), int(r["reads"]),
                         int(r["read_p50"]) / 1e6, **records))


def load_fleet(raw, run):
    for path, kernel, round_ in raw_files(raw, "fleet", run.model):
        for r in csv_rows(path, "fleet"):
            procs, method, ns, pids, read_ok = (r[k] for k in ("procs", "method", "ns", "pids",
                                                               "read_ok"))
            ms = int(ns) / 1e6
            run.fleet_by_round.setdefault((kernel, round_, method), []).append(ms)
            sweeps = run.fleet.setdefault((kernel, method),
                                          dict(ms=[], pids=[], ok=[], procs=int(procs)))
            sweeps["ms"].append(ms)
            sweeps["pids"].append(int(pids))
            sweeps["ok"].append(int(read_ok))


def load_invert(raw, run):
    for path, kernel, round_ in raw_files(raw, "invert", run.model):
        for r in csv_rows(path, "invert"):
            run.invert.setdefault((kernel, r["cond"]), []).append(
                InvertRun(round_, int(r["run"]), int(r["readers"]), int(r["ops"]),
                          *(int(r[k]) / 1e3 for k in ("mmap_mean", "mmap_max", "munmap_mean",
                                                      "munmap_max")), int(r["reads"])))


def moves_mover(method):
    """A bench-moves record's method: (mover, the method without the
    mover's suffix): rollup+uffd is ("uffd", "rollup"), rollup ("mremap",
    "rollup")."""
    if method.endswith(MOVES_UFFD_SUFFIX) and len(method) > len(MOVES_UFFD_SUFFIX):
        return "uffd", method[:-len(MOVES_UFFD_SUFFIX)]
    return "mremap", method


def load_moves(raw, run):
    for path, kernel, round_ in raw_files(raw, "moves", run.model):
        for r in csv_rows(path, "moves"):
            counts = ("rss_kb", "moves", "reads", "wrong", "over", "under", "min_kb", "max_kb")
            mover, method = moves_mover(r["method"])
            run.moves.setdefault((kernel, mover, int(r["mib"]), int(r["period_us"]), method),
                                 []).append(MovesRun(round_, *(int(r[k]) for k in counts),
                                                     int(r["read_p50"]) / 1e6))


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
