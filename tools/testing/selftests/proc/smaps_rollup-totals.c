// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup totals: they equal the sums over /proc/PID/smaps,
 * and each kind of memory moves exactly the fields it should by exactly
 * the amount a workload makes it.
 *
 * Each test starts a target (see smaps_rollup.h), reads smaps_rollup
 * before and after one workload step, and checks the change of every
 * field.  Sizes are multiples of 4 kB pages, so expected changes are exact.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/vfs.h>
#include <time.h>

#include "smaps_rollup.h"

#define MIB		(1024UL * 1024)
#define REGION		MIB		/* most workloads' region */
#define REGION_KB	SR_KB(REGION)

/* --- The workloads, run inside the target --- */

static char *region, *region2, *dummy;
static size_t region_len;
static struct sr_helper helper, helper2;

static int nohuge(void *addr, size_t len)
{
	/* Keep khugepaged and THP faults out of 4 kB-page workloads. */
	return madvise(addr, len, MADV_NOHUGEPAGE) ? -errno : 0;
}

static int map_anon(char **addr, size_t len, int flags)
{
	int ret = sr_mmap((void **)addr, len, PROT_READ | PROT_WRITE,
			  flags | MAP_ANONYMOUS, -1);

	return ret ?: nohuge(*addr, len);
}

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

/* 64 MiB mapped, then 16 MiB of it written. */
static int anon_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return map_anon(&region, 64 * MIB, MAP_PRIVATE);
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

/* Shared memory: fd @arg, or SysV segment @arg if step 1 is 1; written. */
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
		return nohuge(region, REGION);
	}
	return sr_mmap((void **)&region, REGION, PROT_READ | PROT_WRITE,
		       MAP_SHARED, arg) ?: nohuge(region, REGION);
}

/* Shared anonymous memory written, then read by a forked helper too. */
static int shared_anon_step(int step, long arg, unsigned long *val)
{
	int ret;

	if (step == 2)
		return sr_helper_cmd(&helper, 1);
	region_len = REGION;
	ret = map_anon(&region, REGION, MAP_SHARED);
	if (ret)
		return ret;
	sr_touch(region, REGION, 1);
	return sr_helper_start(&helper, (unsigned long)region,
			       (unsigned long)region + REGION,
			       helper_read_region);
}

/* Private anonymous memory written, fork()ed, written by the child. */
static int cow_step(int step, long arg, unsigned long *val)
{
	int ret;

	if (step == 2)
		return sr_helper_cmd(&helper, 1);
	region_len = REGION;
	ret = map_anon(&region, REGION, MAP_PRIVATE);
	if (ret)
		return ret;
	sr_touch(region, REGION, 1);
	return sr_helper_start(&helper, (unsigned long)region,
			       (unsigned long)region + REGION,
			       helper_write_region);
}

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
	int ret;

	if (step == 2)
		return sr_helper_cmd(&helper, 1);
	region_len = arg;
	ret = sr_mmap((void **)&region, arg, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1);
	if (ret)
		return ret;
	sr_touch(region, arg, 1);
	return sr_helper_start(&helper, (unsigned long)region,
			       (unsigned long)region + arg,
			       helper_read_region);
}

#define KSM_PAGES	64

/* KSM_PAGES identical pages (unlike any other process's), MADV_MERGEABLE. */
static int ksm_step(int step, long arg, unsigned long *val)
{
	size_t page = getpagesize(), i;
	int ret;

	ret = map_anon(&region, KSM_PAGES * page, MAP_PRIVATE);
	if (ret)
		return ret;
	for (i = 0; i < KSM_PAGES; i++) {
		memset(region + i * page, 0x5a, page);
		*(pid_t *)(region + i * page) = getpid();
	}
	return madvise(region, KSM_PAGES * page, MADV_MERGEABLE) ? -errno : 0;
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
	ret = sr_pin_to_one_cpu(NULL) ?: map_anon(&region, REGION, MAP_PRIVATE) ?:
	      map_anon(&dummy, getpagesize(), MAP_PRIVATE);
	if (!ret)
		sr_touch(region, REGION, 1);
	return ret;
}

/*
 * mlock(), raising RLIMIT_MEMLOCK to its hard limit if that helps: 0 or
 * -errno (ENOMEM or EPERM for a limit too low without CAP_IPC_LOCK).
 */
static int lock_range(void *addr, size_t len)
{
	struct rlimit rl;
	int err;

	if (!mlock(addr, len))
		return 0;
	err = errno;
	if ((err != ENOMEM && err != EPERM) || getrlimit(RLIMIT_MEMLOCK, &rl) ||
	    rl.rlim_cur == rl.rlim_max)
		return -err;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return -err;
	return mlock(addr, len) ? -errno : 0;
}

/* REGION mapped, then mlock()ed. */
static int mlock_step(int step, long arg, unsigned long *val)
{
	if (step == 1)
		return map_anon(&region, REGION, MAP_PRIVATE);
	return lock_range(region, REGION);
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
			ret = lock_range(region + i * REGION, REGION);
			if (ret)
				return ret;
		}
		return lock_range(region2, REGION);
	}
	ret = map_anon(&region, LOCK_CHUNKS * REGION, MAP_PRIVATE) ?:
	      map_anon(&region2, REGION, MAP_SHARED);
	if (ret)
		return ret;
	sr_touch(region, LOCK_CHUNKS * REGION, 1);
	sr_touch(region2, REGION, 2);
	/* Settling, the helper maps the shared pages and copies the rest. */
	return sr_helper_start(&helper, 0, 0, helper_idle);
}

/* Private anonymous (arg < 0) or memfd @arg memory written, then paged out. */
static int pageout_step(int step, long arg, unsigned long *val)
{
	int ret;

	if (step == 2)
		return madvise(region, REGION, MADV_PAGEOUT) ? -errno : 0;
	ret = sr_pin_to_one_cpu(NULL);
	if (!ret && arg < 0)
		ret = map_anon(&region, REGION, MAP_PRIVATE);
	else if (!ret)
		ret = sr_mmap((void **)&region, REGION, PROT_READ | PROT_WRITE,
			      MAP_SHARED, arg) ?: nohuge(region, REGION);
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
		for (i = 0; i < 3; i++)
			if (madvise(swapped[i], REGION, MADV_PAGEOUT))
				return -errno;
		return 0;
	}
	ret = sr_pin_to_one_cpu(NULL) ?: map_anon(&swapped[0], REGION, MAP_PRIVATE);
	for (i = 1; !ret && i < 3; i++) {
		fd = memfd_create("smaps_rollup-swap", 0);
		if (fd < 0 || ftruncate(fd, REGION))
			return -errno;
		ret = sr_mmap((void **)&swapped[i], REGION,
			      PROT_READ | PROT_WRITE, MAP_SHARED, fd) ?:
		      nohuge(swapped[i], REGION);
		close(fd);
	}
	for (i = 0; !ret && i < 3; i++)
		sr_fill_distinct(swapped[i], REGION);
	return ret;
}

/* @arg pages written, then every other one made read-only: @arg VMAs. */
static int many_vmas_step(int step, long arg, unsigned long *val)
{
	size_t page = getpagesize(), i;

	if (step == 1)
		return map_anon(&region, arg * page, MAP_PRIVATE);
	sr_touch(region, arg * page, 1);
	for (i = 1; i < (size_t)arg; i += 2)
		if (mprotect(region + i * page, page, PROT_READ))
			return -errno;
	return 0;
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
	       sr_pin_to_one_cpu(NULL) : 0) ?:
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
	region_len = MTHP_REGION;
	/* Where MTHP_HALF_MOVED moves to; a page for MTHP_FREED to drain. */
	if (op == MTHP_HALF_MOVED)
		return sr_mmap((void **)&region2, MTHP_REGION / 2, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (op == MTHP_FREED)
		return map_anon(&dummy, getpagesize(), MAP_PRIVATE);
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
		for (off = 0; off < MTHP_REGION; off += MTHP)
			if (madvise(region + off, half, MADV_PAGEOUT))
				return -errno;
		return 0;
	case MTHP_FREED:
		if (madvise(region, MTHP_REGION, MADV_FREE))
			return -errno;
		/* madvise() starts by draining this CPU's LRU batches. */
		return madvise(dummy, getpagesize(), MADV_FREE) ? -errno : 0;
	case MTHP_LOCKED:
		return lock_range(region, MTHP_REGION);
	}
	return -EINVAL;
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

	ret = map_anon(&region, REGION, MAP_PRIVATE);
	if (ret)
		return ret;
	sr_touch(region, REGION, 1);

	fd = memfd_create("smaps_rollup-mix", 0);
	if (fd < 0 || ftruncate(fd, REGION))
		return -errno;
	ret = sr_mmap((void **)&region2, REGION, PROT_READ | PROT_WRITE,
		      MAP_SHARED, fd) ?: nohuge(region2, REGION);
	if (ret)
		return ret;
	sr_touch(region2, REGION, 3);
	ret = sr_mmap((void **)&dummy, REGION, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE, fd) ?: nohuge(dummy, REGION);
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
	ret = map_anon(&region, REGION, MAP_SHARED);
	if (ret)
		return ret;
	sr_touch(region, REGION, 5);
	ret = lock_range(region, REGION);
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
	{ "thp", thp_step, SR_SETTLE_UNMAP_VDSO | SR_SETTLE_THP },
	{ "hugetlb_private", hugetlb_private_step, SR_SETTLE_UNMAP_VDSO },
	{ "hugetlb_shared", hugetlb_shared_step, SR_SETTLE_UNMAP_VDSO },
	{ "ksm", ksm_step, SR_SETTLE_UNMAP_VDSO },
	{ "lazyfree", lazyfree_step, SR_SETTLE_UNMAP_VDSO },
	{ "mlock", mlock_step, SR_SETTLE_UNMAP_VDSO },
	{ "mlock_some", mlock_some_step, SR_SETTLE_UNMAP_VDSO },
	{ "pageout", pageout_step, SR_SETTLE_UNMAP_VDSO },
	{ "pageout_three", pageout_three_step, SR_SETTLE_UNMAP_VDSO },
	{ "many_vmas", many_vmas_step, SR_SETTLE_UNMAP_VDSO },
	{ "mix", mix_step, SR_SETTLE_UNMAP_VDSO },
	{ "mthp", mthp_step, SR_SETTLE_UNMAP_VDSO | SR_SETTLE_THP },
	{}
};

SR_TARGET_MAIN(workloads)

/* --- Test-side helpers --- */

static void target_start(struct __test_metadata *_metadata,
			 struct sr_target *t, const char *name, long arg)
{
	ASSERT_EQ(0, sr_target_start(t, name, arg))
		TH_LOG("cannot start target '%s'", name);
}

static void target_step(struct __test_metadata *_metadata,
			struct sr_target *t, int step, unsigned long *val)
{
	int ret = sr_target_step(t, step, val);

	ASSERT_EQ(0, ret) TH_LOG("target step %d: %s", step, strerror(-ret));
}

static void read_rollup(struct __test_metadata *_metadata, pid_t pid,
			struct sr_rollup *r)
{
	ASSERT_EQ(0, sr_read_rollup_stable(pid, r)) TH_LOG("%s", sr_error);
}

/*
 * The change of every field that writing @kb of private anonymous memory
 * makes (or, with @kb < 0, that it makes as it goes): only that.
 */
static void want_private_anon(long long *want, long long kb)
{
	sr_delta_init(want);
	want[SR_RSS] = kb;
	want[SR_PSS] = kb;
	want[SR_PSS_DIRTY] = kb;
	want[SR_PSS_ANON] = kb;
	want[SR_PRIVATE_DIRTY] = kb;
	want[SR_ANONYMOUS] = kb;
}

/* A target step that failed because mlock() was refused. */
static bool mlock_refused(int ret)
{
	return ret == -EPERM || ret == -ENOMEM || ret == -EAGAIN;
}

/*
 * Start the "mix" target and run its one step; skips when its mlock() is
 * refused, rather than test a mix without locked memory.
 */
static void start_mix(struct __test_metadata *_metadata, struct sr_target *t,
		      int exe)
{
	int ret;

	target_start(_metadata, t, "mix", exe);
	ret = sr_target_step(t, 1, NULL);
	if (mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     REGION_KB, strerror(-ret));
	ASSERT_EQ(0, ret) TH_LOG("target step 1: %s", strerror(-ret));
}

/* Write a pattern (non-zero, so no zero-page tricks) of @size bytes. */
static int fill_file(int fd, size_t size)
{
	char buf[4096];
	size_t done;

	memset(buf, 0x33, sizeof(buf));
	for (done = 0; done < size; done += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			return -1;
	fsync(fd);
	return 0;
}

/*
 * An unlinked file of @size bytes in @dir, if @dir is (@tmpfs) or is not
 * (!@tmpfs) a tmpfs.  A tmpfs file is left sparse, others are written.
 */
static int file_in(const char *dir, bool tmpfs, size_t size)
{
	char path[PATH_MAX];
	struct statfs sfs;
	bool is_tmpfs;
	int fd;

	if (!dir || statfs(dir, &sfs))
		return -1;
	is_tmpfs = sfs.f_type == TMPFS_MAGIC;
	if (is_tmpfs != tmpfs)
		return -1;
	snprintf(path, sizeof(path), "%s/smaps_rollup.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	if (tmpfs ? ftruncate(fd, size) : fill_file(fd, size)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A file of @size bytes that only we map: on tmpfs if @tmpfs, else page
 * cache that is not shmem (a disk file system, or ramfs).  Looks in the
 * usual places, then (as root) mounts a private tmpfs or ramfs.  Returns
 * an fd (not close-on-exec) or -1.
 */
static int open_private_file(bool tmpfs, size_t size, const char **where)
{
	static const char *const dirs[] = { "/dev/shm", "/tmp", "/var/tmp" };
	char dir[] = "/tmp/smaps_rollup.XXXXXX";
	size_t i;
	int fd;

	*where = getenv("TMPDIR");
	fd = file_in(*where, tmpfs, size);
	for (i = 0; fd < 0 && i < ARRAY_SIZE(dirs); i++) {
		*where = dirs[i];
		fd = file_in(*where, tmpfs, size);
	}
	if (fd >= 0)
		return fd;
	/* The mount lives in this test's own mount namespace. */
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -1;
	if (!mkdtemp(dir))
		return -1;
	*where = tmpfs ? "a new tmpfs mount" : "a new ramfs mount";
	fd = -1;
	if (!mount("none", dir, tmpfs ? "tmpfs" : "ramfs", 0, NULL)) {
		fd = file_in(dir, tmpfs, size);
		umount2(dir, MNT_DETACH);
	}
	rmdir(dir);
	return fd;
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
	read_rollup(_metadata, self->t.pid, &r);
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
	read_rollup(_metadata, self->t.pid, &r);
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
	target_start(_metadata, &self->t, "many_vmas", pages);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);
	ASSERT_EQ(0, sr_sum_smaps(self->t.pid, &s));
	ASSERT_LE(pages, s.nr_vmas);

	want_private_anon(want, kb);
	sr_expect_delta(_metadata, &before, &after, want);
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

/* --- Anonymous memory --- */

TEST_F(rollup, private_anon_counts_touched_part_only)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "anon", 0);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

	want_private_anon(want, 16384);
	want[SR_REFERENCED] = 16384;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(rollup, shared_anon_second_mapper_halves_pss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "shared_anon", 0);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);	/* the helper maps the pages too */
	read_rollup(_metadata, self->t.pid, &after);

	/* Shared anonymous memory is shmem. */
	sr_delta_init(want);
	want[SR_PSS] = -REGION_KB / 2;
	want[SR_PSS_DIRTY] = -REGION_KB / 2;
	want[SR_PSS_SHMEM] = -REGION_KB / 2;
	want[SR_PRIVATE_DIRTY] = -REGION_KB;
	want[SR_SHARED_DIRTY] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(rollup, cow_pages_turn_private_when_child_writes)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "cow", 0);
	target_step(_metadata, &self->t, 1, NULL);	/* written, then fork()ed */
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);	/* the child writes its copy */
	read_rollup(_metadata, self->t.pid, &after);

	sr_delta_init(want);
	want[SR_PSS] = REGION_KB / 2;
	want[SR_PSS_DIRTY] = REGION_KB / 2;
	want[SR_PSS_ANON] = REGION_KB / 2;
	want[SR_SHARED_DIRTY] = -REGION_KB;
	want[SR_PRIVATE_DIRTY] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(rollup, mlock_counts_locked)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	int ret;

	target_start(_metadata, &self->t, "mlock", 0);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	ret = sr_target_step(&self->t, 2, NULL);
	if (mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     REGION_KB, strerror(-ret));
	ASSERT_EQ(0, ret);
	read_rollup(_metadata, self->t.pid, &after);

	/* mlock() populates a private writable mapping by writing. */
	want_private_anon(want, REGION_KB);
	want[SR_LOCKED] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
	/*
	 * Pss grew by as much, so only the totals tell Locked from a copy of
	 * Pss: the region is all the target has locked, and not all it has.
	 */
	EXPECT_EQ(0, before.kb[SR_LOCKED]);
	EXPECT_EQ(REGION_KB, after.kb[SR_LOCKED]);
	EXPECT_LT(after.kb[SR_LOCKED], after.kb[SR_PSS]);
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

	target_start(_metadata, &self->t, "mlock_some", 0);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	ret = sr_target_step(&self->t, 2, NULL);
	if (mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     locked + REGION_KB / 2, strerror(-ret));
	ASSERT_EQ(0, ret);
	read_rollup(_metadata, self->t.pid, &after);

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

TEST_F(rollup, madv_free_counts_lazyfree)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "lazyfree", 0);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

	/* MADV_FREE cleans the pages; they stay until reclaim wants them. */
	sr_delta_init(want);
	want[SR_LAZYFREE] = REGION_KB;
	want[SR_PSS_DIRTY] = -REGION_KB;
	want[SR_PRIVATE_DIRTY] = -REGION_KB;
	want[SR_PRIVATE_CLEAN] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(rollup, thp_counts_anon_huge_pages)
{
	long long want[SR_NR_FIELDS], pmd_kb, huge;
	struct sr_rollup before, after;
	unsigned long addr;
	char buf[256];
	long pmd = 0;

	if (sr_read_path("/sys/kernel/mm/transparent_hugepage/enabled", buf,
			 sizeof(buf)) < 0)
		SKIP(return, "no transparent huge pages (CONFIG_TRANSPARENT_HUGEPAGE)");
	if (strstr(buf, "[never]"))
		SKIP(return, "transparent huge pages are disabled (enabled: never)");
	ASSERT_EQ(0, sr_read_long("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
				  &pmd));
	pmd_kb = SR_KB(pmd);

	target_start(_metadata, &self->t, "thp", pmd);
	target_step(_metadata, &self->t, 1, &addr);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);
	huge = sr_smaps_vma_field(self->t.pid, addr, "AnonHugePages:");
	ASSERT_LE(0, huge);
	if (!huge)
		SKIP(return, "the kernel found no free huge page (fragmented memory?)");

	want_private_anon(want, pmd_kb);
	want[SR_ANON_HUGE_PAGES] = pmd_kb;
	sr_expect_delta(_metadata, &before, &after, want);
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
	self->fd = open_private_file(false, REGION, &where);
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

	target_start(_metadata, &self->t, "file", self->fd);
	target_step(_metadata, &self->t, variant->map_step, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);
	expect_file_delta(_metadata, &before, &after, REGION_KB, REGION_KB, 0);
}

TEST_F(file, second_mapper_halves_pss)
{
	struct sr_rollup before, after;
	char *p;

	target_start(_metadata, &self->t, "file", self->fd);
	target_step(_metadata, &self->t, variant->map_step, NULL);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	p = mmap(NULL, REGION, PROT_READ, variant->map_flags, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	sr_touch(p, REGION, -1);
	read_rollup(_metadata, self->t.pid, &after);
	expect_file_delta(_metadata, &before, &after, -REGION_KB / 2,
			  -REGION_KB, REGION_KB);
}

/* --- Shared memory: memfd, a tmpfs file, SysV --- */

FIXTURE(shmem) {
	struct sr_target t;
	int fd, shmid;
};

FIXTURE_VARIANT(shmem) {
	int kind;
};

enum { SHMEM_MEMFD, SHMEM_TMPFS, SHMEM_SYSV };

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
	const char *where;

	self->t.pid = -1;
	self->fd = -1;
	self->shmid = -1;
	switch (variant->kind) {
	case SHMEM_MEMFD:
		self->fd = memfd_create("smaps_rollup", 0);
		if (self->fd < 0)
			SKIP(return, "memfd_create(): %s (CONFIG_MEMFD_CREATE?)",
			     strerror(errno));
		ASSERT_EQ(0, ftruncate(self->fd, REGION));
		break;
	case SHMEM_TMPFS:
		self->fd = open_private_file(true, REGION, &where);
		if (self->fd < 0)
			SKIP(return, "no writable tmpfs, and cannot mount one (needs root)");
		break;
	case SHMEM_SYSV:
		self->shmid = shmget(IPC_PRIVATE, REGION, IPC_CREAT | 0600);
		if (self->shmid < 0)
			SKIP(return, "shmget(): %s (CONFIG_SYSVIPC? kernel.shmmax?)",
			     strerror(errno));
		break;
	}
}

FIXTURE_TEARDOWN_PARENT(shmem)
{
	if (self->shmid >= 0)
		shmctl(self->shmid, IPC_RMID, NULL);
}

/* Map (fd >= 0) or attach (the SysV segment @shmid) in a new target. */
static void start_shmem_target(struct __test_metadata *_metadata,
			       struct sr_target *t, int fd, int shmid)
{
	target_start(_metadata, t, "shmem", shmid >= 0 ? shmid : fd);
	/* Step 1 attaches the SysV segment, step 3 maps the fd. */
	target_step(_metadata, t, shmid >= 0 ? 1 : 3, NULL);
}

TEST_F(shmem, sole_mapper_written_counts_private_shmem)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

	sr_delta_init(want);
	want[SR_RSS] = REGION_KB;
	want[SR_PSS] = REGION_KB;
	want[SR_PSS_DIRTY] = REGION_KB;
	want[SR_PSS_SHMEM] = REGION_KB;
	want[SR_PRIVATE_DIRTY] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(shmem, second_mapper_halves_pss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	char *p;

	start_shmem_target(_metadata, &self->t, self->fd, self->shmid);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	if (self->shmid >= 0)
		p = shmat(self->shmid, NULL, SHM_RDONLY);
	else
		p = mmap(NULL, REGION, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE((void *)-1, p);
	sr_touch(p, REGION, -1);
	read_rollup(_metadata, self->t.pid, &after);

	sr_delta_init(want);
	want[SR_PSS] = -REGION_KB / 2;
	want[SR_PSS_DIRTY] = -REGION_KB / 2;
	want[SR_PSS_SHMEM] = -REGION_KB / 2;
	want[SR_PRIVATE_DIRTY] = -REGION_KB;
	want[SR_SHARED_DIRTY] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
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

TEST_F(hugetlb, private_counts_private_hugetlb_not_rss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "hugetlb_private", self->hp_kb << 10);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

	sr_delta_init(want);
	want[SR_REFERENCED] = 0;
	want[SR_PRIVATE_HUGETLB] = self->hp_kb;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_F(hugetlb, shared_with_child_counts_shared_hugetlb)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "hugetlb_shared", self->hp_kb << 10);
	target_step(_metadata, &self->t, 1, NULL);	/* written, a helper forked */
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);	/* the helper maps it too */
	read_rollup(_metadata, self->t.pid, &after);

	sr_delta_init(want);
	want[SR_REFERENCED] = 0;
	want[SR_PRIVATE_HUGETLB] = -self->hp_kb;
	want[SR_SHARED_HUGETLB] = self->hp_kb;
	sr_expect_delta(_metadata, &before, &after, want);
	EXPECT_EQ(self->hp_kb, after.kb[SR_SHARED_HUGETLB]);
	EXPECT_EQ(0, after.kb[SR_PRIVATE_HUGETLB]);
}

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

TEST_F_TIMEOUT(ksm, merged_pages_count_in_ksm, 120)
{
	const long long kb = KSM_PAGES * SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;
	long scans = 0, first_scan = 0, merged = -1;
	char path[64];
	int ret;

	target_start(_metadata, &self->t, "ksm", 0);
	ret = sr_target_step(&self->t, 1, NULL);
	if (ret == -EINVAL)
		SKIP(return, "MADV_MERGEABLE refused (CONFIG_KSM)");
	ASSERT_EQ(0, ret);
	read_rollup(_metadata, self->t.pid, &before);

	ASSERT_EQ(0, sr_write_long(KSM_DIR "pages_to_scan", 1000));
	ASSERT_EQ(0, sr_write_long(KSM_DIR "sleep_millisecs", 10));
	ASSERT_EQ(0, sr_write_long(KSM_DIR "run", 1));
	/*
	 * Merging takes ksmd a few full scans.  Poll this process's count of
	 * merged pages; give up after 20 more full scans.
	 */
	sr_path(path, sizeof(path), self->t.pid, "ksm_merging_pages");
	ASSERT_EQ(0, sr_read_long(KSM_DIR "full_scans", &first_scan));
	do {
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
		ASSERT_EQ(0, sr_read_long(KSM_DIR "full_scans", &scans));
		ASSERT_EQ(0, sr_read_long(path, &merged));
	} while (merged < KSM_PAGES && scans < first_scan + 20);
	ASSERT_EQ(KSM_PAGES, merged)
		TH_LOG("ksmd merged %ld of %d pages in %ld full scans",
		       merged, KSM_PAGES, scans - first_scan);
	read_rollup(_metadata, self->t.pid, &after);

	/*
	 * All KSM_PAGES page table entries now map one KSM page: each is
	 * still resident and anonymous, but its Pss is a 1/KSM_PAGES share.
	 */
	sr_delta_init(want);
	want[SR_KSM] = kb;
	want[SR_PSS] = SR_KB(getpagesize()) - kb;
	want[SR_PSS_ANON] = SR_KB(getpagesize()) - kb;
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

TEST_F(swap, pageout_anon_counts_swap_and_swap_pss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "pageout", -1);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

	want_private_anon(want, -REGION_KB);
	want[SR_SWAP] = REGION_KB;
	want[SR_SWAP_PSS] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

/* Stock adds a shmem object's swapped pages to Swap but never to SwapPss. */
TEST_F(swap, pageout_shmem_counts_swap_not_swap_pss)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	self->memfd = memfd_create("smaps_rollup-swap", 0);
	ASSERT_LE(0, self->memfd);
	ASSERT_EQ(0, ftruncate(self->memfd, REGION));
	target_start(_metadata, &self->t, "pageout", self->memfd);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

	sr_delta_init(want);
	want[SR_RSS] = -REGION_KB;
	want[SR_PSS] = -REGION_KB;
	want[SR_PSS_DIRTY] = -REGION_KB;
	want[SR_PSS_SHMEM] = -REGION_KB;
	want[SR_PRIVATE_DIRTY] = -REGION_KB;
	want[SR_SWAP] = REGION_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

/*
 * Each VMA's swap adds to the total: 4.14 assigned a shmem VMA's swap
 * instead, losing what the VMAs before it had.
 */
TEST_F(swap, pageout_anon_and_two_shmem_swap_adds_up)
{
	long long want[SR_NR_FIELDS];
	struct sr_rollup before, after;

	target_start(_metadata, &self->t, "pageout_three", 0);
	target_step(_metadata, &self->t, 1, NULL);
	read_rollup(_metadata, self->t.pid, &before);
	target_step(_metadata, &self->t, 2, NULL);
	read_rollup(_metadata, self->t.pid, &after);

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

	target_start(_metadata, t, "mthp", op);
	if (op == MTHP_WRITTEN || op == MTHP_LOCKED)
		ret = sr_target_step(t, 1, NULL);
	else
		ret = mthp_fault_step(_metadata, t, 1);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(0, ret) TH_LOG("target step 1: %s", strerror(-ret));
	read_rollup(_metadata, t->pid, before);
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
	read_rollup(_metadata, t->pid, after);
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

TEST_F(mthp, written_folios_count_as_private_pages)
{
	long long want[SR_NR_FIELDS];

	want_private_anon(want, MTHP_KB);
	want[SR_REFERENCED] = MTHP_KB;
	mthp_expect(_metadata, &self->t, MTHP_WRITTEN, want);
}

/*
 * Shared with a child, the folios count half; once the child has unmapped
 * them, in full.
 */
TEST_F(mthp, folios_shared_with_a_child_count_half)
{
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	want[SR_PSS] = MTHP_KB / 2;
	want[SR_PSS_DIRTY] = MTHP_KB / 2;
	want[SR_PSS_ANON] = MTHP_KB / 2;
	want[SR_PRIVATE_DIRTY] = MTHP_KB;
	want[SR_SHARED_DIRTY] = -MTHP_KB;
	mthp_expect(_metadata, &self->t, MTHP_CHILD_UNMAPS, want);
}

/*
 * The child copies one page of each folio: that page of the target's folio
 * is the target's alone, its other 15 still shared.
 */
TEST_F(mthp, a_page_copied_by_the_child_turns_private)
{
	const long long kb = MTHP_FOLIOS * SR_KB(getpagesize());
	long long want[SR_NR_FIELDS];

	sr_delta_init(want);
	want[SR_PSS] = kb / 2;
	want[SR_PSS_DIRTY] = kb / 2;
	want[SR_PSS_ANON] = kb / 2;
	want[SR_SHARED_DIRTY] = -kb;
	want[SR_PRIVATE_DIRTY] = kb;
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

	sr_delta_init(want);
	want[SR_PSS] = (MTHP_KB - kb) / 2;
	want[SR_PSS_DIRTY] = (MTHP_KB - kb) / 2;
	want[SR_PSS_ANON] = (MTHP_KB - kb) / 2;
	want[SR_SHARED_DIRTY] = -(MTHP_KB - kb);
	want[SR_PRIVATE_DIRTY] = MTHP_KB - kb;
	mthp_expect(_metadata, &self->t, MTHP_CHILD_KEEPS_ONE, want);
}

TEST_F(mthp, half_unmapped_folios_count_their_mapped_half)
{
	long long want[SR_NR_FIELDS];

	want_private_anon(want, -MTHP_KB / 2);
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

	if (sr_meminfo_kb("SwapFree:") < 2 * MTHP_KB)
		SKIP(return, "less than %lld kB of swap free (swapon a zram device)",
		     2 * MTHP_KB);
	want_private_anon(want, -MTHP_KB / 2);
	want[SR_SWAP] = MTHP_KB / 2;
	want[SR_SWAP_PSS] = MTHP_KB / 2;
	mthp_expect(_metadata, &self->t, MTHP_HALF_PAGED_OUT, want);
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
	if (mlock_refused(ret))
		SKIP(return, "mlock() of %lld kB failed: %s (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
		     MTHP_KB, strerror(-ret));
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(0, ret) TH_LOG("target step 2: %s", strerror(-ret));
	read_rollup(_metadata, self->t.pid, &after);

	want_private_anon(want, MTHP_KB);
	want[SR_LOCKED] = MTHP_KB;
	sr_expect_delta(_metadata, &before, &after, want);
}

TEST_HARNESS_MAIN
