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
 * "rollup=FILE:N" (smaps_rollup_stock), as for bench-stall, each also
 * with the suffix "+swap" (records.h INVERT_SWAP_SUFFIX): then swap must
 * be on (guest/setup), every SWAP_EVERY-th page of the region (common.h)
 * is paged out with MADV_PAGEOUT once populated, and while the mapper
 * runs, a pager thread of it on its CPU pages out again every few ms
 * those of them it mapped again, so that about 1/64 of the region is swap
 * entries all along; the mapper dies unless its VmSwap holds at least
 * half of that before and after the loop (on stderr: both, and the pages
 * paged out again). With the suffix "+move" (records.h INVERT_MOVE_SUFFIX),
 * as ART's garbage collector does, a mover thread of the mapper on its CPU
 * moves 8 MiB of populated anonymous memory (MOVE_BYTES, 4 KiB pages) from
 * one area to another with UFFDIO_MOVE (userfaultfd, Linux 6.8 and later),
 * then back, again and again while the mapper's loop runs; the pages stay
 * populated, so the mapper's Rss is constant. A move that fails or moves
 * less than asked kills the mapper, as does a page that is not where the
 * moves left it afterwards (on stderr: the moves and the pages moved). The
 * suffixes combine (rollup:1+swap+move). Prints per run:
 *   invert,COND,READERS,RUN,OPS,MMAP_MEAN,MMAP_MAX,MUNMAP_MEAN,MUNMAP_MAX,READS
 *   (records.h RECORD_INVERT_FORMAT)
 * (ns; OPS counts munmap + mmap pairs; READS the readers' reads).
 */
#include "common.h"
#include <pthread.h>
#include <stdbool.h>

#define REGION (128ul << 20)
#define PAUSE_NS 10000
#define BUSY_NS 2000000ull
#define SLEEP_NS 1000000
#define SWAP_PAGES (REGION / PAGE / SWAP_EVERY)
#define SWAP_KB ((long long)(SWAP_PAGES * PAGE >> 10))
#define PAGER_PERIOD_NS 5000000
#define MOVE_BYTES (8ul << 20)

static int mapper_cpu, other_cpu;	/* pin_cpus() */

struct op_stats {
	uint64_t ops, mmap_sum, mmap_max, munmap_sum, munmap_max;
	long long swap_start_kb, swap_end_kb;	/* +swap: VmSwap before and after */
	uint64_t paged_out;	/* +swap: pages the pager paged out again */
	uint64_t moves, pages_moved;	/* +move: UFFDIO_MOVE calls, pages moved */
};

/* The mapper's settings (child_start()'s ARG). */
struct mapper_arg {
	double seconds;
	bool swap;		/* COND+swap */
	bool move;		/* COND+move */
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
 * The pager of a +swap mapper, a thread on its CPU: every PAGER_PERIOD_NS
 * until STOP, it pages out again the pages of PENDING, those of every
 * SWAP_EVERY-th that the mapper has mapped again and written since.
 */
struct pager {
	char *region;
	unsigned char pending[SWAP_PAGES];
	int stop;
	uint64_t pages;
};

static void *pager(void *arg)
{
	struct pager *p = arg;

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		sleep_ns(PAGER_PERIOD_NS);
		p->pages += (uint64_t)page_out_every(p->region, REGION, p->pending);
	}
	return NULL;
}

/*
 * The mover of a +move mapper, a thread on its CPU: AREA[0] and AREA[1]
 * are MOVE_BYTES each, registered with UFFD; the pages are in AREA[0] at
 * first. Until STOP, it moves them all to the other area with one
 * UFFDIO_MOVE, then back. Dies (the mapper with it) when a move fails or
 * moves less than MOVE_BYTES.
 */
struct mover {
	int uffd;
	char *area[2];
	int stop;
	uint64_t moves;
};

static void *mover(void *arg)
{
	struct mover *mv = arg;

	while (!__atomic_load_n(&mv->stop, __ATOMIC_ACQUIRE)) {
		int from = mv->moves % 2;

		uffd_move(mv->uffd, mv->area[!from], mv->area[from], MOVE_BYTES, "+move",
			  (unsigned long long)mv->moves + 1);
		mv->moves++;
	}
	return NULL;
}

/*
 * mover_setup: MV's two areas, one page apart (so that they stay two
 * VMAs), in 4 KiB pages, the first populated (every page written with its
 * number), then both registered with a new userfaultfd as UFFDIO_MOVE
 * needs (mode missing).
 */
static void mover_setup(struct mover *mv)
{
	char *base = mmap(NULL, 2 * MOVE_BYTES + PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (base == MAP_FAILED)
		die("mmap the mover's areas");
	if (mprotect(base + MOVE_BYTES, PAGE, PROT_NONE))
		die("mprotect the mover's guard page");
	mv->area[0] = base;
	mv->area[1] = base + MOVE_BYTES + PAGE;
	for (int i = 0; i < 2; i++)
		if (madvise(mv->area[i], MOVE_BYTES, MADV_NOHUGEPAGE))
			die("MADV_NOHUGEPAGE the mover's areas");
	for (size_t off = 0; off < MOVE_BYTES; off += PAGE)
		*(uint32_t *)(mv->area[0] + off) = (uint32_t)(off / PAGE) + 1;
	mv->uffd = uffd_open("+move");
	for (int i = 0; i < 2; i++)
		uffd_register_move(mv->uffd, mv->area[i], MOVE_BYTES, "+move");
}

/*
 * mover_check: once the mover has stopped, it must have moved, and the
 * pages must all be in the area its last move left them in, each with its
 * number; dies if not.
 * The userfaultfd is closed first, so that a missing page reads as zero
 * instead of waiting for a handler that there is not.
 */
static void mover_check(struct mover *mv)
{
	const char *area = mv->area[mv->moves % 2];

	close(mv->uffd);
	errno = 0;
	if (!mv->moves)
		die("+move: the mover made no move while the mapper looped");
	for (size_t off = 0; off < MOVE_BYTES; off += PAGE)
		if (*(const uint32_t *)(area + off) != (uint32_t)(off / PAGE) + 1)
			die("+move: page %zu of the moved 8 MiB holds %u after %llu moves",
			    off / PAGE, *(const uint32_t *)(area + off),
			    (unsigned long long)mv->moves);
}

/*
 * The mapper (a child_start() child): pinned, populates the region (with
 * +swap: pages every SWAP_EVERY-th page out and starts its pager), says
 * "r" on READY, waits for a byte on GO (with +move: then starts its mover,
 * set up before "r"), loops for the seconds of ARG (a struct mapper_arg)
 * and writes its struct op_stats to READY.
 */
static void mapper(int ready, int go, void *arg)
{
	const struct mapper_arg *a = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull, end;
	struct op_stats st = { 0 };
	static struct pager pg;
	static struct mover mv;
	pthread_t thread, move_thread;
	char *region, b;

	pin_to_cpu(0, mapper_cpu);
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap the region");
	madvise(region, REGION, MADV_NOHUGEPAGE);
	for (size_t off = 0; off < REGION; off += PAGE)
		region[off] = 1;
	if (a->swap) {
		swap_require(SWAP_KB);
		page_out_every(region, REGION, NULL);
		st.swap_start_kb = swap_check(SWAP_KB / 2, "the mapper's region paged out");
		pg.region = region;
		errno = pthread_create(&thread, NULL, pager, &pg);	/* on this CPU */
		if (errno)
			die("pthread_create");
	}
	if (a->move)
		mover_setup(&mv);
	write_all(ready, "r", 1);
	if (read(go, &b, 1) != 1)
		_exit(1);
	if (a->move) {
		errno = pthread_create(&move_thread, NULL, mover, &mv);	/* on this CPU */
		if (errno)
			die("pthread_create");
	}
	end = now_ns() + (uint64_t)(a->seconds * 1e9);
	while (now_ns() < end) {
		size_t index = next_random(&seed) % (REGION / PAGE);
		char *page = region + index * PAGE;
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
		if (a->swap && index % SWAP_EVERY == 0)
			__atomic_store_n(&pg.pending[index / SWAP_EVERY], 1, __ATOMIC_RELEASE);
		st.ops++;
		st.munmap_sum += t1;
		st.mmap_sum += t2;
		st.munmap_max = t1 > st.munmap_max ? t1 : st.munmap_max;
		st.mmap_max = t2 > st.mmap_max ? t2 : st.mmap_max;
		sleep_ns(PAUSE_NS);
	}
	if (a->swap) {
		__atomic_store_n(&pg.stop, 1, __ATOMIC_RELEASE);
		pthread_join(thread, NULL);
		st.paged_out = pg.pages;
		st.swap_end_kb = swap_check(SWAP_KB / 2, "the mapper's region after the loop");
	}
	if (a->move) {
		__atomic_store_n(&mv.stop, 1, __ATOMIC_RELEASE);
		pthread_join(move_thread, NULL);
		mover_check(&mv);
		st.moves = mv.moves;
		st.pages_moved = mv.moves * (MOVE_BYTES / PAGE);
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

static void run(const char *cond, const struct method *m, int nrun, struct mapper_arg *a,
		struct readers *rs)
{
	struct child mapper_child;
	struct op_stats s;
	pid_t busy;
	int st;

	child_start(&mapper_child, mapper, a, "the mapper");
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
	if (a->swap)
		fprintf(stderr, "bench-invert: %s run %d: the mapper's VmSwap %lld kB before, %lld kB after, %llu pages paged out again\n",
			cond, nrun, s.swap_start_kb, s.swap_end_kb,
			(unsigned long long)s.paged_out);
	if (a->move)
		fprintf(stderr, "bench-invert: %s run %d: the mover moved 8 MiB %llu times with UFFDIO_MOVE (%llu pages, %.1f moves/s)\n",
			cond, nrun, (unsigned long long)s.moves,
			(unsigned long long)s.pages_moved, s.moves / a->seconds);
	printf(RECORD_INVERT_FORMAT, cond, rs->n, nrun,
	       (unsigned long long)s.ops,
	       (unsigned long long)(s.ops ? s.mmap_sum / s.ops : 0),
	       (unsigned long long)s.mmap_max,
	       (unsigned long long)(s.ops ? s.munmap_sum / s.ops : 0),
	       (unsigned long long)s.munmap_max,
	       (unsigned long long)readers_count(rs));
	fflush(stdout);
}

/* strip_suffix: if SPEC ends in SUFFIX (and has more), cut it off and say so. */
static bool strip_suffix(char *spec, const char *suffix)
{
	size_t len = strlen(spec), n = strlen(suffix);

	if (len <= n || strcmp(spec + len - n, suffix))
		return false;
	spec[len - n] = '\0';
	return true;
}

int main(int argc, char **argv)
{
	struct mapper_arg a;
	struct readers rs;
	int runs;

	if (argc < 4)
		die("usage: bench-invert SECONDS RUNS COND[" INVERT_SWAP_SUFFIX "][" INVERT_MOVE_SUFFIX "]...");
	a.seconds = atof(argv[1]);
	runs = atoi(argv[2]);
	readers_init(&rs);
	pin_cpus("bench-invert", &mapper_cpu, &other_cpu);
	pin_to_cpu(0, other_cpu);	/* this program only waits */
	for (int c = 3; c < argc; c++) {
		struct method m;
		char spec[64];
		bool bad = false;

		if (strlen(argv[c]) >= sizeof(spec))
			die("condition %s too long", argv[c]);
		strcpy(spec, argv[c]);
		a.swap = a.move = false;
		for (;;) {
			bool *flag = strip_suffix(spec, INVERT_SWAP_SUFFIX) ? &a.swap :
				     strip_suffix(spec, INVERT_MOVE_SUFFIX) ? &a.move : NULL;

			if (!flag)
				break;
			bad |= *flag;	/* twice */
			*flag = true;
		}
		parse_method(&m, strcmp(spec, "none") ? spec : "status:0", 1);
		if ((m.kind != M_STATUS && m.kind != M_ROLLUP) || m.count < 0 || bad)
			die("bad condition %s (none, status:N or rollup[=FILE]:N, each with or without "
			    INVERT_SWAP_SUFFIX " and " INVERT_MOVE_SUFFIX ")", argv[c]);
		for (int r = 1; r <= runs; r++)
			run(argv[c], &m, r, &a, &rs);
	}
	return 0;
}
