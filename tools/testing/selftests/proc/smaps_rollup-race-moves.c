// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup read while the target moves memory with mremap().
 *
 * The rollup counts in short batches, letting go of mmap_lock between two
 * of them, and resumes at the address the last batch counted up to.  A
 * mapping that mremap() moves meanwhile, from behind the walk to ahead of
 * it, would be counted twice, and one moved the other way not at all.  So
 * a pass that sees that page tables were moved in the mm while it read
 * throws its counts away and starts again from address 0, and after a few
 * tries makes a final pass that keeps mmap_lock from start to end, which
 * mremap() cannot get in: every read's totals are exact.
 *
 * The target maps MOVED_LEN of private anonymous memory of small pages
 * (MADV_NOHUGEPAGE, and PR_SET_THP_DISABLE as every target), writes it,
 * and one thread moves the whole mapping back and forth between two
 * PMD-aligned addresses with mremap(MREMAP_MAYMOVE | MREMAP_FIXED); nothing
 * else in the target runs.  mremap() keeps every page resident and
 * anonymous, so Rss and Anonymous never change: every read while the
 * mover runs must show both exactly as a read before it started.  The
 * mover runs in a tight loop, or once a millisecond (on an absolute
 * CLOCK_MONOTONIC schedule: pacing only, no test result depends on it),
 * until the reader has made MOVES_READS reads and MOVES_MS have passed.
 *
 * The reader traces its stops and restarts (smaps_rollup_trace.h), and
 * reports them, but the verdict of the moves tests does not depend on
 * tracing; walk_stops_within_a_large_mapping_many_times checks, with the
 * trace, that reads stop within such a mapping at all, so that the moves
 * meet a walk that let go of mmap_lock in the middle of the mapping.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup_race.h"

#define TIGHT_LEN	(64UL << 20)	/* "moves_tight" */
#define PACED_LEN	(16UL << 20)	/* "moves_paced" */
#define PACE_NS		1000000LL	/* "moves_paced": a move a ms */
#define MOVES_READS	20
#define MOVES_MS	3000
#define STILL_READS	30		/* walk_stops_within_a_... */
#define WRONG_LOGGED	5		/* wrong reads logged, at most */

/* --- The workloads, run inside the target --- */

static bool paced;
static size_t moved_len;
static char *at, *other;	/* where the mapping is, and the other place */
static unsigned long moves;	/* read and set with __atomic builtins */
static struct timespec next_move;

/*
 * Step 1: a reservation of PROT_NONE memory with room for the mapping at
 * two PMD-aligned addresses, a PMD range apart, and the mapping at the
 * lower one, written.  The reservation keeps anything else out of the
 * range, and the mapping from merging with anything.  Its address in
 * *@addr.
 */
static int map_moved(unsigned long *addr)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	size_t span = 2 * moved_len + 3 * PMD_RANGE;
	char *p, *a;

	p = mmap(NULL, span, PROT_NONE, flags, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	a = (char *)(((uintptr_t)p + PMD_RANGE) & ~(PMD_RANGE - 1));
	if (mmap(a, moved_len, PROT_READ | PROT_WRITE, flags | MAP_FIXED, -1,
		 0) != a)
		return -errno;
	if (madvise(a, moved_len, MADV_NOHUGEPAGE))
		return -errno;
	sr_touch(a, moved_len, 1);
	at = a;
	other = a + moved_len + PMD_RANGE;
	clock_gettime(CLOCK_MONOTONIC, &next_move);
	*addr = (unsigned long)a;
	return 0;
}

/* Wait for the next millisecond of the mover's schedule; skip missed ones. */
static void pace(void)
{
	struct timespec now;
	long long next_ns, now_ns;

	next_ns = next_move.tv_sec * 1000000000LL + next_move.tv_nsec + PACE_NS;
	clock_gettime(CLOCK_MONOTONIC, &now);
	now_ns = now.tv_sec * 1000000000LL + now.tv_nsec;
	if (next_ns < now_ns)
		next_ns = now_ns;
	next_move.tv_sec = next_ns / 1000000000LL;
	next_move.tv_nsec = next_ns % 1000000000LL;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next_move,
			       NULL) == EINTR)
		;
}

/* Move the whole mapping to the other place: 0 or -errno. */
static int move_op(int id, unsigned int r)
{
	char *to = other;

	if (paced)
		pace();
	if (mremap(at, moved_len, moved_len, MREMAP_MAYMOVE | MREMAP_FIXED,
		   to) != to)
		return -errno;
	other = at;
	at = to;
	__atomic_add_fetch(&moves, 1, __ATOMIC_RELAXED);
	return 0;
}

static unsigned long moves_done(void)
{
	return __atomic_load_n(&moves, __ATOMIC_RELAXED);
}

/* Step 1 maps and writes; step 2 moves until the test says stop. */
static int moves_step(int step, long arg, unsigned long *val)
{
	const struct race_churn churn = {
		.map = map_moved,
		.op = move_op,
		.threads = 1,
		.fork = false,
		.done = moves_done,
	};

	return race_churn_step(&churn, step, val);
}

static int moves_tight_step(int step, long arg, unsigned long *val)
{
	moved_len = TIGHT_LEN;
	return moves_step(step, arg, val);
}

static int moves_paced_step(int step, long arg, unsigned long *val)
{
	moved_len = PACED_LEN;
	paced = true;
	return moves_step(step, arg, val);
}

static const struct sr_workload workloads[] = {
	{ "moves_tight", moves_tight_step, 0 },
	{ "moves_paced", moves_paced_step, 0 },
	{}
};

SR_TARGET_MAIN(workloads)

/* --- The tests --- */

FIXTURE(moves) {
	struct sr_target t;
	struct race_reader rd;
};

FIXTURE_SETUP(moves)
{
	self->t.pid = -1;
	race_reader_init(&self->rd);
}

/* The tracefs instance outlives a test that failed an ASSERT_*(). */
FIXTURE_TEARDOWN_PARENT(moves)
{
	sr_stop_trace_remove(&self->rd.st);
}

/*
 * Start workload @name, which moves a mapping of @len bytes, and read
 * while it moves: every read must show Rss and Anonymous as a read before
 * the mover started.  All reads are made and checked, and the wrong ones
 * counted, so that the count of wrong reads says how often a kernel gets
 * it wrong.
 */
static void expect_exact_while_moving(struct __test_metadata *_metadata,
				      struct sr_target *t,
				      struct race_reader *rd,
				      const char *name, size_t len)
{
	unsigned long long lo_rss = ULLONG_MAX, hi_rss = 0;
	unsigned long wrong = 0;
	struct sr_rollup before, r;
	long long ms;
	int ret;

	rd->min_reads = MOVES_READS;
	rd->churn_ms = MOVES_MS;
	rd->trace_optional = true;
	race_set_up(_metadata, t, rd, name, len, &before);
	/* Stops anywhere in both places, and in the PMD range between. */
	rd->st.hi = rd->region + 2 * len + PMD_RANGE;
	ASSERT_EQ(SR_KB(len), sr_smaps_vma_field(t->pid, rd->region, "Rss:"))
		TH_LOG("Rss of the mapping at %#lx", rd->region);
	TH_LOG("before: Rss %llu kB, Anonymous %llu kB, %zu kB of it moving",
	       before.kb[SR_RSS], before.kb[SR_ANONYMOUS], len >> 10);
	race_go(_metadata, t, rd);
	do {
		ret = race_read_once(_metadata, rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during the moves: %s",
					 strerror(-ret));
		if (r.kb[SR_RSS] < lo_rss)
			lo_rss = r.kb[SR_RSS];
		if (r.kb[SR_RSS] > hi_rss)
			hi_rss = r.kb[SR_RSS];
		if (r.kb[SR_RSS] == before.kb[SR_RSS] &&
		    r.kb[SR_ANONYMOUS] == before.kb[SR_ANONYMOUS])
			continue;
		if (++wrong <= WRONG_LOGGED)
			TH_LOG("read %lu: Rss %llu kB, Anonymous %llu kB",
			       rd->during + 1, r.kb[SR_RSS],
			       r.kb[SR_ANONYMOUS]);
	} while (race_churning(t, rd));
	ms = race_now_ms() - rd->since;
	race_stop_churn(_metadata, t, rd);
	TH_LOG("%lu reads in %lld ms, %lu moves of the mapping",
	       rd->during, ms, rd->churn_val);
	TH_LOG("Rss from %llu to %llu kB; %lu of %lu reads wrong",
	       lo_rss, hi_rss, wrong, rd->during);
	if (!rd->traced)
		TH_LOG("restarts not traced: %s", rd->why);
	else if (!rd->st.restarts)
		TH_LOG("restarts not traced: no trace event %s",
		       "proc/smaps_rollup_walk_restart");
	else
		TH_LOG("%lu passes restarted, %lu into a final pass",
		       rd->restarts, rd->final_restarts);
	EXPECT_EQ(0UL, wrong)
		TH_LOG("%lu of %lu reads showed Rss or Anonymous other than %llu kB and %llu kB",
		       wrong, rd->during, before.kb[SR_RSS],
		       before.kb[SR_ANONYMOUS]);
	/* Else the reads raced nothing. */
	EXPECT_LE(2UL, rd->churn_val) TH_LOG("the mapping hardly moved");
	race_finish(_metadata, t, rd);
}

/* Moved as fast as mremap() goes: every pass of a read may see a move. */
TEST_F_TIMEOUT(moves, mapping_moved_in_a_tight_loop_counted_exactly, RACE_TIMEOUT)
{
	expect_exact_while_moving(_metadata, &self->t, &self->rd,
				  "moves_tight", TIGHT_LEN);
}

/* Moved once a millisecond: some passes see a move, some do not. */
TEST_F_TIMEOUT(moves, mapping_moved_every_millisecond_counted_exactly, RACE_TIMEOUT)
{
	expect_exact_while_moving(_metadata, &self->t, &self->rd,
				  "moves_paced", PACED_LEN);
}

/*
 * The moves tests race the walk only where it lets go of mmap_lock: each
 * batch counts about one page table's entries (512), so every read of the
 * TIGHT_LEN mapping (one VMA of TIGHT_LEN / PMD_RANGE page tables) must
 * stop within it many times, at least at every other page table boundary,
 * letting go of mmap_lock.  With nothing moving, no pass restarts.  The
 * mover is set up but never started.
 */
TEST_F(moves, walk_stops_within_a_large_mapping_many_times)
{
	const int want = TIGHT_LEN / PMD_RANGE / 2;
	int i, least = INT_MAX, most = 0, restarts = 0;
	struct sr_trace_counts c;
	struct sr_stop_trace *st = &self->rd.st;
	unsigned long addr = 0;
	char why[256];
	ssize_t n;
	int fd;

	ASSERT_EQ(0, sr_target_start(&self->t, "moves_tight", 0));
	ASSERT_EQ(0, sr_target_step(&self->t, 1, &addr));
	sr_path(self->rd.path, sizeof(self->rd.path), self->t.pid,
		"smaps_rollup");
	fd = open(self->rd.path, O_RDONLY);
	ASSERT_LE(0, fd);
	if (sr_stop_trace_start(st, syscall(SYS_gettid), why, sizeof(why)))
		SKIP(return, "cannot count the stops of a read: %s", why);
	/* Within the mapping: its start is where the walk enters it. */
	st->lo = addr + 1;
	st->hi = addr + TIGHT_LEN;
	for (i = 0; i < STILL_READS; i++) {
		ASSERT_LE(0, sr_stop_trace_count(st, NULL));
		n = pread(fd, self->rd.buf, sizeof(self->rd.buf), 0);
		ASSERT_LT(0, n) TH_LOG("read %d: %s", i + 1, strerror(errno));
		ASSERT_LE(0, sr_stop_trace_count(st, &c));
		EXPECT_LE(want, c.stops)
			TH_LOG("read %d stopped %d times within the mapping",
			       i + 1, c.stops);
		/* The moves race a walk that let go of the lock only. */
		EXPECT_LE(want, c.held[SR_HELD_NONE]);
		restarts += c.restarts;
		if (c.stops < least)
			least = c.stops;
		if (c.stops > most)
			most = c.stops;
	}
	TH_LOG("%d reads of a %lu MiB mapping: %d to %d stops within it each",
	       STILL_READS, TIGHT_LEN >> 20, least, most);
	if (st->restarts)
		EXPECT_EQ(0, restarts) TH_LOG("passes restarted, though nothing moved");
	close(fd);
	sr_stop_trace_stop(st);
	sr_target_stop(&self->t);
}

TEST_HARNESS_MAIN
