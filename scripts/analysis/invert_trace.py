"""Where the inversion's mapper waits for mmap_lock (scripts/bench-trace).

    invert_trace.py TRACE...

Each TRACE is the ftrace text of one bench-invert condition that
guest/bench/trace-invert wrote: mmap_lock, sched, irq, softirq and local
timer events, and smaps_rollup_walk_stop. The target mm is the one the
walk_stop events name (in the status control, which has none, the mm
whose write lock is taken most); the mapper is the task that write-locks
it most; the readers are the tasks that stop walks of it.

For each trace, one row: the mapper's write-lock waits (start_locking to
acquire_returned) and what they overlap:
  - reader batches: the time a reader held the lock for reading;
  - stalls: gaps of over STALL_US inside a batch in which the reader's
    CPU records no event at all (no interrupt, softirq or switch), which
    no work of the batch explains: the emulator's vCPU not running;
  - wake-up: from the mapper's sched_waking to its running again, after
    it slept on the lock;
  - rest: the remainder (the lock's own cost, spinning, hand-over).
And the batches' hold times. Then every wait over LONG_US, with its parts
and the longest silence of the mapper's own CPU within it.
"""
import bisect
import collections
import re
import sys

LINE = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+): (\w+): (.*)$')
STALL_US = 50
LONG_US = 2000
GAP_US = 300

Event = collections.namedtuple('Event', 't pid cpu flags name args mm')
Batch = collections.namedtuple('Batch', 't0 t1 cpu stalls')
Wait = collections.namedtuple('Wait', 't0 t1 cpu woke')


def parse(lines):
    events = []
    for line in lines:
        m = LINE.match(line)
        if m:
            events.append(Event(float(m[5]) * 1e6, int(m[2]), int(m[3]),
                                m[4], m[6], m[7], field(m[7], 'mm')))
    return events


def field(args, name):
    m = re.search(r'\b%s=(\S+)' % name, args)
    return m[1] if m else None


def roles(events):
    """The target mm, the mapper's pid and the readers' pids."""
    stops = collections.Counter(e.mm for e in events
                                if e.name == 'smaps_rollup_walk_stop')
    writes = collections.Counter(
        e.mm for e in events
        if e.name == 'mmap_lock_start_locking' and 'write=true' in e.args)
    if not writes:
        raise ValueError('no mmap_lock write lock in the trace')
    mm = (stops or writes).most_common(1)[0][0]
    mapper = collections.Counter(
        e.pid for e in events if e.name == 'mmap_lock_start_locking'
        and 'write=true' in e.args and e.mm == mm)
    readers = {e.pid for e in events if e.name == 'smaps_rollup_walk_stop'
               and e.mm == mm}
    return mm, mapper.most_common(1)[0][0], readers


def silences(events, cpu, t0, t1, first=0):
    """The gaps over STALL_US between events of @cpu within [t0, t1],
    looking from events[first] on."""
    out, prev = [], t0
    for j in range(first, len(events)):
        e = events[j]
        if e.cpu != cpu or e.t < t0:
            continue
        if e.t > t1:
            break
        if e.t - prev > STALL_US:
            out.append((prev, e.t))
        prev = e.t
    return out


def batches(events, mm, readers):
    held, out = {}, []
    for i, e in enumerate(events):
        if e.pid not in readers or e.mm != mm:
            continue
        if e.name == 'mmap_lock_acquire_returned' and 'success=true' in e.args:
            held[e.pid] = i
        elif e.name == 'mmap_lock_released' and e.pid in held:
            first = held.pop(e.pid)
            b = events[first]
            out.append(Batch(b.t, e.t, b.cpu,
                             silences(events, b.cpu, b.t, e.t, first)))
    return out


def segments(events, mm, readers):
    """The readers' time in batches and between two of them (from a release
    to the next lock attempt, with no switch in between): how long each,
    and how many lasted over GAP_US, per second of each."""
    acc = {'in batches': [0.0, 0], 'between batches': [0.0, 0]}
    state = {}
    for e in events:
        if e.name == 'sched_switch':
            state.pop(int(field(e.args, 'prev_pid') or -1), None)
            continue
        if e.pid not in readers or e.mm != mm:
            continue
        was = state.get(e.pid)
        if e.name == 'mmap_lock_acquire_returned' and 'success=true' in e.args:
            state[e.pid] = ('in batches', e.t)
        elif e.name == 'mmap_lock_released':
            if was and was[0] == 'in batches':
                acc[was[0]][0] += e.t - was[1]
                acc[was[0]][1] += e.t - was[1] > GAP_US
            state[e.pid] = ('between batches', e.t)
        elif e.name == 'mmap_lock_start_locking':
            if was and was[0] == 'between batches':
                acc[was[0]][0] += e.t - was[1]
                acc[was[0]][1] += e.t - was[1] > GAP_US
            state.pop(e.pid, None)
    return acc


def waits(events, mm, mapper):
    out, start, woke = [], None, None
    for e in events:
        if e.name == 'sched_waking' and field(e.args, 'pid') == str(mapper):
            woke = [e.t, None]
        elif (e.name == 'sched_switch' and woke and woke[1] is None
              and field(e.args, 'next_pid') == str(mapper)):
            woke[1] = e.t
        if e.pid != mapper or e.mm != mm or 'write=true' not in e.args:
            continue
        if e.name == 'mmap_lock_start_locking':
            start, woke = e, None
        elif e.name == 'mmap_lock_acquire_returned' and start:
            ok = woke and woke[1] is not None and woke[0] >= start.t
            out.append(Wait(start.t, e.t, start.cpu, tuple(woke) if ok else None))
            start = None
    return out


def overlap(a0, a1, b0, b1):
    return max(0.0, min(a1, b1) - max(a0, b0))


def outside_wake(a0, a1, w):
    """How much of [a0, a1] falls in the wait @w but not in its wake-up:
    the parts of a wait do not overlap (with two readers, one may stall
    while the mapper is being woken for the other)."""
    b0, b1 = max(a0, w.t0), min(a1, w.t1)
    if b1 <= b0:
        return 0.0
    return (b1 - b0) - (overlap(b0, b1, *w.woke) if w.woke else 0.0)


def parts(all_waits, held):
    """Each wait's time in reader batches, in their stalls, and waking up.

    The mapper is one task: its waits do not overlap, so each batch finds
    the waits it overlaps by a binary search of their starts. Batches and
    their stalls count outside the wake-up only.
    """
    starts = [w.t0 for w in all_waits]
    inside = [0.0] * len(all_waits)
    stalled = [0.0] * len(all_waits)
    for b in held:
        k = bisect.bisect_right(starts, b.t1) - 1
        while k >= 0 and all_waits[k].t1 > b.t0:
            w = all_waits[k]
            inside[k] += outside_wake(b.t0, b.t1, w)
            stalled[k] += sum(outside_wake(s0, s1, w) for s0, s1 in b.stalls)
            k -= 1
    for k, w in enumerate(all_waits):
        wake = overlap(w.woke[0], w.woke[1], w.t0, w.t1) if w.woke else 0.0
        yield w, inside[k] - stalled[k], stalled[k], wake


def percentile(values, q):
    return values[min(len(values) - 1, int(len(values) * q))] if values else 0.0


def analyse(path):
    with open(path, errors='replace') as f:
        events = parse(f)
    mm, mapper, readers = roles(events)
    held = batches(events, mm, readers)
    times = [e.t for e in events]
    row = collections.Counter()
    long_waits = []
    for w, batch, stall, wake in parts(waits(events, mm, mapper), held):
        total = w.t1 - w.t0
        row['waits'] += 1
        row['wait'] += total
        row['batch'] += batch
        row['stall'] += stall
        row['wake'] += wake
        row['slept'] += w.woke is not None
        if total > LONG_US:
            gaps = silences(events, w.cpu, w.t0, w.t1, bisect.bisect_left(times, w.t0))
            quiet = max([s1 - s0 for s0, s1 in gaps] or [0])
            long_waits.append((total, batch, stall, wake, quiet))
    holds = sorted(b.t1 - b.t0 for b in held)
    return {'readers': len(readers), 'row': row, 'holds': holds,
            'segments': segments(events, mm, readers),
            'long': sorted(long_waits, reverse=True)}


def ms(us):
    return '%.1f' % (us / 1e3)


def main(argv):
    if len(argv) < 2:
        sys.exit('usage: invert_trace.py TRACE...')
    results = [(path, analyse(path)) for path in argv[1:]]
    print('| trace | readers | lock waits | in reader batches, ms | stalls in them, ms '
          '| wake-up to running, ms | rest, ms | writer sleeps | batch hold p50 / p99 / p99.9, us '
          '| batches over 10 us |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---|---:|')
    for path, r in results:
        row, holds = r['row'], r['holds']
        rest = row['wait'] - row['batch'] - row['stall'] - row['wake']
        hold = '%.0f / %.0f / %.0f' % tuple(percentile(holds, q) for q in (.5, .99, .999)) if holds else ''
        over = '%.1f%%' % (100 * sum(h > 10 for h in holds) / len(holds)) if holds else ''
        print('| %s | %d | %d, %s ms | %s | %s | %s | %s | %d | %s | %s |' % (
            path.rsplit('/', 1)[-1], r['readers'], row['waits'], ms(row['wait']),
            ms(row['batch']), ms(row['stall']), ms(row['wake']), ms(rest),
            row['slept'], hold, over))
    print()
    print('The readers\' segments over %d us, per second of each kind '
          '(a stall that no work explains falls in either):' % GAP_US)
    print()
    for path, r in results:
        if not r['readers']:
            continue
        print('- %s: %s' % (path.rsplit('/', 1)[-1], '; '.join(
            '%s %.1f ms, %d (%.0f/s)' % (k, t / 1e3, n, n / (t / 1e6) if t else 0)
            for k, (t, n) in r['segments'].items())))
    print()
    print('Waits over %d us: total = in batches + stalls in them + wake-up + rest; '
          "quiet: the longest time the mapper's own CPU recorded no event." % LONG_US)
    print()
    for path, r in results:
        for total, batch, stall, wake, quiet in r['long']:
            print('- %s: %.0f us = %.0f + %.0f + %.0f + %.0f; quiet %.0f us' % (
                path.rsplit('/', 1)[-1], total, batch, stall, wake,
                total - batch - stall - wake, quiet))


if __name__ == '__main__':
    main(sys.argv)
