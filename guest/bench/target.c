// SPDX-License-Identifier: GPL-2.0
/*
 * bench-target: the workload whose smaps_rollup the benchmarks read.
 *
 *   bench-target VMAS RSS_MIB[LAYOUT] FILE
 *
 * Lays out about VMAS mappings (the process's own few included) holding
 * RSS_MIB resident: half anonymous (private, written), a quarter file
 * (FILE, created sparse and mapped private read-only, read-faulted), a
 * quarter shmem (one memfd, mapped shared, written). Each mapping is
 * followed by an unmapped page so none merge. Anonymous mappings get
 * MADV_NOHUGEPAGE: every resident page is a 4 KiB PTE, the page-walk
 * worst case. When there are more mappings than resident pages, the
 * remaining mappings stay empty (like the unused library mappings of a
 * real process). LAYOUT, a letter after RSS_MIB (512h), changes that:
 *   h  the anonymous half is one mapping instead, a heap as in Redis or a
 *      JVM, and the other anonymous mappings keep one page each: the page
 *      walk then spends half its time in one VMA;
 *   p  as h, and every SWAP_EVERY-th page of the heap (common.h: every
 *      64th) paged out (MADV_PAGEOUT) to swap, which must be on: swap
 *      entries amid the present PTEs of every page table the walk reads;
 *   u  half the VMAs are never touched: the page after each mapping stays
 *      a PROT_NONE anonymous reservation (guard-page style, no anon_vma)
 *      instead of a hole, so the mappings above number VMAS / 2;
 *   s  half of the shmem pages are paged out (MADV_PAGEOUT) to swap, which
 *      must be on: the shmem swap accounting path;
 *   d  dense: every mapping holds resident pages, none is empty. Each
 *      kind's budget is spread evenly over its mappings (their sizes
 *      differ by one page at most) instead of filling whole mappings of
 *      ceil(budget / mappings) pages until it runs out; when a kind has
 *      more mappings than budgeted pages, each still gets one page, so the
 *      resident size grows to one page per mapping (about 63 MiB at
 *      16,000 VMAs whatever RSS_MIB says; "ready" reports the real one);
 *   a  anonymous only: all of RSS_MIB private anonymous memory in 4 KiB
 *      pages, in mappings 64 KiB aligned, each followed by a 64 KiB hole;
 *   m  as a, but in 64 KiB folios (mTHP), each mapped by 16 PTEs: the
 *      mappings are not MADV_NOHUGEPAGE, and
 *      /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled must be
 *      "always" (scripts/bench sets it); the target checks in that size's
 *      stats/anon_fault_alloc that it got such folios for all of it.
 * Three layouts put all of RSS_MIB in one mapping instead (VMAS is not
 * used: the process's own few and that one), 4 KiB pages each:
 *   o  private anonymous, MADV_NOHUGEPAGE, written;
 *   c  as o, then shared with a forked child that keeps it mapped, never
 *      writing, until the target exits (each page's mapcount 2, Pss half);
 *   f  FILE, created, written and mapped private read-only, read-faulted:
 *      page cache pages.
 * The target checks in its totals (smaps_rollup, or summed smaps) that it
 * got what the layout asks for, and dies saying what it got otherwise;
 * with swap (s, p), also after each stall loop that its Swap is still at
 * least half what it had when it got ready.
 *
 * Then it prints "ready PID NVMAS RSS_KB" on stdout and obeys lines on
 * stdin:
 *   stall SECONDS PATH   loop mmap 64 KiB + touch it + munmap for SECONDS,
 *                        timing each step with CLOCK_MONOTONIC; write the
 *                        records (records.h STALL_OPS_FIELDS, uint32 ns) to
 *                        PATH and print "stalled OPS P50 P99 MAX" (ns).
 * and exits 0 at EOF.
 */
#include "common.h"
#include <stdbool.h>
#include <sys/prctl.h>

static long count_vmas(void)
{
	char buf[65536];
	long lines = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY);

	if (fd < 0)
		die("open /proc/self/maps");
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	close(fd);
	return lines;
}

struct kind {
	const char *name;
	long vmas;	/* mappings of this kind */
	long pages;	/* pages per mapping */
	long extra;	/* dense: the first EXTRA mappings have one page more */
	long budget;	/* resident pages to fault in */
};

/*
 * page_out_shmem: MADV_PAGEOUT the shmem mappings in [START, START + LEN)
 * (holes included: madvise skips them, then says ENOMEM), and check that
 * the target now has swap.
 */
static void page_out_shmem(char *start, size_t len)
{
	struct sr_rollup r;
	char path[64];

	if (madvise(start, len, MADV_PAGEOUT) && errno != ENOMEM)
		die("MADV_PAGEOUT");
	sr_path(path, sizeof(path), getpid(), "smaps_rollup");
	if (read_rollup_path(path, &r) == 0 && r.kb[SR_SWAP] == 0) {
		errno = 0;
		die("MADV_PAGEOUT swapped nothing out: is swap on (guest/setup)?");
	}
}

#define MTHP_PAGES	16	/* of a 64 KiB folio */
#define MTHP_STATS	"/sys/kernel/mm/transparent_hugepage/hugepages-64kB/stats/"

/* A counter of the 64 KiB folio size, from MTHP_STATS; dies if missing. */
static long mthp_stat(const char *name)
{
	char path[128], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), MTHP_STATS "%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open %s (a kernel without 64 KiB THP?)", path);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		die("read %s", path);
	buf[n] = 0;
	return atol(buf);
}

static void layout(long vmas, long rss_mib, char shape, const char *file)
{
	bool heap = shape == 'h' || shape == 'p', untouched = shape == 'u', dense = shape == 'd';
	bool mthp = shape == 'm', anon_only = shape == 'a' || mthp;
	long total_pages = rss_mib * (1024 * 1024 / PAGE);
	struct kind k[3] = {
		{ "anon", 0, 0, 0, total_pages - 2 * (total_pages / 4) },
		{ "file", 0, 0, 0, total_pages / 4 },
		{ "shmem", 0, 0, 0, total_pages / 4 },
	};
	long own = count_vmas() + 1; /* +1: the stall record buffer later */
	/* The hole after each mapping; anon_only keeps 64 KiB alignment. */
	long gap = anon_only ? MTHP_PAGES : 1;
	long n = vmas - own, span = 0, folios = 0;
	int memfd, filefd;
	char *base, *p, *shmem_start = NULL, *heap_start = NULL;

	if (untouched)
		n /= 2;	/* each mapping and its PROT_NONE gap */
	if (n < 3)
		n = 3;
	if (anon_only) {
		k[0].budget = total_pages;
		k[1].budget = 0;
		k[2].budget = 0;
	} else {
		k[1].vmas = n / 4;
		k[2].vmas = n / 4;
	}
	k[0].vmas = n - k[1].vmas - k[2].vmas;
	for (int i = 0; i < 3; i++) {
		if (!k[i].vmas)
			continue;
		if (anon_only) {	/* whole folios each */
			k[i].pages = (k[i].budget + k[i].vmas - 1) / k[i].vmas;
			k[i].pages = (k[i].pages + MTHP_PAGES - 1) /
				     MTHP_PAGES * MTHP_PAGES;
		} else if (dense) {
			k[i].pages = k[i].budget / k[i].vmas;
			k[i].extra = k[i].budget % k[i].vmas;
			if (k[i].pages < 1) {	/* one page each, over budget */
				k[i].pages = 1;
				k[i].extra = 0;
				k[i].budget = k[i].vmas;
			}
		} else {
			k[i].pages = (k[i].budget + k[i].vmas - 1) / k[i].vmas;
			if (k[i].pages < 1 || (heap && i == 0))
				k[i].pages = 1;
		}
		span += k[i].vmas * (k[i].pages + gap) + k[i].extra;
	}
	if (heap)
		span += k[0].budget;
	if (anon_only)
		span += MTHP_PAGES;	/* room to align the first mapping */

	memfd = memfd_create("bench-shmem", MFD_CLOEXEC);
	if (memfd < 0 ||
	    ftruncate(memfd, (off_t)((k[2].vmas * k[2].pages + k[2].extra) * PAGE)))
		die("memfd");
	filefd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (filefd < 0 ||
	    ftruncate(filefd, (off_t)((k[1].vmas * k[1].pages + k[1].extra) * PAGE)))
		die("create %s", file);

	base = mmap(NULL, span * PAGE, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		die("reserve %ld pages", span);
	p = base;
	if (anon_only) {	/* 64 KiB aligned, nothing mapped around it */
		p = (char *)(((uintptr_t)base + MTHP_PAGES * PAGE - 1) &
			     ~(MTHP_PAGES * PAGE - 1));
		char *end = p + (span - MTHP_PAGES) * PAGE;

		if ((p > base && munmap(base, p - base)) ||
		    (end < base + span * PAGE &&
		     munmap(end, base + span * PAGE - end)))
			die("munmap around the mappings");
	}
	if (mthp)
		folios = mthp_stat("anon_fault_alloc");
	for (int i = 0; i < 3; i++) {
		long left = k[i].budget;
		off_t off = 0;	/* in the file or memfd */

		if (i == 2)
			shmem_start = p;
		for (long j = 0; j < k[i].vmas; j++) {
			size_t len = (size_t)(k[i].pages + (j < k[i].extra)) * PAGE;
			void *m;

			if (heap && i == 0 && j == 0) {
				len += (size_t)k[0].budget * PAGE;
				heap_start = p;
			}

			if (i == 0) {
				m = mmap(p, len, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
				if (m != MAP_FAILED && !mthp)
					madvise(m, len, MADV_NOHUGEPAGE);
			} else if (i == 1) {
				m = mmap(p, len, PROT_READ, MAP_PRIVATE | MAP_FIXED,
					 filefd, off);
			} else {
				m = mmap(p, len, PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_FIXED, memfd, off);
			}
			if (m == MAP_FAILED)
				die("mmap %s #%ld", k[i].name, j);
			for (long pg = 0; pg < (long)(len / PAGE) && left > 0; pg++, left--) {
				volatile char *c = p + pg * PAGE;

				if (i == 1)
					(void)*c;
				else
					*c = 1;
			}
			if (!untouched && munmap(p + len, gap * PAGE))
				die("munmap gap");
			p += len + gap * PAGE;
			off += (off_t)len;
		}
	}
	if (mthp && mthp_stat("anon_fault_alloc") - folios < k[0].budget / MTHP_PAGES) {
		errno = 0;
		die("%ld of %ld folios of 64 KiB allocated (%ld fell back): is hugepages-64kB/enabled always?",
		    mthp_stat("anon_fault_alloc") - folios, k[0].budget / MTHP_PAGES,
		    mthp_stat("anon_fault_fallback"));
	}
	close(memfd);
	close(filefd);
	if (shape == 's') {	/* the mappings holding half the shmem budget */
		long half = (k[2].budget / 2 + k[2].pages - 1) / k[2].pages;

		page_out_shmem(shmem_start, (size_t)(half * (k[2].pages + 1)) * PAGE);
	}
	if (shape == 'p') {	/* the heap's pages, all written above */
		size_t len = (size_t)k[0].budget * PAGE;
		long long kb = (long long)((len / PAGE + SWAP_EVERY - 1) / SWAP_EVERY * PAGE >> 10);

		swap_require(kb);
		page_out_every(heap_start, len, NULL);
		swap_check(kb / 2, "layout p: every 64th page of the heap paged out");
	}
}

/* totals: the process's own totals, from smaps_rollup or else summed smaps. */
static void totals(unsigned long long *kb)
{
	struct sr_rollup r;
	struct sr_smaps s;
	char path[64];

	sr_path(path, sizeof(path), getpid(), "smaps_rollup");
	if (read_rollup_path(path, &r) == 0) {
		memcpy(kb, r.kb, sizeof(r.kb));
		return;
	}
	sr_path(path, sizeof(path), getpid(), "smaps");
	if (sum_smaps_path(path, &s))
		die("read %s", path);
	memcpy(kb, s.kb, sizeof(s.kb));
}

/*
 * The sharer of layout c (a child_start() child): keeps its copy of the
 * mapping, untouched, until EOF on GO or its parent's death.
 */
static void sharer(int ready, int go, void *arg)
{
	char b;

	(void)arg;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(0);
	close(1);
	write_all(ready, "r", 1);
	while (read(go, &b, 1) > 0)
		;
	_exit(0);
}

static struct child shared_with;

/* At the target's exit, whatever ends it: the sharer killed and reaped. */
static void sharer_stop(void)
{
	if (shared_with.pid <= 0)
		return;
	close(shared_with.go);
	kill(shared_with.pid, SIGKILL);
	waitpid(shared_with.pid, NULL, 0);
	shared_with.pid = 0;
}

/* Layouts o, c and f: RSS_MIB in one mapping. */
static void one_mapping(long rss_mib, char shape, const char *file)
{
	size_t len = (size_t)rss_mib << 20;
	unsigned long long kb[SR_NR_FIELDS], want = len >> 10, got;
	char *p;

	if (shape == 'f') {
		static char chunk[1 << 20];
		int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (fd < 0)
			die("create %s", file);
		memset(chunk, 'f', sizeof(chunk));
		for (size_t off = 0; off < len; off += sizeof(chunk))
			write_all(fd, chunk, sizeof(chunk));
		p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
	} else {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		/* EINVAL: a kernel without THP (UML), 4 KiB pages anyway */
		if (p != MAP_FAILED && madvise(p, len, MADV_NOHUGEPAGE) && errno != EINVAL)
			die("MADV_NOHUGEPAGE");
	}
	if (!len || p == MAP_FAILED)
		die("mmap %ld MiB", rss_mib);
	for (size_t off = 0; off < len; off += PAGE) {
		volatile char *c = p + off;

		if (shape == 'f')
			(void)*c;
		else
			*c = 1;
	}
	if (shape == 'c') {
		child_start(&shared_with, sharer, NULL, "the child sharing the mapping");
		atexit(sharer_stop);
	}
	totals(kb);
	errno = 0;
	got = shape == 'f' ? kb[SR_RSS] - kb[SR_ANONYMOUS] : kb[SR_ANONYMOUS];
	if (got < want || kb[SR_ANON_HUGE_PAGES] || kb[SR_FILE_PMD_MAPPED])
		die("layout %c: %llu of %llu kB resident %s, AnonHugePages %llu, FilePmdMapped %llu kB",
		    shape, got, want, shape == 'f' ? "from the file" : "anonymous",
		    kb[SR_ANON_HUGE_PAGES], kb[SR_FILE_PMD_MAPPED]);
	/* Rss - Pss: what sharing takes off; half the mapping when shared. */
	got = kb[SR_RSS] - kb[SR_PSS];
	want = shape == 'c' ? want / 2 : 0;
	if (got + (len >> 10) / 100 < want || got > want + (len >> 10) / 100)
		die("layout %c: Rss - Pss %llu kB, not about %llu (Rss %llu, Pss %llu kB)",
		    shape, got, want, kb[SR_RSS], kb[SR_PSS]);
}

/*
 * Layouts s and p: half the target's Swap (totals()) when it got ready. A
 * stall loop that leaves less dies: the cell is about swap entries.
 */
static unsigned long long swap_floor_kb;

static void swap_kept(const char *when)
{
	unsigned long long kb[SR_NR_FIELDS];

	if (!swap_floor_kb)
		return;
	totals(kb);
	errno = 0;
	if (kb[SR_SWAP] < swap_floor_kb)
		die("%s: Swap %llu kB, below half the %llu kB paged out", when, kb[SR_SWAP],
		    2 * swap_floor_kb);
}

static void stall(double seconds, const char *path)
{
	size_t cap = 1 << 18, n = 0;
	uint32_t *rec;
	uint64_t *tot, start, end;
	size_t len = 64 * 1024;
	int fd;

	rec = malloc(cap * STALL_OPS_WORDS * sizeof(*rec));
	tot = malloc(cap * sizeof(*tot));
	if (!rec || !tot)
		die("malloc");
	memset(rec, 0, cap * STALL_OPS_WORDS * sizeof(*rec));	/* fault it in now */
	memset(tot, 0, cap * sizeof(*tot));
	start = now_ns();
	end = start + (uint64_t)(seconds * 1e9);
	for (uint64_t t0 = start; t0 < end && n < cap; n++) {
		uint64_t t1, t2, t3;
		char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			die("stall mmap");
		t1 = now_ns();
		for (size_t off = 0; off < len; off += PAGE)
			((volatile char *)m)[off] = 1;
		t2 = now_ns();
		if (munmap(m, len))
			die("stall munmap");
		t3 = now_ns();
		rec[STALL_OPS_WORDS * n] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
		rec[STALL_OPS_WORDS * n + 1] = (uint32_t)(t2 - t1 > UINT32_MAX ? UINT32_MAX : t2 - t1);
		rec[STALL_OPS_WORDS * n + 2] = (uint32_t)(t3 - t2 > UINT32_MAX ? UINT32_MAX : t3 - t2);
		tot[n] = t3 - t0;
		t0 = t3;
	}
	swap_kept("after the stall loop");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("create %s", path);
	write_all(fd, rec, n * STALL_OPS_WORDS * sizeof(*rec));
	close(fd);
	qsort(tot, n, sizeof(*tot), cmp_u64);
	printf("stalled %zu %llu %llu %llu\n", n,
	       (unsigned long long)pct(tot, n, 0.50),
	       (unsigned long long)pct(tot, n, 0.99),
	       (unsigned long long)(n ? tot[n - 1] : 0));
	fflush(stdout);
	free(rec);
	free(tot);
}

int main(int argc, char **argv)
{
	char line[4096], path[4096], self[64], *kind;
	long long rss_kb;
	struct sr_rollup r;
	double secs;

	if (argc != 4)
		die("usage: bench-target VMAS RSS_MIB[h|p|u|s|d|a|m|o|c|f] FILE");
	strtol(argv[2], &kind, 10);
	if (kind[0] && (kind[1] || !strchr("hpusdamocf", kind[0]))) {
		errno = 0;
		die("bad RSS_MIB[LAYOUT] %s", argv[2]);
	}
	if (kind[0] && strchr("ocf", kind[0]))
		one_mapping(atol(argv[2]), kind[0], argv[3]);
	else
		layout(atol(argv[1]), atol(argv[2]), kind[0], argv[3]);
	if (kind[0] && strchr("sp", kind[0])) {
		unsigned long long kb[SR_NR_FIELDS];

		totals(kb);
		errno = 0;
		if (!kb[SR_SWAP])
			die("layout %c: no Swap in the totals", kind[0]);
		swap_floor_kb = (kb[SR_SWAP] + 1) / 2;
	}
	sr_path(self, sizeof(self), getpid(), "smaps_rollup");
	if (read_rollup_path(self, &r) == 0) {
		rss_kb = (long long)r.kb[SR_RSS];
	} else {
		sr_path(self, sizeof(self), getpid(), "status");
		proc_kb(self, "VmRSS", &rss_kb);
	}
	printf("ready %d %ld %lld\n", getpid(), count_vmas(), rss_kb);
	fflush(stdout);
	while (read_line(0, line, sizeof(line)) > 0) {
		if (sscanf(line, "stall %lf %4095s", &secs, path) == 2)
			stall(secs, path);
		else
			die("unknown command: %s", line);
	}
	return 0;	/* and sharer_stop(), at exit */
}
