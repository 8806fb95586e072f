/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Readers of /proc/PID/smaps_rollup racing a target that churns its address
 * space: what smaps_rollup-race-*.c share.
 *
 * The target side.  A churn is a workload (see smaps_rollup.h) of two
 * steps.  Step 1 maps what the churn works on and starts its threads,
 * which wait; it returns the address of the churn's walked region, 0 if
 * none.  Step 2 lets the threads loop over the churn's operation until the
 * test writes a byte to the command pipe or closes it, the main thread
 * forking children that exit at once meanwhile if the churn wants it; it
 * returns when the threads have stopped, with the error that stopped one
 * of them, if one did.  The threads never exit: glibc would MADV_DONTNEED
 * the stack of an exiting thread, changing Anonymous.
 *
 * The test side.  A reader reads the target's smaps_rollup in three ways
 * in turn: through a new fd each time, through pread() at 0 on one fd, and
 * through read()s of 61 bytes; every read must parse and obey the relations
 * of sr_rollup_consistent(), and the only error allowed is ESRCH once the
 * target exits.  The churn runs until the reader has made min_reads reads
 * during it and churn_ms have passed, however slow the kernel: no verdict
 * depends on how much CPU time the emulator or the host gives a test, and
 * the harness's timeout is only there to catch a hang.
 *
 * Workbench only (guest/selftests/, not sent): v6 reads each VMA under its
 * per-VMA lock and has no trace events, so nothing here traces where a
 * read stopped.
 */
#ifndef SMAPS_ROLLUP_WB_RACE_H
#define SMAPS_ROLLUP_WB_RACE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>

#include "smaps_rollup_wb.h"

#define CHURN_MS	0	/* no time floor: the churn runs for MIN_READS reads */
#define MIN_READS	200
/*
 * The harness's timeout of a race test, in s: a guard against a hang, not
 * a bound on the kernel.  The slowest test took 31.6 s on a KCSAN kernel in
 * a TCG guest, and the same host, loaded with a second such run, took
 * twice as long to do the same work: five times that, and more.
 */
#define RACE_TIMEOUT	360
#define RACE_THREADS_MAX	4
/* The walked region of most churns: one VMA of 64 page tables. */
#define LARGE_VMA	(128UL << 20)
#define PMD_RANGE	(2UL << 20)	/* x86-64, arm64 with 4K pages */
#define PIECE_MAX	(2UL << 20)	/* the most a churn op tears at once */

/* --- The target side --- */

struct race_churn {
	/* Step 1: map what the churn works on; its walked region in *@region. */
	int (*map)(unsigned long *region);
	/* One operation of thread @id, @r random: 0, or -errno to stop. */
	int (*op)(int id, unsigned int r);
	int threads;	/* how many threads run op(), at most RACE_THREADS_MAX */
	bool fork;	/* the main thread forks children meanwhile */
	/* If not NULL: what step 2 returns, once the threads have stopped. */
	unsigned long (*done)(void);
};

static struct race_churn race_churn;	/* the target's */
static int race_stop;			/* read and set with __atomic builtins */
static int race_churn_err;		/* why a thread stopped the churn */
static int race_start_pipe[2], race_ready_pipe[2];
static pthread_t race_threads[RACE_THREADS_MAX];

static inline unsigned int race_next_random(unsigned int *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static inline long long race_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static inline void *race_churn_thread(void *arg)
{
	int id = (long)arg, err;
	unsigned int r = 0x9e3779b9u * (id + 1);
	char c;

	sr_grow_stack();
	if (write(race_ready_pipe[1], "x", 1) != 1 ||
	    read(race_start_pipe[0], &c, 1) != 1)
		return NULL;
	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		err = race_churn.op(id, race_next_random(&r));
		if (err) {
			/* Step 2 returns it: the test fails. */
			__atomic_store_n(&race_churn_err, err, __ATOMIC_RELAXED);
			__atomic_store_n(&race_stop, 1, __ATOMIC_RELAXED);
		}
	}
	/* Report, and never exit (see the top). */
	if (write(race_ready_pipe[1], "x", 1) != 1)
		return NULL;
	for (;;)
		pause();
	return NULL;
}

/*
 * Change the flags of the whole walked region [@addr, @addr + @len):
 * MADV_RANDOM and MADV_NORMAL in turn on even threads, MADV_DONTDUMP and
 * MADV_DODUMP on odd ones, so that each call changes them whatever the
 * other thread did.  That takes mmap_lock for writing and write-locks each
 * VMA of the region: a reader's batch ends early when such a writer waits,
 * and the walk resumes in the VMA after it.  Neither flag changes what
 * smaps_rollup counts, nor what is resident.
 */
static inline void race_flip_flags(int id, void *addr, size_t len)
{
	static const int advice[2][2] = {
		{ MADV_RANDOM, MADV_NORMAL },
		{ MADV_DONTDUMP, MADV_DODUMP },
	};
	static unsigned int flips[RACE_THREADS_MAX];

	/* ENOMEM where a churn tore a hole: the rest changes. */
	madvise(addr, len, advice[id % 2][flips[id]++ % 2]);
}

/*
 * The writers of the churns that interrupt a walk without changing the
 * layout: take mmap_lock for writing for a VMA no walk reads (mmap() and
 * munmap() of a page never touched), then race_flip_flags().
 */
static inline void race_interrupt_op(int id, void *addr, size_t len)
{
	size_t page = getpagesize();
	void *p;

	p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		munmap(p, page);
	race_flip_flags(id, addr, len);
}

/*
 * Has the test asked the churn to stop (or gone away)?  Waits up to
 * @wait_ms for it.
 */
static inline bool race_stop_asked(int wait_ms)
{
	struct pollfd pfd = { .fd = sr_target_cmd_fd, .events = POLLIN };
	char c;

	if (poll(&pfd, 1, wait_ms) <= 0)
		return false;
	if (read(sr_target_cmd_fd, &c, 1) < 0)
		return false;
	return true;
}

/* The two steps of churn @c, for a workload's step function. */
static inline int race_churn_step(const struct race_churn *c, int step,
				  unsigned long *val)
{
	unsigned long region = 0;
	char go[RACE_THREADS_MAX];
	pid_t pid;
	long id;
	int ret;

	if (step == 1) {
		race_churn = *c;
		if (c->threads < 1 || c->threads > RACE_THREADS_MAX)
			return -EINVAL;
		ret = c->map(&region);
		if (ret)
			return ret;
		if (pipe(race_start_pipe) || pipe(race_ready_pipe))
			return -errno;
		for (id = 0; id < c->threads; id++)
			if (pthread_create(&race_threads[id], NULL,
					   race_churn_thread, (void *)id))
				return -EAGAIN;
		/* Wait until the threads have grown their stacks. */
		for (id = 0; id < c->threads; id++)
			if (read(race_ready_pipe[0], go, 1) != 1)
				return -EPIPE;
		*val = region;
		return 0;
	}
	memset(go, 'x', sizeof(go));
	if (write(race_start_pipe[1], go, race_churn.threads) !=
	    race_churn.threads)
		return -EPIPE;
	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		/*
		 * Without children to fork, the main thread waits, looking at
		 * the threads' stop now and then.
		 */
		if (!race_churn.fork) {
			if (race_stop_asked(100))
				break;
			continue;
		}
		if (race_stop_asked(0))
			break;
		pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	__atomic_store_n(&race_stop, 1, __ATOMIC_RELAXED);
	for (id = 0; id < race_churn.threads; id++)
		if (read(race_ready_pipe[0], go, 1) != 1)
			return -EPIPE;
	if (race_churn.done)
		*val = race_churn.done();
	return __atomic_load_n(&race_churn_err, __ATOMIC_RELAXED);
}

/*
 * The step function name##_step of a workload that sets @mode_var to @m,
 * then churns: step 1, @map_fn maps what @nr threads of @op_fn work on,
 * the threads waiting; step 2, they churn while the main thread forks and
 * reaps children (race_churn_step()).
 */
#define RACE_CHURN_WORKLOAD(name, mode_var, m, map_fn, op_fn, nr)	\
static int name##_step(int step, long arg, unsigned long *val)		\
{									\
	const struct race_churn churn = {				\
		.map = map_fn, .op = op_fn, .threads = nr, .fork = true,	\
	};								\
									\
	mode_var = m;							\
	return race_churn_step(&churn, step, val);			\
}

/* --- The test side --- */

/* The reading side: the file, a kept-open fd, how often it was read. */
struct race_reader {
	char path[64];
	int fd;			/* read with pread() at 0 */
	unsigned long reads;
	unsigned long during;	/* reads while the churn ran */
	unsigned long min_reads;	/* reads the churn runs for, at least */
	long long churn_ms;	/* and ms */
	long long since;	/* when the churn started, in ms; 0 before */
	unsigned long region;	/* the churn's walked region, 0 if none */
	bool quiescent_sum;	/* compare with summed smaps once stopped */
	bool asked;		/* the churn was asked to stop */
	bool stopped;		/* and has reported its end */
	unsigned long churn_val;	/* what step 2 returned then */
	char buf[8192];
};

/* For FIXTURE_SETUP(). */
static inline void race_reader_init(struct race_reader *rd)
{
	memset(rd, 0, sizeof(*rd));
	rd->fd = -1;
	rd->min_reads = MIN_READS;
	rd->churn_ms = CHURN_MS;
}

/* One read() (@off < 0) or pread() of smaps_rollup: what read() does, -errno. */
static inline ssize_t race_read_counted(struct race_reader *rd, int fd,
					char *buf, size_t len, off_t off)
{
	ssize_t n = off < 0 ? read(fd, buf, len) : pread(fd, buf, len, off);

	return n < 0 ? -errno : n;
}

/* read() from @fd until EOF in pieces of @chunk: the length, or -errno. */
static inline ssize_t race_read_all(struct race_reader *rd, int fd,
				    size_t chunk)
{
	size_t len = 0;
	ssize_t n;

	do {
		if (len == sizeof(rd->buf))
			return -EFBIG;
		if (chunk > sizeof(rd->buf) - len)
			chunk = sizeof(rd->buf) - len;
		n = race_read_counted(rd, fd, rd->buf + len, chunk, -1);
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
static inline int race_read_once(struct __test_metadata *_metadata,
				 struct race_reader *rd, struct sr_rollup *r)
{
	ssize_t n;
	int fd;

	switch (rd->reads++ % 3) {
	case 0:
		fd = open(rd->path, O_RDONLY);
		if (fd < 0)
			return -errno;
		n = race_read_all(rd, fd, sizeof(rd->buf));
		close(fd);
		break;
	case 1:
		n = race_read_counted(rd, rd->fd, rd->buf, sizeof(rd->buf), 0);
		break;
	default:
		fd = open(rd->path, O_RDONLY);
		if (fd < 0)
			return -errno;
		n = race_read_all(rd, fd, 61);
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
 * Start workload @name and run its step 1; open the fd, read the rollup
 * before the churn.  Skips if the workload needs THP and the kernel
 * refuses MADV_COLLAPSE.
 */
static inline void race_set_up(struct __test_metadata *_metadata,
			       struct sr_target *t, struct race_reader *rd,
			       const char *name, size_t region_len,
			       struct sr_rollup *before)
{
	unsigned long addr = 0;
	int ret;

	ASSERT_EQ(0, sr_target_start(t, name, 0));
	ret = sr_target_step(t, 1, &addr);
	if (ret == -EOPNOTSUPP)
		SKIP(return, "MADV_COLLAPSE refused: no THP, or THP enabled is never");
	ASSERT_EQ(0, ret) TH_LOG("setting up %s: %s", name, strerror(-ret));
	sr_path(rd->path, sizeof(rd->path), t->pid, "smaps_rollup");
	rd->fd = open(rd->path, O_RDONLY);
	ASSERT_LE(0, rd->fd);
	ASSERT_EQ(0, sr_read_rollup_stable(t->pid, before))
		TH_LOG("%s", sr_error);
	rd->region = addr;
}

/* Step 2 runs the churn; its status comes when the churn is over. */
static inline void race_go(struct __test_metadata *_metadata,
			   struct sr_target *t, struct race_reader *rd)
{
	ASSERT_EQ(1, write(t->cmd, "\2", 1));
	rd->since = race_now_ms();
}

/* Ask the churn to stop, once: it reads one byte. */
static inline void race_ask_stop(struct sr_target *t, struct race_reader *rd)
{
	if (!rd->asked && write(t->cmd, "\3", 1) == 1)
		rd->asked = true;
}

/* Stop the churn, once, and see that it went well. */
static inline void race_stop_churn(struct __test_metadata *_metadata,
				   struct sr_target *t, struct race_reader *rd)
{
	int ret;

	if (rd->stopped)
		return;
	race_ask_stop(t, rd);
	ret = sr_recv_status(t->ack, &rd->churn_val);
	ASSERT_EQ(0, ret) TH_LOG("the churn stopped: %s", strerror(-ret));
	rd->stopped = true;
}

/* Whether the churn still runs: it has not reported its end. */
static inline bool race_churn_running(struct sr_target *t)
{
	struct pollfd pfd = { .fd = t->ack, .events = POLLIN };

	return poll(&pfd, 1, 0) == 0;
}

/*
 * Whether the churn goes on, after one more read during it.  Once there
 * were min_reads such reads and churn_ms have passed, ask it to stop.
 */
static inline bool race_churning(struct sr_target *t, struct race_reader *rd)
{
	rd->during++;
	if (rd->during >= rd->min_reads &&
	    race_now_ms() - rd->since >= rd->churn_ms)
		race_ask_stop(t, rd);
	return race_churn_running(t);
}

/* Let the target exit; then reads fail with ESRCH and nothing else. */
static inline void race_finish(struct __test_metadata *_metadata,
			       struct sr_target *t, struct race_reader *rd)
{
	struct sr_rollup r;
	siginfo_t info;
	int ret;

	TH_LOG("%lu reads during the churn", rd->during);
	EXPECT_LE(rd->min_reads, rd->during);
	race_stop_churn(_metadata, t, rd);
	if (rd->quiescent_sum)
		sr_expect_rollup_is_smaps_sum(_metadata, t->pid);
	close(t->cmd);
	ASSERT_EQ(0, waitid(P_PID, t->pid, &info, WEXITED | WNOWAIT));
	do {
		ret = race_read_once(_metadata, rd, &r);
	} while (!ret);
	EXPECT_EQ(-ESRCH, ret);
}

/*
 * A read during a churn that changes neither Anonymous nor Swap must show
 * both as they were before; and Rss, if @exact_rss.
 */
static inline void race_expect_as_before(struct __test_metadata *_metadata,
					 const struct race_reader *rd,
					 const struct sr_rollup *before,
					 const struct sr_rollup *r,
					 bool exact_rss)
{
	EXPECT_EQ(before->kb[SR_ANONYMOUS], r->kb[SR_ANONYMOUS])
		TH_LOG("Anonymous, read %lu", rd->during + 1);
	EXPECT_EQ(before->kb[SR_SWAP], r->kb[SR_SWAP])
		TH_LOG("Swap, read %lu", rd->during + 1);
	if (exact_rss) {
		EXPECT_EQ(before->kb[SR_RSS], r->kb[SR_RSS])
			TH_LOG("Rss, read %lu", rd->during + 1);
	} else {
		EXPECT_LE(before->kb[SR_ANONYMOUS], r->kb[SR_RSS]);
	}
}

/*
 * The walked region, of @region_len bytes, must be resident all through,
 * in a VMA of its own, for Rss to be exact: with @rss_kb in all, that much
 * is the rest's.
 */
static inline void race_expect_region_resident(struct __test_metadata *_metadata,
					       pid_t pid,
					       const struct race_reader *rd,
					       size_t region_len,
					       unsigned long long rss_kb)
{
	long long region_kb = SR_KB(region_len);

	ASSERT_EQ(region_kb, sr_smaps_vma_field(pid, rd->region, "Rss:"))
		TH_LOG("Rss of the walked region at %#lx", rd->region);
	TH_LOG("Rss %llu kB: the walked region's %lld kB and %lld kB besides",
	       rss_kb, region_kb, (long long)rss_kb - region_kb);
}

/*
 * Churn with workload @name, whose walked region is @region_len bytes and
 * which never changes Anonymous nor Swap, and check that every read during
 * it shows them as they were before; Swap must be @swap_kb then.
 * @exact_rss: nor Rss, and the walked region is resident all through.
 */
static inline void race_expect_fixed(struct __test_metadata *_metadata,
				     struct sr_target *t,
				     struct race_reader *rd, const char *name,
				     size_t region_len, long long swap_kb,
				     bool exact_rss)
{
	struct sr_rollup before, r;
	int ret;

	race_set_up(_metadata, t, rd, name, region_len, &before);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	ASSERT_EQ(swap_kb, (long long)before.kb[SR_SWAP])
		TH_LOG("Swap before the churn");
	if (exact_rss)
		race_expect_region_resident(_metadata, t->pid, rd, region_len,
					    before.kb[SR_RSS]);
	race_go(_metadata, t, rd);
	do {
		ret = race_read_once(_metadata, rd, &r);
		ASSERT_EQ(0, ret) TH_LOG("read during churn: %s", strerror(-ret));
		race_expect_as_before(_metadata, rd, &before, &r, exact_rss);
		if (_metadata->exit_code)
			break;
	} while (race_churning(t, rd));
	race_finish(_metadata, t, rd);
}

#endif /* SMAPS_ROLLUP_WB_RACE_H */
