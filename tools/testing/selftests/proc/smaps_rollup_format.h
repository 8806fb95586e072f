/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The smaps_rollup format, with nothing from kselftest_harness.h, so that
 * tools outside the harness (a stress program, say) can share it.
 *
 * /proc/PID/smaps_rollup is one header line and 22 field lines.  Every
 * read parsed with sr_parse_rollup() also checks the format against
 * stock's; sr_rollup_consistent() checks what holds for every single read;
 * sr_sum_smaps() and sr_smaps_slack() compare a rollup with the sums over
 * /proc/PID/smaps.
 */
#ifndef SELFTESTS_PROC_SMAPS_ROLLUP_FORMAT_H
#define SELFTESTS_PROC_SMAPS_ROLLUP_FORMAT_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum sr_field {
	SR_RSS,
	SR_PSS,
	SR_PSS_DIRTY,
	SR_PSS_ANON,
	SR_PSS_FILE,
	SR_PSS_SHMEM,
	SR_SHARED_CLEAN,
	SR_SHARED_DIRTY,
	SR_PRIVATE_CLEAN,
	SR_PRIVATE_DIRTY,
	SR_REFERENCED,
	SR_ANONYMOUS,
	SR_KSM,
	SR_LAZYFREE,
	SR_ANON_HUGE_PAGES,
	SR_SHMEM_PMD_MAPPED,
	SR_FILE_PMD_MAPPED,
	SR_SHARED_HUGETLB,
	SR_PRIVATE_HUGETLB,
	SR_SWAP,
	SR_SWAP_PSS,
	SR_LOCKED,
	SR_NR_FIELDS
};

/* The labels, colon included, in the order smaps_rollup prints them. */
static const char *const sr_label[SR_NR_FIELDS] = {
	"Rss:", "Pss:", "Pss_Dirty:", "Pss_Anon:", "Pss_File:", "Pss_Shmem:",
	"Shared_Clean:", "Shared_Dirty:", "Private_Clean:", "Private_Dirty:",
	"Referenced:", "Anonymous:", "KSM:", "LazyFree:", "AnonHugePages:",
	"ShmemPmdMapped:", "FilePmdMapped:", "Shared_Hugetlb:",
	"Private_Hugetlb:", "Swap:", "SwapPss:", "Locked:",
};

/* Pss_Anon, Pss_File and Pss_Shmem exist only in smaps_rollup. */
static inline bool sr_field_in_smaps(int f)
{
	return f != SR_PSS_ANON && f != SR_PSS_FILE && f != SR_PSS_SHMEM;
}

struct sr_rollup {
	unsigned long start, end;
	unsigned long long kb[SR_NR_FIELDS];
};

/* Why the last sr_parse_rollup() or sr_read_rollup() failed, per thread. */
static __thread char sr_error[2048];

/*
 * The header stock prints: start and end as at least 8 lower-case hex
 * digits, the fixed "---p 00000000 00:00 0 ", spaces up to column
 * 25 + 6 * sizeof(void *) - 1 (72 on 64-bit), one more space, "[rollup]".
 */
static inline int sr_render_header(char *buf, size_t size,
				   unsigned long start, unsigned long end)
{
	int pad_until = 25 + 6 * sizeof(void *) - 1;
	int n;

	n = snprintf(buf, size, "%08lx-%08lx ---p 00000000 00:00 0 ",
		     start, end);
	while (n < pad_until && (size_t)n + 1 < size)
		buf[n++] = ' ';
	return n + snprintf(buf + n, size - n, " [rollup]\n");
}

/*
 * A field line: the label padded to 16 columns and the value at least 8
 * wide, so that short values end at column 24; Private_Hugetlb is one
 * column too long for that and is followed by a space and a 7-wide value.
 */
static inline int sr_render_field(char *buf, size_t size, int f,
				  unsigned long long kb)
{
	if (f == SR_PRIVATE_HUGETLB)
		return snprintf(buf, size, "%s %7llu kB\n", sr_label[f], kb);
	return snprintf(buf, size, "%-16s%8llu kB\n", sr_label[f], kb);
}

static inline int sr_render_rollup(char *buf, size_t size,
				   const struct sr_rollup *r)
{
	int f, n;

	n = sr_render_header(buf, size, r->start, r->end);
	for (f = 0; f < SR_NR_FIELDS; f++)
		n += sr_render_field(buf + n, size - n, f, r->kb[f]);
	return n;
}

static inline unsigned long long sr_parse_number(const char **pp,
						 const char *end, int base)
{
	unsigned long long v = 0;
	const char *p = *pp;
	int d;

	for (; p < end; p++) {
		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			break;
		v = v * base + d;
	}
	*pp = p;
	return v;
}

/*
 * Parse one complete smaps_rollup.  Returns 0, or -1 with the reason in
 * sr_error: the buffer must be byte for byte what stock prints for the
 * values parsed from it (labels, padding, order, no tab, nothing more).
 */
static inline int sr_parse_rollup(const char *buf, size_t len,
				  struct sr_rollup *r)
{
	const char *p = buf, *end = buf + len, *line, *nl, *wnl, *w;
	char want[4096];
	size_t i, n;
	int f;

	memset(r, 0, sizeof(*r));
	r->start = sr_parse_number(&p, end, 16);
	if (p < end && *p == '-' && ++p)
		r->end = sr_parse_number(&p, end, 16);
	for (f = 0; f < SR_NR_FIELDS && (p = memchr(p, '\n', end - p)); f++) {
		p += 1 + strlen(sr_label[f]);
		while (p < end && *p == ' ')
			p++;
		r->kb[f] = sr_parse_number(&p, end, 10);
	}
	n = sr_render_rollup(want, sizeof(want), r);
	for (i = 0; i < n && i < len && want[i] == buf[i]; i++)
		;
	if (i == n && n == len)
		return 0;
	for (line = buf + i; line > buf && line[-1] != '\n'; line--)
		;
	w = want + (line - buf);
	nl = memchr(line, '\n', end - line);
	wnl = line - buf < (ssize_t)n ? memchr(w, '\n', want + n - w) : NULL;
	snprintf(sr_error, sizeof(sr_error),
		 "byte %zu differs from stock's format, in line '%.*s', expected '%.*s'",
		 i, (int)(nl ? nl - line : end - line), line,
		 (int)(wnl ? wnl - w : 0), w);
	return -1;
}

/*
 * Read from @fd until EOF in read()s of at most @chunk bytes.  Returns the
 * number of bytes read, -errno, or -EFBIG if @size was too small.
 */
static inline ssize_t sr_read_fd(int fd, char *buf, size_t size, size_t chunk)
{
	size_t len = 0;
	ssize_t n;

	for (;;) {
		size_t want = size - len < chunk ? size - len : chunk;

		if (!want)
			return -EFBIG;
		n = read(fd, buf + len, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return len;
		len += n;
	}
}

/* Write, or read, all of @len bytes: 0, or -1 on an error or EOF. */
static inline int sr_io_full(int fd, char *p, size_t len, bool wr)
{
	ssize_t n;

	for (; len; p += n, len -= n) {
		n = wr ? write(fd, p, len) : read(fd, p, len);
		if (n < 0 && errno == EINTR)
			n = 0;
		else if (n <= 0)
			return -1;
	}
	return 0;
}

static inline int sr_write_full(int fd, const void *buf, size_t len)
{
	return sr_io_full(fd, (char *)buf, len, true);
}

static inline int sr_read_full(int fd, void *buf, size_t len)
{
	return sr_io_full(fd, buf, len, false);
}

static inline ssize_t sr_read_path(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = sr_read_fd(fd, buf, size, size);
	close(fd);
	return n;
}

static inline void sr_path(char *buf, size_t size, pid_t pid, const char *file)
{
	snprintf(buf, size, "/proc/%d/%s", (int)pid, file);
}

/* Read and parse /proc/@pid/smaps_rollup: 0, -errno, or -EPROTO. */
static inline int sr_read_rollup(pid_t pid, struct sr_rollup *r)
{
	char path[64], buf[4096];
	ssize_t n;

	sr_path(path, sizeof(path), pid, "smaps_rollup");
	n = sr_read_path(path, buf, sizeof(buf));
	if (n < 0) {
		snprintf(sr_error, sizeof(sr_error), "reading %s: %s", path,
			 strerror(-n));
		return n;
	}
	return sr_parse_rollup(buf, n, r) ? -EPROTO : 0;
}

/*
 * Read until two reads in a row agree, so that a value a kernel thread
 * happened to change during one read (reclaim aging a page, say) is not
 * taken for the workload's doing.  -EAGAIN if they never agree.
 */
static inline int sr_read_rollup_stable(pid_t pid, struct sr_rollup *r)
{
	struct sr_rollup next;
	int i, ret;

	ret = sr_read_rollup(pid, r);
	for (i = 0; i < 20 && !ret; i++) {
		ret = sr_read_rollup(pid, &next);
		if (!ret && !memcmp(r, &next, sizeof(next)))
			return 0;
		*r = next;
	}
	if (!ret) {
		snprintf(sr_error, sizeof(sr_error),
			 "smaps_rollup of %d never read the same twice", pid);
		ret = -EAGAIN;
	}
	return ret;
}

/*
 * Relations that hold for every single read, however the target changes
 * meanwhile, because each page adds to all its fields at once (Pss_Anon,
 * Pss_File and Pss_Shmem are rounded down separately: their sum is Pss -
 * 2 to Pss).  0, or -1 with the broken relation in sr_error.
 */
static inline int sr_rollup_consistent(const struct sr_rollup *r)
{
	const unsigned long long *kb = r->kb;
	unsigned long long pss_sum = kb[SR_PSS_ANON] + kb[SR_PSS_FILE] +
				     kb[SR_PSS_SHMEM];
	const char *broken = NULL;

	if (kb[SR_SHARED_CLEAN] + kb[SR_SHARED_DIRTY] + kb[SR_PRIVATE_CLEAN] +
	    kb[SR_PRIVATE_DIRTY] != kb[SR_RSS])
		broken = "Shared_Clean + Shared_Dirty + Private_Clean + Private_Dirty == Rss";
	else if (pss_sum > kb[SR_PSS] || pss_sum + 2 < kb[SR_PSS])
		broken = "Pss - 2 <= Pss_Anon + Pss_File + Pss_Shmem <= Pss";
	else if (kb[SR_PSS] > kb[SR_RSS])
		broken = "Pss <= Rss";
	else if (kb[SR_PSS_DIRTY] > kb[SR_PSS])
		broken = "Pss_Dirty <= Pss";
	else if (kb[SR_PSS_DIRTY] > kb[SR_SHARED_DIRTY] + kb[SR_PRIVATE_DIRTY])
		broken = "Pss_Dirty <= Shared_Dirty + Private_Dirty";
	else if (kb[SR_LOCKED] > kb[SR_PSS])
		broken = "Locked <= Pss";
	else if (kb[SR_ANONYMOUS] > kb[SR_RSS])
		broken = "Anonymous <= Rss";
	else if (kb[SR_PSS_ANON] > kb[SR_ANONYMOUS])
		broken = "Pss_Anon <= Anonymous";
	else if (kb[SR_PSS_FILE] + kb[SR_PSS_SHMEM] > kb[SR_RSS] - kb[SR_ANONYMOUS])
		broken = "Pss_File + Pss_Shmem <= Rss - Anonymous";
	else if (kb[SR_REFERENCED] > kb[SR_RSS])
		broken = "Referenced <= Rss";
	else if (kb[SR_KSM] > kb[SR_ANONYMOUS])
		broken = "KSM <= Anonymous";
	else if (kb[SR_LAZYFREE] > kb[SR_ANONYMOUS])
		broken = "LazyFree <= Anonymous";
	else if (kb[SR_ANON_HUGE_PAGES] > kb[SR_ANONYMOUS])
		broken = "AnonHugePages <= Anonymous";
	else if (kb[SR_SHMEM_PMD_MAPPED] + kb[SR_FILE_PMD_MAPPED] >
		 kb[SR_RSS] - kb[SR_ANONYMOUS])
		broken = "ShmemPmdMapped + FilePmdMapped <= Rss - Anonymous";
	else if (kb[SR_SWAP_PSS] > kb[SR_SWAP])
		broken = "SwapPss <= Swap";
	else if (r->start > r->end || (r->start | r->end) & 4095)
		broken = "start <= end, both page aligned";
	if (!broken)
		return 0;
	sr_render_rollup(sr_error, sizeof(sr_error), r);
	snprintf(sr_error + strlen(sr_error), sizeof(sr_error) - strlen(sr_error),
		 "violates %s", broken);
	return -1;
}

/* Sums over /proc/PID/smaps, the gate VMA left out as smaps_rollup does. */
struct sr_smaps {
	unsigned long long kb[SR_NR_FIELDS];	/* Pss_{Anon,File,Shmem}: 0 */
	unsigned long start, end;		/* first start, last end */
	unsigned long nr_vmas;
	unsigned long nr_pss_shared;	/* VMAs showing Pss < Rss */
	unsigned long nr_swap_shared;	/* VMAs showing SwapPss < Swap */
};

struct sr_smaps_vma {
	unsigned long long kb[SR_NR_FIELDS];
	unsigned long start, end;
	bool gate, open;
};

static inline bool sr_is_vma_header(const char *line, const char *eol,
				    unsigned long *start, unsigned long *end)
{
	const char *q = line;

	*start = sr_parse_number(&q, eol, 16);
	if (q == line || q >= eol || *q != '-')
		return false;
	line = ++q;
	*end = sr_parse_number(&q, eol, 16);
	return q != line && q < eol && *q == ' ';
}

static inline void sr_smaps_close_vma(struct sr_smaps *s, struct sr_smaps_vma *v)
{
	int f;

	if (!v->open || v->gate)
		return;
	if (!s->nr_vmas++)
		s->start = v->start;
	s->end = v->end;
	for (f = 0; f < SR_NR_FIELDS; f++)
		s->kb[f] += v->kb[f];
	if (v->kb[SR_PSS] < v->kb[SR_RSS])
		s->nr_pss_shared++;
	if (v->kb[SR_SWAP_PSS] < v->kb[SR_SWAP])
		s->nr_swap_shared++;
}

static inline void sr_smaps_line(struct sr_smaps *s, struct sr_smaps_vma *v,
				 const char *line, const char *eol)
{
	unsigned long start, end;
	int f;

	if (sr_is_vma_header(line, eol, &start, &end)) {
		sr_smaps_close_vma(s, v);
		memset(v, 0, sizeof(*v));
		v->open = true;
		v->start = start;
		v->end = end;
		/* The gate VMA: x86-64 [vsyscall], arm [vectors]. */
		v->gate = (eol - line > 11 && !memcmp(eol - 11, " [vsyscall]", 11)) ||
			  (eol - line > 10 && !memcmp(eol - 10, " [vectors]", 10));
		return;
	}
	for (f = 0; f < SR_NR_FIELDS; f++) {
		size_t l = strlen(sr_label[f]);
		const char *q = line + l;

		if ((size_t)(eol - line) <= l || memcmp(line, sr_label[f], l))
			continue;
		while (q < eol && *q == ' ')
			q++;
		v->kb[f] = sr_parse_number(&q, eol, 10);
		return;
	}
}

/* Sum /proc/@pid/smaps, streaming it in 64 KiB reads: 0 or -errno. */
static inline int sr_sum_smaps(pid_t pid, struct sr_smaps *s)
{
	size_t size = 1 << 16, len = 0;
	struct sr_smaps_vma v = {};
	char path[64], *buf;
	int fd, ret = 0;

	memset(s, 0, sizeof(*s));
	sr_path(path, sizeof(path), pid, "smaps");
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, size - len);
		char *line = buf, *nl;

		if (n < 0) {
			ret = -errno;
			break;
		}
		len += n;
		while ((nl = memchr(line, '\n', buf + len - line))) {
			sr_smaps_line(s, &v, line, nl);
			line = nl + 1;
		}
		len = buf + len - line;
		memmove(buf, line, len);
		if (!n || len == size)
			break;
	}
	sr_smaps_close_vma(s, &v);
	close(fd);
	free(buf);
	return ret;
}

/*
 * How much field @f of the rollup may exceed its sum over smaps.  smaps
 * rounds each VMA's Pss, Pss_Dirty, Locked and SwapPss down to a whole kB,
 * smaps_rollup rounds their sum once.  A VMA's value has a fraction only
 * if it shows Pss < Rss (SwapPss < Swap); with k such VMAs, the rollup may
 * exceed the sum by 0 to k - 1 kB.  Every other field must match exactly.
 */
static inline unsigned long long sr_smaps_slack(const struct sr_smaps *s, int f)
{
	if (f == SR_PSS || f == SR_PSS_DIRTY || f == SR_LOCKED)
		return s->nr_pss_shared ? s->nr_pss_shared - 1 : 0;
	if (f == SR_SWAP_PSS)
		return s->nr_swap_shared ? s->nr_swap_shared - 1 : 0;
	return 0;
}

#endif /* SELFTESTS_PROC_SMAPS_ROLLUP_FORMAT_H */
