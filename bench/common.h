/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers for the smaps_rollup benchmarks (the bench programs): clocks,
 * whole-file reads, the smaps/smaps_rollup field parser, the status VmRSS
 * parser and percentiles. Header-only: each program is one translation
 * unit, linked statically.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((unused)) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "bench: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (errno)
		fprintf(stderr, ": %s", strerror(errno));
	fputc('\n', stderr);
	exit(1);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The fields of a smaps_rollup, in its order (NOTES.md section 3). */
static const char *const field_names[] = {
	"Rss", "Pss", "Pss_Dirty", "Pss_Anon", "Pss_File", "Pss_Shmem",
	"Shared_Clean", "Shared_Dirty", "Private_Clean", "Private_Dirty",
	"Referenced", "Anonymous", "KSM", "LazyFree", "AnonHugePages",
	"ShmemPmdMapped", "FilePmdMapped", "Shared_Hugetlb", "Private_Hugetlb",
	"Swap", "SwapPss", "Locked",
};
#define NFIELDS (int)(sizeof(field_names) / sizeof(field_names[0]))
enum { F_RSS = 0, F_PSS = 1 };

struct totals {
	long long v[NFIELDS];
	long lines;	/* field lines summed */
	long entries;	/* header (address) lines seen */
};

/*
 * parse_line: one line of smaps or smaps_rollup, without its newline.
 * A field line is "Name:<spaces>NUMBER kB"; it is added to the matching
 * rollup field. Lines of other fields (Size, KernelPageSize, THPeligible,
 * VmFlags) are ignored, and an address line counts one entry.
 */
static inline void parse_line(struct totals *t, const char *s, size_t len)
{
	const char *colon, *p, *end = s + len;
	long long v = 0;
	size_t nlen;
	int i;

	if (len == 0)
		return;
	if (!(*s >= 'A' && *s <= 'Z')) {
		t->entries++;
		return;
	}
	colon = memchr(s, ':', len);
	if (!colon)
		return;
	nlen = (size_t)(colon - s);
	for (p = colon + 1; p < end && *p == ' '; p++)
		;
	if (p == end || *p < '0' || *p > '9')
		return;
	for (; p < end && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	if (end - p < 3 || memcmp(p, " kB", 3) != 0)
		return;
	for (i = 0; i < NFIELDS; i++) {
		if (strlen(field_names[i]) == nlen &&
		    memcmp(field_names[i], s, nlen) == 0) {
			t->v[i] += v;
			t->lines++;
			return;
		}
	}
}

/*
 * sum_file: read PATH to the end in chunks of BUFSZ and parse every line
 * into T. Returns 0, or -errno when open or read fails (ESRCH for a task
 * that exited, ENOENT for a kernel without the file).
 */
#define READ_CHUNK (256 * 1024)
static char read_buf[READ_CHUNK + 1];

static inline int sum_file(const char *path, struct totals *t)
{
	size_t have = 0;
	ssize_t n;
	int fd;

	memset(t, 0, sizeof(*t));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		char *line, *nl, *end;

		n = read(fd, read_buf + have, READ_CHUNK - have);
		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		end = read_buf + have;
		line = read_buf;
		while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
			parse_line(t, line, (size_t)(nl - line));
			line = nl + 1;
		}
		have = (size_t)(end - line);
		if (have == READ_CHUNK) /* a line longer than the buffer */
			have = 0;
		memmove(read_buf, line, have);
	}
	if (have)
		parse_line(t, read_buf, have);
	close(fd);
	return 0;
}

/* status_rss: VmRSS of /proc/PID/status in kB into *KB; 0 or -errno. */
static inline int status_rss(const char *path, long long *kb)
{
	char buf[8192];
	ssize_t n;
	size_t have = 0;
	char *p;
	int fd;

	*kb = -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (have < sizeof(buf) - 1 &&
	       (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	close(fd);
	buf[have] = '\0';
	p = strstr(buf, "\nVmRSS:");
	if (p)
		*kb = strtoll(p + 7, NULL, 10);
	return 0;
}

__attribute__((unused)) static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* pct: the Q-quantile (0..1) of sorted V[N], nearest rank. */
static inline uint64_t pct(const uint64_t *v, size_t n, double q)
{
	size_t k;

	if (n == 0)
		return 0;
	k = (size_t)(q * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* read_line: one line from FD into BUF (no stdio: FD is a pipe). */
static inline ssize_t read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;

	while (n < size - 1) {
		ssize_t r = read(fd, buf + n, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return (ssize_t)n;
}

static inline void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write");
		c += w;
		n -= (size_t)w;
	}
}

/* A running bench-target: commands go to @in, its lines come from @out. */
struct target {
	pid_t child;
	int pid;		/* as its "ready" line says */
	long nvmas;
	long long rss_kb;
	int in, out;
};

/*
 * Start DIR/bench-target VMAS RSS_MIB FILE (@args[0..2]) with a pipe each
 * way, and wait for its "ready PID NVMAS RSS_KB" line.
 */
static inline void target_start(struct target *t, const char *dir, char **args)
{
	char tgt[4200], line[256];
	int to[2], from[2];

	snprintf(tgt, sizeof(tgt), "%s/bench-target", dir);
	if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
		die("pipe");
	t->child = fork();
	if (t->child < 0)
		die("fork");
	if (t->child == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		execl(tgt, "bench-target", args[0], args[1], args[2], (char *)NULL);
		die("exec %s", tgt);
	}
	close(to[0]);
	close(from[1]);
	t->in = to[1];
	t->out = from[0];
	if (read_line(t->out, line, sizeof(line)) <= 0 ||
	    sscanf(line, "ready %d %ld %lld", &t->pid, &t->nvmas, &t->rss_kb) != 3)
		die("the target did not get ready");
}

/* EOF on its stdin: the target exits; it must exit 0. */
static inline void target_stop(struct target *t)
{
	int st;

	close(t->in);
	if (waitpid(t->child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("the target failed");
}

#endif
