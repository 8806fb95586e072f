// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup read while its target changes its address space
 * as fast as it can: two threads mmap, munmap, mremap, mprotect and
 * madvise, while the main thread forks children that exit at once.  Stock
 * drops mmap_lock in the middle of the walk when a writer waits, and
 * resumes from the last address it reached; these tests check that the
 * reads stay sane meanwhile:
 *
 *  - every read parses, obeys the relations of sr_rollup_consistent(), and
 *    stays below what the target could possibly have mapped;
 *  - memory the churn never touches is counted exactly, every time: if
 *    the churn uses shared memory only, Anonymous never moves.
 *
 * More churns aim at the places where the walk resumes after letting a
 * writer in, with Anonymous again fixed while the layout moves:
 *
 *  - "interrupt": one large VMA, and threads that only take mmap_lock for
 *    writing (mmap and munmap of a page they never touch), so the walk
 *    stops inside the VMA and must resume at the exact address;
 *  - "split_merge": threads mprotect() single pages of a large VMA to
 *    read-only and back, so the VMA the walk resumes in may have been
 *    split, or merged with the part below the resume address;
 *  - "collapse": one thread splits VMAs in the middle of PMD-sized ranges
 *    and merges them again, another collapses the ranges into THPs with
 *    MADV_COLLAPSE, so the walk may resume in the middle of a PMD-mapped
 *    THP of which it has counted the lower part already;
 *  - "shmem_swap": as "interrupt", but the large VMA maps a memfd, half of
 *    it swapped out, so the walk resumes inside a VMA whose swap it counts
 *    page by page, and Swap must stay exact;
 *  - "unmap": one large VMA, written in its lower half only, and threads
 *    that munmap() random ranges of its upper half and mmap() them back,
 *    so the walk may resume in a hole, or in a VMA split or merged anew;
 *  - "remap": the same VMA, and threads that shrink it with mremap() and
 *    grow it back in place, or move random ranges of its upper half away
 *    and back, so the walk may resume past the end of a VMA shrunk
 *    meanwhile, or in a range moved there meanwhile.
 *
 * Reads go through a new fd each time, through pread() at 0 on one fd, and
 * through small read()s; the only error allowed is ESRCH once the target
 * exits.  The churn runs until the test has made MIN_READS reads and
 * CHURN_MS have passed, and at most MAX_CHURN_MS, however slow the kernel.
 *
 * A read that never let a writer in proves nothing here, and its output
 * cannot tell.  So the reader traces its own mmap_lock acquisitions (see
 * sr_lock_trace_start()): a read() that took the target's mmap_lock more
 * than once dropped it and resumed.  The trace does not say where.  But a
 * walk that resumes between VMAs only, as stock's does, takes the lock at
 * most once per VMA it visits.  The "interrupt" and "shmem_swap" churns
 * add one VMA per thread, a page that munmap() removes and mmap() puts
 * back in the same place, so a read() that took the lock more often than
 * the target had VMAs before the churn plus two per thread resumed inside
 * a VMA.  (Splitting VMAs at random, the other churns make VMA boundaries
 * appear ahead of the walk again and again: no such bound holds there.)
 * A test whose reads all passed skips, saying why, when tracing is not
 * available, or no read() resumed (inside a VMA, for those two churns).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>

#include "smaps_rollup.h"

#define CHURN_MS	2000
#define MAX_CHURN_MS	60000
#define MIN_READS	10
#define NR_THREADS	2
#define SLOTS		8
#define SLOT_MAX	(512UL << 10)
#define THP_SLOT_MAX	(8UL << 20)	/* slot 0 of thread 0, mixed churn */
#define STABLE_PAGES	2048		/* each page its own VMA */
/*
 * "interrupt", "split_merge" and "shmem_swap": the VMA spans more page
 * tables (64) than a read takes mmap_lock between VMAs (vma_bound), so
 * that a read over that bound must have resumed inside it.
 */
#define LARGE_VMA	(128UL << 20)
#define PMD_RANGE	(2UL << 20)	/* x86-64, arm64 with 4K pages */
#define THP_RANGES	4		/* "collapse" */
#define SWAP_CHUNK	(PMD_RANGE / 2)	/* "shmem_swap": every other one out */
#define SWAPPED_KB	SR_KB(LARGE_VMA / 2)
#define PIECE_MAX	(2UL << 20)	/* "unmap", "remap": the most torn at once */

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE	25
#endif

enum {
	CHURN_MIXED,
	CHURN_SHMEM,
	CHURN_INTERRUPT,	/* and after it, the churns of layout_op() */
	CHURN_SPLIT_MERGE,
	CHURN_COLLAPSE,
	CHURN_SHMEM_SWAP,
	CHURN_UNMAP,
	CHURN_REMAP,
};

struct slot {
	char *addr;
	size_t len;
	size_t obj_len;	/* shared memory: touching beyond it is SIGBUS */
};

static struct slot slots[NR_THREADS][SLOTS];
static int stop;		/* read and set with __atomic builtins */
static int start_pipe[2], ready_pipe[2];
static int mode;
static char *region;		/* the large VMA, or the THP ranges */
static char *reserve;		/* "remap": where pieces of it move to */
static int churn_err;		/* why a thread stopped the churn, if one did */
static pthread_t threads[NR_THREADS];

/* The most the churn can have mapped at once. */
static unsigned long long churn_max_kb(int churn)
{
	unsigned long long bytes = NR_THREADS * SLOTS * SLOT_MAX;

	if (churn == CHURN_MIXED)
		bytes += THP_SLOT_MAX - SLOT_MAX;
	return bytes >> 10;
}

static unsigned int next_random(unsigned int *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
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
	case CHURN_SHMEM_SWAP:
		p = mmap(NULL, page, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED)
			munmap(p, page);
		break;
	case CHURN_SPLIT_MERGE:
		p = region + r % (LARGE_VMA / page) * page;
		mprotect(p, page, PROT_READ);
		mprotect(p, page, PROT_READ | PROT_WRITE);
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

static void *churn_thread(void *arg)
{
	int id = (long)arg, i, err;
	unsigned int r = 0x9e3779b9u * (id + 1);
	char c;

	sr_grow_stack();
	if (write(ready_pipe[1], "x", 1) != 1 ||
	    read(start_pipe[0], &c, 1) != 1)
		return NULL;
	/*
	 * "interrupt" and "shmem_swap" churn on one thread: with one writer
	 * queued at a time, the reader's wait for the queue to drain ends at
	 * once, and it stops in nearly every page table of the large VMA;
	 * with two, one is nearly always queued, and the reader waits out its
	 * bound at each stop, so it stops too rarely to show a resume inside
	 * the VMA.  The other churns need no resume inside a VMA to count,
	 * and run on both threads, for more shapes of the layout: "unmap"
	 * and "remap" tear the walked VMA in two places at once, and in
	 * "remap" one thread's shrink may meet the other's piece moved away.
	 */
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED) &&
	       !(id && (mode == CHURN_INTERRUPT || mode == CHURN_SHMEM_SWAP))) {
		if (mode >= CHURN_INTERRUPT) {
			err = layout_op(id, next_random(&r));
			if (err) {
				/* Step 2 returns it: the test fails. */
				__atomic_store_n(&churn_err, err,
						 __ATOMIC_RELAXED);
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
			}
			continue;
		}
		i = next_random(&r) % SLOTS;
		if (slots[id][i].addr)
			slot_op(&slots[id][i], is_thp_slot(id, i), next_random(&r));
		else
			slot_map(&slots[id][i], is_thp_slot(id, i), next_random(&r));
	}
	/*
	 * Report, and never exit: glibc would MADV_DONTNEED the stack of
	 * an exiting thread, changing Anonymous.
	 */
	if (write(ready_pipe[1], "x", 1) != 1)
		return NULL;
	for (;;)
		pause();
	return NULL;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * Written pages no one touches again: each its own VMA, or one large VMA,
 * of which "unmap" and "remap" write the lower half only, and tear the
 * upper half.  "remap" reserves a slot per thread, between PROT_NONE pages
 * so that a piece moved there merges with nothing.
 */
static int map_stable(void)
{
	size_t page = getpagesize(), i;
	bool torn = mode == CHURN_UNMAP || mode == CHURN_REMAP;
	char *p;

	if (mode == CHURN_INTERRUPT || mode == CHURN_SPLIT_MERGE || torn) {
		p = mmap(NULL, LARGE_VMA, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		sr_touch(p, torn ? LARGE_VMA / 2 : LARGE_VMA, 1);
		region = p;
		if (mode != CHURN_REMAP)
			return 0;
		p = mmap(NULL, NR_THREADS * (PIECE_MAX + page) + page,
			 PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		reserve = p;
		return 0;
	}
	p = mmap(NULL, STABLE_PAGES * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	sr_touch(p, STABLE_PAGES * page, 1);
	for (i = 1; i < STABLE_PAGES; i += 2)
		if (mprotect(p + i * page, page, PROT_READ))
			return -errno;
	return 0;
}

/*
 * A memfd of LARGE_VMA bytes mapped shared, written, and every other
 * SWAP_CHUNK of it paged out: SWAPPED_KB of shmem swap, spread over the
 * whole VMA.  Paging out runs on one CPU, whose LRU batches madvise()
 * drains; the churn threads may run anywhere.
 */
static int map_shmem_swap(void)
{
	cpu_set_t cpus;
	size_t off;
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
	ret = sr_pin_to_one_cpu(&cpus);
	if (ret)
		return ret;
	sr_fill_distinct(p, LARGE_VMA);
	for (off = 0; off < LARGE_VMA && !ret; off += 2 * SWAP_CHUNK)
		ret = madvise(p + off, SWAP_CHUNK, MADV_PAGEOUT) ? -errno : 0;
	if (sched_setaffinity(0, sizeof(cpus), &cpus) && !ret)
		ret = -errno;
	region = p;
	return ret;
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

/* Has the test asked the churn to stop (or gone away)? */
static bool stop_asked(void)
{
	struct pollfd pfd = { .fd = sr_target_cmd_fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, 0) <= 0)
		return false;
	if (read(sr_target_cmd_fd, &c, 1) < 0)
		return false;
	return true;
}

/*
 * Step 1: the memory no one touches, and the churn threads, waiting.
 * Step 2: churn while the main thread forks and reaps children, until the
 * test writes a byte to the command pipe, or for @arg ms at most; return
 * when the threads have stopped.
 */
static int churn_step(int step, long arg, unsigned long *val)
{
	long long deadline;
	char c;
	pid_t pid;
	long id;
	int ret;

	if (step == 1) {
		if (mode == CHURN_COLLAPSE)
			ret = map_thp_ranges();
		else if (mode == CHURN_SHMEM_SWAP)
			ret = map_shmem_swap();
		else
			ret = map_stable();
		if (ret)
			return ret;
		if (pipe(start_pipe) || pipe(ready_pipe))
			return -errno;
		for (id = 0; id < NR_THREADS; id++)
			if (pthread_create(&threads[id], NULL, churn_thread,
					   (void *)id))
				return -EAGAIN;
		/* Wait until the threads have grown their stacks. */
		for (id = 0; id < NR_THREADS; id++)
			if (read(ready_pipe[0], &c, 1) != 1)
				return -EPIPE;
		return 0;
	}
	deadline = now_ms() + arg;
	if (write(start_pipe[1], "xx", NR_THREADS) != NR_THREADS)
		return -EPIPE;
	while (!stop_asked() && now_ms() < deadline &&
	       !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (id = 0; id < NR_THREADS; id++)
		if (read(ready_pipe[0], &c, 1) != 1)
			return -EPIPE;
	return __atomic_load_n(&churn_err, __ATOMIC_RELAXED);
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
CHURN_STEP(collapse, CHURN_COLLAPSE)
CHURN_STEP(shmem_swap, CHURN_SHMEM_SWAP)
CHURN_STEP(unmap, CHURN_UNMAP)
CHURN_STEP(remap, CHURN_REMAP)

static const struct sr_workload workloads[] = {
	/* clock_gettime() needs the vDSO; no exact Pss here anyway. */
	{ "churn_mixed", churn_mixed_step, SR_SETTLE_THP },
	{ "churn_shmem", churn_shmem_step, 0 },
	{ "interrupt", interrupt_step, 0 },
	{ "split_merge", split_merge_step, 0 },
	/* THP is in madvise mode: only the ranges can be collapsed. */
	{ "collapse", collapse_step, SR_SETTLE_THP },
	{ "shmem_swap", shmem_swap_step, 0 },
	{ "unmap", unmap_step, 0 },
	{ "remap", remap_step, 0 },
	{}
};

SR_TARGET_MAIN(workloads)

/* The reading side: the file, a kept-open fd, and how often it was read. */
struct reader {
	char path[64];
	int fd;			/* read with pread() at 0 */
	unsigned long reads;
	unsigned long during;	/* reads while the churn ran */
	unsigned long resumed;	/* read()s that took mmap_lock again */
	unsigned long inside;	/* read()s that took it over vma_bound times */
	int vma_bound;		/* VMAs the walk may meet; 0: not counted */
	int most_locks;		/* the most one read() took it */
	long long since;	/* when the churn started, in ms */
	bool asked;		/* the churn was asked to stop */
	bool traced;		/* lt counts mmap_lock acquisitions */
	char why[256];		/* why not, if not */
	struct sr_lock_trace lt;
	char buf[8192];
};

FIXTURE(race) {
	struct sr_target t;
	struct reader rd;
};

FIXTURE_SETUP(race)
{
	self->t.pid = -1;
	self->rd.fd = -1;
	self->rd.reads = 0;
	self->rd.during = 0;
	self->rd.resumed = 0;
	self->rd.inside = 0;
	self->rd.vma_bound = 0;
	self->rd.most_locks = 0;
	self->rd.asked = false;
	self->rd.traced = false;
	sr_lock_trace_init(&self->rd.lt);
}

/* The tracefs instance outlives a test that failed an ASSERT_*(). */
FIXTURE_TEARDOWN_PARENT(race)
{
	sr_lock_trace_remove(&self->rd.lt);
}

/*
 * One read() (@off < 0) or pread() of smaps_rollup, which counts as resumed
 * if it took the target's mmap_lock more than once.  Returns what read()
 * does, -errno for an error.
 */
static ssize_t read_counted(struct reader *rd, int fd, char *buf, size_t len,
			    off_t off)
{
	ssize_t n;
	int locks;

	if (rd->traced)
		sr_lock_trace_count(&rd->lt);	/* forget the events before */
	n = off < 0 ? read(fd, buf, len) : pread(fd, buf, len, off);
	if (n < 0)
		return -errno;
	if (!rd->traced)
		return n;
	locks = sr_lock_trace_count(&rd->lt);
	if (locks < 0) {
		snprintf(rd->why, sizeof(rd->why), "reading trace_pipe: %s",
			 strerror(-locks));
		rd->traced = false;
	} else if (locks > 1) {
		rd->resumed++;
		if (rd->vma_bound && locks > rd->vma_bound)
			rd->inside++;
	}
	if (locks > rd->most_locks)
		rd->most_locks = locks;
	return n;
}

/* read() from @fd until EOF in pieces of @chunk: the length, or -errno. */
static ssize_t read_all(struct reader *rd, int fd, size_t chunk)
{
	size_t len = 0;
	ssize_t n;

	do {
		if (len == sizeof(rd->buf))
			return -EFBIG;
		if (chunk > sizeof(rd->buf) - len)
			chunk = sizeof(rd->buf) - len;
		n = read_counted(rd, fd, rd->buf + len, chunk, -1);
		if (n < 0)
			return n;
		len += n;
	} while (n);
	return len;
}

/*
 * One read, in one of three ways: 0 and the rollup, or -errno.  Format and
 * consistency failures are test failures.
 */
static int read_once(struct __test_metadata *_metadata, struct reader *rd,
		     struct sr_rollup *r)
{
	ssize_t n;
	int fd;

	switch (rd->reads++ % 3) {
	case 0:
		fd = open(rd->path, O_RDONLY);
		if (fd < 0)
			return -errno;
		n = read_all(rd, fd, sizeof(rd->buf));
		close(fd);
		break;
	case 1:
		n = read_counted(rd, rd->fd, rd->buf, sizeof(rd->buf), 0);
		break;
	default:
		fd = open(rd->path, O_RDONLY);
		if (fd < 0)
			return -errno;
		n = read_all(rd, fd, 61);
		close(fd);
		break;
	}
	if (n < 0)
		return n;
	ASSERT_EQ(0, sr_parse_rollup(rd->buf, n, r)) TH_LOG("%s", sr_error);
	EXPECT_EQ(0, sr_rollup_consistent(r)) TH_LOG("%s", sr_error);
	return 0;
}

/*
 * Start @name and run step 1; open the fd, read the rollup before churn.
 * Skips if the workload needs THP and the kernel refuses MADV_COLLAPSE.
 * If @in_vma, the churn adds no VMA but a page per thread, and a read()
 * that takes mmap_lock more often than there can be VMAs, with a margin,
 * counts as resumed inside one (see the top of this file).
 */
static void start(struct __test_metadata *_metadata, struct sr_target *t,
		  struct reader *rd, const char *name, bool in_vma,
		  struct sr_rollup *before)
{
	struct sr_smaps s;
	int ret;

	ASSERT_EQ(0, sr_target_start(t, name, MAX_CHURN_MS));
	ret = sr_target_step(t, 1, NULL);
	if (ret == -EOPNOTSUPP)
		SKIP(return, "MADV_COLLAPSE refused: no THP, or THP enabled is never");
	ASSERT_EQ(0, ret) TH_LOG("setting up %s: %s", name, strerror(-ret));
	sr_path(rd->path, sizeof(rd->path), t->pid, "smaps_rollup");
	rd->fd = open(rd->path, O_RDONLY);
	ASSERT_LE(0, rd->fd);
	ASSERT_EQ(0, sr_read_rollup_stable(t->pid, before))
		TH_LOG("%s", sr_error);
	if (in_vma) {
		ASSERT_EQ(0, sr_sum_smaps(t->pid, &s));
		rd->vma_bound = s.nr_vmas + 2 * NR_THREADS;
	}
	rd->traced = !sr_lock_trace_start(&rd->lt, syscall(SYS_gettid),
					  rd->why, sizeof(rd->why));
	/* Step 2 runs the churn; its status comes when the churn is over. */
	ASSERT_EQ(1, write(t->cmd, "\2", 1));
	rd->since = now_ms();
}

/* Ask the churn to stop, once: it reads one byte. */
static void ask_stop(struct sr_target *t, struct reader *rd)
{
	if (!rd->asked && write(t->cmd, "\3", 1) == 1)
		rd->asked = true;
}

/*
 * Whether the churn goes on, after one more read during it.  Once there
 * were MIN_READS such reads and CHURN_MS have passed, ask it to stop.
 */
static bool churning(struct sr_target *t, struct reader *rd)
{
	struct pollfd pfd = { .fd = t->ack, .events = POLLIN };

	rd->during++;
	if (rd->during >= MIN_READS && now_ms() - rd->since >= CHURN_MS)
		ask_stop(t, rd);
	return poll(&pfd, 1, 0) == 0;
}

/*
 * Let the target exit; then reads fail with ESRCH and nothing else.  Skip
 * a test that passed without showing that a read resumed.
 */
static void finish(struct __test_metadata *_metadata, struct sr_target *t,
		   struct reader *rd)
{
	unsigned long resumed = rd->resumed;
	struct sr_rollup r;
	siginfo_t info;
	int ret;

	if (rd->traced)
		TH_LOG("%lu reads during the churn, %lu read()s resumed, at most %d locks in one",
		       rd->during, resumed, rd->most_locks);
	else
		TH_LOG("%lu reads during the churn", rd->during);
	if (rd->traced && rd->vma_bound)
		TH_LOG("%lu read()s took mmap_lock over %d times: resumed inside a VMA",
		       rd->inside, rd->vma_bound);
	EXPECT_LE(MIN_READS, rd->during);
	ask_stop(t, rd);
	ret = sr_recv_status(t->ack, NULL);
	ASSERT_EQ(0, ret) TH_LOG("the churn stopped: %s", strerror(-ret));
	close(t->cmd);
	ASSERT_EQ(0, waitid(P_PID, t->pid, &info, WEXITED | WNOWAIT));
	do {
		ret = read_once(_metadata, rd, &r);
	} while (!ret);
	EXPECT_EQ(-ESRCH, ret);
	sr_lock_trace_stop(&rd->lt);
	if (_metadata->exit_code != KSFT_PASS)
		return;
	if (!rd->traced)
		SKIP(return, "cannot tell whether a read resumed: %s", rd->why);
	if (!resumed)
		SKIP(return, "no read() took mmap_lock again in %lu reads: no walk resumed",
		     rd->during);
	if (rd->vma_bound && !rd->inside)
		SKIP(return, "no read() took mmap_lock over %d times: none resumed inside a VMA",
		     rd->vma_bound);
}

TEST_F_TIMEOUT(race, every_read_parses_within_bounds_during_churn, 90)
{
	unsigned long long bound;
	struct sr_rollup before, r;
	int f, ret;

	start(_metadata, &self->t, &self->rd, "churn_mixed", false, &before);
	/*
	 * The churn maps at most churn_max_kb() at a time.  A walk that
	 * drops mmap_lock may meet a page twice, if mremap() moves it from
	 * behind the walk to ahead of it; allow that, and 8 MiB for stacks.
	 */
	bound = before.kb[SR_RSS] + before.kb[SR_SWAP] +
		2 * churn_max_kb(CHURN_MIXED) + 8192;
	do {
		ret = read_once(_metadata, &self->rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		EXPECT_GE(bound, r.kb[SR_RSS] + r.kb[SR_SWAP]);
		for (f = 0; f < SR_NR_FIELDS; f++)
			EXPECT_GE(bound, r.kb[f]) TH_LOG("field %d", f + 1);
		EXPECT_EQ(0, r.kb[SR_SHARED_HUGETLB]);
		EXPECT_EQ(0, r.kb[SR_PRIVATE_HUGETLB]);
		EXPECT_GE(1UL << 56, r.end);
		if (_metadata->exit_code)
			break;
	} while (churning(&self->t, &self->rd));
	finish(_metadata, &self->t, &self->rd);
}

/*
 * Churn with @workload, which never changes Anonymous nor Swap, and check
 * that every read during it shows them as they were before; Swap must be
 * @swap_kb then.  @in_vma: see start().
 */
static void expect_fixed(struct __test_metadata *_metadata,
			 struct sr_target *t, struct reader *rd,
			 const char *workload, bool in_vma, long long swap_kb)
{
	struct sr_rollup before, r;
	int ret;

	start(_metadata, t, rd, workload, in_vma, &before);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(swap_kb, (long long)before.kb[SR_SWAP])
		TH_LOG("Swap before the churn");
	do {
		ret = read_once(_metadata, rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		EXPECT_EQ(before.kb[SR_ANONYMOUS], r.kb[SR_ANONYMOUS])
			TH_LOG("Anonymous, read %lu", rd->during + 1);
		EXPECT_EQ(before.kb[SR_SWAP], r.kb[SR_SWAP])
			TH_LOG("Swap, read %lu", rd->during + 1);
		EXPECT_LE(before.kb[SR_ANONYMOUS], r.kb[SR_RSS]);
		if (_metadata->exit_code)
			break;
	} while (churning(t, rd));
	finish(_metadata, t, rd);
}

/* The churn maps shared memory only, which is not Anonymous. */
TEST_F_TIMEOUT(race, untouched_anonymous_memory_counted_exactly_during_churn, 90)
{
	expect_fixed(_metadata, &self->t, &self->rd, "churn_shmem", false, 0);
}

TEST_F_TIMEOUT(race, walk_resumed_inside_a_vma_counts_it_exactly, 90)
{
	expect_fixed(_metadata, &self->t, &self->rd, "interrupt", true, 0);
}

TEST_F_TIMEOUT(race, vma_split_or_merged_across_resume_counted_exactly, 90)
{
	expect_fixed(_metadata, &self->t, &self->rd, "split_merge", false, 0);
}

TEST_F_TIMEOUT(race, thp_collapsed_across_resume_counted_exactly, 90)
{
	expect_fixed(_metadata, &self->t, &self->rd, "collapse", false, 0);
}

/*
 * Ranges of the walked VMA's unwritten upper half go and come back: its
 * written lower half must be counted once, every time.
 */
TEST_F_TIMEOUT(race, vma_partly_unmapped_across_resume_counted_exactly, 90)
{
	expect_fixed(_metadata, &self->t, &self->rd, "unmap", false, 0);
}

/*
 * As above, but the VMA shrinks and grows back in place, or ranges of its
 * upper half move away and back.
 */
TEST_F_TIMEOUT(race, vma_resized_or_partly_moved_across_resume_counted_exactly, 90)
{
	expect_fixed(_metadata, &self->t, &self->rd, "remap", false, 0);
}

/*
 * The walk resumes inside a shared memfd mapping with half of its pages
 * swapped out, whose swap is counted page by page then: Swap must come out
 * as SWAPPED_KB on every read, never counted twice nor lost.
 */
TEST_F_TIMEOUT(race, shmem_swap_counted_exactly_across_resume, 90)
{
	long free_kb = sr_meminfo_kb("SwapFree:");

	if (free_kb < 2 * SWAPPED_KB)
		SKIP(return, "%ld kB of swap free, %lld kB needed (swapon a zram device)",
		     free_kb, 2 * SWAPPED_KB);
	expect_fixed(_metadata, &self->t, &self->rd, "shmem_swap", true,
		     SWAPPED_KB);
}

TEST_HARNESS_MAIN
