// SPDX-License-Identifier: GPL-2.0
/*
 * bench-moves: does a read of a process's totals see a mapping that is
 * moved while it reads?
 *
 *   bench-moves [-m MOVER] MIB PERIOD_US SECONDS METHOD...
 *
 * Forks a target that maps MIB MiB of private anonymous memory
 * (MADV_NOHUGEPAGE), writes every page (with its number) and starts a
 * mover thread, which moves the whole MIB back and forth between two
 * addresses: A, and B one guard page past A's end, so that the two never
 * share an offset within a PMD and the PTEs move one by one. MOVER says
 * how:
 *   mremap  (the default) mremap(MREMAP_MAYMOVE | MREMAP_FIXED) of the
 *           mapping, from A to B and back; B is a PROT_NONE reservation
 *           while the mapping is at A, and A one while it is at B.
 *   uffd    UFFDIO_MOVE, as ART's garbage collector moves memory: A and B
 *           are two mappings of MIB MiB each, kept two VMAs by the guard
 *           page between them (PROT_NONE), both registered with a
 *           userfaultfd (UFFD_FEATURE_MOVE, UFFDIO_REGISTER_MODE_MISSING);
 *           the pages are written at A, and each move is one UFFDIO_MOVE
 *           of all MIB MiB to the other area (common.h uffd_move). Needs
 *           userfaultfd with UFFDIO_MOVE (Linux 6.8 and later): without
 *           it, the target dies during its setup, saying which is missing.
 *           A move that fails or moves less than MIB MiB ends the run.
 * PERIOD_US 0: in a tight loop; else one move about
 * every PERIOD_US µs (clock_nanosleep to absolute CLOCK_MONOTONIC
 * deadlines). The target, mover included, is pinned to CPU 0 and this
 * program, the reader, to CPU 1 (as bench-stall pins). Either mover keeps
 * every page resident, so the target's Rss never changes: each METHOD reads it
 * once before the mover starts (quiescent: the truth), then for SECONDS
 * the methods read in turn, and a read whose Rss differs from its method's
 * quiescent one is wrong: over (above it) or under (below it). METHOD is
 * rollup, rollup=FILE (smaps_rollup_stock) or status (VmRSS, the control),
 * as in common.h. Once the mover has stopped, every page must hold its
 * number where the last move left it, and every method must read its
 * quiescent Rss again. Prints per METHOD:
 *   moves,MIB,PERIOD_US,METHOD,RSS_KB,MOVES,READS,WRONG,OVER,UNDER,MIN_KB,MAX_KB,READ_P50_NS
 *   (records.h RECORD_MOVES_FORMAT)
 * (RSS_KB the quiescent Rss; MOVES the mover's moves while the methods
 * read; MIN_KB and MAX_KB the lowest and highest Rss read), METHOD with
 * the suffix MOVES_UFFD_SUFFIX (rollup+uffd) when MOVER is uffd; and on
 * stderr, the moves made and their rate.
 */
#include "common.h"
#include <pthread.h>

#define MAX_METHODS 8

struct shared {		/* MAP_SHARED between the reader and the target */
	int stop;
	uint64_t moves;
};

enum mover_kind { MOVER_MREMAP, MOVER_UFFD };

struct mover {
	enum mover_kind kind;
	int uffd;		/* MOVER_UFFD: its userfaultfd */
	char *at, *to;		/* where the pages are, where they go next */
	size_t len;
	long period_ns;
	int ready, go;		/* pipes to the reader and from it */
	int cpu;		/* the target's */
	struct shared *sh;
};

/* The "-m uffd" of die()'s messages. */
#define UFFD_WHAT "bench-moves -m uffd"

/* move: one move of the whole MIB from M->at to M->to; N counts them. */
static void move(struct mover *m, unsigned long long n)
{
	char *at = m->at;

	if (m->kind == MOVER_UFFD)
		uffd_move(m->uffd, m->to, at, m->len, UFFD_WHAT, n);
	else if (mremap(at, m->len, m->len, MREMAP_MAYMOVE | MREMAP_FIXED, m->to) != m->to)
		die("move %llu: mremap", n);
	m->at = m->to;
	m->to = at;
}

/*
 * moved_check: once the mover has stopped, every page must be at M->at
 * with its number; dies if not. The userfaultfd is closed first, so that
 * a missing page reads as zero instead of raising SIGBUS.
 */
static void moved_check(struct mover *m, unsigned long long moves)
{
	if (m->kind == MOVER_UFFD)
		close(m->uffd);
	errno = 0;
	for (size_t off = 0; off < m->len; off += PAGE)
		if (*(const uint32_t *)(m->at + off) != (uint32_t)(off / PAGE) + 1)
			die("page %zu of the moved %zu MiB holds %u after %llu moves", off / PAGE,
			    m->len >> 20, *(const uint32_t *)(m->at + off), moves);
}

/* After its deadline: DL plus NS, or now if that is past already. */
static void next_deadline(struct timespec *dl, long ns)
{
	struct timespec now;

	dl->tv_nsec += ns;
	dl->tv_sec += dl->tv_nsec / 1000000000;
	dl->tv_nsec %= 1000000000;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec > dl->tv_sec || (now.tv_sec == dl->tv_sec && now.tv_nsec > dl->tv_nsec))
		*dl = now;
}

/*
 * fault_in: everything the target will touch, so that its Rss stays what
 * the quiescent reads saw: the caller's next 64 KiB of stack, and every
 * page of its file mappings (a forked child gets no PTEs of the program's
 * text, and a code path first taken later, the mover's stop, would fault
 * some in).
 */
static void fault_in(void)
{
	volatile char stack[64 << 10];
	char line[512];
	FILE *maps;

	for (size_t off = 0; off < sizeof(stack); off += PAGE)
		stack[off] = 0;
	maps = fopen("/proc/self/maps", "re");
	if (!maps)
		die("open /proc/self/maps");
	while (fgets(line, sizeof(line), maps)) {
		unsigned long start, end;
		char path[256] = "";

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &start, &end, path) >= 2 &&
		    path[0] == '/' && madvise((void *)start, end - start, MADV_POPULATE_READ))
			die("MADV_POPULATE_READ %s", path);
	}
	fclose(maps);
}

/*
 * The mover: two warm-up moves, everything faulted in (fault_in), "r" on
 * READY, a byte on GO, then moves until STOP, checks the pages
 * (moved_check), "s" on READY, and exits the target, 0, at EOF on GO.
 */
static void *mover(void *arg)
{
	struct mover *m = arg;
	unsigned long long n = 0;
	struct timespec dl;
	char b;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	for (int i = 0; i < 2; i++) {
		move(m, ++n);
		next_deadline(&dl, 0);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL);
	}
	fault_in();
	write_all(m->ready, "r", 1);
	if (read(m->go, &b, 1) != 1)
		_exit(1);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	while (!__atomic_load_n(&m->sh->stop, __ATOMIC_ACQUIRE)) {
		move(m, ++n);
		__atomic_store_n(&m->sh->moves, m->sh->moves + 1, __ATOMIC_RELEASE);
		if (m->period_ns) {
			next_deadline(&dl, m->period_ns);
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR)
				;
		}
	}
	moved_check(m, n);
	write_all(m->ready, "s", 1);
	/* Still alive: glibc's thread exit would give back its stack pages. */
	while (read(m->go, &b, 1) > 0)
		;
	_exit(0);
}

/* map_area: MIB MiB of private anonymous memory at AT, in 4 KiB pages. */
static void map_area(char *at, size_t len)
{
	if (mmap(at, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at)
		die("mmap %zu bytes", len);
	if (madvise(at, len, MADV_NOHUGEPAGE))
		die("MADV_NOHUGEPAGE");
}

/*
 * The target (a child_start() child): the mapping and its mover (ARG).
 * A reservation of both places and the guard page between them, PROT_NONE;
 * A mapped (with uffd, B too, and both registered), every page of A
 * written with its number.
 */
static void target(int ready, int go, void *arg)
{
	struct mover *m = arg;
	pthread_t thread;
	char *res;

	m->ready = ready;
	m->go = go;
	pin_to_cpu(0, m->cpu);	/* the mover thread inherits it */
	res = mmap(NULL, 2 * m->len + PAGE, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		die("mmap the reservation");
	m->at = res;
	m->to = res + m->len + PAGE;
	map_area(m->at, m->len);
	if (m->kind == MOVER_UFFD)
		map_area(m->to, m->len);
	for (size_t off = 0; off < m->len; off += PAGE)
		*(uint32_t *)(m->at + off) = (uint32_t)(off / PAGE) + 1;
	if (m->kind == MOVER_UFFD) {
		m->uffd = uffd_open(UFFD_WHAT);
		uffd_register_move(m->uffd, m->at, m->len, UFFD_WHAT);
		uffd_register_move(m->uffd, m->to, m->len, UFFD_WHAT);
	}
	fault_in();
	errno = pthread_create(&thread, NULL, mover, m);
	if (errno)
		die("pthread_create");
	pthread_join(thread, NULL);
	_exit(1);
}

/* One read of PID's Rss by M (rollup or status) into *KB; 0 or -errno. */
static int read_rss(const struct method *m, int pid, long long *kb)
{
	struct sr_rollup r;
	char path[96];
	int ret;

	sr_path(path, sizeof(path), pid, m->file);
	if (m->kind == M_STATUS)
		return proc_kb(path, "VmRSS", kb);
	ret = read_rollup_path(path, &r);
	*kb = ret ? -1 : (long long)r.kb[SR_RSS];
	return ret;
}

/*
 * target_gone: after a failed read: if the target PID exits within a
 * second (its mover died: the read came as it exited), say so and die.
 */
static void target_gone(int pid)
{
	struct timespec ms = { 0, 1000000 };
	int st, i;

	for (i = 0; i < 1000 && waitpid(pid, &st, WNOHANG) != pid; i++)
		nanosleep(&ms, NULL);
	if (i == 1000)
		return;
	errno = 0;
	if (WIFEXITED(st))
		die("the target exited (status %d) while the methods read: see its message above",
		    WEXITSTATUS(st));
	die("the target was killed by signal %d while the methods read", WTERMSIG(st));
}

struct tally {
	struct method m;
	long long rss, min, max;
	uint64_t wrong, over, under;
	uint64_t *ns;		/* every read's time */
	size_t reads, cap;
};

static void quiescent(struct tally *t, int n, int pid, int check)
{
	for (int i = 0; i < n; i++) {
		long long kb;

		if (read_rss(&t[i].m, pid, &kb) || kb < 0)
			die("%s: no Rss of the target", t[i].m.name);
		if (check && kb != t[i].rss) {
			errno = 0;
			die("%s: %lld kB at rest after the moves, %lld kB before", t[i].m.name,
			    kb, t[i].rss);
		}
		if (!check)
			t[i].rss = t[i].min = t[i].max = kb;
	}
}

#define USAGE "usage: bench-moves [-m mremap|uffd] MIB PERIOD_US SECONDS METHOD..."

int main(int argc, char **argv)
{
	int reader_cpu, n, st, opt;
	struct tally t[MAX_METHODS] = { 0 };
	struct mover m = { .kind = MOVER_MREMAP, .uffd = -1 };
	const char *suffix = "", *how = "mremap";
	struct child c;
	uint64_t start, end, moves;
	char b;

	while ((opt = getopt(argc, argv, "+m:")) != -1) {
		errno = 0;
		if (opt != 'm')
			die(USAGE);
		if (!strcmp(optarg, "uffd")) {
			m.kind = MOVER_UFFD;
			suffix = MOVES_UFFD_SUFFIX;
			how = "UFFDIO_MOVE";
		} else if (strcmp(optarg, "mremap")) {
			die("bad mover %s (mremap or uffd)", optarg);
		}
	}
	argv += optind - 1;	/* argv[1]: MIB, as without options */
	argc -= optind - 1;
	n = argc - 4;
	errno = 0;
	if (argc < 5 || n > MAX_METHODS)
		die(USAGE " (%d methods at most)", MAX_METHODS);
	m.len = (size_t)atol(argv[1]) << 20;
	m.period_ns = atol(argv[2]) * 1000;
	for (int i = 0; i < n; i++) {
		parse_method(&t[i].m, argv[4 + i], 0);
		if (t[i].m.kind != M_ROLLUP && t[i].m.kind != M_STATUS)
			die("bad method %s (rollup[=FILE] or status)", argv[4 + i]);
		if (strlen(t[i].m.name) + strlen(suffix) >= sizeof(t[i].m.name))
			die("method %s too long", argv[4 + i]);
	}
	m.sh = mmap(NULL, sizeof(*m.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!m.len || m.sh == MAP_FAILED)
		die("%s MiB: no mapping", argv[1]);
	pin_cpus("bench-moves", &m.cpu, &reader_cpu);
	child_start(&c, target, &m, "the target");
	pin_to_cpu(0, reader_cpu);
	quiescent(t, n, c.pid, 0);

	write_all(c.go, "g", 1);
	start = now_ns();
	end = start + (uint64_t)(atof(argv[3]) * 1e9);
	while (now_ns() < end) {
		for (int i = 0; i < n; i++) {
			struct tally *x = &t[i];
			uint64_t t0 = now_ns();
			long long kb;

			if (read_rss(&x->m, c.pid, &kb) || kb < 0) {
				target_gone(c.pid);
				die("%s: no Rss of the target", x->m.name);
			}
			if (x->reads == x->cap) {
				x->cap = x->cap ? 2 * x->cap : 4096;
				x->ns = realloc(x->ns, x->cap * sizeof(*x->ns));
				if (!x->ns)
					die("realloc");
			}
			x->ns[x->reads++] = now_ns() - t0;
			x->wrong += kb != x->rss;
			x->over += kb > x->rss;
			x->under += kb < x->rss;
			x->min = kb < x->min ? kb : x->min;
			x->max = kb > x->max ? kb : x->max;
		}
	}
	__atomic_store_n(&m.sh->stop, 1, __ATOMIC_RELEASE);
	if (read(c.ready, &b, 1) != 1 || b != 's')
		die("the mover did not stop (it failed: see the target's message above)");
	moves = __atomic_load_n(&m.sh->moves, __ATOMIC_ACQUIRE);
	fprintf(stderr, "bench-moves: the mover moved %s MiB %llu times with %s (%.1f moves/s)\n",
		argv[1], (unsigned long long)moves, how, moves / ((end - start) / 1e9));
	quiescent(t, n, c.pid, 1);
	close(c.go);
	if (waitpid(c.pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("the target failed");

	for (int i = 0; i < n; i++) {
		struct tally *x = &t[i];

		strcat(x->m.name, suffix);	/* the record's METHOD */
		qsort(x->ns, x->reads, sizeof(*x->ns), cmp_u64);
		printf(RECORD_MOVES_FORMAT,
		       argv[1], argv[2], x->m.name, x->rss, (unsigned long long)moves, x->reads,
		       (unsigned long long)x->wrong, (unsigned long long)x->over,
		       (unsigned long long)x->under, x->min, x->max,
		       (unsigned long long)pct(x->ns, x->reads, 0.5));
		free(x->ns);
	}
	return 0;
}
