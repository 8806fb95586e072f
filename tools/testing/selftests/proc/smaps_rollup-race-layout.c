// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup read while its target tears its VMAs apart as fast
 * as it can (see smaps_rollup_race.h for how the reads and churns run).
 * The rollup counts in short batches, each under mmap_lock, and resumes at
 * the address the last batch counted up to, with whatever VMA spans it
 * then: so the layout may change between any two batches of a read.  These
 * tests check that the reads stay sane meanwhile:
 *
 *  - every read parses, obeys the relations of sr_rollup_consistent(), and
 *    stays below what the target could possibly have mapped: mremap()
 *    moving pages from behind the walk to ahead of it makes the pass start
 *    again, so no page counts twice;
 *  - memory the churn never touches is counted exactly, every time: if
 *    the churn uses shared memory only, Anonymous never moves.
 *
 * More churns aim at the places where the walk resumes, with Anonymous
 * again fixed while the layout moves.  Each has a walked region larger than
 * a page table, within which every read stops, and writers that take
 * mmap_lock for writing to change it, so that batches also end early:
 *
 *  - "interrupt": one large VMA, and threads that take mmap_lock for
 *    writing for another VMA (mmap and munmap of a page they never touch)
 *    and change the large VMA's flags (race_flip_flags()), so the walk
 *    must resume at the exact address; Rss is exact;
 *  - "split_merge": threads mprotect() single pages of a large VMA to
 *    read-only and back, so the VMA the walk resumes in may have been
 *    split, or merged with the part below the resume address;
 *  - "split_below": threads mprotect() a lower part of random length of a
 *    large VMA to read-only and back, and change its flags, so the walk
 *    resumes, again and again, in a VMA split or merged anew below the
 *    resume address; Rss is exact;
 *  - "unmap": one large VMA, written in its lower half only, and threads
 *    that munmap() random ranges of its upper half and mmap() them back,
 *    so the walk may resume in a hole, or in a VMA split or merged anew;
 *  - "remap": the same VMA, and threads that shrink it with mremap() and
 *    grow it back in place, or move random ranges of its upper half away
 *    and back, so the walk may resume past the end of a VMA shrunk
 *    meanwhile, or in a range moved there meanwhile.
 *
 * Churns that change what the pages are rather than where (swap, THP):
 * smaps_rollup-race-pages.c; the moves of mremap() alone:
 * smaps_rollup-race-moves.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup_race.h"

#define NR_THREADS	2
#define SLOTS		8
#define SLOT_MAX	(512UL << 10)
#define THP_SLOT_MAX	(8UL << 20)	/* slot 0 of thread 0, mixed churn */
#define STABLE_PAGES	2048		/* each page its own VMA */
#define SPLIT_VMA	(64UL << 20)	/* "split_below" */

/* In the order of workloads[]. */
enum {
	CHURN_MIXED,
	CHURN_SHMEM,
	CHURN_INTERRUPT,	/* and after it, the churns of layout_op() */
	CHURN_SPLIT_MERGE,
	CHURN_UNMAP,
	CHURN_REMAP,
	CHURN_SPLIT_BELOW,
};

struct slot {
	char *addr;
	size_t len;
	size_t obj_len;	/* shared memory: touching beyond it is SIGBUS */
};

static struct slot slots[NR_THREADS][SLOTS];
static int mode;
static char *region;		/* the walked region, of region_len() */
static char *reserve;		/* "remap": where pieces of it move to */

/* The most the churn can have mapped at once. */
static unsigned long long churn_max_kb(int churn)
{
	unsigned long long bytes = NR_THREADS * SLOTS * SLOT_MAX;

	if (churn == CHURN_MIXED)
		bytes += THP_SLOT_MAX - SLOT_MAX;
	return bytes >> 10;
}

/*
 * The length of the region whose walk @churn's writers interrupt, a VMA;
 * 0 for the churns without one.
 */
static size_t region_len(int churn)
{
	switch (churn) {
	case CHURN_MIXED:
	case CHURN_SHMEM:
		return 0;
	case CHURN_SPLIT_BELOW:
		return SPLIT_VMA;
	default:
		return LARGE_VMA;
	}
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

/*
 * "unmap" and "remap": a random range of one page to PIECE_MAX in the upper
 * half of the large VMA, the half no one writes.
 */
static char *upper_piece(unsigned int r, size_t *len)
{
	size_t page = getpagesize(), pages = PIECE_MAX / page;

	*len = (r % pages + 1) * page;
	r /= pages;
	return region + LARGE_VMA / 2 +
	       r % ((LARGE_VMA / 2 - *len) / page + 1) * page;
}

/* "remap": where thread @id moves a piece to, between PROT_NONE pages. */
static char *move_slot(int id)
{
	size_t page = getpagesize();

	return reserve + page + id * (PIECE_MAX + page);
}

/*
 * "remap": an mremap() failed, most likely because the other thread had
 * shrunk the VMA, moved a piece of it away, or restored it meanwhile.  Put
 * back what map_stable() made, whatever is left: unwritten memory over the
 * upper half, and the slot of thread @id reserved.  If the other thread
 * still has a piece away, it moves it back over the new memory, or restores
 * again.  The written lower half is never in the way.  0 or -errno.
 */
static int remap_restore(int id)
{
	int flags = MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS;
	char *upper = region + LARGE_VMA / 2, *slot = move_slot(id);

	if (mmap(upper, LARGE_VMA / 2, PROT_READ | PROT_WRITE, flags, -1,
		 0) != upper ||
	    mmap(slot, PIECE_MAX, PROT_NONE, flags, -1, 0) != slot)
		return -errno;
	return 0;
}

/*
 * One operation of the churns that leave Anonymous alone: 0, or -errno if
 * the churn must stop.
 */
static int layout_op(int id, unsigned int r)
{
	int flags = MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS;
	size_t page = getpagesize(), len;
	char *p, *slot;
	bool ok;

	switch (mode) {
	case CHURN_INTERRUPT:
		race_interrupt_op(id, region, region_len(mode));
		break;
	case CHURN_SPLIT_BELOW:
		/*
		 * Split off a lower part of the VMA, of one page up to all but
		 * one, and merge it back: below wherever the walk stopped, the
		 * VMA it resumes in starts elsewhere than the one it left.
		 */
		len = (r % (SPLIT_VMA / page - 1) + 1) * page;
		if (mprotect(region, len, PROT_READ) ||
		    mprotect(region, len, PROT_READ | PROT_WRITE))
			return -errno;
		race_flip_flags(id, region, region_len(mode));
		break;
	case CHURN_SPLIT_MERGE:
		p = region + r % (LARGE_VMA / page) * page;
		mprotect(p, page, PROT_READ);
		mprotect(p, page, PROT_READ | PROT_WRITE);
		break;
	case CHURN_UNMAP:
		/*
		 * The threads' ranges may overlap: then one unmaps or maps
		 * over what the other maps back, the same unwritten memory,
		 * and neither call fails for it.  A failure is an error.
		 */
		p = upper_piece(r, &len);
		if (munmap(p, len) ||
		    mmap(p, len, PROT_READ | PROT_WRITE, flags, -1, 0) != p)
			return -errno;
		break;
	case CHURN_REMAP:
		if (r >> 31) {	/* one or the other, at random */
			/* Shrink by a page at least, and grow back in place. */
			len = LARGE_VMA / 2 +
			      (r % (LARGE_VMA / 2 / page - 1) + 1) * page;
			ok = mremap(region, LARGE_VMA, len, 0) == region &&
			     mremap(region, len, LARGE_VMA, 0) == region;
			return ok ? 0 : remap_restore(id);
		}
		/*
		 * Move a piece to the slot and back.  mremap(MREMAP_FIXED)
		 * unmaps the destination before it checks the source: a
		 * failed move may have left a hole in the slot, or where the
		 * piece was, and remap_restore() fills both.
		 */
		p = upper_piece(r, &len);
		slot = move_slot(id);
		ok = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			    slot) == slot &&
		     mremap(slot, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			    p) == p;
		if (!ok)
			return remap_restore(id);
		/* Keep the slot reserved, as it was before the move. */
		if (mmap(slot, len, PROT_NONE, flags, -1, 0) != slot)
			return -errno;
		break;
	}
	return 0;
}

/*
 * One operation of thread @id: of layout_op(), or on one of the thread's
 * slots, at random, for the mixed churns.
 */
static int churn_op(int id, unsigned int r)
{
	int i = r % SLOTS;

	if (mode >= CHURN_INTERRUPT)
		return layout_op(id, r);
	r = race_next_random(&r);
	if (slots[id][i].addr)
		slot_op(&slots[id][i], is_thp_slot(id, i), r);
	else
		slot_map(&slots[id][i], is_thp_slot(id, i), r);
	return 0;
}

/*
 * Written pages no one touches again: each its own VMA, or the walked
 * region, one VMA between PROT_NONE pages so that it merges with nothing,
 * of which "unmap" and "remap" write the lower half only, and tear the
 * upper half.  "remap" reserves a slot per thread, between PROT_NONE pages
 * so that a piece moved there merges with nothing.
 */
static int map_stable(unsigned long *addr)
{
	size_t page = getpagesize(), len = region_len(mode), i;
	bool torn = mode == CHURN_UNMAP || mode == CHURN_REMAP;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	char *p;

	if (len) {
		p = mmap(NULL, len + 2 * page, PROT_NONE, flags, -1, 0);
		if (p == MAP_FAILED ||
		    mmap(p + page, len, PROT_READ | PROT_WRITE,
			 flags | MAP_FIXED, -1, 0) != p + page)
			return -errno;
		region = p + page;
		*addr = (unsigned long)region;
		sr_touch(region, torn ? len / 2 : len, 1);
		if (mode != CHURN_REMAP)
			return 0;
		p = mmap(NULL, NR_THREADS * (PIECE_MAX + page) + page,
			 PROT_NONE, flags, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		reserve = p;
		return 0;
	}
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

/*
 * Step 1: the memory no one touches, and the churn threads, waiting.
 * Step 2: churn while the main thread forks and reaps children.
 */
static int churn_step(int step, long arg, unsigned long *val)
{
	const struct race_churn churn = {
		.map = map_stable,
		.op = churn_op,
		.threads = NR_THREADS,
		.fork = true,
	};

	return race_churn_step(&churn, step, val);
}

#define CHURN_STEP(name, m)						\
static int name##_step(int step, long arg, unsigned long *val)		\
{									\
	mode = m;							\
	return churn_step(step, arg, val);				\
}

CHURN_STEP(churn_mixed, CHURN_MIXED)
CHURN_STEP(churn_shmem, CHURN_SHMEM)
CHURN_STEP(interrupt, CHURN_INTERRUPT)
CHURN_STEP(split_merge, CHURN_SPLIT_MERGE)
CHURN_STEP(unmap, CHURN_UNMAP)
CHURN_STEP(remap, CHURN_REMAP)
CHURN_STEP(split_below, CHURN_SPLIT_BELOW)

static const struct sr_workload workloads[] = {
	/* clock_gettime() needs the vDSO; no exact Pss here anyway. */
	{ "churn_mixed", churn_mixed_step, SR_SETTLE_THP },
	{ "churn_shmem", churn_shmem_step, 0 },
	{ "interrupt", interrupt_step, 0 },
	{ "split_merge", split_merge_step, 0 },
	{ "unmap", unmap_step, 0 },
	{ "remap", remap_step, 0 },
	{ "split_below", split_below_step, 0 },
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

/* The tracefs instance outlives a test that failed an ASSERT_*(). */
FIXTURE_TEARDOWN_PARENT(race)
{
	sr_stop_trace_remove(&self->rd.st);
}

static void set_up(struct __test_metadata *_metadata, struct sr_target *t,
		   struct race_reader *rd, int churn, struct sr_rollup *before)
{
	race_set_up(_metadata, t, rd, workloads[churn].name, region_len(churn),
		    before);
}

static void expect_fixed(struct __test_metadata *_metadata,
			 struct sr_target *t, struct race_reader *rd, int churn,
			 bool exact_rss)
{
	race_expect_fixed(_metadata, t, rd, workloads[churn].name,
			  region_len(churn), 0, exact_rss);
}

TEST_F_TIMEOUT(race, every_read_parses_within_bounds_during_churn, RACE_TIMEOUT)
{
	unsigned long long bound, most = 0;
	struct sr_rollup before, r;
	int f, ret;

	set_up(_metadata, &self->t, &self->rd, CHURN_MIXED, &before);
	race_go(_metadata, &self->t, &self->rd);
	/*
	 * The churn maps at most churn_max_kb() at a time; allow that, and
	 * 8 MiB for stacks.  Nothing for a page met twice: a pass during
	 * which mremap() moved pages (from behind the walk to ahead of it,
	 * say) throws its counts away and starts again.
	 */
	bound = before.kb[SR_RSS] + before.kb[SR_SWAP] +
		churn_max_kb(CHURN_MIXED) + 8192;
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

TEST_F_TIMEOUT(race, walk_resumed_inside_a_vma_counts_it_exactly, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_INTERRUPT, true);
}

TEST_F_TIMEOUT(race, vma_split_or_merged_across_resume_counted_exactly, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_SPLIT_MERGE, false);
}

/*
 * The walk stops in the VMA, a writer splits off a lower part of it, or
 * merges that back, and the walk resumes in a VMA that starts elsewhere
 * than the one it left: it must go on at the address it stopped at, and
 * count every page of the VMA once, on every read.
 */
TEST_F_TIMEOUT(race, vma_split_below_the_resume_address_counted_once, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_SPLIT_BELOW, true);
}

/*
 * Ranges of the walked VMA's unwritten upper half go and come back: its
 * written lower half must be counted once, every time.
 */
TEST_F_TIMEOUT(race, vma_partly_unmapped_across_resume_counted_exactly, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_UNMAP, false);
}

/*
 * As above, but the VMA shrinks and grows back in place, or ranges of its
 * upper half move away and back.
 */
TEST_F_TIMEOUT(race, vma_resized_or_partly_moved_across_resume_counted_exactly, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_REMAP, false);
}

TEST_HARNESS_MAIN
