// SPDX-License-Identifier: GPL-2.0
/*
 * Workbench (guest/selftests/, not sent): /proc/PID/smaps_rollup read while
 * its target changes what its pages are, rather than where its VMAs are
 * (see smaps_rollup_wb_race.h for how the reads and churns run):
 *
 *  - "pageout": one large VMA, written, and threads that page random
 *    ranges of it out with MADV_PAGEOUT and write them back in, so that
 *    entries turn into swap entries and back while the walk reads them:
 *    Anonymous plus Swap is exact;
 *  - "thp_split": THP_RANGES PMD ranges, with khugepaged scanning without
 *    pause (the test sets it up), one thread that splits the THPs
 *    (through debugfs's split_huge_pages where there is one, else by
 *    splitting their PMD mapping with mprotect()) and one that collapses
 *    them: Anonymous is exact.
 *
 * Once the churn has stopped, both compare the rollup with summed smaps.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup_wb_race.h"

#define NR_THREADS	2
#define THP_RANGES	4		/* "thp_split" */

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE	25
#endif

/* In the order of workloads[]. */
enum {
	CHURN_PAGEOUT,
	CHURN_THP_SPLIT,
};

static int mode;
static char *region;		/* the walked region, of region_len() */

/* The length of the churn's region: a VMA, or the THP ranges. */
static size_t region_len(int churn)
{
	return churn == CHURN_THP_SPLIT ? THP_RANGES * PMD_RANGE : LARGE_VMA;
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
	}
	return 0;
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

	if (mode == CHURN_THP_SPLIT)
		ret = map_thp_ranges();
	else
		ret = map_written();
	if (ret)
		return ret;
	*addr = (unsigned long)region;
	return 0;
}

RACE_CHURN_WORKLOAD(pageout, mode, CHURN_PAGEOUT, map_churn, churn_op,
		    NR_THREADS)
RACE_CHURN_WORKLOAD(thp_split, mode, CHURN_THP_SPLIT, map_churn, churn_op,
		    NR_THREADS)

static const struct sr_workload workloads[] = {
	{ "pageout", pageout_step, 0 },
	/* THP is in madvise mode: only the ranges can be collapsed. */
	{ "thp_split", thp_split_step, SR_SETTLE_THP },
	{}
};

SR_TARGET_MAIN(workloads)


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
	self->khugepaged_saved = false;
}

FIXTURE_TEARDOWN_PARENT(race)
{
	khugepaged_restore(self->khugepaged, &self->khugepaged_saved);
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
