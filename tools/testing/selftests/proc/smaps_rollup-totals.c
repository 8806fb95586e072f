// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup totals of each kind of memory: a target (see
 * smaps_rollup.h) runs one workload step between two reads, each field
 * must change by exactly what the step does, and the quiescent totals must
 * equal the sums over /proc/PID/smaps.  The large-folio tests map 64 KiB
 * folios (mTHP) by runs of 16 PTEs, and tear those runs apart.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup.h"

#define MIB		(1024UL * 1024)
#define REGION		MIB
#define REGION_KB	SR_KB(REGION)
#define COW_KEPT	100	/* the page a "cow" child with @arg 1 keeps */
#define MTHP		(64UL << 10)
#define MTHP_REGION	(16 * MIB)
#define MTHP_FOLIOS	(MTHP_REGION / MTHP)
#define MTHP_KB		SR_KB(MTHP_REGION)

/* --- The workloads, run inside the target --- */

static char *region, *region2, *dummy;
static size_t region_len;
static struct sr_helper helper;

/* Write the region, but page COW_KEPT if @cmd is 2. */
static int helper_write_region(int cmd)
{
	size_t page = getpagesize();

	if (cmd != 2) {
		sr_touch(region, region_len, 2);
		return 0;
	}
	sr_touch(region, COW_KEPT * page, 2);
	sr_touch(region + (COW_KEPT + 1) * page,
		 region_len - (COW_KEPT + 1) * page, 2);
	return 0;
}

static int helper_unmap(int cmd)
{
	return munmap(region, region_len) ? -errno : 0;
}

/* Write the @len bytes of the region, fork a helper that maps them too. */
static int write_and_fork(size_t len, int (*op)(int cmd))
{
	region_len = len;
	sr_touch(region, len, 1);
	return sr_helper_start(&helper, (unsigned long)region,
			       (unsigned long)region + len, op);
}

/* 64 MiB mapped, then 16 MiB of it written. */
static int anon_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return sr_map_anon(&region, 64 * MIB, MAP_PRIVATE);
	sr_touch(region, 16 * MIB, 1);
	return 0;
}

/* Private anonymous memory written and fork()ed; the child writes it. */
static int cow_step(int step, long arg, unsigned long *val)
{
	if (step == 2)
		return sr_helper_cmd(&helper, 1 + arg);
	return sr_map_anon(&region, REGION, MAP_PRIVATE) ?:
	       write_and_fork(REGION, helper_write_region);
}

/* File or memfd @arg mapped shared (@arg < 0: private), then read. */
static int file_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return sr_mmap((void **)&region, REGION, PROT_READ | PROT_WRITE,
			       arg < 0 ? MAP_PRIVATE : MAP_SHARED,
			       arg < 0 ? -arg : arg) ?: sr_nohuge(region, REGION);
	sr_touch(region, REGION, step == 2 ? -1 : 1);
	return 0;
}

/* One private hugetlb page of @arg bytes, then written. */
static int hugetlb_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return sr_mmap((void **)&region, arg, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1);
	sr_touch(region, arg, 1);
	return 0;
}

/* REGION written, then MADV_FREE (step 2) or mlock() (step 3). */
static int free_lock_step(int step, long arg, unsigned long *val)
{
	int ret;

	if (step == 2)
		return madvise(region, REGION, MADV_FREE) ||
		       /* madvise() drains this CPU's LRU batches first. */
		       madvise(dummy, getpagesize(), MADV_FREE) ? -errno : 0;
	if (step == 3)
		return sr_lock_range(region, REGION);
	ret = sr_pin_to_one_cpu() ?:
	      sr_map_anon(&region, REGION, MAP_PRIVATE) ?:
	      sr_map_anon(&dummy, getpagesize(), MAP_PRIVATE);
	if (!ret && arg)
		sr_touch(region, REGION, 1);
	return ret;
}

/* A PMD-aligned MADV_HUGEPAGE region of @arg bytes, then written. */
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
	munmap((void *)(aligned + arg), start + arg - aligned);
	region = (char *)aligned;
	return madvise(region, arg, MADV_HUGEPAGE) ? -errno : 0;
}

/* Private anonymous (@arg < 0) or memfd @arg memory written, paged out. */
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

/*
 * MTHP_REGION of private anonymous memory aligned to MTHP, so that each
 * aligned 64 KiB is one folio.  Step 1 maps it and writes it (but for
 * MTHP_WRITTEN); step 2 does what @arg says.
 */
enum {
	MTHP_WRITTEN,		/* step 2 writes it */
	MTHP_CHILD_UNMAPS,	/* forked; the child unmaps it */
	MTHP_HALF_UNMAPPED,	/* MADV_DONTNEED of each folio's upper half */
	MTHP_HALF_PROTECTED,	/* mprotect() of each folio's upper half */
	MTHP_HALF_MOVED,	/* mremap() of its upper half, from mid-folio */
	MTHP_HALF_PAGED_OUT,	/* MADV_PAGEOUT of each folio's lower half */
};

static int mthp_step_1(long op)
{
	unsigned long start;
	int ret;

	ret = (op == MTHP_HALF_PAGED_OUT ? sr_pin_to_one_cpu() : 0) ?:
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
	if (op == MTHP_HALF_MOVED)
		ret = sr_mmap((void **)&region2, MTHP_REGION / 2, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (ret || op == MTHP_WRITTEN)
		return ret;
	sr_fill_distinct(region, MTHP_REGION);
	region_len = MTHP_REGION;
	if (op == MTHP_CHILD_UNMAPS)
		return sr_helper_start(&helper, start, start + MTHP_REGION,
				       helper_unmap);
	return 0;
}

static int mthp_step(int step, long arg, unsigned long *val)
{
	size_t off, half = MTHP / 2;
	int ret = 0;

	if (step == 1)
		return mthp_step_1(arg);
	for (off = 0; off < MTHP_REGION && !ret; off += MTHP) {
		switch (arg) {
		case MTHP_WRITTEN:
			sr_touch(region + off, MTHP, 1);
			break;
		case MTHP_CHILD_UNMAPS:
			return sr_helper_cmd(&helper, 1);
		case MTHP_HALF_UNMAPPED:
			ret = madvise(region + off + half, half, MADV_DONTNEED);
			break;
		case MTHP_HALF_PROTECTED:
			ret = mprotect(region + off + half, half, PROT_READ);
			break;
		case MTHP_HALF_MOVED:
			return mremap(region + half, MTHP_REGION / 2,
				      MTHP_REGION / 2, MREMAP_MAYMOVE | MREMAP_FIXED,
				      region2) == region2 ? 0 : -errno;
		case MTHP_HALF_PAGED_OUT:
			ret = sr_page_out(region + off, half);
			break;
		}
	}
	return ret == -1 ? -errno : ret;
}

static const struct sr_workload workloads[] = {
	{ "anon", anon_step, SR_SETTLE_UNMAP_VDSO },
	{ "cow", cow_step, SR_SETTLE_UNMAP_VDSO },
	{ "file", file_step, SR_SETTLE_UNMAP_VDSO },
	{ "hugetlb", hugetlb_step, SR_SETTLE_UNMAP_VDSO },
	{ "free_lock", free_lock_step, SR_SETTLE_UNMAP_VDSO },
	{ "thp", thp_step, SR_SETTLE_UNMAP_VDSO | SR_SETTLE_THP },
	{ "pageout", pageout_step, SR_SETTLE_UNMAP_VDSO },
	{ "mthp", mthp_step, SR_SETTLE_UNMAP_VDSO | SR_SETTLE_THP },
	{}
};

SR_TARGET_MAIN(workloads)

/* --- 4 kB pages --- */

FIXTURE(rollup) {
	struct sr_target t;
	int fd;
};

FIXTURE_SETUP(rollup)
{
	self->t.pid = -1;
	self->fd = -1;
}

FIXTURE_TEARDOWN(rollup)
{
}

/*
 * Start workload @name with @arg, run step 1, read @before, run step
 * @step, read @after; the quiescent totals must be summed smaps.
 */
static void two_steps(struct __test_metadata *_metadata, struct sr_target *t,
		      const char *name, long arg, int step,
		      const long long *want)
{
	struct sr_rollup before, after;

	sr_assert_start(_metadata, t, name, arg);
	sr_assert_step(_metadata, t, 1, NULL);
	sr_assert_read(_metadata, t->pid, &before);
	sr_assert_step(_metadata, t, step, NULL);
	sr_assert_read(_metadata, t->pid, &after);
	sr_expect_delta(_metadata, &before, &after, want);
	sr_expect_rollup_is_smaps_sum(_metadata, t->pid);
}

TEST_F(rollup, private_anon_counts_touched_part_only)
{
	long long want[SR_NR_FIELDS];

	sr_want_private_anon(want, 16 * SR_KB(MIB));
	want[SR_REFERENCED] = 16 * SR_KB(MIB);
	two_steps(_metadata, &self->t, "anon", 0, 2, want);
}

/* The child copies every page: the target's turn private, Pss doubles. */
TEST_F(rollup, cow_pages_turn_private_when_child_writes)
{
	long long want[SR_NR_FIELDS];

	sr_want_anon_unshared(want, REGION_KB);
	two_steps(_metadata, &self->t, "cow", 0, 2, want);
}

/* The child copies all but one page, which stays shared amid private ones. */
TEST_F(rollup, cow_a_page_left_shared_amid_private_ones_counts_half)
{
	const long long page_kb = SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];

	sr_want_anon_unshared(want, REGION_KB - page_kb);
	two_steps(_metadata, &self->t, "cow", 1, 2, want);
}

/* mlock() populates a private writable mapping by writing it. */
TEST_F(rollup, mlock_counts_locked)
{
	long long want[SR_NR_FIELDS];

	sr_want_private_anon(want, REGION_KB);
	want[SR_LOCKED] = REGION_KB;
	two_steps(_metadata, &self->t, "free_lock", 0, 3, want);
}

/* MADV_FREE cleans the pages; they stay until reclaim wants them. */
TEST_F(rollup, madv_free_counts_lazyfree)
{
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	want[SR_LAZYFREE] = REGION_KB;
	want[SR_PSS_DIRTY] = -REGION_KB;
	want[SR_PRIVATE_DIRTY] = -REGION_KB;
	want[SR_PRIVATE_CLEAN] = REGION_KB;
	two_steps(_metadata, &self->t, "free_lock", 1, 2, want);
}

/* Page cache that is not shmem (ramfs: dirty), read through a private mapping. */
TEST_F(rollup, file_read_through_counts_pss_file)
{
	long long want[SR_NR_FIELDS];

	self->fd = sr_ramfs_file(REGION);
	if (self->fd < 0)
		SKIP(return, "cannot mount a ramfs (needs root): %s", strerror(errno));
	sr_delta_init(want);
	want[SR_RSS] = REGION_KB;
	want[SR_PSS] = REGION_KB;
	want[SR_PSS_FILE] = REGION_KB;
	want[SR_PSS_DIRTY] = REGION_KB;
	want[SR_PRIVATE_DIRTY] = REGION_KB;
	two_steps(_metadata, &self->t, "file", -self->fd, 2, want);
}

TEST_F(rollup, memfd_written_by_sole_mapper_counts_private_shmem)
{
	long long want[SR_NR_FIELDS];

	self->fd = memfd_create("smaps_rollup", 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, ftruncate(self->fd, REGION));
	sr_want_private_shmem(want, REGION_KB);
	two_steps(_metadata, &self->t, "file", self->fd, 3, want);
}

TEST_F(rollup, hugetlb_private_counts_private_hugetlb_not_rss)
{
	long long want[SR_NR_FIELDS];
	long kb = sr_meminfo_kb("Hugepagesize:");

	if (kb <= 0 || sr_meminfo_kb("HugePages_Free:") < 1)
		SKIP(return, "no free huge page (CONFIG_HUGETLBFS? vm.nr_hugepages?)");
	sr_delta_init(want);
	want[SR_REFERENCED] = 0;
	want[SR_PRIVATE_HUGETLB] = kb;
	two_steps(_metadata, &self->t, "hugetlb", kb << 10, 2, want);
}

/* --- THP and swap --- */

TEST_F(rollup, thp_counts_anon_huge_pages)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	struct sr_smaps s;
	char buf[256];
	long pmd = 0;

	if (sr_read_path(SR_THP_DIR "enabled", buf, sizeof(buf)) < 0)
		SKIP(return, "no transparent huge pages (CONFIG_TRANSPARENT_HUGEPAGE)");
	if (strstr(buf, "[never]"))
		SKIP(return, "transparent huge pages are disabled (enabled: never)");
	ASSERT_EQ(0, sr_read_long(SR_THP_DIR "hpage_pmd_size", &pmd));
	sr_assert_start(_metadata, &self->t, "thp", pmd);
	sr_assert_step(_metadata, &self->t, 1, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &after);
	ASSERT_EQ(0, sr_sum_smaps(self->t.pid, &s));
	if (!s.kb[SR_ANON_HUGE_PAGES])
		SKIP(return, "the kernel found no free huge page (fragmented memory?)");
	sr_want_private_anon(want, SR_KB(pmd));
	want[SR_ANON_HUGE_PAGES] = SR_KB(pmd);
	sr_expect_delta(_metadata, &before, &after, want);
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

/* Is there less than twice @kb of swap free? */
static bool swap_short(long long kb)
{
	return sr_meminfo_kb("SwapFree:") < 2 * kb;
}

TEST_F(rollup, pageout_anon_counts_swap_and_swap_pss)
{
	long long want[SR_NR_FIELDS];

	if (swap_short(REGION_KB))
		SKIP(return, "less than %lld kB of swap free (swapon a zram device)",
		     2 * REGION_KB);
	sr_want_private_anon(want, -REGION_KB);
	want[SR_SWAP] = REGION_KB;
	want[SR_SWAP_PSS] = REGION_KB;
	two_steps(_metadata, &self->t, "pageout", -1, 2, want);
}

/* Stock adds a shmem object's swapped pages to Swap but never to SwapPss. */
TEST_F(rollup, pageout_shmem_counts_swap_not_swap_pss)
{
	long long want[SR_NR_FIELDS];

	if (swap_short(REGION_KB))
		SKIP(return, "less than %lld kB of swap free (swapon a zram device)",
		     2 * REGION_KB);
	self->fd = memfd_create("smaps_rollup-swap", 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, ftruncate(self->fd, REGION));
	sr_want_private_shmem(want, -REGION_KB);
	want[SR_SWAP] = REGION_KB;
	two_steps(_metadata, &self->t, "pageout", self->fd, 2, want);
}

/* --- 64 KiB folios (mTHP), counted a run of PTEs at a time --- */

#define MTHP_DIR	SR_THP_DIR "hugepages-64kB/"

FIXTURE(mthp) {
	struct sr_target t;
	char pmd_path[96], pmd[16], mthp[16];	/* to restore, "" if untouched */
};

/* 64 KiB folios for every anonymous fault, PMD-sized ones for none. */
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
		SKIP(return, "no %senabled: no 64 KiB THP (6.8 or later)", MTHP_DIR);
	if (geteuid())
		SKIP(return, "allocating 64 KiB folios needs root, to set %senabled",
		     MTHP_DIR);
	ASSERT_EQ(0, sr_read_long(SR_THP_DIR "hpage_pmd_size", &pmd));
	snprintf(self->pmd_path, sizeof(self->pmd_path),
		 SR_THP_DIR "hugepages-%ldkB/enabled", pmd >> 10);
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
 * Run workload "mthp" with @op, and expect the change @want.  The step
 * that faults the region in must get MTHP_FOLIOS folios of 64 KiB (the
 * kernel's anon_fault_alloc), none falling back to smaller ones, or the
 * test skips.
 */
static void mthp_expect(struct __test_metadata *_metadata, struct sr_target *t,
			int op, const long long *want)
{
	long alloc[2] = { 0, 0 }, fallback[2] = { 0, 0 };
	struct sr_rollup before, after;
	int step, i, ret = 0;

	sr_assert_start(_metadata, t, "mthp", op);
	for (step = 1; step <= 2; step++) {
		for (i = 0; i < 2; i++) {
			ASSERT_EQ(0, sr_read_long(MTHP_DIR "stats/anon_fault_alloc",
						  &alloc[i]));
			ASSERT_EQ(0, sr_read_long(MTHP_DIR "stats/anon_fault_fallback",
						  &fallback[i]));
			if (!i)
				ret = sr_target_step(t, step, NULL);
		}
		ASSERT_EQ(0, ret) TH_LOG("target step %d: %s", step, strerror(-ret));
		if (step == (op == MTHP_WRITTEN ? 2 : 1) &&
		    (alloc[1] - alloc[0] < (long)MTHP_FOLIOS || fallback[1] > fallback[0]))
			SKIP(return,
			     "%ld folios of 64 KiB allocated for %lu, %ld fell back to smaller ones (memory fragmented?)",
			     alloc[1] - alloc[0], MTHP_FOLIOS, fallback[1] - fallback[0]);
		sr_assert_read(_metadata, t->pid, step == 1 ? &before : &after);
	}
	EXPECT_EQ(0, sr_rollup_consistent(&after)) TH_LOG("%s", sr_error);
	sr_expect_delta(_metadata, &before, &after, want);
	sr_expect_rollup_is_smaps_sum(_metadata, t->pid);
}

TEST_F(mthp, written_folios_count_as_private_pages)
{
	long long want[SR_NR_FIELDS];

	sr_want_private_anon(want, MTHP_KB);
	want[SR_REFERENCED] = MTHP_KB;
	mthp_expect(_metadata, &self->t, MTHP_WRITTEN, want);
}

/* Shared with a child, folios count half; once it unmapped them, whole. */
TEST_F(mthp, folios_shared_with_a_child_count_half)
{
	long long want[SR_NR_FIELDS];

	sr_want_anon_unshared(want, MTHP_KB);
	mthp_expect(_metadata, &self->t, MTHP_CHILD_UNMAPS, want);
}

TEST_F(mthp, half_unmapped_folios_count_their_mapped_half)
{
	long long want[SR_NR_FIELDS];

	sr_want_private_anon(want, -MTHP_KB / 2);
	mthp_expect(_metadata, &self->t, MTHP_HALF_UNMAPPED, want);
}

/* Each folio is half in one VMA, half in the next: nothing changes. */
TEST_F(mthp, folios_split_by_mprotect_count_once)
{
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	mthp_expect(_metadata, &self->t, MTHP_HALF_PROTECTED, want);
}

/* Two folios are each half here, half moved away: nothing changes. */
TEST_F(mthp, folios_split_by_mremap_count_once)
{
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	mthp_expect(_metadata, &self->t, MTHP_HALF_MOVED, want);
}

/* The kernel splits each folio to page out its lower half. */
TEST_F(mthp, half_paged_out_folios_count_swap_exactly)
{
	long long want[SR_NR_FIELDS];

	if (swap_short(MTHP_KB))
		SKIP(return, "less than %lld kB of swap free (swapon a zram device)",
		     2 * MTHP_KB);
	sr_want_private_anon(want, -MTHP_KB / 2);
	want[SR_SWAP] = MTHP_KB / 2;
	want[SR_SWAP_PSS] = MTHP_KB / 2;
	mthp_expect(_metadata, &self->t, MTHP_HALF_PAGED_OUT, want);
}

TEST_HARNESS_MAIN
