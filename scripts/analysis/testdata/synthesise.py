#!/usr/bin/env python3
"""Write scripts/analysis/testdata/run/: a small raw scripts/bench run in the real
format (QUICK plan, one round, stock and series kernels, the series one
with /proc/PID/smaps_rollup_stock, in two preemption models: voluntary,
the whole plan, and full, its reduced plan), with figures chosen so that
test_analyze.py knows every result:

- cost, ms: series rollup 2.0 at 4,000 VMAs and 8.0 at 16,000 (16 MiB),
  4.0 at 4,000 VMAs and 64 MiB; stock 1.6, 6.4 and 3.2 (series/stock
  1.25, bar 2 missed), stock's file in the series boot the same as stock;
  smaps 30x rollup on both kernels (bar 1: 30x, met);
  the half-untouched cell (4000:16u) 1.0 on both; the dense cell
  (4000:16d) series 3.0, stock 2.5 (1.2), stock's file in the series
  boot 2.4 (1.25), maps 1.0 on both; the one-VMA cells (1:256o, 1:256c,
  1:256f) series 6.0, 9.0 and 7.0, stock 10.0 on both kernels (same boot
  0.6, met; 0.9, missed; 0.7, met), maps 1.0, status 0.1.
- stall, 16000:128h, 20 ops per condition, all 100 µs but one spike:
  status:1 1000 µs on both kernels, series rollup:1 1100, stock rollup:1
  3000, stock's file in the series boot 2500; the swap cell 16000:128p,
  status:1 1000 on both, series rollup:1 1200 (1.2x, met), stock's file
  3000, stock rollup:1 3500.
- inversion, 3 runs: series status:1 means 50 µs, max 500; series
  rollup:1 means 54/55/70, max 400/450/900; stock status:1 as series',
  stock rollup:1 means 190/200/210, max 5000. With swap (+swap): status:1
  as without on both kernels; series rollup:1 means 52/53/60, max
  550/560/700 (1.06x and 1.12x: met), stock's file 500, max 5000, stock
  rollup:1 200, max 5000. With UFFDIO_MOVE (+move): status:1 mean 100,
  max 1000 on both kernels; series rollup:1 means 105/110/130, max
  900/1100/1500 (1.10x and 1.10x: the move bar met, were it judged here),
  stock's file 1600, max 20000 (16x, 20x), stock rollup:1 1950, max 24000
  (19.5x, 24x).
- fleet: rollup sweeps series 10 and 12 ms, stock 10 ms; status 5 ms.
- moves (reads, over, under): 64 MiB in a tight loop, series rollup
  1000, 0, 0, stock's file in the series boot 1000, 6, 4 (bar met);
  16 MiB every 1 ms, series 1000, 2, 0, stock's file 1000, 1, 0 (bar
  missed: 0.2% against 0.1%); status 1000, 0, 0 in both; the stock
  kernel's rollup 500, 0, 5 (64 MiB) and 500, 0, 0 (16 MiB); reads take
  1.5 ms. With UFFDIO_MOVE (methods with MOVES_UFFD_SUFFIX, +uffd), 64
  MiB in a tight loop: series rollup 1000, 0, 0, stock's file 1000,
  30, 20 (bar met), status 1000, 0, 0; the stock kernel's rollup 500,
  10, 15, status 500, 0, 0.
- model full (files KERNEL-full-r1): cells 4000:16u and 4000:16d, series
  rollup 0.9, stock 1.2 (0.75), stock's file in the series boot 1.0
  (0.9), maps 1.0; stall 16000:128h, status:1 1000 µs on both, series
  rollup:1 1200, stock rollup:1 4000, stock's file 2000; inversion, one
  run each: status:1 mean 50, max 500, series rollup:1 mean 60, max 600;
  with swap, series only: status:1 mean 50, max 500, rollup:1 mean 60,
  max 650 (1.2x and 1.3x: the swap bars missed), stock's file mean 400,
  max 4000; with UFFDIO_MOVE: status:1 mean 100, max 1000 on both
  kernels, series rollup:1 mean 130, max 1100 (1.3x: the move bar
  missed), stock's file mean 1600, max 24000, stock rollup:1 mean 1950,
  max 24000; stall 16000:128p, series only: status:1 1000, rollup:1 1400
  (1.4x, missed), stock's file 2000;
  moves, 64 MiB in a tight loop only: series rollup 800, 7, 1, stock's
  file 800, 4, 0 (bar missed); with UFFDIO_MOVE, series rollup 800, 0,
  0, stock's file 800, 40, 40 (bar met); no stock kernel figures.

It also writes testdata/native/cost.csv, the cost records of one native
boot (analyze.py --cost native=..., icount.py --label native), three reads
of each method, interleaved, in ns: 4000:16 series rollup 290, 300 and
310 µs, stock's file 400, 400 and 410 (0.750); 4000:16d series 500, 510
and 520, stock's file 400, 408 and 410 (1.250); 100:16, a cell that run/
does not have, 10 against 20 (0.500); maps 200 µs (3 at 100:16), status
5 µs.

Run it again after changing the raw format; it overwrites the files.
"""
import array
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run")
FIELDS = ("Rss=17228,Pss=17224,Pss_Dirty=12356,Pss_Anon=8268,Pss_File=4860,Pss_Shmem=4096,"
          "Shared_Clean=4,Shared_Dirty=0,Private_Clean=4868,Private_Dirty=12356,"
          "Referenced=17228,Anonymous=8268,KSM=0,LazyFree=0,AnonHugePages=0,ShmemPmdMapped=0,"
          "FilePmdMapped=0,Shared_Hugetlb=0,Private_Hugetlb=0,Swap=0,SwapPss=0,Locked=0")
SAME_BOOT = "rollup=smaps_rollup_stock"
UFFD = "+uffd"  # guest/bench/records.h MOVES_UFFD_SUFFIX: a UFFDIO_MOVE mover


def write(name, lines):
    with open(os.path.join(OUT, name), "w") as f:
        f.write("".join(line + "\n" for line in lines))


def layout_cost(kernel, cell, rollup, same_boot):
    """One layout cell: rollup, status and maps reads, the stock file's
    on the series kernel."""
    lines = [f"fields,{cell},rollup,{FIELDS}"]
    methods = [("rollup", rollup), ("status", 0.1), ("maps", 1.0)]
    if kernel == "series":
        methods.append((SAME_BOOT, same_boot))
    return lines + [f"cost,{cell},{m},{i},{round(ms * 1e6)},17224"
                    for m, ms in methods for i in range(3)]


def cost_lines(kernel):
    rollup = {"series": (2.0, 8.0, 4.0), "stock": (1.6, 6.4, 3.2)}[kernel]
    lines = []
    cells = ((4000, 16, 3999, 17228), (16000, 16, 15999, 17228), (4000, 64, 3999, 66380))
    for (vmas, rss, nvmas, rss_kb), ms in zip(cells, rollup):
        cell = f"{vmas},{rss},{nvmas},{rss_kb}"
        lines.append(f"fields,{cell},rollup,{FIELDS}")
        methods = [("smaps", [ms * 30] * 2), ("awk", [ms * 100]),
                   ("rollup", [ms * 0.95, ms, ms * 1.05]), ("status", [0.1] * 3),
                   ("maps", [1.0] * 3)]
        if kernel == "series":
            methods.append((SAME_BOOT, [ms / 1.25] * 3))
        for method, reads in methods:
            lines += [f"cost,{cell},{method},{i},{round(x * 1e6)},17224"
                      for i, x in enumerate(reads)]
    lines.append(f"fields,4000,16u,3999,17228,rollup,{FIELDS}")
    lines += [f"cost,4000,16u,3999,17228,{m},{i},1000000,17224"
              for m in ("rollup", "status", "maps") for i in range(3)]
    lines += layout_cost(kernel, "4000,16d,3999,17228", 3.0 if kernel == "series" else 2.5, 2.4)
    for layout, series in (("o", 6.0), ("c", 9.0), ("f", 7.0)):
        lines += layout_cost(kernel, f"1,256{layout},13,263168",
                             series if kernel == "series" else 10.0, 10.0)
    return lines


def stall(kernel, cells):
    """CELLS: {RSS at 16,000 VMAs: {cond: its spike, µs}}."""
    lines = []
    for rss, spikes in cells.items():
        for cond, spike_us in spikes.items():
            ops = [(10000, 20000, 70000)] * 19 + [(10000, 20000, spike_us * 1000 - 30000)]
            words = array.array("I", [w for op in ops for w in op])
            name = cond.replace(":", "_").replace("=", "_")
            with open(os.path.join(OUT, f"stall-{kernel}-r1-16000-{rss}-{name}.bin"), "wb") as f:
                f.write(words.tobytes())
            readers = int(cond.rsplit(":", 1)[1]) if ":" in cond else 0
            lines.append(f"stall,16000,{rss},15999,131072,{cond},{readers},20,100000,"
                         f"{spike_us * 1000},{spike_us * 1000},{readers * 10},2000000,3000000")
    write(f"stall-{kernel}-r1.csv", lines)


def invert(kernel, conds):
    write(f"invert-{kernel}-r1.csv",
          [f"invert,{cond},1,{run},1000,{mean * 1000},{peak * 1000},{mean * 1000},"
           f"{peak * 1000 // 2},50"
           for cond, runs in conds.items() for run, (mean, peak) in enumerate(runs, 1)])


def moves(kernel, reads):
    """(mib, period_us, method) -> (reads, over, under); METHOD as
    bench-moves prints it (rollup+uffd with -m uffd)."""
    lines = []
    for (mib, period, method), (n, over, under) in reads.items():
        rss = mib * 1024 + 1052
        lines.append(f"moves,{mib},{period},{method},{rss},{n * 2},{n},{over + under},{over},"
                     f"{under},{rss - mib * 1024 if under else rss},"
                     f"{rss + mib * 1024 if over else rss},1500000")
    write(f"moves-{kernel}-r1.csv", lines)


def native():
    """testdata/native/cost.csv (see the docstring)."""
    cells = {"4000,16,3999,17228": ((300, 290, 310), (400, 410, 400), 200),
             "4000,16d,3999,17228": ((510, 500, 520), (408, 400, 410), 200),
             "100,16,99,17272": ((10, 10, 10), (20, 20, 20), 3)}
    lines = [f"cost,{cell},{method},{i},{us * 1000},17224"
             for cell, (series, stock, maps) in cells.items() for i in range(3)
             for method, us in (("rollup", series[i]), (SAME_BOOT, stock[i]), ("maps", maps),
                                ("status", 5))]
    os.makedirs(os.path.join(os.path.dirname(OUT), "native"), exist_ok=True)
    with open(os.path.join(os.path.dirname(OUT), "native", "cost.csv"), "w") as f:
        f.write("".join(line + "\n" for line in lines))


def main():
    native()
    os.makedirs(OUT, exist_ok=True)
    write("run.txt", ["plan,quick", "rounds,1", "models,voluntary full", "preempt_stock,1",
                      "stock_image,/k/stock/bzImage,2026-11-22 19:00:00,0123456789abcdef",
                      "series_image,/k/series/bzImage,2026-11-22 19:00:00,fedcba9876543210",
                      "stock-full_image,/k/stock-preempt/bzImage,2026-11-22 19:00:00,0123456789abcdee",
                      "series-full_image,/k/bench-preempt/bzImage,2026-11-22 19:00:00,fedcba987654321f",
                      "host,6.1.0,2 cpus", "guest_mem_mib,3072", "started,2026-11-22 19:10:00",
                      "load,stock-r1,0.50 0.40 0.30", "load,series-r1,0.60 0.50 0.40",
                      "load,stock-full-r1,0.50 0.40 0.30", "load,series-full-r1,0.60 0.50 0.40",
                      "finished,2026-11-22 19:14:00"])
    for kernel in ("stock", "series", "stock-full", "series-full"):
        meta = [f"kernel,{kernel}", "round,1", f"uname,6.12.117-{kernel} #1 SMP",
                "clocksource,tsc", "cpus,2", "memtotal_kb,3000000", "thp,[madvise]",
                "awk,/usr/bin/mawk", "clock,getres_ns,1", "clock,min_delta_ns,76",
                "clock,median_delta_ns,80", "done,120"]
        if kernel.startswith("series"):
            meta.append(f"same_boot,{SAME_BOOT}")
        write(f"meta-{kernel}-r1.txt", meta)
    for kernel in ("stock", "series"):
        write(f"cost-{kernel}-r1.csv", cost_lines(kernel))
        write(f"fleet-{kernel}-r1.csv",
              [f"fleet,100,rollup,{i},{ms * 1000000},120,110"
               for i, ms in enumerate((10, 12) if kernel == "series" else (10, 10))]
              + [f"fleet,100,status,{i},5000000,120,110" for i in range(2)])
    stall("stock", {"128h": {"none": 200, "status:1": 1000, "rollup:1": 3000},
                    "128p": {"status:1": 1000, "rollup:1": 3500}})
    stall("series", {"128h": {"none": 200, "status:1": 1000, "rollup:1": 1100,
                              f"{SAME_BOOT}:1": 2500},
                     "128p": {"status:1": 1000, "rollup:1": 1200, f"{SAME_BOOT}:1": 3000}})
    invert("stock", {"status:1": [(50, 500)] * 3,
                     "rollup:1": [(190, 5000), (200, 5000), (210, 5000)],
                     "status:1+swap": [(50, 500)] * 3, "rollup:1+swap": [(200, 5000)] * 3,
                     "status:1+move": [(100, 1000)] * 3, "rollup:1+move": [(1950, 24000)] * 3})
    invert("series", {"status:1": [(50, 500)] * 3,
                      "rollup:1": [(54, 400), (55, 450), (70, 900)],
                      "status:1+swap": [(50, 500)] * 3,
                      "rollup:1+swap": [(52, 550), (53, 560), (60, 700)],
                      f"{SAME_BOOT}:1+swap": [(500, 5000)] * 3,
                      "status:1+move": [(100, 1000)] * 3,
                      "rollup:1+move": [(105, 900), (110, 1100), (130, 1500)],
                      f"{SAME_BOOT}:1+move": [(1600, 20000)] * 3})
    moves("series", {(64, 0, "rollup"): (1000, 0, 0), (64, 0, SAME_BOOT): (1000, 6, 4),
                     (64, 0, "status"): (1000, 0, 0), (16, 1000, "rollup"): (1000, 2, 0),
                     (16, 1000, SAME_BOOT): (1000, 1, 0), (16, 1000, "status"): (1000, 0, 0),
                     (64, 0, "rollup" + UFFD): (1000, 0, 0),
                     (64, 0, SAME_BOOT + UFFD): (1000, 30, 20),
                     (64, 0, "status" + UFFD): (1000, 0, 0)})
    moves("stock", {(64, 0, "rollup"): (500, 0, 5), (64, 0, "status"): (500, 0, 0),
                    (16, 1000, "rollup"): (500, 0, 0), (16, 1000, "status"): (500, 0, 0),
                    (64, 0, "rollup" + UFFD): (500, 10, 15), (64, 0, "status" + UFFD): (500, 0, 0)})
    # Model full: its reduced plan.
    for kernel, rollup in (("stock", 1.2), ("series", 0.9)):
        write(f"cost-{kernel}-full-r1.csv",
              [line for cell in ("4000,16u,3999,17228", "4000,16d,3999,17228")
               for line in layout_cost(kernel, cell, rollup, 1.0)])
    stall("stock-full", {"128h": {"none": 200, "status:1": 1000, "rollup:1": 4000}})
    stall("series-full", {"128h": {"none": 200, "status:1": 1000, "rollup:1": 1200,
                                   f"{SAME_BOOT}:1": 2000},
                          "128p": {"status:1": 1000, "rollup:1": 1400, f"{SAME_BOOT}:1": 2000}})
    invert("stock-full", {"status:1": [(50, 500)], "rollup:1": [(300, 6000)],
                          "status:1+move": [(100, 1000)], "rollup:1+move": [(1950, 24000)]})
    invert("series-full", {"status:1": [(50, 500)], "rollup:1": [(60, 600)],
                           "status:1+swap": [(50, 500)], "rollup:1+swap": [(60, 650)],
                           f"{SAME_BOOT}:1+swap": [(400, 4000)],
                           "status:1+move": [(100, 1000)], "rollup:1+move": [(130, 1100)],
                           f"{SAME_BOOT}:1+move": [(1600, 24000)]})
    moves("series-full", {(64, 0, "rollup"): (800, 7, 1), (64, 0, SAME_BOOT): (800, 4, 0),
                          (64, 0, "rollup" + UFFD): (800, 0, 0),
                          (64, 0, SAME_BOOT + UFFD): (800, 40, 40)})


if __name__ == "__main__":
    main()
