// SPDX-License-Identifier: GPL-2.0
/*
 * Workbench (guest/selftests/, not sent): the cases that the series'
 * smaps_rollup-totals.c does not carry.
 *
 * /proc/PID/smaps_rollup totals of memory that is not one 4 kB page mapped
 * where it was written: PMD-sized THPs, 64 KiB folios (mTHP) mapped by
 * runs of PTEs and torn apart in every way, pages merged by KSM, and
 * anonymous and shmem pages paged out to swap.  Each moves exactly the
 * fields it should by exactly the amount a workload makes it.  Memory of
 * 4 kB pages: smaps_rollup-wb-totals.c.
 *
 * Each test starts a target (see smaps_rollup.h), reads smaps_rollup
 * before and after one workload step, and checks the change of every
 * field.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <time.h>

#include "smaps_rollup_wb.h"

#define MIB		(1024UL * 1024)
#define REGION		MIB		/* most workloads' region */
#define REGION_KB	SR_KB(REGION)

/* --- The workloads, run inside the target --- */

static char *region, *region2, *dummy;
static struct sr_helper helper;

/* One PMD-aligned MADV_HUGEPAGE region of @arg bytes, then written. */
static int thp_step(int step, long arg, unsigned long *val)
{
	unsigned long start, aligned;
	int ret;

	if (step == 2) {
		sr_touch(region, arg, 1);
		return 0;
	}
	ret = sr_mmap((void **)&region, 2 * arg, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (ret)
		return ret;
	start = (unsigned long)region;
	aligned = (start + arg - 1) & ~(arg - 1);
	if (aligned > start)
		munmap(region, aligned - start);
	if (start + 2 * arg > aligned + arg)
		munmap((void *)(aligned + arg), start + arg - aligned);
	region = (char *)aligned;
	*val = aligned;
	return madvise(region, arg, MADV_HUGEPAGE) ? -errno : 0;
}

#define KSM_PAGES	64

/*
 * KSM_PAGES pages, MADV_MERGEABLE: pages 0, @arg, 2 * @arg... identical
 * (and unlike any other process's), the others all different.  With @arg
 * 2, once ksmd merged them, each KSM page sits between two private pages.
 */
static int ksm_step(int step, long arg, unsigned long *val)
{
	size_t page = getpagesize(), i;
	int ret;

	ret = sr_map_anon(&region, KSM_PAGES * page, MAP_PRIVATE);
	if (ret)
		return ret;
	for (i = 0; i < KSM_PAGES; i++) {
		memset(region + i * page, 0x5a, page);
		*(pid_t *)(region + i * page) = getpid();
		if (i % arg)
			*(size_t *)(region + i * page + 64) = i;
	}
	return madvise(region, KSM_PAGES * page, MADV_MERGEABLE) ? -errno : 0;
}

/* Private anonymous (arg < 0) or memfd @arg memory written, then paged out. */
static int pageout_step(int step, long arg, unsigned long *val)
{
	int ret;

	if (step == 2)
		return sr_page_out(region, REGION);
	ret = sr_pin_to_one_cpu();
	if (!ret && arg < 0)
		ret = sr_map_anon(&region, REGION, MAP_PRIVATE);
	else if (!ret)
		ret = sr_mmap((void **)&region, REGION, PROT_READ | PROT_WRITE,
			      MAP_SHARED, arg) ?: sr_nohuge(region, REGION);
	if (!ret)
		sr_fill_distinct(region, REGION);
	return ret;
}

static char *swapped[3];

/* Private anonymous memory and two memfds, written, then all paged out. */
static int pageout_three_step(int step, long arg, unsigned long *val)
{
	int i, fd, ret;

	if (step == 2) {
		for (i = 0; i < 3; i++) {
			ret = sr_page_out(swapped[i], REGION);
			if (ret)
				return ret;
		}
		return 0;
	}
	ret = sr_pin_to_one_cpu() ?: sr_map_anon(&swapped[0], REGION, MAP_PRIVATE);
	for (i = 1; !ret && i < 3; i++) {
		fd = memfd_create("smaps_rollup-swap", 0);
		if (fd < 0 || ftruncate(fd, REGION))
			return -errno;
		ret = sr_mmap((void **)&swapped[i], REGION,
			      PROT_READ | PROT_WRITE, MAP_SHARED, fd) ?:
		      sr_nohuge(swapped[i], REGION);
		close(fd);
	}
	for (i = 0; !ret && i < 3; i++)
		sr_fill_distinct(swapped[i], REGION);
	return ret;
}

/*
 * 64 KiB folios (mTHP): MTHP_REGION of private anonymous memory, aligned to
 * 64 KiB so that each aligned 64 KiB is one folio mapped by 16 PTEs (the
 * test makes the kernel allocate such folios, and no PMD-sized ones).  Step
 * 1 maps it and, but for MTHP_WRITTEN and MTHP_LOCKED, writes it (distinct
 * pages, for zram); step 2 does what @arg says to it.
 */
#define MTHP		(64UL << 10)
#define MTHP_REGION	(16 * MIB)
#define MTHP_FOLIOS	(MTHP_REGION / MTHP)

enum {
	MTHP_WRITTEN,		/* step 2 writes it */
	MTHP_CHILD_UNMAPS,	/* forked; the helper unmaps it */
	MTHP_CHILD_COPIES_ONE,	/* forked; the helper writes a page a folio */
	MTHP_CHILD_KEEPS_ONE,	/* forked; the helper drops all but one */
	MTHP_HALF_UNMAPPED,	/* MADV_DONTNEED of each folio's upper half */
	MTHP_HALF_PROTECTED,	/* mprotect() of each folio's upper half */
	MTHP_HALF_MOVED,	/* mremap() of its upper half, from mid-folio */
	MTHP_HALF_PAGED_OUT,	/* MADV_PAGEOUT of each folio's lower half */
	MTHP_FREED,		/* MADV_FREE */
	MTHP_LOCKED,		/* step 2 mlock()s it */
};

/* The page of each folio that a helper copies, or keeps mapped. */
#define MTHP_MIDDLE	(MTHP / 2)

/* In the helper: unmap the region, which the target keeps. */
static int helper_unmap(int cmd)
{
	return munmap(region, MTHP_REGION) ? -errno : 0;
}

/* In the helper: write one page of each folio, breaking copy-on-write. */
static int helper_copy_one(int cmd)
{
	size_t off;

	for (off = 0; off < MTHP_REGION; off += MTHP)
		region[off + MTHP_MIDDLE] = 3;
	return 0;
}

/* In the helper: unmap all pages of each folio but one. */
static int helper_keep_one(int cmd)
{
	size_t page = getpagesize(), off;

	for (off = 0; off < MTHP_REGION; off += MTHP)
		if (madvise(region + off, MTHP_MIDDLE, MADV_DONTNEED) ||
		    madvise(region + off + MTHP_MIDDLE + page,
			    MTHP - MTHP_MIDDLE - page, MADV_DONTNEED))
			return -errno;
	return 0;
}

/* MTHP_REGION of private anonymous memory, aligned to MTHP; and more. */
static int mthp_map(long op)
{
	unsigned long start;
	int ret;

	ret = (op == MTHP_HALF_PAGED_OUT || op == MTHP_FREED ?
	       sr_pin_to_one_cpu() : 0) ?:
	      sr_mmap((void **)&region, MTHP_REGION + MTHP,
		      PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (ret)
		return ret;
	start = ((unsigned long)region + MTHP - 1) & ~(MTHP - 1);
	if (start > (unsigned long)region)
		munmap(region, start - (unsigned long)region);
	munmap((void *)(start + MTHP_REGION),
	       (unsigned long)region + MTHP - start);
	region = (char *)start;
	/* Where MTHP_HALF_MOVED moves to; a page for MTHP_FREED to drain. */
	if (op == MTHP_HALF_MOVED)
		return sr_mmap((void **)&region2, MTHP_REGION / 2, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (op == MTHP_FREED)
		return sr_map_anon(&dummy, getpagesize(), MAP_PRIVATE);
	return 0;
}

/* Fork a helper that shares the region, and does @op to it when told. */
static int mthp_helper_start(int (*op)(int cmd))
{
	return sr_helper_start(&helper, (unsigned long)region,
			       (unsigned long)region + MTHP_REGION, op);
}

static int mthp_step_1(long op)
{
	int ret = mthp_map(op);

	if (ret || op == MTHP_WRITTEN || op == MTHP_LOCKED)
		return ret;
	sr_fill_distinct(region, MTHP_REGION);
	switch (op) {
	case MTHP_CHILD_UNMAPS:
		return mthp_helper_start(helper_unmap);
	case MTHP_CHILD_COPIES_ONE:
		return mthp_helper_start(helper_copy_one);
	case MTHP_CHILD_KEEPS_ONE:
		return mthp_helper_start(helper_keep_one);
	}
	return 0;
}

static int mthp_step(int step, long arg, unsigned long *val)
{
	size_t off, half = MTHP / 2;
	int ret = 0;
	void *p;

	if (step == 1)
		return mthp_step_1(arg);
	switch (arg) {
	case MTHP_WRITTEN:
		sr_touch(region, MTHP_REGION, 1);
		return 0;
	case MTHP_CHILD_UNMAPS:
	case MTHP_CHILD_COPIES_ONE:
	case MTHP_CHILD_KEEPS_ONE:
		return sr_helper_cmd(&helper, 1);
	case MTHP_HALF_UNMAPPED:
		for (off = 0; off < MTHP_REGION; off += MTHP)
			if (madvise(region + off + half, half, MADV_DONTNEED))
				return -errno;
		return 0;
	case MTHP_HALF_PROTECTED:
		for (off = 0; off < MTHP_REGION; off += MTHP)
			if (mprotect(region + off + half, half, PROT_READ))
				return -errno;
		return 0;
	case MTHP_HALF_MOVED:
		p = mremap(region + half, MTHP_REGION / 2, MTHP_REGION / 2,
			   MREMAP_MAYMOVE | MREMAP_FIXED, region2);
		return p == region2 ? 0 : -errno;
	case MTHP_HALF_PAGED_OUT:
		for (off = 0; off < MTHP_REGION && !ret; off += MTHP)
			ret = sr_page_out(region + off, half);
		return ret;
	case MTHP_FREED:
		if (madvise(region, MTHP_REGION, MADV_FREE))
			return -errno;
		/* madvise() starts by draining this CPU's LRU batches. */
		return madvise(dummy, getpagesize(), MADV_FREE) ? -errno : 0;
	case MTHP_LOCKED:
		return sr_lock_range(region, MTHP_REGION);
	}
	return -EINVAL;
}

static const struct sr_workload workloads[] = {
	{ "thp", thp_step, SR_SETTLE_UNMAP_VDSO | SR_SETTLE_THP },
	{ "ksm", ksm_step, SR_SETTLE_UNMAP_VDSO },
	{ "pageout", pageout_step, SR_SETTLE_UNMAP_VDSO },
	{ "pageout_three", pageout_three_step, SR_SETTLE_UNMAP_VDSO },
	{ "mthp", mthp_step, SR_SETTLE_UNMAP_VDSO | SR_SETTLE_THP },
	{}
};

SR_TARGET_MAIN(workloads)

/* --- KSM --- */

#define KSM_DIR "/sys/kernel/mm/ksm/"

FIXTURE(ksm) {
	struct sr_target t;
	long run, pages_to_scan, sleep_millisecs;
};

FIXTURE_SETUP(ksm)
{
	self->t.pid = -1;
	self->run = -1;
	if (sr_read_long(KSM_DIR "run", &self->run))
		SKIP(return, "no KSM (CONFIG_KSM)");
	if (geteuid())
		SKIP(return, "starting ksmd needs root");
	ASSERT_EQ(0, sr_read_long(KSM_DIR "pages_to_scan", &self->pages_to_scan));
	ASSERT_EQ(0, sr_read_long(KSM_DIR "sleep_millisecs", &self->sleep_millisecs));
}

FIXTURE_TEARDOWN_PARENT(ksm)
{
	sr_write_long(KSM_DIR "pages_to_scan", self->pages_to_scan);
	sr_write_long(KSM_DIR "sleep_millisecs", self->sleep_millisecs);
	sr_write_long(KSM_DIR "run", self->run);
}

/*
 * Start workload "ksm" with @every, which writes the same bytes to every
 * @every-th of its pages, KSM_PAGES / @every of them, and makes them
 * mergeable; let ksmd merge those into one KSM page: each page table entry
 * of them is still resident and anonymous, but counts in Ksm, and its Pss
 * is a 1/(KSM_PAGES / @every) share of the one page.  Merging takes ksmd a
 * few full scans: poll this process's count of merged pages, and give up
 * after 20 more full scans.
 */
static void ksm_expect_merged(struct __test_metadata *_metadata,
			      struct sr_target *t, long every)
{
	const long long page_kb = SR_KB(getpagesize());
	const long pages = KSM_PAGES / every;
	const long long kb = pages * page_kb;
	long scans = 0, first_scan = 0, merged = -1;
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	char path[64];
	int ret;

	sr_assert_start(_metadata, t, "ksm", every);
	ret = sr_target_step(t, 1, NULL);
	if (ret == -EINVAL)
		SKIP(return, "MADV_MERGEABLE refused (CONFIG_KSM)");
	ASSERT_EQ(0, ret);
	sr_assert_read(_metadata, t->pid, &before);

	ASSERT_EQ(0, sr_write_long(KSM_DIR "pages_to_scan", 1000));
	ASSERT_EQ(0, sr_write_long(KSM_DIR "sleep_millisecs", 10));
	ASSERT_EQ(0, sr_write_long(KSM_DIR "run", 1));
	sr_path(path, sizeof(path), t->pid, "ksm_merging_pages");
	ASSERT_EQ(0, sr_read_long(KSM_DIR "full_scans", &first_scan));
	do {
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
		ASSERT_EQ(0, sr_read_long(KSM_DIR "full_scans", &scans));
		ASSERT_EQ(0, sr_read_long(path, &merged));
	} while (merged < pages && scans < first_scan + 20);
	ASSERT_EQ(pages, merged)
		TH_LOG("ksmd merged %ld of %ld pages in %ld full scans",
		       merged, pages, scans - first_scan);
	sr_assert_read(_metadata, t->pid, &after);

	sr_delta_init(want);
	want[SR_KSM] = kb;
	want[SR_PSS] = page_kb - kb;
	want[SR_PSS_ANON] = page_kb - kb;
	want[SR_PSS_DIRTY] = SR_ANY;
	want[SR_SHARED_CLEAN] = SR_ANY;
	want[SR_SHARED_DIRTY] = SR_ANY;
	want[SR_PRIVATE_CLEAN] = SR_ANY;
	want[SR_PRIVATE_DIRTY] = SR_ANY;
	sr_expect_delta(_metadata, &before, &after, want);
	EXPECT_EQ(kb, sr_delta(&before, &after, SR_SHARED_CLEAN) +
		      sr_delta(&before, &after, SR_SHARED_DIRTY));
	EXPECT_EQ(-kb, sr_delta(&before, &after, SR_PRIVATE_CLEAN) +
		       sr_delta(&before, &after, SR_PRIVATE_DIRTY));
}

TEST_F_TIMEOUT(ksm, merged_pages_count_in_ksm, 120)
{
	ksm_expect_merged(_metadata, &self->t, 1);
}

/*
 * Every other page merged into one KSM page, the others private: each KSM
 * page counts in Ksm and shares its Pss, each private page is counted as
 * before.
 */
TEST_F_TIMEOUT(ksm, merged_pages_amid_private_ones_count_in_ksm, 120)
{
	ksm_expect_merged(_metadata, &self->t, 2);
}

/* --- Swap --- */

FIXTURE(swap) {
	struct sr_target t;
	int memfd;
};

FIXTURE_SETUP(swap)
{
	char buf[4096];
	ssize_t n;

	self->t.pid = -1;
	self->memfd = -1;
	n = sr_read_path("/proc/swaps", buf, sizeof(buf) - 1);
	if (n < 0)
		SKIP(return, "no /proc/swaps (CONFIG_SWAP)");
	buf[n] = 0;
	if (!strchr(buf, '\n') || !strchr(strchr(buf, '\n') + 1, '\n'))
		SKIP(return, "no swap space is active (swapon a zram device to run this)");
	if (sr_meminfo_kb("SwapFree:") < 4 * REGION_KB)
		SKIP(return, "less than %lld kB of swap free", 4 * REGION_KB);
}

FIXTURE_TEARDOWN(swap)
{
}

/*
 * Each VMA's swap adds to the total: 4.14 assigned a shmem VMA's swap
 * instead, losing what the VMAs before it had.
 */
TEST_F(swap, pageout_anon_and_two_shmem_swap_adds_up)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	sr_assert_two_steps(_metadata, &self->t, "pageout_three", 0,
			    &before, &after);

	sr_delta_init(want);
	want[SR_RSS] = -3 * REGION_KB;
	want[SR_PSS] = -3 * REGION_KB;
	want[SR_PSS_DIRTY] = -3 * REGION_KB;
	want[SR_PSS_ANON] = -REGION_KB;
	want[SR_PSS_SHMEM] = -2 * REGION_KB;
	want[SR_PRIVATE_DIRTY] = -3 * REGION_KB;
	want[SR_ANONYMOUS] = -REGION_KB;
	want[SR_SWAP] = 3 * REGION_KB;
	want[SR_SWAP_PSS] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

/* --- 64 KiB folios (mTHP), counted a run of PTEs at a time --- */

#define THP_DIR		"/sys/kernel/mm/transparent_hugepage/"
#define MTHP_DIR	THP_DIR "hugepages-64kB/"
#define MTHP_KB		SR_KB(MTHP_REGION)

FIXTURE(mthp) {
	struct sr_target t;
	/* The settings to restore, "" where untouched. */
	char pmd_path[96], pmd[16], mthp[16];
};

/*
 * 64 KiB folios for every anonymous fault, PMD-sized ones for none, while
 * the test runs: the target's memory is then mapped by runs of 16 PTEs.
 */
FIXTURE_SETUP(mthp)
{
	long pmd = 0;

	self->t.pid = -1;
	self->pmd[0] = 0;
	self->mthp[0] = 0;
	if (getpagesize() != 4096)
		SKIP(return, "64 KiB folios are 16 pages of 4 KiB; pages here are %d bytes",
		     getpagesize());
	if (sr_thp_setting(MTHP_DIR "enabled", self->mthp, sizeof(self->mthp)))
		SKIP(return, "no %senabled: no 64 KiB THP (%s)", MTHP_DIR,
		     "CONFIG_TRANSPARENT_HUGEPAGE, 6.8 or later");
	if (geteuid())
		SKIP(return, "allocating 64 KiB folios needs root, to set %senabled",
		     MTHP_DIR);
	ASSERT_EQ(0, sr_read_long(THP_DIR "hpage_pmd_size", &pmd));
	snprintf(self->pmd_path, sizeof(self->pmd_path),
		 THP_DIR "hugepages-%ldkB/enabled", pmd >> 10);
	ASSERT_EQ(0, sr_thp_setting(self->pmd_path, self->pmd, sizeof(self->pmd)));
	ASSERT_EQ(0, sr_write_str(MTHP_DIR "enabled", "always"));
	ASSERT_EQ(0, sr_write_str(self->pmd_path, "never"));
}

FIXTURE_TEARDOWN_PARENT(mthp)
{
	if (self->mthp[0])
		sr_write_str(MTHP_DIR "enabled", self->mthp);
	if (self->pmd[0])
		sr_write_str(self->pmd_path, self->pmd);
}

/*
 * Run target step @step, which faults the region in, and return what it
 * returned; skip unless it got MTHP_FOLIOS folios of 64 KiB: the kernel
 * counts them in anon_fault_alloc, and a fault that fell back to a smaller
 * folio in anon_fault_fallback.
 */
static int mthp_fault_step(struct __test_metadata *_metadata,
			   struct sr_target *t, int step)
{
	long alloc[2] = { 0, 0 }, fallback[2] = { 0, 0 };
	int i, ret = 0;

	for (i = 0; i < 2; i++) {
		EXPECT_EQ(0, sr_read_long(MTHP_DIR "stats/anon_fault_alloc",
					  &alloc[i]));
		EXPECT_EQ(0, sr_read_long(MTHP_DIR "stats/anon_fault_fallback",
					  &fallback[i]));
		if (!i)
			ret = sr_target_step(t, step, NULL);
	}
	if (!ret && (alloc[1] - alloc[0] < (long)MTHP_FOLIOS ||
		     fallback[1] > fallback[0]))
		SKIP(return ret,
		     "%ld folios of 64 KiB allocated for %lu, %ld fell back to smaller ones (memory fragmented?)",
		     alloc[1] - alloc[0], MTHP_FOLIOS, fallback[1] - fallback[0]);
	return ret;
}

/*
 * Start workload "mthp" with @op and run its step 1, then read @before;
 * step 1 faults the region in but for MTHP_WRITTEN and MTHP_LOCKED.
 */
static void mthp_start(struct __test_metadata *_metadata, struct sr_target *t,
		       int op, struct sr_rollup *before)
{
	int ret;

	sr_assert_start(_metadata, t, "mthp", op);
	if (op == MTHP_WRITTEN || op == MTHP_LOCKED)
		ret = sr_target_step(t, 1, NULL);
	else
		ret = mthp_fault_step(_metadata, t, 1);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(0, ret) TH_LOG("target step 1: %s", strerror(-ret));
	sr_assert_read(_metadata, t->pid, before);
}

/* Step 2 of workload "mthp" (not MTHP_LOCKED), then read @after. */
static void mthp_finish(struct __test_metadata *_metadata, struct sr_target *t,
			int op, struct sr_rollup *after)
{
	int ret;

	if (op == MTHP_WRITTEN)
		ret = mthp_fault_step(_metadata, t, 2);
	else
		ret = sr_target_step(t, 2, NULL);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(0, ret) TH_LOG("target step 2: %s", strerror(-ret));
	sr_assert_read(_metadata, t->pid, after);
	EXPECT_EQ(0, sr_rollup_consistent(after)) TH_LOG("%s", sr_error);
	sr_expect_rollup_is_smaps_sum(_metadata, t->pid);
}

/* Run workload "mthp" with @op, and expect the change @want. */
static void mthp_expect(struct __test_metadata *_metadata, struct sr_target *t,
			int op, const long long *want)
{
	struct sr_rollup before, after;

	mthp_start(_metadata, t, op, &before);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	mthp_finish(_metadata, t, op, &after);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	sr_expect_delta(_metadata, &before, &after, want);
}

/*
 * The child copies one page of each folio: that page of the target's folio
 * is the target's alone, its other 15 still shared.
 */
TEST_F(mthp, a_page_copied_by_the_child_turns_private)
{
	const long long kb = MTHP_FOLIOS * SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];

	sr_want_anon_unshared(want, kb);
	mthp_expect(_metadata, &self->t, MTHP_CHILD_COPIES_ONE, want);
}

/*
 * The child unmaps all pages of each folio but the one in the middle: in
 * the target, that page is shared amid 15 private ones, and must count
 * half, though the run's first page is private.
 */
TEST_F(mthp, a_page_shared_amid_private_ones_counts_half)
{
	const long long kb = MTHP_FOLIOS * SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];

	sr_want_anon_unshared(want, MTHP_KB - kb);
	mthp_expect(_metadata, &self->t, MTHP_CHILD_KEEPS_ONE, want);
}

TEST_F(mthp, freed_folios_count_lazyfree)
{
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	want[SR_LAZYFREE] = MTHP_KB;
	want[SR_PSS_DIRTY] = -MTHP_KB;
	want[SR_PRIVATE_DIRTY] = -MTHP_KB;
	want[SR_PRIVATE_CLEAN] = MTHP_KB;
	mthp_expect(_metadata, &self->t, MTHP_FREED, want);
}

TEST_F(mthp, locked_folios_count_locked)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	int ret;

	mthp_start(_metadata, &self->t, MTHP_LOCKED, &before);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ret = mthp_fault_step(_metadata, &self->t, 2);
	if (sr_mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     MTHP_KB, strerror(-ret));
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(0, ret) TH_LOG("target step 2: %s", strerror(-ret));
	sr_assert_read(_metadata, self->t.pid, &after);

	sr_want_private_anon(want, MTHP_KB);
	want[SR_LOCKED] = MTHP_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_HARNESS_MAIN
