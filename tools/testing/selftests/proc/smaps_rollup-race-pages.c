// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup read while its target changes what its pages are,
 * rather than where its VMAs are: pages go out to swap and come back, THPs
 * are split and collapsed (see smaps_rollup_race.h for how the reads and
 * churns run).  The rollup counts in short batches, each under mmap_lock,
 * and resumes at the address the last batch counted up to: within a swap
 * entry of a large folio, or in the middle of a PMD range that was small
 * pages when the walk left it and is a THP now.  Each churn has a walked
 * region larger than a page table, within which every read stops:
 *
 *  - "collapse": one thread splits VMAs in the middle of PMD-sized ranges
 *    and merges them again, another collapses the ranges into THPs with
 *    MADV_COLLAPSE, so the walk may resume in the middle of a PMD-mapped
 *    THP of which it has counted the lower part already;
 *  - "shmem_swap": one large VMA that maps a memfd, half of it swapped out,
 *    and threads that take mmap_lock for writing for another VMA and
 *    change the large VMA's flags (race_interrupt_op()), so the walk
 *    resumes inside a VMA whose swap it counts by range, and Swap must stay
 *    exact;
 *  - "shmem_swap_large": as "shmem_swap", in shared anonymous memory of
 *    64 KiB folios, mapped half a folio off so that the swap entry of a
 *    folio paged out whole spans an address where the walk may stop;
 *  - "pageout": one large VMA, written, and threads that page random
 *    ranges of it out with MADV_PAGEOUT and write them back in, so that
 *    entries of the walked tables turn into swap entries and back, under
 *    the page table lock, while the walk reads them: Anonymous plus Swap
 *    is exact;
 *  - "thp_split": as "collapse", with khugepaged scanning without pause
 *    (the test sets it up), one thread that splits the THPs (through
 *    debugfs's split_huge_pages where there is one, else by splitting
 *    their PMD mapping with mprotect()) and one that collapses them.
 *
 * Once the churn has stopped, the tests of the last two also compare the
 * rollup with summed smaps: the totals of a quiescent moment are exact.
 * Churns that tear the VMAs apart: smaps_rollup-race-layout.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup_race.h"

#define NR_THREADS	2
#define THP_RANGES	4		/* "collapse", "thp_split" */
#define SWAP_CHUNK	(PMD_RANGE / 2)	/* "shmem_swap": every other one out */
#define SWAPPED_KB	SR_KB(LARGE_VMA / 2)

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE	25
#endif

/* In the order of workloads[]. */
enum {
	CHURN_COLLAPSE,
	CHURN_SHMEM_SWAP,
	CHURN_SHMEM_SWAP_LARGE,
	CHURN_PAGEOUT,
	CHURN_THP_SPLIT,
};

static int mode;
static char *region;		/* the walked region, of region_len() */

/*
 * The length of the region whose walk @churn's writers interrupt: a VMA,
 * or the THP ranges.
 */
static size_t region_len(int churn)
{
	switch (churn) {
	case CHURN_COLLAPSE:
	case CHURN_THP_SPLIT:
		return THP_RANGES * PMD_RANGE;
	default:
		return LARGE_VMA;
	}
}

/*
 * "thp_split": split the THP of the PMD range at @p into small folios, as
 * debugfs's split_huge_pages does for a range of a process; where it is
 * missing, split the PMD mapping only, by splitting the VMA mid-range and
 * merging it back.  A split maps pages that hold only zeroes to the shared
 * zero page, which is not counted: map_thp_ranges() writes 1s.
 */
static int split_thp(char *p, unsigned int r)
{
	static const char knob[] = "/sys/kernel/debug/split_huge_pages";
	size_t page = getpagesize();
	char cmd[64];
	int fd, n, ret = 0;

	fd = open(knob, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = snprintf(cmd, sizeof(cmd), "%d,%#lx,%#lx", getpid(),
			     (unsigned long)p, (unsigned long)p + PMD_RANGE);
		if (write(fd, cmd, n) != n)
			ret = -errno;
		close(fd);
		return ret;
	}
	p += r % (PMD_RANGE / page - 2) * page + page;
	mprotect(p, page, PROT_READ);
	mprotect(p, page, PROT_READ | PROT_WRITE);
	return 0;
}

/* One operation of thread @id: 0, or -errno if the churn must stop. */
static int churn_op(int id, unsigned int r)
{
	size_t page = getpagesize(), len;
	char *p;

	switch (mode) {
	case CHURN_SHMEM_SWAP:
	case CHURN_SHMEM_SWAP_LARGE:
		race_interrupt_op(id, region, region_len(mode));
		break;
	case CHURN_THP_SPLIT:
		p = region + r % THP_RANGES * PMD_RANGE;
		if (id) {
			madvise(p, PMD_RANGE, MADV_COLLAPSE);
			break;
		}
		return split_thp(p, r >> 8);
	case CHURN_PAGEOUT:
		/*
		 * Thread 0 pages a range out, thread 1 writes one back in.
		 * Neither changes what is Anonymous or Swap in all: each page
		 * of the region is always one or the other.
		 */
		len = (r % (PIECE_MAX / page) + 1) * page;
		p = region + (r >> 9) % (LARGE_VMA / page - len / page + 1) *
			     page;
		if (id)
			sr_touch(p, len, 4);
		else if (madvise(p, len, MADV_PAGEOUT))
			return -errno;
		break;
	case CHURN_COLLAPSE:
		p = region + r % THP_RANGES * PMD_RANGE;
		if (id) {
			madvise(p, PMD_RANGE, MADV_COLLAPSE);
			break;
		}
		/* Split the VMA and the PMD mapping mid-range, then merge. */
		p += (r >> 8) % (PMD_RANGE / page - 2) * page + page;
		mprotect(p, page, PROT_READ);
		mprotect(p, page, PROT_READ | PROT_WRITE);
		break;
	}
	return 0;
}

/* "shmem_swap_large": the size of the shmem folios, from the test. */
#define SHMEM_FOLIO	(64UL << 10)

/*
 * Page out every other SWAP_CHUNK of the walked region: SWAPPED_KB of shmem
 * swap, spread over it.  Paging out runs on one CPU, whose LRU batches
 * madvise() drains; the churn threads may run anywhere.
 */
static int page_out_half(void)
{
	cpu_set_t cpus;
	size_t off;
	int ret;

	ret = sr_pin_to_one_cpu(&cpus);
	if (ret)
		return ret;
	for (off = 0; off < LARGE_VMA && !ret; off += 2 * SWAP_CHUNK)
		ret = sr_page_out(region + off, SWAP_CHUNK);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) && !ret)
		ret = -errno;
	return ret;
}

/* A memfd of LARGE_VMA bytes mapped shared, written, half paged out. */
static int map_shmem_swap(void)
{
	char *p;
	int fd, ret;

	fd = memfd_create("smaps_rollup-race", 0);
	if (fd < 0)
		return -errno;
	ret = ftruncate(fd, LARGE_VMA) ? -errno : 0;
	ret = ret ?: sr_mmap((void **)&p, LARGE_VMA, PROT_READ | PROT_WRITE,
			     MAP_SHARED, fd);
	close(fd);
	if (ret)
		return ret;
	sr_fill_distinct(p, LARGE_VMA);
	region = p;
	return page_out_half();
}

/*
 * As map_shmem_swap(), in shared anonymous memory, whose faults the test
 * has made allocate folios of SHMEM_FOLIO (64 KiB): the mapping is moved
 * to an address half a folio past a PMD boundary, so that each folio paged
 * out whole leaves one swap entry that spans a SHMEM_FOLIO boundary of
 * addresses, where the walk of its page tables may stop.  The chunks paged
 * out are whole folios that no page table boundary cuts (MADV_PAGEOUT
 * would have to split such a folio, and may fail).  Between PROT_NONE
 * pages, so that it merges with nothing.
 */
static int map_shmem_swap_large(void)
{
	char *p, *q, *to;
	int ret;

	ret = sr_mmap((void **)&p, LARGE_VMA + SHMEM_FOLIO, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1) ?:
	      sr_mmap((void **)&q, LARGE_VMA + 2 * PMD_RANGE, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (ret)
		return ret;
	p = (char *)(((uintptr_t)p + SHMEM_FOLIO - 1) & ~(SHMEM_FOLIO - 1));
	if (mmap(p, LARGE_VMA, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p)
		return -errno;
	sr_fill_distinct(p, LARGE_VMA);
	to = (char *)(((uintptr_t)q + PMD_RANGE - 1) & ~(PMD_RANGE - 1)) +
	     SHMEM_FOLIO / 2;
	if (mremap(p, LARGE_VMA, LARGE_VMA, MREMAP_MAYMOVE | MREMAP_FIXED,
		   to) != to)
		return -errno;
	region = to;
	return page_out_half();
}

/*
 * THP_RANGES PMD-aligned ranges in one VMA, written and collapsed into THPs.
 * -EOPNOTSUPP if MADV_COLLAPSE is refused: no THP, or THP disabled.
 */
static int map_thp_ranges(void)
{
	size_t len = THP_RANGES * PMD_RANGE;
	struct sr_maps m;
	struct sr_vma v;
	char *p, *aligned;

	/* Whatever THP mode the system is in, nothing else may collapse. */
	if (!sr_maps_read(&m))
		while (sr_maps_next(&m, &v))
			madvise((void *)v.start, v.end - v.start,
				MADV_NOHUGEPAGE);
	p = mmap(NULL, len + PMD_RANGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	aligned = (char *)(((uintptr_t)p + PMD_RANGE - 1) & ~(PMD_RANGE - 1));
	if (aligned > p)
		munmap(p, aligned - p);
	munmap(aligned + len, p + PMD_RANGE - aligned);
	madvise(aligned, len, MADV_HUGEPAGE);
	sr_touch(aligned, len, 1);
	if (madvise(aligned, len, MADV_COLLAPSE))
		return errno == EINVAL || errno == EPERM ? -EOPNOTSUPP : -errno;
	region = aligned;
	return 0;
}

/*
 * "pageout": LARGE_VMA written, one VMA between PROT_NONE pages so that it
 * merges with nothing.
 */
static int map_written(void)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	size_t page = getpagesize();
	char *p;

	p = mmap(NULL, LARGE_VMA + 2 * page, PROT_NONE, flags, -1, 0);
	if (p == MAP_FAILED ||
	    mmap(p + page, LARGE_VMA, PROT_READ | PROT_WRITE,
		 flags | MAP_FIXED, -1, 0) != p + page)
		return -errno;
	region = p + page;
	sr_touch(region, LARGE_VMA, 1);
	return 0;
}

/* Step 1: the churn's walked region, in *@addr. */
static int map_churn(unsigned long *addr)
{
	int ret;

	if (mode == CHURN_COLLAPSE || mode == CHURN_THP_SPLIT)
		ret = map_thp_ranges();
	else if (mode == CHURN_SHMEM_SWAP)
		ret = map_shmem_swap();
	else if (mode == CHURN_SHMEM_SWAP_LARGE)
		ret = map_shmem_swap_large();
	else
		ret = map_written();
	if (ret)
		return ret;
	*addr = (unsigned long)region;
	return 0;
}

/*
 * Step 1: the walked region, and the churn threads, waiting.  Step 2:
 * churn while the main thread forks and reaps children.
 */
static int churn_step(int step, long arg, unsigned long *val)
{
	const struct race_churn churn = {
		.map = map_churn,
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

CHURN_STEP(collapse, CHURN_COLLAPSE)
CHURN_STEP(shmem_swap, CHURN_SHMEM_SWAP)
CHURN_STEP(shmem_swap_large, CHURN_SHMEM_SWAP_LARGE)
CHURN_STEP(pageout, CHURN_PAGEOUT)
CHURN_STEP(thp_split, CHURN_THP_SPLIT)

static const struct sr_workload workloads[] = {
	/* THP is in madvise mode: only the ranges can be collapsed. */
	{ "collapse", collapse_step, SR_SETTLE_THP },
	{ "shmem_swap", shmem_swap_step, 0 },
	{ "shmem_swap_large", shmem_swap_large_step, SR_SETTLE_THP },
	{ "pageout", pageout_step, 0 },
	{ "thp_split", thp_split_step, SR_SETTLE_THP },
	{}
};

SR_TARGET_MAIN(workloads)

#define SHMEM_FOLIO_DIR	"/sys/kernel/mm/transparent_hugepage/hugepages-64kB/"

#define KHUGEPAGED_DIR	"/sys/kernel/mm/transparent_hugepage/khugepaged/"

/* khugepaged's pace, and what "thp_split" sets it to: no pause. */
static const struct {
	const char *name;
	long fast;
} khugepaged_knobs[] = {
	{ "scan_sleep_millisecs", 0 },
	{ "alloc_sleep_millisecs", 0 },
	{ "pages_to_scan", 4096 },
};

#define NR_KNOBS	ARRAY_SIZE(khugepaged_knobs)

FIXTURE(race) {
	struct sr_target t;
	struct race_reader rd;
	char shmem_folios[16];	/* SHMEM_FOLIO_DIR's to restore, or "" */
	long khugepaged[NR_KNOBS];	/* to restore, if saved */
	bool khugepaged_saved;
};

/* Put khugepaged's pace back to @saved, if *@is_saved, once. */
static void khugepaged_restore(const long saved[NR_KNOBS], bool *is_saved)
{
	char path[128];
	size_t i;

	if (!*is_saved)
		return;
	for (i = 0; i < NR_KNOBS; i++) {
		snprintf(path, sizeof(path), KHUGEPAGED_DIR "%s",
			 khugepaged_knobs[i].name);
		sr_write_long(path, saved[i]);
	}
	*is_saved = false;
}

FIXTURE_SETUP(race)
{
	self->t.pid = -1;
	race_reader_init(&self->rd);
	self->shmem_folios[0] = 0;
	self->khugepaged_saved = false;
}

/* The tracefs instance outlives a test that failed an ASSERT_*(). */
FIXTURE_TEARDOWN_PARENT(race)
{
	sr_stop_trace_remove(&self->rd.st);
	khugepaged_restore(self->khugepaged, &self->khugepaged_saved);
	if (self->shmem_folios[0])
		sr_write_str(SHMEM_FOLIO_DIR "shmem_enabled",
			     self->shmem_folios);
}

static void set_up(struct __test_metadata *_metadata, struct sr_target *t,
		   struct race_reader *rd, int churn, struct sr_rollup *before)
{
	race_set_up(_metadata, t, rd, workloads[churn].name, region_len(churn),
		    before);
}

static void expect_fixed(struct __test_metadata *_metadata,
			 struct sr_target *t, struct race_reader *rd, int churn,
			 long long swap_kb)
{
	race_expect_fixed(_metadata, t, rd, workloads[churn].name,
			  region_len(churn), swap_kb, false);
}

TEST_F_TIMEOUT(race, thp_collapsed_across_resume_counted_exactly, RACE_TIMEOUT)
{
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_COLLAPSE, 0);
}

/*
 * The walk resumes inside a shared memfd mapping with half of its pages
 * swapped out, whose swap is counted by range then: Swap must come out as
 * SWAPPED_KB on every read, never counted twice nor lost.
 */
TEST_F_TIMEOUT(race, shmem_swap_counted_exactly_across_resume, RACE_TIMEOUT)
{
	long free_kb = sr_meminfo_kb("SwapFree:");

	if (free_kb < 2 * SWAPPED_KB)
		SKIP(return, "%ld kB of swap free, %lld kB needed (swapon a zram device)",
		     free_kb, 2 * SWAPPED_KB);
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_SHMEM_SWAP,
		     SWAPPED_KB);
}

/*
 * As above, in shmem folios of 64 KiB, which the kernel pages out whole, as
 * one swap entry each: when the walk stops within one of them, its swap must
 * still count once, not on both sides of the stop.
 */
TEST_F_TIMEOUT(race, large_shmem_swap_entries_counted_once_across_resume, RACE_TIMEOUT)
{
	long free_kb = sr_meminfo_kb("SwapFree:");
	long alloc[2] = { 0, 0 }, swpout[2] = { 0, 0 };

	if (free_kb < 2 * SWAPPED_KB)
		SKIP(return, "%ld kB of swap free, %lld kB needed (swapon a zram device)",
		     free_kb, 2 * SWAPPED_KB);
	if (sr_thp_setting(SHMEM_FOLIO_DIR "shmem_enabled", self->shmem_folios,
			   sizeof(self->shmem_folios)))
		SKIP(return, "no %sshmem_enabled: no 64 KiB shmem folios (6.11 or later)",
		     SHMEM_FOLIO_DIR);
	ASSERT_EQ(0, sr_write_str(SHMEM_FOLIO_DIR "shmem_enabled", "always"));
	ASSERT_EQ(0, sr_read_long(SHMEM_FOLIO_DIR "stats/shmem_alloc", &alloc[0]));
	ASSERT_EQ(0, sr_read_long(SHMEM_FOLIO_DIR "stats/swpout", &swpout[0]));
	expect_fixed(_metadata, &self->t, &self->rd, CHURN_SHMEM_SWAP_LARGE,
		     SWAPPED_KB);
	if (_metadata->exit_code != KSFT_PASS)
		return;
	ASSERT_EQ(0, sr_read_long(SHMEM_FOLIO_DIR "stats/shmem_alloc", &alloc[1]));
	ASSERT_EQ(0, sr_read_long(SHMEM_FOLIO_DIR "stats/swpout", &swpout[1]));
	if (alloc[1] - alloc[0] < (long)(LARGE_VMA / SHMEM_FOLIO) ||
	    swpout[1] == swpout[0])
		SKIP(return, "%ld shmem folios of 64 KiB allocated, %ld paged out whole: %s",
		     alloc[1] - alloc[0], swpout[1] - swpout[0],
		     "no swap entry spanned a stop");
	TH_LOG("%ld shmem folios of 64 KiB paged out whole", swpout[1] - swpout[0]);
}

/*
 * Pages of the walked VMA go out to swap and come back in while the walk
 * reads their page tables: each is Anonymous or Swap at every moment, so
 * the sum of the two must not move; and once the churn has stopped, the
 * rollup is the sum of smaps.
 */
TEST_F_TIMEOUT(race, anonymous_plus_swap_counted_exactly_during_pageout, RACE_TIMEOUT)
{
	long free_kb = sr_meminfo_kb("SwapFree:");
	struct sr_rollup before, r;
	int ret;

	if (free_kb < 2 * (long)SR_KB(LARGE_VMA))
		SKIP(return, "%ld kB of swap free, %lld kB needed (swapon a zram device)",
		     free_kb, 2 * SR_KB(LARGE_VMA));
	self->rd.quiescent_sum = true;
	set_up(_metadata, &self->t, &self->rd, CHURN_PAGEOUT, &before);
	race_go(_metadata, &self->t, &self->rd);
	do {
		ret = race_read_once(_metadata, &self->rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		EXPECT_EQ(before.kb[SR_ANONYMOUS] + before.kb[SR_SWAP],
			  r.kb[SR_ANONYMOUS] + r.kb[SR_SWAP])
			TH_LOG("Anonymous %llu kB + Swap %llu kB, read %lu",
			       r.kb[SR_ANONYMOUS], r.kb[SR_SWAP],
			       self->rd.during + 1);
		if (_metadata->exit_code)
			break;
	} while (race_churning(&self->t, &self->rd));
	race_finish(_metadata, &self->t, &self->rd);
}

/*
 * THPs of the walked region are split into small folios and collapsed
 * again, by MADV_COLLAPSE and by khugepaged, while the walk reads them:
 * neither changes Anonymous; and once the churn has stopped (and khugepaged
 * paces itself again), the rollup is the sum of smaps.
 */
TEST_F_TIMEOUT(race, thp_split_and_collapsed_by_khugepaged_counted_exactly, RACE_TIMEOUT)
{
	struct sr_rollup before, r;
	char path[128], mode_word[16];
	size_t i;
	int ret;

	/*
	 * khugepaged, without a pause, would collapse what the target maps
	 * after step 1 too (the churn threads' stacks), changing Anonymous.
	 */
	if (sr_thp_setting("/sys/kernel/mm/transparent_hugepage/enabled",
			   mode_word, sizeof(mode_word)))
		SKIP(return, "no THP");
	if (strcmp(mode_word, "madvise"))
		SKIP(return, "THP enabled is %s, not madvise: khugepaged collapses more",
		     mode_word);
	for (i = 0; i < NR_KNOBS; i++) {
		snprintf(path, sizeof(path), KHUGEPAGED_DIR "%s",
			 khugepaged_knobs[i].name);
		if (sr_read_long(path, &self->khugepaged[i]))
			SKIP(return, "no %s: no THP", path);
	}
	self->khugepaged_saved = true;
	for (i = 0; i < NR_KNOBS; i++) {
		snprintf(path, sizeof(path), KHUGEPAGED_DIR "%s",
			 khugepaged_knobs[i].name);
		ASSERT_EQ(0, sr_write_long(path, khugepaged_knobs[i].fast));
	}
	set_up(_metadata, &self->t, &self->rd, CHURN_THP_SPLIT, &before);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	race_go(_metadata, &self->t, &self->rd);
	do {
		ret = race_read_once(_metadata, &self->rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		race_expect_as_before(_metadata, &self->rd, &before, &r, false);
		if (_metadata->exit_code)
			break;
	} while (race_churning(&self->t, &self->rd));
	race_stop_churn(_metadata, &self->t, &self->rd);
	khugepaged_restore(self->khugepaged, &self->khugepaged_saved);
	self->rd.quiescent_sum = true;
	race_finish(_metadata, &self->t, &self->rd);
}

TEST_HARNESS_MAIN

