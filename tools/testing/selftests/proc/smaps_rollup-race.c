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
 * Reads go through a new fd each time, through pread() at 0 on one fd, and
 * through small read()s; the only error allowed is ESRCH once the target
 * exits.  Each test churns for CHURN_MS and stops after ITERS operations
 * per thread, whichever comes first.
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
#define ITERS		200000
#define NR_THREADS	2
#define SLOTS		8
#define SLOT_MAX	(512UL << 10)
#define THP_SLOT_MAX	(8UL << 20)	/* slot 0 of thread 0, mixed churn */
#define STABLE_PAGES	2048		/* each page its own VMA */

enum { CHURN_MIXED, CHURN_SHMEM };

struct slot {
	char *addr;
	size_t len;
	size_t obj_len;	/* shared memory: touching beyond it is SIGBUS */
};

static struct slot slots[NR_THREADS][SLOTS];
static int stop;		/* read and set with __atomic builtins */
static int start_pipe[2], ready_pipe[2];
static int mode;
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

static void *churn_thread(void *arg)
{
	int id = (long)arg, i, iter;
	unsigned int r = 0x9e3779b9u * (id + 1);
	char c;

	sr_grow_stack();
	if (write(ready_pipe[1], "x", 1) != 1 ||
	    read(start_pipe[0], &c, 1) != 1)
		return NULL;
	for (iter = 0; iter < ITERS && !__atomic_load_n(&stop, __ATOMIC_RELAXED);
	     iter++) {
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
 * Step 1: STABLE_PAGES written pages in STABLE_PAGES VMAs that no one
 * touches again, and the churn threads, waiting.  Step 2: churn for @arg
 * ms while the main thread forks and reaps children; return when done.
 */
static int churn_step(int step, long arg, unsigned long *val)
{
	size_t page = getpagesize(), i;
	long long deadline;
	char *p, c;
	pid_t pid;
	long id;

	if (step == 1) {
		p = mmap(NULL, STABLE_PAGES * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		sr_touch(p, STABLE_PAGES * page, 1);
		for (i = 1; i < STABLE_PAGES; i += 2)
			if (mprotect(p + i * page, page, PROT_READ))
				return -errno;
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
	while (now_ms() < deadline) {
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

static int churn_mixed_step(int step, long arg, unsigned long *val)
{
	mode = CHURN_MIXED;
	return churn_step(step, arg, val);
}

static int churn_shmem_step(int step, long arg, unsigned long *val)
{
	mode = CHURN_SHMEM;
	return churn_step(step, arg, val);
}

static const struct sr_workload workloads[] = {
	/* clock_gettime() needs the vDSO; no exact Pss here anyway. */
	{ "churn_mixed", churn_mixed_step, SR_SETTLE_THP },
	{ "churn_shmem", churn_shmem_step, 0 },
	{}
};

SR_TARGET_MAIN(workloads)

/* The reading side: the file, a kept-open fd, and how often it was read. */
struct reader {
	char path[64];
	int fd;			/* read with pread() at 0 */
	unsigned long reads;
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

/* Start @name and run step 1; open the fd, read the rollup before churn. */
static void start(struct __test_metadata *_metadata, struct sr_target *t,
		  struct reader *rd, const char *name, struct sr_rollup *before)
{
	ASSERT_EQ(0, sr_target_start(t, name, CHURN_MS));
	ASSERT_EQ(0, sr_target_step(t, 1, NULL));
	sr_path(rd->path, sizeof(rd->path), t->pid, "smaps_rollup");
	rd->fd = open(rd->path, O_RDONLY);
	ASSERT_LE(0, rd->fd);
	ASSERT_EQ(0, sr_read_rollup_stable(t->pid, before))
		TH_LOG("%s", sr_error);
	/* Step 2 runs the churn; its status comes when the churn is over. */
	ASSERT_EQ(1, write(t->cmd, "\2", 1));
}

static bool churn_done(struct sr_target *t)
{
	struct pollfd pfd = { .fd = t->ack, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

/* Let the target exit; then reads fail with ESRCH and nothing else. */
static void finish(struct __test_metadata *_metadata, struct sr_target *t,
		   struct reader *rd)
{
	struct sr_rollup r;
	siginfo_t info;
	int ret;

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
	unsigned long during = 0;
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
		during++;
		EXPECT_GE(bound, r.kb[SR_RSS] + r.kb[SR_SWAP]);
		for (f = 0; f < SR_NR_FIELDS; f++)
			EXPECT_GE(bound, r.kb[f]) TH_LOG("field %d", f + 1);
		EXPECT_EQ(0, r.kb[SR_SHARED_HUGETLB]);
		EXPECT_EQ(0, r.kb[SR_PRIVATE_HUGETLB]);
		EXPECT_GE(1UL << 56, r.end);
		if (_metadata->exit_code)
			break;
	} while (!churn_done(&self->t));
	TH_LOG("%lu reads during the churn", during);
	EXPECT_LE(10, during);
	finish(_metadata, &self->t, &self->rd);
}

TEST_F_TIMEOUT(race, untouched_anonymous_memory_counted_exactly_during_churn, 90)
{
	struct sr_rollup before, r;
	unsigned long during = 0;
	int ret;

	start(_metadata, &self->t, &self->rd, "churn_shmem", &before);
	do {
		ret = read_once(_metadata, &self->rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		during++;
		/* The churn maps shared memory only, which is not Anonymous. */
		EXPECT_EQ(before.kb[SR_ANONYMOUS], r.kb[SR_ANONYMOUS])
			TH_LOG("read %lu", during);
		EXPECT_LE(before.kb[SR_ANONYMOUS], r.kb[SR_RSS]);
		if (_metadata->exit_code)
			break;
	} while (!churn_done(&self->t));
	TH_LOG("%lu reads during the churn", during);
	EXPECT_LE(10, during);
	finish(_metadata, &self->t, &self->rd);
}

TEST_HARNESS_MAIN
