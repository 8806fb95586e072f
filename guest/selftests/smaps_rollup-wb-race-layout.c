// SPDX-License-Identifier: GPL-2.0
/*
 * Workbench (guest/selftests/, not sent): /proc/PID/smaps_rollup read
 * while the threads of its target map, grow, shrink, move, split, merge,
 * advise and unmap slots of memory as fast as they can, the main thread
 * forking children meanwhile (see smaps_rollup_wb_race.h):
 *
 *  - every read parses, obeys the relations of sr_rollup_consistent(), and
 *    stays below what the target could possibly have mapped;
 *  - memory the churn never touches (2048 written pages, each its own VMA)
 *    is counted exactly, every time: if the churn uses shared memory only,
 *    Anonymous never moves.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup_wb_race.h"

#define NR_THREADS	2
#define SLOTS		8
#define SLOT_MAX	(512UL << 10)
#define THP_SLOT_MAX	(8UL << 20)	/* slot 0 of thread 0, mixed churn */
#define STABLE_PAGES	2048		/* each page its own VMA */

/* In the order of workloads[]. */
enum {
	CHURN_MIXED,
	CHURN_SHMEM,
};

struct slot {
	char *addr;
	size_t len;
	size_t obj_len;	/* shared memory: touching beyond it is SIGBUS */
};

static struct slot slots[NR_THREADS][SLOTS];
static int mode;

/* The most the churn can have mapped at once. */
static unsigned long long churn_max_kb(int churn)
{
	unsigned long long bytes = NR_THREADS * SLOTS * SLOT_MAX;

	if (churn == CHURN_MIXED)
		bytes += THP_SLOT_MAX - SLOT_MAX;
	return bytes >> 10;
}

static bool is_thp_slot(int id, int i)
{
	return mode == CHURN_MIXED && id == 0 && i == 0;
}

/* Write the pages of [@from, @to) that exist. */
static void slot_touch(struct slot *s, size_t from, size_t to, int val)
{
	if (to > s->obj_len)
		to = s->obj_len;
	if (from < to)
		sr_touch(s->addr + from, to - from, val);
}

static void slot_map(struct slot *s, bool thp, unsigned int r)
{
	size_t page = getpagesize();
	int flags = MAP_ANONYMOUS;
	void *p;

	if (thp) {
		s->len = THP_SLOT_MAX / 2;
		flags |= MAP_PRIVATE;
	} else {
		s->len = (r % (SLOT_MAX / page / 2) + 1) * page;
		flags |= mode == CHURN_SHMEM || (r & 0x100) ? MAP_SHARED :
							       MAP_PRIVATE;
	}
	p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED)
		return;
	if (thp)
		madvise(p, s->len, MADV_HUGEPAGE);
	s->addr = p;
	s->obj_len = flags & MAP_SHARED ? s->len : SIZE_MAX;
	slot_touch(s, 0, s->len, 1);
}

static void slot_op(struct slot *s, bool thp, unsigned int r)
{
	size_t page = getpagesize(), max = thp ? THP_SLOT_MAX : SLOT_MAX;
	size_t off = (r >> 12) % (s->len / page) * page, len;
	void *p;

	switch ((r >> 8) % 8) {
	case 0:
		munmap(s->addr, s->len);
		s->addr = NULL;
		break;
	case 1:		/* grow, perhaps moving */
		len = s->len * 2 > max ? max : s->len * 2;
		p = mremap(s->addr, s->len, len, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			break;
		mprotect(p, len, PROT_READ | PROT_WRITE);
		s->addr = p;
		slot_touch(s, s->len, len, 2);
		s->len = len;
		break;
	case 2:		/* shrink */
		len = (s->len / 2 + page - 1) / page * page;
		p = mremap(s->addr, s->len, len, 0);
		if (p != MAP_FAILED)
			s->len = len;
		break;
	case 3:		/* split off a read-only page */
		mprotect(s->addr + off, page, PROT_READ);
		break;
	case 4:		/* merge back and write all */
		mprotect(s->addr, s->len, PROT_READ | PROT_WRITE);
		slot_touch(s, 0, s->len, 3);
		break;
	case 5:
		madvise(s->addr + off, s->len - off, MADV_DONTNEED);
		break;
	case 6:
		madvise(s->addr, s->len, MADV_COLD);
		/* EINVAL on shared memory. */
		madvise(s->addr + off, s->len - off, MADV_FREE);
		break;
	case 7:		/* move elsewhere, keeping the size */
		p = mmap(NULL, s->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (p == MAP_FAILED)
			break;
		/*
		 * On failure leave p alone: mremap(MREMAP_FIXED) unmaps the
		 * destination before it checks the source, so p may already
		 * hold another thread's new mapping.
		 */
		if (mremap(s->addr, s->len, s->len,
			   MREMAP_MAYMOVE | MREMAP_FIXED, p) == p)
			s->addr = p;
		break;
	}
}

/* One operation of thread @id on one of its slots, at random. */
static int churn_op(int id, unsigned int r)
{
	int i = r % SLOTS;

	r = race_next_random(&r);
	if (slots[id][i].addr)
		slot_op(&slots[id][i], is_thp_slot(id, i), r);
	else
		slot_map(&slots[id][i], is_thp_slot(id, i), r);
	return 0;
}

/* Written pages no one touches again, each its own VMA. */
static int map_stable(unsigned long *addr)
{
	size_t page = getpagesize(), i;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	char *p;

	*addr = 0;
	p = mmap(NULL, STABLE_PAGES * page, PROT_READ | PROT_WRITE, flags, -1,
		 0);
	if (p == MAP_FAILED)
		return -errno;
	sr_touch(p, STABLE_PAGES * page, 1);
	for (i = 1; i < STABLE_PAGES; i += 2)
		if (mprotect(p + i * page, page, PROT_READ))
			return -errno;
	return 0;
}

RACE_CHURN_WORKLOAD(churn_mixed, mode, CHURN_MIXED, map_stable, churn_op,
		    NR_THREADS)
RACE_CHURN_WORKLOAD(churn_shmem, mode, CHURN_SHMEM, map_stable, churn_op,
		    NR_THREADS)

static const struct sr_workload workloads[] = {
	/* clock_gettime() needs the vDSO; no exact Pss here anyway. */
	{ "churn_mixed", churn_mixed_step, SR_SETTLE_THP },
	{ "churn_shmem", churn_shmem_step, 0 },
	{}
};

SR_TARGET_MAIN(workloads)

FIXTURE(race) {
	struct sr_target t;
	struct race_reader rd;
};

FIXTURE_SETUP(race)
{
	self->t.pid = -1;
	race_reader_init(&self->rd);
}

FIXTURE_TEARDOWN_PARENT(race)
{
}

static void set_up(struct __test_metadata *_metadata, struct sr_target *t,
		   struct race_reader *rd, int churn, struct sr_rollup *before)
{
	race_set_up(_metadata, t, rd, workloads[churn].name, 0, before);
}

static void expect_fixed(struct __test_metadata *_metadata,
			 struct sr_target *t, struct race_reader *rd, int churn,
			 bool exact_rss)
{
	race_expect_fixed(_metadata, t, rd, workloads[churn].name, 0, 0,
			  exact_rss);
}

TEST_F_TIMEOUT(race, every_read_parses_within_bounds_during_churn, RACE_TIMEOUT)
{
	unsigned long long bound, most = 0;
	struct sr_rollup before, r;
	int f, ret;

	set_up(_metadata, &self->t, &self->rd, CHURN_MIXED, &before);
	race_go(_metadata, &self->t, &self->rd);
	/*
	 * The churn maps at most churn_max_kb() at a time; allow that, 8 MiB
	 * for stacks, and the largest slot once more: as with stock, v6 may
	 * count pages that mremap() moved across the read twice.
	 */
	bound = before.kb[SR_RSS] + before.kb[SR_SWAP] +
		churn_max_kb(CHURN_MIXED) + 8192 + SR_KB(THP_SLOT_MAX);
	do {
		ret = race_read_once(_metadata, &self->rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		if (r.kb[SR_RSS] + r.kb[SR_SWAP] > most)
			most = r.kb[SR_RSS] + r.kb[SR_SWAP];
		EXPECT_GE(bound, r.kb[SR_RSS] + r.kb[SR_SWAP])
			TH_LOG("Rss + Swap, read %lu", self->rd.during + 1);
		for (f = 0; f < SR_NR_FIELDS; f++)
			EXPECT_GE(bound, r.kb[f]) TH_LOG("field %d", f + 1);
		EXPECT_EQ(0, r.kb[SR_SHARED_HUGETLB]);
		EXPECT_EQ(0, r.kb[SR_PRIVATE_HUGETLB]);
		EXPECT_GE(1UL << 56, r.end);
		if (_metadata->exit_code)
			break;
	} while (race_churning(&self->t, &self->rd));
	TH_LOG("Rss + Swap: %llu kB before, at most %llu kB during, bound %llu kB",
	       before.kb[SR_RSS] + before.kb[SR_SWAP], most, bound);
	race_finish(_metadata, &self->t, &self->rd);
}

/* The churn maps shared memory only, which is not Anonymous. */
TEST_F_TIMEOUT(race, untouched_anonymous_memory_counted_exactly_during_churn, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_SHMEM, false);
}

TEST_HARNESS_MAIN
