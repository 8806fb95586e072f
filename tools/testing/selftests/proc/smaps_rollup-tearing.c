// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup read while threads of the target split and merge
 * the VMA of its populated memory (mprotect() of a page to read-only and
 * back), or map and unmap empty VMAs beside it, which may merge with it.
 * No page changes: every read's Anonymous and Pss_Anon must exceed those
 * before the memory was written by exactly its size.  Each
 * of the READS reads waits for progress of the churn since the last.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>

#include "smaps_rollup.h"

#define READS		200
#define POPULATED	(4UL << 20)
#define GAP		(1024UL * 1024)	/* on each side, for the empty VMAs */
#define THREADS		2

static char *area;		/* GAP, POPULATED, GAP */
static int stop, ops, tick_fd, start_pipe[2], done_pipe[2];

/* Thread 0 splits and merges; thread 1 maps and unmaps empty VMAs. */
static int churn_op(long id, unsigned int r)
{
	size_t page = getpagesize(), pages = 1 + r % 64, off;
	char *p;

	if (!id) {
		p = area + GAP + (r >> 8) % (POPULATED / page) * page;
		return mprotect(p, page, PROT_READ) ||
		       mprotect(p, page, PROT_READ | PROT_WRITE) ? -errno : 0;
	}
	off = (r >> 8) % (GAP / page - pages) * page;
	p = area + (r & 128 ? GAP + POPULATED + off : GAP - off - pages * page);
	return mmap(p, pages * page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED ||
	       mmap(p, pages * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		    MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED ? -errno : 0;
}

static void *churn_thread(void *arg)
{
	unsigned int seed = (long)arg;
	int err = 0;
	char c;

	sr_grow_stack();
	if (write(done_pipe[1], "r", 1) != 1 || read(start_pipe[0], &c, 1) != 1)
		return NULL;
	while (ops & (1 << (long)arg) && !err &&
	       !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		err = churn_op((long)arg, rand_r(&seed));
		/* Progress, for the reader; a full pipe is progress enough. */
		if (!err && write(tick_fd, "t", 1) < 0 && errno != EAGAIN)
			err = -errno;
	}
	if (err)	/* the reader's read() of a tick fails */
		close(tick_fd);
	c = -err;
	if (write(done_pipe[1], &c, 1) != 1)
		return NULL;
	for (;;)	/* exiting would free the stack, changing Rss */
		pause();
	return NULL;
}

/*
 * Step 1: map the area, start the threads (they wait); step 2: write the
 * populated part; step 3: start the churn; step 4: stop it, and return
 * the first error of a thread.  @arg: the pipe to tick on, and (<< 16)
 * which threads churn.
 */
static int churn_step(int step, long arg, unsigned long *val)
{
	pthread_t t;
	char c[THREADS];
	long i;

	switch (step) {
	case 1:
		tick_fd = arg & 0xffff;
		ops = arg >> 16;
		if (fcntl(tick_fd, F_SETFL, O_NONBLOCK) ||
		    pipe(start_pipe) || pipe(done_pipe) ||
		    sr_mmap((void **)&area, 2 * GAP + POPULATED, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1) ||
		    mprotect(area + GAP, POPULATED, PROT_READ | PROT_WRITE))
			return -errno;
		for (i = 0; i < THREADS; i++)
			if (pthread_create(&t, NULL, churn_thread, (void *)i))
				return -EAGAIN;
		return sr_read_full(done_pipe[0], c, THREADS) ? -EPIPE : 0;
	case 2:
		sr_touch(area + GAP, POPULATED, 1);
		return 0;
	case 3:
		return write(start_pipe[1], "gg", THREADS) == THREADS ? 0 : -EPIPE;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	if (sr_read_full(done_pipe[0], c, THREADS))
		return -EPIPE;
	return -(c[0] ?: c[1]);
}

static const struct sr_workload workloads[] = {
	{ "churn", churn_step, SR_SETTLE_UNMAP_VDSO },
	{}
};

SR_TARGET_MAIN(workloads)

FIXTURE(tearing) {
	struct sr_target t;
	int tick[2];
};

/* Which threads churn: 1 splits and merges, 2 maps and unmaps beside. */
FIXTURE_VARIANT(tearing) {
	int ops;
};

FIXTURE_VARIANT_ADD(tearing, populated_vma_split_and_merged) {
	.ops = 1,
};

FIXTURE_VARIANT_ADD(tearing, empty_vmas_mapped_and_unmapped_beside) {
	.ops = 2,
};

FIXTURE_VARIANT_ADD(tearing, both_at_once) {
	.ops = 3,
};

FIXTURE_SETUP(tearing)
{
	self->t.pid = -1;
	ASSERT_EQ(0, pipe(self->tick));
}

FIXTURE_TEARDOWN(tearing)
{
}

/*
 * Only the target's anonymous memory is its own to control: the Pss of the
 * libraries it maps moves as other processes map them, and its first calls
 * of the churn's functions may fault in a page of their text.
 */
static const int exact[] = { SR_ANONYMOUS, SR_PSS_ANON };

/* Wait until the churn has made progress since the last call. */
static void wait_tick(struct __test_metadata *_metadata, int fd)
{
	char buf[4096];

	ASSERT_EQ(0, fcntl(fd, F_SETFL, O_NONBLOCK));
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	ASSERT_EQ(0, fcntl(fd, F_SETFL, 0));
	ASSERT_EQ(1, read(fd, buf, 1)) TH_LOG("the churn stopped");
}

TEST_F_TIMEOUT(tearing, every_read_counts_populated_memory_exactly, 300)
{
	struct sr_rollup empty, before, r;
	char path[64], buf[4096];
	int i, f, fd, ret;
	ssize_t n;

	sr_assert_start(_metadata, &self->t, "churn",
			self->tick[1] | variant->ops << 16);
	close(self->tick[1]);
	sr_assert_step(_metadata, &self->t, 1, NULL);
	sr_assert_read(_metadata, self->t.pid, &empty);
	sr_assert_step(_metadata, &self->t, 2, NULL);
	sr_assert_read(_metadata, self->t.pid, &before);
	for (f = 0; f < (int)ARRAY_SIZE(exact); f++)
		ASSERT_EQ(SR_KB(POPULATED), sr_delta(&empty, &before, exact[f]))
			TH_LOG("%s before the churn", sr_label[exact[f]]);

	sr_path(path, sizeof(path), self->t.pid, "smaps_rollup");
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	sr_assert_step(_metadata, &self->t, 3, NULL);
	for (i = 0; i < READS; i++) {
		wait_tick(_metadata, self->tick[0]);
		/* A fresh open and a pread() of one fd, in turn. */
		n = i % 2 ? pread(fd, buf, sizeof(buf), 0) :
			    sr_read_path(path, buf, sizeof(buf));
		ASSERT_LT(0, n) TH_LOG("read %d: %s", i, strerror(errno));
		ASSERT_EQ(0, sr_parse_rollup(buf, n, &r)) TH_LOG("%s", sr_error);
		EXPECT_EQ(0, sr_rollup_consistent(&r)) TH_LOG("%s", sr_error);
		for (f = 0; f < (int)ARRAY_SIZE(exact); f++)
			EXPECT_EQ(before.kb[exact[f]], r.kb[exact[f]])
				TH_LOG("%s, read %d:\n%.*s", sr_label[exact[f]], i,
				       (int)n, buf);
		if (_metadata->exit_code)
			break;
	}
	close(fd);
	ret = sr_target_step(&self->t, 4, NULL);
	ASSERT_EQ(0, ret) TH_LOG("the churn: %s", strerror(-ret));
	sr_expect_rollup_is_smaps_sum(_metadata, self->t.pid);
}

TEST_HARNESS_MAIN
