// SPDX-License-Identifier: GPL-2.0
/*
 * bench-moves: does a read of a process's totals see a mapping that is
 * moved while it reads?
 *
 *   bench-moves MIB PERIOD_US SECONDS METHOD...
 *
 * Forks a target that maps MIB MiB of private anonymous memory
 * (MADV_NOHUGEPAGE), writes every page and starts a mover thread, which
 * moves the whole mapping back and forth between two addresses with
 * mremap(MREMAP_MAYMOVE | MREMAP_FIXED): A, and B one guard page past A's
 * end, so that the two never share an offset within a PMD and mremap moves
 * the PTEs one by one. PERIOD_US 0: in a tight loop; else one move about
 * every PERIOD_US µs (clock_nanosleep to absolute CLOCK_MONOTONIC
 * deadlines). The target, mover included, is pinned to CPU 0 and this
 * program, the reader, to CPU 1 (as bench-stall pins). mremap keeps every
 * page resident, so the target's Rss never changes: each METHOD reads it
 * once before the mover starts (quiescent: the truth), then for SECONDS
 * the methods read in turn, and a read whose Rss differs from its method's
 * quiescent one is wrong: over (above it) or under (below it). METHOD is
 * rollup, rollup=FILE (smaps_rollup_stock) or status (VmRSS, the control),
 * as in common.h. Once the mover has stopped, every method must read its
 * quiescent Rss again. Prints per METHOD:
 *   moves,MIB,PERIOD_US,METHOD,RSS_KB,MOVES,READS,WRONG,OVER,UNDER,MIN_KB,MAX_KB,READ_P50_NS
 *   (records.h RECORD_MOVES_FORMAT)
 * (RSS_KB the quiescent Rss; MOVES the mover's moves while the methods
 * read; MIN_KB and MAX_KB the lowest and highest Rss read).
 */
#include "common.h"
#include <pthread.h>

#define MAX_METHODS 8

struct shared {		/* MAP_SHARED between the reader and the target */
	int stop;
	uint64_t moves;
};

struct mover {
	char *at, *to;
	size_t len;
	long period_ns;
	int ready, go;		/* pipes to the reader and from it */
	int cpu;		/* the target's */
	struct shared *sh;
};

static void move(struct mover *m)
{
	char *at = m->at;

	if (mremap(at, m->len, m->len, MREMAP_MAYMOVE | MREMAP_FIXED, m->to) != m->to)
		die("mremap");
	m->at = m->to;
	m->to = at;
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
 * READY, a byte on GO, then moves until STOP, "s" on READY, and exits the
 * target, 0, at EOF on GO.
 */
static void *mover(void *arg)
{
	struct mover *m = arg;
	struct timespec dl;
	char b;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	for (int i = 0; i < 2; i++) {
		move(m);
		next_deadline(&dl, 0);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL);
	}
	fault_in();
	write_all(m->ready, "r", 1);
	if (read(m->go, &b, 1) != 1)
		_exit(1);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	while (!__atomic_load_n(&m->sh->stop, __ATOMIC_ACQUIRE)) {
		move(m);
		__atomic_store_n(&m->sh->moves, m->sh->moves + 1, __ATOMIC_RELEASE);
		if (m->period_ns) {
			next_deadline(&dl, m->period_ns);
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) == EINTR)
				;
		}
	}
	write_all(m->ready, "s", 1);
	/* Still alive: glibc's thread exit would give back its stack pages. */
	while (read(m->go, &b, 1) > 0)
		;
	_exit(0);
}

/* The target (a child_start() child): the mapping and its mover (ARG). */
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
	m->at = mmap(res, m->len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m->at == MAP_FAILED)
		die("mmap %zu bytes", m->len);
	if (madvise(m->at, m->len, MADV_NOHUGEPAGE))
		die("MADV_NOHUGEPAGE");
	for (size_t off = 0; off < m->len; off += PAGE)
		m->at[off] = 1;
	m->to = res + m->len + PAGE;
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

int main(int argc, char **argv)
{
	int reader_cpu, n = argc - 4, st;
	struct tally t[MAX_METHODS] = { 0 };
	struct mover m = { 0 };
	struct child c;
	uint64_t end, moves;
	char b;

	if (argc < 5 || n > MAX_METHODS)
		die("usage: bench-moves MIB PERIOD_US SECONDS METHOD... (%d at most)", MAX_METHODS);
	m.len = (size_t)atol(argv[1]) << 20;
	m.period_ns = atol(argv[2]) * 1000;
	for (int i = 0; i < n; i++) {
		parse_method(&t[i].m, argv[4 + i], 0);
		if (t[i].m.kind != M_ROLLUP && t[i].m.kind != M_STATUS)
			die("bad method %s (rollup[=FILE] or status)", argv[4 + i]);
	}
	m.sh = mmap(NULL, sizeof(*m.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!m.len || m.sh == MAP_FAILED)
		die("%s MiB: no mapping", argv[1]);
	pin_cpus("bench-moves", &m.cpu, &reader_cpu);
	child_start(&c, target, &m, "the target");
	pin_to_cpu(0, reader_cpu);
	quiescent(t, n, c.pid, 0);

	write_all(c.go, "g", 1);
	end = now_ns() + (uint64_t)(atof(argv[3]) * 1e9);
	while (now_ns() < end) {
		for (int i = 0; i < n; i++) {
			struct tally *x = &t[i];
			uint64_t t0 = now_ns();
			long long kb;

			if (read_rss(&x->m, c.pid, &kb) || kb < 0)
				die("%s: no Rss of the target", x->m.name);
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
		die("the mover did not stop");
	moves = __atomic_load_n(&m.sh->moves, __ATOMIC_ACQUIRE);
	quiescent(t, n, c.pid, 1);
	close(c.go);
	if (waitpid(c.pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("the target failed");

	for (int i = 0; i < n; i++) {
		struct tally *x = &t[i];

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
