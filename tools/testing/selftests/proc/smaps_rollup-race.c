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
 * Three more churns aim at the places where the walk resumes after letting
 * a writer in, with Anonymous again fixed while the layout moves:
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
 *    THP of which it has counted the lower part already.
 *
 * Reads go through a new fd each time, through pread() at 0 on one fd, and
 * through small read()s; the only error allowed is ESRCH once the target
 * exits.  The churn runs until the test has made MIN_READS reads and
 * CHURN_MS have passed, and at most MAX_CHURN_MS, however slow the kernel.
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
#define LARGE_VMA	(32UL << 20)	/* "interrupt" and "split_merge" */
#define PMD_RANGE	(2UL << 20)	/* x86-64, arm64 with 4K pages */
#define THP_RANGES	4		/* "collapse" */

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE	25
#endif

enum {
	CHURN_MIXED,
	CHURN_SHMEM,
	CHURN_INTERRUPT,	/* and after it, the churns of layout_op() */
	CHURN_SPLIT_MERGE,
	CHURN_COLLAPSE,
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

/* One operation of the churns that leave Anonymous alone. */
static void layout_op(int id, unsigned int r)
{
	size_t page = getpagesize();
	char *p;

	switch (mode) {
	case CHURN_INTERRUPT:
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
	}
}

static void *churn_thread(void *arg)
{
	int id = (long)arg, i;
	unsigned int r = 0x9e3779b9u * (id + 1);
	char c;

	sr_grow_stack();
	if (write(ready_pipe[1], "x", 1) != 1 ||
	    read(start_pipe[0], &c, 1) != 1)
		return NULL;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (mode >= CHURN_INTERRUPT) {
			layout_op(id, next_random(&r));
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

/* Written pages no one touches again: each its own VMA, or one large VMA. */
static int map_stable(void)
{
	size_t page = getpagesize(), i;
	char *p;

	if (mode == CHURN_INTERRUPT || mode == CHURN_SPLIT_MERGE) {
		p = mmap(NULL, LARGE_VMA, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		sr_touch(p, LARGE_VMA, 1);
		region = p;
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
		ret = mode == CHURN_COLLAPSE ? map_thp_ranges() : map_stable();
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
	while (!stop_asked() && now_ms() < deadline) {
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
	return 0;
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

static const struct sr_workload workloads[] = {
	/* clock_gettime() needs the vDSO; no exact Pss here anyway. */
	{ "churn_mixed", churn_mixed_step, SR_SETTLE_THP },
	{ "churn_shmem", churn_shmem_step, 0 },
	{ "interrupt", interrupt_step, 0 },
	{ "split_merge", split_merge_step, 0 },
	/* THP is in madvise mode: only the ranges can be collapsed. */
	{ "collapse", collapse_step, SR_SETTLE_THP },
	{}
};

SR_TARGET_MAIN(workloads)

/* The reading side: the file, a kept-open fd, and how often it was read. */
struct reader {
	char path[64];
	int fd;			/* read with pread() at 0 */
	unsigned long reads;
	unsigned long during;	/* reads while the churn ran */
	long long since;	/* when the churn started, in ms */
	bool asked;		/* the churn was asked to stop */
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
	self->rd.asked = false;
}

FIXTURE_TEARDOWN(race)
{
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
		n = sr_read_fd(fd, rd->buf, sizeof(rd->buf), sizeof(rd->buf));
		close(fd);
		break;
	case 1:
		n = pread(rd->fd, rd->buf, sizeof(rd->buf), 0);
		if (n < 0)
			n = -errno;
		break;
	default:
		fd = open(rd->path, O_RDONLY);
		if (fd < 0)
			return -errno;
		n = sr_read_fd(fd, rd->buf, sizeof(rd->buf), 61);
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
 */
static void start(struct __test_metadata *_metadata, struct sr_target *t,
		  struct reader *rd, const char *name, struct sr_rollup *before)
{
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

/* Let the target exit; then reads fail with ESRCH and nothing else. */
static void finish(struct __test_metadata *_metadata, struct sr_target *t,
		   struct reader *rd)
{
	struct sr_rollup r;
	siginfo_t info;
	int ret;

	TH_LOG("%lu reads during the churn", rd->during);
	EXPECT_LE(MIN_READS, rd->during);
	ask_stop(t, rd);
	ASSERT_EQ(0, sr_recv_status(t->ack, NULL));
	close(t->cmd);
	ASSERT_EQ(0, waitid(P_PID, t->pid, &info, WEXITED | WNOWAIT));
	do {
		ret = read_once(_metadata, rd, &r);
	} while (!ret);
	EXPECT_EQ(-ESRCH, ret);
}

TEST_F_TIMEOUT(race, every_read_parses_within_bounds_during_churn, 90)
{
	unsigned long long bound;
	struct sr_rollup before, r;
	int f, ret;

	start(_metadata, &self->t, &self->rd, "churn_mixed", &before);
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
 * Churn with @workload, which never changes Anonymous, and check that every
 * read during it shows Anonymous as it was before.
 */
static void expect_anonymous_fixed(struct __test_metadata *_metadata,
				   struct sr_target *t, struct reader *rd,
				   const char *workload)
{
	struct sr_rollup before, r;
	int ret;

	start(_metadata, t, rd, workload, &before);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	do {
		ret = read_once(_metadata, rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		EXPECT_EQ(before.kb[SR_ANONYMOUS], r.kb[SR_ANONYMOUS])
			TH_LOG("read %lu", rd->during + 1);
		EXPECT_LE(before.kb[SR_ANONYMOUS], r.kb[SR_RSS]);
		if (_metadata->exit_code)
			break;
	} while (churning(t, rd));
	finish(_metadata, t, rd);
}

/* The churn maps shared memory only, which is not Anonymous. */
TEST_F_TIMEOUT(race, untouched_anonymous_memory_counted_exactly_during_churn, 90)
{
	expect_anonymous_fixed(_metadata, &self->t, &self->rd, "churn_shmem");
}

TEST_F_TIMEOUT(race, walk_resumed_inside_a_vma_counts_it_exactly, 90)
{
	expect_anonymous_fixed(_metadata, &self->t, &self->rd, "interrupt");
}

TEST_F_TIMEOUT(race, vma_split_or_merged_across_resume_counted_exactly, 90)
{
	expect_anonymous_fixed(_metadata, &self->t, &self->rd, "split_merge");
}

TEST_F_TIMEOUT(race, thp_collapsed_across_resume_counted_exactly, 90)
{
	expect_anonymous_fixed(_metadata, &self->t, &self->rd, "collapse");
}

TEST_HARNESS_MAIN
