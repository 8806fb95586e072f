"""Tests of invert_trace.py on a trace written here, with known parts."""
import contextlib
import io
import os
import tempfile
import unittest

import invert_trace

MM = 'mm=00000000cafe0001 memcg_path='


def line(t_us, pid, cpu, name, args, flags='.....'):
    return '  bench-invert-%d     [%03d] %s %12.6f: %s: %s\n' % (
        pid, cpu, flags, t_us / 1e6, name, args)


# The mapper (pid 10, CPU 0) waits for a reader's batch (pid 20, CPU 1)
# from 200 to 910 us: the batch runs 100-500 us with no event of CPU 1
# from 110 to 500 (a stall, 300 us of it within the wait), the mapper
# sleeps at 210, is woken at 505 and runs at 900 (395 us). The reader's
# next batch is short and passes with no wait.
TRACE = ''.join([
    line(50, 20, 1, 'smaps_rollup_walk_stop', 'mm=00000000cafe0001 addr=0x1000 lock=none'),
    line(100, 20, 1, 'mmap_lock_start_locking', MM + ' write=false', '...1.'),
    line(100, 20, 1, 'mmap_lock_acquire_returned', MM + ' write=false success=true', '...1.'),
    line(110, 20, 1, 'local_timer_entry', 'vector=236', 'd.h1.'),
    line(200, 10, 0, 'mmap_lock_start_locking', MM + ' write=true'),
    line(210, 10, 0, 'sched_switch', 'prev_comm=bench-invert prev_pid=10 prev_prio=120 '
         'prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120', 'd..2.'),
    line(500, 20, 1, 'mmap_lock_released', MM + ' write=false', '...1.'),
    line(505, 20, 1, 'sched_waking', 'comm=bench-invert pid=10 prio=120 target_cpu=000', 'd..4.'),
    line(510, 20, 1, 'smaps_rollup_walk_stop', 'mm=00000000cafe0001 addr=0x2000 lock=none'),
    line(512, 20, 1, 'mmap_lock_start_locking', MM + ' write=false', '...1.'),
    line(513, 20, 1, 'mmap_lock_acquire_returned', MM + ' write=false success=false', '...1.'),
    line(900, 0, 0, 'sched_switch', 'prev_comm=swapper/0 prev_pid=0 prev_prio=120 '
         'prev_state=R ==> next_comm=bench-invert next_pid=10 next_prio=120', 'd..2.'),
    line(910, 10, 0, 'mmap_lock_acquire_returned', MM + ' write=true success=true'),
    line(950, 10, 0, 'mmap_lock_released', MM + ' write=true'),
    line(960, 20, 1, 'mmap_lock_start_locking', MM + ' write=false', '...1.'),
    line(961, 20, 1, 'mmap_lock_acquire_returned', MM + ' write=false success=true', '...1.'),
    line(965, 20, 1, 'mmap_lock_released', MM + ' write=false', '...1.'),
])


class InvertTraceTest(unittest.TestCase):
    def trace_file(self, text):
        with tempfile.NamedTemporaryFile('w', suffix='.trace', delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_roles_are_the_walked_mm_its_writer_and_its_walkers(self):
        mm, mapper, readers = invert_trace.roles(invert_trace.parse(TRACE.splitlines()))
        self.assertEqual((mm, mapper, readers), ('00000000cafe0001', 10, {20}))

    def test_a_wait_splits_into_batch_stall_wake_up_and_rest(self):
        r = invert_trace.analyse(self.trace_file(TRACE))
        row = r['row']
        self.assertEqual(row['waits'], 1)
        self.assertAlmostEqual(row['wait'], 710, places=3)
        self.assertAlmostEqual(row['stall'], 300, places=3)  # 200-500
        self.assertAlmostEqual(row['batch'], 0, places=3)    # the rest of 200-500
        self.assertAlmostEqual(row['wake'], 395, places=3)   # 505-900
        self.assertEqual(row['slept'], 1)
        self.assertEqual([round(h) for h in r['holds']], [4, 400])

    def test_segments_count_long_ones_in_and_between_batches(self):
        r = invert_trace.analyse(self.trace_file(TRACE))
        held, n_held = r['segments']['in batches']
        between, n_between = r['segments']['between batches']
        self.assertAlmostEqual(held, 404, places=3)      # 100-500, 961-965
        self.assertEqual(n_held, 1)
        self.assertAlmostEqual(between, 12 + 0, places=3)  # 500-512
        self.assertEqual(n_between, 0)

    def test_a_wait_with_no_reader_and_no_sleep_is_all_rest(self):
        text = ''.join(l for l in TRACE.splitlines(True)
                       if 'bench-invert-20 ' not in l and 'prev_pid=10 ' not in l)
        r = invert_trace.analyse(self.trace_file(text))
        self.assertEqual(r['readers'], 0)
        self.assertAlmostEqual(r['row']['wait'], 710, places=3)
        self.assertEqual(r['row']['slept'], 0)
        self.assertEqual(r['row']['batch'] + r['row']['stall'] + r['row']['wake'], 0)

    def test_the_table_has_a_row_per_trace(self):
        path = self.trace_file(TRACE)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            invert_trace.main(['invert_trace.py', path])
        rows = [l for l in out.getvalue().splitlines() if l.startswith('| ')]
        self.assertEqual(len(rows), 2)  # the header and one trace
        self.assertIn('| 1 | 1, 0.7 ms | 0.0 | 0.3 | 0.4 | 0.0 | 1 |', rows[1])


if __name__ == '__main__':
    unittest.main()
