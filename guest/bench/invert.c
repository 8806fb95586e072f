// SPDX-License-Identifier: GPL-2.0
/*
 * bench-invert: priority inversion through mmap_lock. Does a low-priority
 * reader of a process's /proc file, preempted while it holds the lock,
 * delay the process's mmap and munmap?
 *
 *   bench-invert SECONDS RUNS COND...
 *
 * For each COND, RUNS times: a mapper process pinned to CPU 0 populates a
 * 128 MiB anonymous region (4 KiB pages), then for SECONDS unmaps one
 * random page of it, maps it again (MAP_FIXED, merging back) and writes
 * it, pausing 10 us after each step, and times each munmap and mmap. On
 * CPU 1 meanwhile: the readers of COND at nice 15, and beside them a
 * nice-0 task busy for 2 ms, asleep for 1 ms, again and again, which
 * preempts them. COND is "none", "status:N" (the control), "rollup:N" or
 * "rollup=FILE:N" (smaps_rollup_stock), as for bench-stall. Prints per run:
 *   invert,COND,READERS,RUN,OPS,MMAP_MEAN,MMAP_MAX,MUNMAP_MEAN,MUNMAP_MAX,READS
 *   (records.h RECORD_INVERT_FORMAT)
 * (ns; OPS counts munmap + mmap pairs; READS the readers' reads).
 */
#include "common.h"

#define REGION (128ul << 20)
#define PAGE 4096ul
#define PAUSE_NS 10000
#define BUSY_NS 2000000ull
#define SLEEP_NS 1000000

static int mapper_cpu, other_cpu;	/* pin_cpus() */

struct op_stats {
	uint64_t ops, mmap_sum, mmap_max, munmap_sum, munmap_max;
};

static void sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* xorshift64: the mapper's page picker (no libc state, no locks). */
static uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * The mapper (a child_start() child): pinned, populates the region, says
 * "r" on READY, waits for a byte on GO, loops for *SECONDS (ARG) and
 * writes its struct op_stats to READY.
 */
static void mapper(int ready, int go, void *arg)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull, end;
	double seconds = *(const double *)arg;
	struct op_stats st = { 0 };
	char *region, b;

	pin_to_cpu(0, mapper_cpu);
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap the region");
	madvise(region, REGION, MADV_NOHUGEPAGE);
	for (size_t off = 0; off < REGION; off += PAGE)
		region[off] = 1;
	write_all(ready, "r", 1);
	if (read(go, &b, 1) != 1)
		_exit(1);
	end = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < end) {
		char *page = region + next_random(&seed) % (REGION / PAGE) * PAGE;
		uint64_t t0, t1, t2;

		t0 = now_ns();
		if (munmap(page, PAGE))
			die("munmap");
		t1 = now_ns();
		sleep_ns(PAUSE_NS);
		t2 = now_ns();
		if (mmap(page, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			die("mmap");
		t1 -= t0;
		t2 = now_ns() - t2;
		*page = 1;
		st.ops++;
		st.munmap_sum += t1;
		st.mmap_sum += t2;
		st.munmap_max = t1 > st.munmap_max ? t1 : st.munmap_max;
		st.mmap_max = t2 > st.mmap_max ? t2 : st.mmap_max;
		sleep_ns(PAUSE_NS);
	}
	write_all(ready, &st, sizeof(st));
	_exit(0);
}

/* The nice-0 competitor on the readers' CPU: 2 ms busy, 1 ms asleep. */
static pid_t start_busy(void)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid)
		return pid;
	pin_to_cpu(0, other_cpu);
	for (;;) {
		uint64_t until = now_ns() + BUSY_NS;

		while (now_ns() < until)
			;
		sleep_ns(SLEEP_NS);
	}
}

static void run(const char *cond, const struct method *m, int nrun, double seconds,
		struct readers *rs)
{
	struct child mapper_child;
	struct op_stats s;
	pid_t busy;
	int st;

	child_start(&mapper_child, mapper, &seconds, "the mapper");
	readers_start(rs, m, mapper_child.pid, other_cpu, 15);
	busy = start_busy();
	write_all(mapper_child.go, "g", 1);
	if (sr_read_full(mapper_child.ready, &s, sizeof(s)))
		die("the mapper did not finish");
	readers_stop(rs);
	kill(busy, SIGKILL);
	waitpid(busy, NULL, 0);
	if (waitpid(mapper_child.pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("the mapper failed");
	close(mapper_child.ready);
	close(mapper_child.go);
	printf(RECORD_INVERT_FORMAT, cond, rs->n, nrun,
	       (unsigned long long)s.ops,
	       (unsigned long long)(s.ops ? s.mmap_sum / s.ops : 0),
	       (unsigned long long)s.mmap_max,
	       (unsigned long long)(s.ops ? s.munmap_sum / s.ops : 0),
	       (unsigned long long)s.munmap_max,
	       (unsigned long long)readers_count(rs));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct readers rs;
	double seconds;
	int runs;

	if (argc < 4)
		die("usage: bench-invert SECONDS RUNS COND...");
	seconds = atof(argv[1]);
	runs = atoi(argv[2]);
	readers_init(&rs);
	pin_cpus("bench-invert", &mapper_cpu, &other_cpu);
	pin_to_cpu(0, other_cpu);	/* this program only waits */
	for (int c = 3; c < argc; c++) {
		struct method m;

		parse_method(&m, strcmp(argv[c], "none") ? argv[c] : "status:0", 1);
		if ((m.kind != M_STATUS && m.kind != M_ROLLUP) || m.count < 0)
			die("bad condition %s (none, status:N or rollup[=FILE]:N)", argv[c]);
		for (int r = 1; r <= runs; r++)
			run(argv[c], &m, r, seconds, &rs);
	}
	return 0;
}
