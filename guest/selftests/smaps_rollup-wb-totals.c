// SPDX-License-Identifier: GPL-2.0
/*
 * Workbench (guest/selftests/, not sent): the cases of 4 kB pages that the
 * series' smaps_rollup-totals.c does not carry: sums over smaps of a mixed
 * target, of 20,480 VMAs and of small VMAs of every kind in one page
 * table; shared anonymous memory, file and shmem (memfd, tmpfs, SysV)
 * mapped by a second process, mlock() of some VMAs, Referenced of shmem
 * read by pread(), shared hugetlb pages.  Each test starts a target (see
 * smaps_rollup.h) and checks the change of every field that one step makes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/shm.h>

#include "smaps_rollup_wb.h"

#define MIB		(1024UL * 1024)
#define REGION		MIB		/* most workloads' region */
#define REGION_KB	SR_KB(REGION)

/* --- The workloads, run inside the target --- */

static char *region, *region2, *dummy;
static size_t region_len;
static struct sr_helper helper, helper2;

static int helper_read_region(int cmd)
{
	sr_touch(region, region_len, -1);
	return 0;
}

static int helper_write_region(int cmd)
{
	sr_touch(region, region_len, 2);
	return 0;
}

static int helper_idle(int cmd)
{
	return 0;
}

#define COW_KEPT	100	/* the page of REGION a "cow_one" child keeps */

/* Write every page of the region but page COW_KEPT. */
static int helper_write_all_but_one(int cmd)
{
	size_t page = getpagesize();

	sr_touch(region, COW_KEPT * page, 2);
	sr_touch(region + (COW_KEPT + 1) * page,
		 region_len - (COW_KEPT + 1) * page, 2);
	return 0;
}

/* 64 MiB mapped, then 16 MiB of it written. */
static int anon_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return sr_map_anon(&region, 64 * MIB, MAP_PRIVATE);
	sr_touch(region, 16 * MIB, 1);
	return 0;
}

/* A file (fd @arg) mapped private (step 1) or shared (step 3), then read. */
static int file_step(int step, long arg, unsigned long *val)
{
	if (step == 2) {
		sr_touch(region, REGION, -1);
		return 0;
	}
	return sr_mmap((void **)&region, REGION, PROT_READ,
		       step == 1 ? MAP_PRIVATE : MAP_SHARED, arg);
}

/*
 * Shared memory: fd @arg mapped (step 3), or SysV segment @arg attached
 * (step 1); then written (step 2) or only read (step 4, which returns the
 * address).
 */
static int shmem_step(int step, long arg, unsigned long *val)
{
	if (step == 2) {
		sr_touch(region, REGION, 1);
		return 0;
	}
	if (step == 1) {
		region = shmat(arg, NULL, 0);
		if (region == (void *)-1)
			return -errno;
		return sr_nohuge(region, REGION);
	}
	if (step == 4) {
		sr_touch(region, REGION, -1);
		*val = (unsigned long)region;
		return 0;
	}
	*val = 0;
	return sr_mmap((void **)&region, REGION, PROT_READ | PROT_WRITE,
		       MAP_SHARED, arg) ?: sr_nohuge(region, REGION);
}

/*
 * Write the @len bytes of the region, then fork a helper that maps them
 * too and does @op to them when told.
 */
static int write_and_fork(size_t len, int (*op)(int cmd))
{
	region_len = len;
	sr_touch(region, len, 1);
	return sr_helper_start(&helper, (unsigned long)region,
			       (unsigned long)region + len, op);
}

/* Shared anonymous memory written, then read by a forked helper too. */
static int shared_anon_step(int step, long arg, unsigned long *val)
{
	if (step == 2)
		return sr_helper_cmd(&helper, 1);
	return sr_map_anon(&region, REGION, MAP_SHARED) ?:
	       write_and_fork(REGION, helper_read_region);
}

/*
 * Private anonymous memory written, fork()ed, written by the child: all of
 * it, or (@arg 1) all but page COW_KEPT.
 */
static int cow_step(int step, long arg, unsigned long *val)
{
	if (step == 2)
		return sr_helper_cmd(&helper, 1);
	return sr_map_anon(&region, REGION, MAP_PRIVATE) ?:
	       write_and_fork(REGION, arg == 1 ? helper_write_all_but_one :
						 helper_write_region);
}

/* One hugetlb page of @arg bytes, private; then written. */
static int hugetlb_private_step(int step, long arg, unsigned long *val)
{
	if (step == 2) {
		sr_touch(region, arg, 1);
		return 0;
	}
	return sr_mmap((void **)&region, arg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1);
}

/* One hugetlb page of @arg bytes, shared and written; a helper reads it. */
static int hugetlb_shared_step(int step, long arg, unsigned long *val)
{
	if (step == 2)
		return sr_helper_cmd(&helper, 1);
	return sr_mmap((void **)&region, arg, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1) ?:
	       write_and_fork(arg, helper_read_region);
}

/* REGION written, then MADV_FREE. */
static int lazyfree_step(int step, long arg, unsigned long *val)
{
	int ret;

	if (step == 2) {
		if (madvise(region, REGION, MADV_FREE))
			return -errno;
		/* madvise() starts by draining this CPU's LRU batches. */
		return madvise(dummy, getpagesize(), MADV_FREE) ? -errno : 0;
	}
	ret = sr_pin_to_one_cpu() ?: sr_map_anon(&region, REGION, MAP_PRIVATE) ?:
	      sr_map_anon(&dummy, getpagesize(), MAP_PRIVATE);
	if (!ret)
		sr_touch(region, REGION, 1);
	return ret;
}

/* REGION mapped, then mlock()ed. */
static int mlock_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return sr_map_anon(&region, REGION, MAP_PRIVATE);
	return sr_lock_range(region, REGION);
}

#define LOCK_CHUNKS	6	/* of REGION bytes; the odd ones get locked */

/*
 * Step 1: LOCK_CHUNKS * REGION of private anonymous memory and REGION of
 * shared anonymous memory, all written; a helper maps the shared pages too,
 * so their Pss is half their Rss.  Step 2: mlock() the odd chunks, each
 * then a locked VMA right after an unlocked one, and the shared memory.
 */
static int mlock_some_step(int step, long arg, unsigned long *val)
{
	int i, ret;

	if (step == 2) {
		for (i = 1; i < LOCK_CHUNKS; i += 2) {
			ret = sr_lock_range(region + i * REGION, REGION);
			if (ret)
				return ret;
		}
		return sr_lock_range(region2, REGION);
	}
	ret = sr_map_anon(&region, LOCK_CHUNKS * REGION, MAP_PRIVATE) ?:
	      sr_map_anon(&region2, REGION, MAP_SHARED);
	if (ret)
		return ret;
	sr_touch(region, LOCK_CHUNKS * REGION, 1);
	sr_touch(region2, REGION, 2);
	/* Settling, the helper maps the shared pages and copies the rest. */
	return sr_helper_start(&helper, 0, 0, helper_idle);
}

/* @arg pages written, then every other one made read-only: @arg VMAs. */
static int many_vmas_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return sr_map_anon(&region, arg * getpagesize(), MAP_PRIVATE);
	return sr_write_and_split(region, arg);
}

/*
 * What one page table maps: a page of entries the size of a long (but on
 * 32-bit x86 with PAE, where this is twice the 2 MiB and still aligned).
 */
static size_t table_bytes(void)
{
	size_t page = getpagesize();

	return page * (page / sizeof(long));
}

/* One page (or @pages) of @fd, or anonymous, at page @i of @base. */
static int map_at(char *base, long i, long pages, int prot, int flags, int fd)
{
	size_t page = getpagesize();

	if (fd < 0)
		flags |= MAP_ANONYMOUS;
	if (mmap(base + i * page, pages * page, prot, flags | MAP_FIXED, fd,
		 0) == MAP_FAILED)
		return -errno;
	return fd < 0 ? sr_nohuge(base + i * page, pages * page) : 0;
}

/*
 * Step 1: reserve what three page tables map, PROT_NONE.
 * Step 2: in the page table after the first boundary, small VMAs of every
 * kind side by side, each the neighbour of a piece of the reservation (a VMA
 * with no page): 16 private anonymous pages written, every other one made
 * read-only (16 VMAs); two pages of a memfd mapped shared and written, and
 * the same two mapped private, one read and one written (copy-on-write); a
 * page of the file @arg (the test binary) read; an mlock()ed anonymous page;
 * and four anonymous pages across the page table's end, written. 22 pages
 * anonymous, 26 resident, one locked.
 */
static int one_table_step(int step, long arg, unsigned long *val)
{
	size_t page = getpagesize(), table = table_bytes();
	char *t;
	int fd, ret;

	if (step == 1)
		return sr_mmap((void **)&region, 3 * table, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1);
	t = (char *)(((unsigned long)region + table - 1) & ~(table - 1));
	fd = memfd_create("smaps_rollup-one-table", 0);
	if (fd < 0 || ftruncate(fd, 2 * page))
		return -errno;
	ret = map_at(t, 0, 16, PROT_READ | PROT_WRITE, MAP_PRIVATE, -1) ?:
	      sr_write_and_split(t, 16) ?:
	      map_at(t, 17, 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd) ?:
	      map_at(t, 20, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd) ?:
	      map_at(t, 23, 1, PROT_READ, MAP_PRIVATE, arg) ?:
	      map_at(t, 25, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE, -1) ?:
	      map_at(t, table / page - 2, 4, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE, -1);
	close(fd);
	if (ret)
		return ret;
	sr_touch(t + 17 * page, 2 * page, 3);
	sr_touch(t + 20 * page, page, -1);
	sr_touch(t + 21 * page, page, 4);
	sr_touch(t + 23 * page, page, -1);
	sr_touch(t + 25 * page, page, 5);
	sr_touch(t + table - 2 * page, 4 * page, 6);
	return sr_lock_range(t + 25 * page, page);
}

/*
 * A bit of everything, with pages mapped 1, 2 and 3 times so that Pss has
 * fractions: private anonymous memory; a memfd mapped shared and written,
 * and mapped private, half read and a quarter written (copy-on-write);
 * the file @arg (the test binary, which the test maps too) read through;
 * shared anonymous memory, mlock()ed, that two helpers map as well.
 */
static int mix_step(int step, long arg, unsigned long *val)
{
	struct stat st;
	int ret, fd;
	char *file;

	ret = sr_map_anon(&region, REGION, MAP_PRIVATE);
	if (ret)
		return ret;
	sr_touch(region, REGION, 1);

	fd = memfd_create("smaps_rollup-mix", 0);
	if (fd < 0 || ftruncate(fd, REGION))
		return -errno;
	ret = sr_mmap((void **)&region2, REGION, PROT_READ | PROT_WRITE,
		      MAP_SHARED, fd) ?: sr_nohuge(region2, REGION);
	if (ret)
		return ret;
	sr_touch(region2, REGION, 3);
	ret = sr_mmap((void **)&dummy, REGION, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE, fd) ?: sr_nohuge(dummy, REGION);
	if (ret)
		return ret;
	sr_touch(dummy, REGION / 2, -1);
	sr_touch(dummy + REGION / 2, REGION / 4, 4);
	close(fd);

	if (fstat(arg, &st))
		return -errno;
	ret = sr_mmap((void **)&file, st.st_size, PROT_READ, MAP_PRIVATE, arg);
	if (ret)
		return ret;
	sr_touch(file, st.st_size, -1);

	region_len = REGION;
	ret = sr_map_anon(&region, REGION, MAP_SHARED);
	if (ret)
		return ret;
	sr_touch(region, REGION, 5);
	ret = sr_lock_range(region, REGION);
	if (ret)
		return ret;
	return sr_helper_start(&helper, 0, 0, helper_idle) ?:
	       sr_helper_start(&helper2, 0, 0, helper_idle);
}

static const struct sr_workload workloads[] = {
	{ "anon", anon_step, SR_SETTLE_UNMAP_VDSO },
	{ "file", file_step, SR_SETTLE_UNMAP_VDSO },
	{ "shmem", shmem_step, SR_SETTLE_UNMAP_VDSO },
	{ "shared_anon", shared_anon_step, SR_SETTLE_UNMAP_VDSO },
	{ "cow", cow_step, SR_SETTLE_UNMAP_VDSO },
	{ "hugetlb_private", hugetlb_private_step, SR_SETTLE_UNMAP_VDSO },
	{ "hugetlb_shared", hugetlb_shared_step, SR_SETTLE_UNMAP_VDSO },
	{ "lazyfree", lazyfree_step, SR_SETTLE_UNMAP_VDSO },
	{ "mlock", mlock_step, SR_SETTLE_UNMAP_VDSO },
	{ "mlock_some", mlock_some_step, SR_SETTLE_UNMAP_VDSO },
	{ "many_vmas", many_vmas_step, SR_SETTLE_UNMAP_VDSO },
	{ "one_table", one_table_step, SR_SETTLE_UNMAP_VDSO },
	{ "mix", mix_step, SR_SETTLE_UNMAP_VDSO },
	{}
};

SR_TARGET_MAIN(workloads)

/* --- Test-side helpers --- */

/*
 * Start the "mix" target and run its one step; skips when its mlock() is
 * refused, rather than test a mix without locked memory.
 */
static void start_mix(struct __test_metadata *_metadata, struct sr_target *t,
		      int exe)
{
	int ret;

	sr_assert_start(_metadata, t, "mix", exe);
	ret = sr_target_step(t, 1, NULL);
	if (sr_mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     REGION_KB, strerror(-ret));
	ASSERT_EQ(0, ret) TH_LOG("target step 1: %s", strerror(-ret));
}

FIXTURE(rollup) {
	struct sr_target t;
	int exe;		/* the test binary, for the "mix" target */
	long restore_max_map_count;
};

FIXTURE_SETUP(rollup)
{
	self->t.pid = -1;
	self->restore_max_map_count = -1;
	self->exe = open("/proc/self/exe", O_RDONLY);
	ASSERT_LE(0, self->exe);
}

FIXTURE_TEARDOWN_PARENT(rollup)
{
	if (self->restore_max_map_count > 0)
		sr_write_long("/proc/sys/vm/max_map_count",
			      self->restore_max_map_count);
}

/*
 * The change when a second task maps @kb of dirty shmem pages that were
 * mapped once: they turn shared, and their Pss halves.
 */
static void want_shared_by_two(long long *want, long long kb)
{
	sr_delta_init(want);
	want[SR_PSS] = -kb / 2;
	want[SR_PSS_DIRTY] = -kb / 2;
	want[SR_PSS_SHMEM] = -kb / 2;
	want[SR_PRIVATE_DIRTY] = -kb;
	want[SR_SHARED_DIRTY] = kb;
}

/* --- Sums and relations --- */

TEST_F(rollup, quiescent_fields_equal_summed_smaps)
{
	start_mix(_metadata, &self->t, self->exe);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

/*
 * The three Pss parts are rounded down separately from the same page
 * values Pss adds up, so Pss - 2 <= Pss_Anon + Pss_File + Pss_Shmem <= Pss.
 */
TEST_F(rollup, pss_parts_sum_to_pss)
{
	struct sr_rollup r;
	unsigned long long sum;

	start_mix(_metadata, &self->t, self->exe);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	sr_assert_read(_metadata, self->t.pid, &r);
	sum = r.kb[SR_PSS_ANON] + r.kb[SR_PSS_FILE] + r.kb[SR_PSS_SHMEM];
	EXPECT_LE(sum, r.kb[SR_PSS]);
	EXPECT_LE(r.kb[SR_PSS], sum + 2);
	/* The mix has all three kinds. */
	EXPECT_LT(0, r.kb[SR_PSS_ANON]);
	EXPECT_LT(0, r.kb[SR_PSS_FILE]);
	EXPECT_LT(0, r.kb[SR_PSS_SHMEM]);
}

TEST_F(rollup, fields_are_consistent)
{
	struct sr_rollup r;

	start_mix(_metadata, &self->t, self->exe);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	sr_assert_read(_metadata, self->t.pid, &r);
	EXPECT_EQ(0, sr_rollup_consistent(&r)) TH_LOG("%s", sr_error);
}

TEST_F_TIMEOUT(rollup, many_vmas_fields_equal_summed_smaps, 180)
{
	const long pages = 20480;
	const long long kb = pages * SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	struct sr_smaps s;
	long max = 0;

	ASSERT_EQ(0, sr_read_long("/proc/sys/vm/max_map_count", &max));
	if (max < pages + 1000) {
		if (sr_write_long("/proc/sys/vm/max_map_count", pages + 1000))
			SKIP(return, "vm.max_map_count %ld is below %ld and cannot be raised",
			     max, pages + 1000);
		self->restore_max_map_count = max;
	}
	sr_assert_two_steps(_metadata, &self->t, "many_vmas", pages,
			    &before, &after);
	ASSERT_EQ(0, sr_sum_smaps(self->t.pid, &s));
	ASSERT_LE(pages, s.nr_vmas);

	sr_want_private_anon(want, kb);
	sr_expect_delta(_metadata, &before, &after, want);
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

TEST_F(rollup, small_vmas_of_every_kind_in_one_page_table_equal_summed_smaps)
{
	const long long page_kb = SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	int ret;

	sr_assert_start(_metadata, &self->t, "one_table", self->exe);
	sr_assert_step(_metadata, &self->t, 1, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	ret = sr_target_step(&self->t, 2, NULL);
	if (sr_mlock_refused(ret))
		SKIP(return, "mlock() of a page failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     strerror(-ret));
	ASSERT_EQ(0, ret) TH_LOG("target step 2: %s", strerror(-ret));
	sr_assert_read(_metadata, self->t.pid, &after);

	for (int f = 0; f < SR_NR_FIELDS; f++)
		want[f] = SR_ANY;
	want[SR_RSS] = 26 * page_kb;
	want[SR_ANONYMOUS] = 22 * page_kb;
	want[SR_LOCKED] = page_kb;
	want[SR_SWAP] = 0;
	sr_expect_delta(_metadata, &before, &after, want);
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

/* --- Anonymous memory --- */

TEST_F(rollup, shared_anon_second_mapper_halves_pss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	/* Written, a helper forked; then the helper maps the pages too. */
	sr_assert_two_steps(_metadata, &self->t, "shared_anon", 0,
			    &before, &after);

	/* Shared anonymous memory is shmem. */
	want_shared_by_two(want, REGION_KB);
	sr_expect_delta(_metadata, &before, &after, want);
}

/*
 * Locked adds up the Pss of each locked page.  Here the target has locked
 * half of its private chunks, each a VMA after an unlocked one, and shared
 * memory whose Pss is half its Rss; it has more memory unlocked.  4.14
 * printed the Pss total as Locked, and then added the running Pss total
 * at each locked VMA.
 */
TEST_F(rollup, mlock_of_some_vmas_counts_their_pss_as_locked)
{
	const long long locked = LOCK_CHUNKS / 2 * REGION_KB + REGION_KB / 2;
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	int ret;

	sr_assert_start(_metadata, &self->t, "mlock_some", 0);
	sr_assert_step(_metadata, &self->t, 1, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	ret = sr_target_step(&self->t, 2, NULL);
	if (sr_mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     locked + REGION_KB / 2, strerror(-ret));
	ASSERT_EQ(0, ret);
	sr_assert_read(_metadata, self->t.pid, &after);

	/* Every page was present already: only Locked moves. */
	sr_delta_init(want);
	want[SR_LOCKED] = locked;
	sr_expect_delta(_metadata, &before, &after, want);
	EXPECT_EQ(0, before.kb[SR_LOCKED]);
	EXPECT_EQ(locked, after.kb[SR_LOCKED]);
	/* Pss has the unlocked chunks too, and Rss all of the shared pages. */
	EXPECT_LE(locked + LOCK_CHUNKS / 2 * REGION_KB, after.kb[SR_PSS]);
	EXPECT_LT(after.kb[SR_PSS], after.kb[SR_RSS]);
}

/* --- File-backed memory (page cache that is not shmem) --- */

FIXTURE(file) {
	struct sr_target t;
	int fd;
};

FIXTURE_VARIANT(file) {
	int map_flags;
	int map_step;
};

FIXTURE_VARIANT_ADD(file, private) {
	.map_flags = MAP_PRIVATE,
	.map_step = 1,
};

FIXTURE_VARIANT_ADD(file, shared) {
	.map_flags = MAP_SHARED,
	.map_step = 3,
};

FIXTURE_SETUP(file)
{
	const char *where;

	self->t.pid = -1;
	self->fd = sr_open_private_file(false, REGION, &where);
	if (self->fd < 0)
		SKIP(return, "no non-tmpfs file system to write to, no ramfs (root)");
	TH_LOG("file on %s", where);
}

FIXTURE_TEARDOWN(file)
{
}

/*
 * Whether these page cache pages are dirty depends on the file system
 * (ramfs pages always are; a synced disk file's are not), so only the sum
 * of the clean and dirty fields is checked.
 */
static void expect_file_delta(struct __test_metadata *_metadata,
			      const struct sr_rollup *before,
			      const struct sr_rollup *after,
			      long long pss, long long private, long long shared)
{
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	want[SR_PSS_DIRTY] = SR_ANY;
	want[SR_PRIVATE_CLEAN] = SR_ANY;
	want[SR_PRIVATE_DIRTY] = SR_ANY;
	want[SR_SHARED_CLEAN] = SR_ANY;
	want[SR_SHARED_DIRTY] = SR_ANY;
	want[SR_RSS] = private + shared;
	want[SR_PSS] = pss;
	want[SR_PSS_FILE] = pss;
	sr_expect_delta(_metadata, before, after, want);
	EXPECT_EQ(private, sr_delta(before, after, SR_PRIVATE_CLEAN) +
			   sr_delta(before, after, SR_PRIVATE_DIRTY));
	EXPECT_EQ(shared, sr_delta(before, after, SR_SHARED_CLEAN) +
			  sr_delta(before, after, SR_SHARED_DIRTY));
}

TEST_F(file, read_through_counts_pss_file)
{
	struct sr_rollup before, after;

	sr_assert_start(_metadata, &self->t, "file", self->fd);
	sr_assert_step(_metadata, &self->t, variant->map_step, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &after);
	expect_file_delta(_metadata, &before, &after, REGION_KB, REGION_KB, 0);
}

TEST_F(file, second_mapper_halves_pss)
{
	struct sr_rollup before, after;
	char *p;

	sr_assert_start(_metadata, &self->t, "file", self->fd);
	sr_assert_step(_metadata, &self->t, variant->map_step, NULL);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	p = mmap(NULL, REGION, PROT_READ, variant->map_flags, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	sr_touch(p, REGION, -1);
	sr_assert_read(_metadata, self->t.pid, &after);
	expect_file_delta(_metadata, &before, &after, -REGION_KB / 2,
			  -REGION_KB, REGION_KB);
}

/* --- Shared memory: memfd, a tmpfs file, SysV --- */

enum { SHMEM_MEMFD, SHMEM_TMPFS, SHMEM_SYSV };

/*
 * The REGION bytes of shared memory a test maps: a memfd or a tmpfs file
 * (@fd), or a SysV segment (@shmid); the other is -1.  Skips without one.
 */
static void shmem_open(struct __test_metadata *_metadata, int kind, int *fd,
		       int *shmid)
{
	const char *where;

	*fd = -1;
	*shmid = -1;
	switch (kind) {
	case SHMEM_MEMFD:
		*fd = memfd_create("smaps_rollup", 0);
		if (*fd < 0)
			SKIP(return, "memfd_create(): %s (CONFIG_MEMFD_CREATE?)",
			     strerror(errno));
		ASSERT_EQ(0, ftruncate(*fd, REGION));
		break;
	case SHMEM_TMPFS:
		*fd = sr_open_private_file(true, REGION, &where);
		if (*fd < 0)
			SKIP(return, "no writable tmpfs, and cannot mount one (needs root)");
		break;
	case SHMEM_SYSV:
		*shmid = shmget(IPC_PRIVATE, REGION, IPC_CREAT | 0600);
		if (*shmid < 0)
			SKIP(return, "shmget(): %s (CONFIG_SYSVIPC? kernel.shmmax?)",
			     strerror(errno));
		break;
	}
}

/* Map (fd >= 0) or attach (the SysV segment @shmid) in a new target. */
static void start_shmem_target(struct __test_metadata *_metadata,
			       struct sr_target *t, int fd, int shmid)
{
	sr_assert_start(_metadata, t, "shmem", shmid >= 0 ? shmid : fd);
	/* Step 1 attaches the SysV segment, step 3 maps the fd. */
	sr_assert_step(_metadata, t, shmid >= 0 ? 1 : 3, NULL);
}

/*
 * Map the @len bytes at @off once more, in this process, read-only, and
 * read them: mmap() of the fd, or shmat() of the segment, which attaches
 * all of it, and munmap() of all the rest of it.
 */
static char *map_again(struct __test_metadata *_metadata, int fd, int shmid,
		       size_t off, size_t len)
{
	char *p;

	if (fd >= 0) {
		p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
		ASSERT_NE(MAP_FAILED, p);
	} else {
		p = shmat(shmid, NULL, SHM_RDONLY);
		ASSERT_NE((void *)-1, p);
		if (off)
			ASSERT_EQ(0, munmap(p, off));
		if (off + len < REGION)
			ASSERT_EQ(0, munmap(p + off + len, REGION - off - len));
		p += off;
	}
	sr_touch(p, len, -1);
	return p;
}

/*
 * Write all REGION bytes, but not through the target: with write() to the
 * fd, or through an attach of the segment that is detached again.
 */
static void write_not_through_target(struct __test_metadata *_metadata,
				     int fd, int shmid)
{
	static char buf[REGION];
	char *p;

	memset(buf, 0x3c, sizeof(buf));
	if (fd >= 0) {
		ASSERT_EQ(REGION, pwrite(fd, buf, REGION, 0));
		return;
	}
	p = shmat(shmid, NULL, 0);
	ASSERT_NE((void *)-1, p);
	ASSERT_EQ(0, sr_nohuge(p, REGION));
	memcpy(p, buf, REGION);
	ASSERT_EQ(0, shmdt(p));
}

FIXTURE(shmem) {
	struct sr_target t;
	int fd, shmid;
};

FIXTURE_VARIANT(shmem) {
	int kind;
};

FIXTURE_VARIANT_ADD(shmem, memfd) {
	.kind = SHMEM_MEMFD,
};

FIXTURE_VARIANT_ADD(shmem, tmpfs) {
	.kind = SHMEM_TMPFS,
};

FIXTURE_VARIANT_ADD(shmem, sysv) {
	.kind = SHMEM_SYSV,
};

FIXTURE_SETUP(shmem)
{
	self->t.pid = -1;
	shmem_open(_metadata, variant->kind, &self->fd, &self->shmid);
}

FIXTURE_TEARDOWN_PARENT(shmem)
{
	if (self->shmid >= 0)
		shmctl(self->shmid, IPC_RMID, NULL);
}

TEST_F(shmem, sole_mapper_written_counts_private_shmem)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	sr_assert_read(_metadata, self->t.pid, &before);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &after);

	sr_want_private_shmem(want, REGION_KB);
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(shmem, second_mapper_halves_pss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	map_again(_metadata, self->fd, self->shmid, 0, REGION);
	sr_assert_read(_metadata, self->t.pid, &after);

	want_shared_by_two(want, REGION_KB);
	sr_expect_delta(_metadata, &before, &after, want);
}

/*
 * The mapcount of one page amid pages mapped once rises when the test maps
 * it too, and falls back when it unmaps it: each time only that page moves
 * between Private_Dirty and Shared_Dirty, and its Pss halves and comes back.
 */
TEST_F(shmem, a_page_mapped_again_amid_private_ones_counts_half)
{
	const size_t page = getpagesize();
	const long long kb = SR_KB(page);
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after, again;
	char *p;

	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	p = map_again(_metadata, self->fd, self->shmid, 100 * page, page);
	sr_assert_read(_metadata, self->t.pid, &after);
	ASSERT_EQ(0, munmap(p, page));
	sr_assert_read(_metadata, self->t.pid, &again);

	want_shared_by_two(want, kb);
	sr_expect_delta(_metadata, &before, &after, want);
	sr_delta_init(want);
	sr_expect_delta(_metadata, &before, &again, want);
}

/*
 * Pages written, but not through the target, and then only read by it:
 * each of its entries is young but clean, and the page is dirty, so the
 * pages count as dirty.
 */
TEST_F(shmem, written_pages_mapped_by_clean_entries_count_dirty)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	write_not_through_target(_metadata, self->fd, self->shmid);
	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	sr_assert_read(_metadata, self->t.pid, &before);
	sr_assert_step(_metadata, &self->t, 4, NULL);	/* read through */
	sr_assert_read(_metadata, self->t.pid, &after);

	sr_want_private_shmem(want, REGION_KB);
	sr_expect_delta(_metadata, &before, &after, want);
}

/* --- Shared memory that read() reaches: memfd, a tmpfs file --- */

FIXTURE(shmem_file) {
	struct sr_target t;
	int fd, shmid;		/* shmid: -1 */
};

FIXTURE_VARIANT(shmem_file) {
	int kind;
};

FIXTURE_VARIANT_ADD(shmem_file, memfd) {
	.kind = SHMEM_MEMFD,
};

FIXTURE_VARIANT_ADD(shmem_file, tmpfs) {
	.kind = SHMEM_TMPFS,
};

FIXTURE_SETUP(shmem_file)
{
	self->t.pid = -1;
	shmem_open(_metadata, variant->kind, &self->fd, &self->shmid);
}

FIXTURE_TEARDOWN(shmem_file)
{
}

/*
 * The target reads the pages through its mapping: its entries are young,
 * the pages count as referenced.  After clear_refs the entries are old,
 * and pread() marks the pages referenced: they count as referenced again.
 * Referenced is read from the mapping's smaps entry (clear_refs ages the
 * target's other pages too, which it touches again as it runs).
 */
TEST_F(shmem_file, pages_read_by_pread_count_referenced_though_entries_are_old)
{
	static char buf[REGION];
	unsigned long addr;
	char path[64];

	write_not_through_target(_metadata, self->fd, self->shmid);
	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	sr_assert_step(_metadata, &self->t, 4, &addr);	/* read through */
	EXPECT_EQ(REGION_KB, sr_smaps_vma_field(self->t.pid, addr, "Referenced:"));

	sr_path(path, sizeof(path), self->t.pid, "clear_refs");
	if (sr_write_long(path, 1))
		SKIP(return, "cannot write %s", path);
	ASSERT_EQ(0, sr_smaps_vma_field(self->t.pid, addr, "Referenced:"));
	ASSERT_EQ(REGION, pread(self->fd, buf, REGION, 0));
	EXPECT_EQ(REGION_KB, sr_smaps_vma_field(self->t.pid, addr, "Referenced:"));
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

/* --- hugetlb --- */

FIXTURE(hugetlb) {
	struct sr_target t;
	char nr_path[128];
	long hp_kb, restore_nr;
};

#define HP_DIR "/sys/kernel/mm/hugepages/hugepages-%ldkB/%s"

static long hp_read(long hp_kb, const char *file)
{
	char path[128];
	long val = -1;

	snprintf(path, sizeof(path), HP_DIR, hp_kb, file);
	return sr_read_long(path, &val) ? -1 : val;
}

/*
 * Make sure a huge page is free.  nr_hugepages counts surplus pages too,
 * and a page a previous test's target still holds (it dies asynchronously)
 * is surplus if that test lowered the pool meanwhile: so the pool size to
 * restore is nr_hugepages - surplus_hugepages.  Raising nr_hugepages to
 * nr + 1 turns surplus pages into pool pages and adds one.
 */
FIXTURE_SETUP(hugetlb)
{
	long nr, surplus;

	self->t.pid = -1;
	self->restore_nr = -1;
	self->hp_kb = sr_meminfo_kb("Hugepagesize:");
	if (self->hp_kb <= 0)
		SKIP(return, "no hugetlb support (CONFIG_HUGETLBFS)");
	snprintf(self->nr_path, sizeof(self->nr_path), HP_DIR, self->hp_kb,
		 "nr_hugepages");
	if (hp_read(self->hp_kb, "free_hugepages") >= 1)
		return;
	nr = hp_read(self->hp_kb, "nr_hugepages");
	surplus = hp_read(self->hp_kb, "surplus_hugepages");
	ASSERT_LE(0, nr);
	ASSERT_LE(0, surplus);
	if (sr_write_long(self->nr_path, nr + 1))
		SKIP(return, "no free %ld kB huge page, and cannot add one (needs root)",
		     self->hp_kb);
	self->restore_nr = nr - surplus;
	if (hp_read(self->hp_kb, "free_hugepages") < 1) {
		sr_write_long(self->nr_path, self->restore_nr);
		self->restore_nr = -1;
		SKIP(return, "the kernel could not allocate a %ld kB huge page",
		     self->hp_kb);
	}
}

FIXTURE_TEARDOWN_PARENT(hugetlb)
{
	if (self->restore_nr >= 0)
		sr_write_long(self->nr_path, self->restore_nr);
}

TEST_F(hugetlb, shared_with_child_counts_shared_hugetlb)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	/* Written, a helper forked; then the helper maps it too. */
	sr_assert_two_steps(_metadata, &self->t, "hugetlb_shared",
			    self->hp_kb << 10, &before, &after);

	sr_delta_init(want);
	want[SR_REFERENCED] = 0;
	want[SR_PRIVATE_HUGETLB] = -self->hp_kb;
	want[SR_SHARED_HUGETLB] = self->hp_kb;
	sr_expect_delta(_metadata, &before, &after, want);
	EXPECT_EQ(self->hp_kb, after.kb[SR_SHARED_HUGETLB]);
	EXPECT_EQ(0, after.kb[SR_PRIVATE_HUGETLB]);
}

TEST_HARNESS_MAIN
