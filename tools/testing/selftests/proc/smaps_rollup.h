/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the smaps_rollup-*.c selftests.
 *
 * Parsing.  /proc/PID/smaps_rollup is one header line and 22 field lines.
 * sr_parse_rollup() accepts a buffer only if re-rendering the parsed
 * values in stock's format gives back the same bytes, so every test that
 * reads the file also checks its format.
 *
 * Targets.  Exact expectations need a process whose memory nothing else
 * touches.  A forked child is not enough: every page it shares with its
 * parent changes Pss whenever the parent breaks copy-on-write.  A target is
 * therefore this test binary executed afresh with SMAPS_ROLLUP_TARGET in its
 * environment; a constructor sees the variable before the harness starts
 * and runs the named workload instead of the tests.  It executes a private
 * copy of the binary in a memfd, so that no other process (a previous
 * test's target still exiting, say) maps its text and changes its Pss.  The
 * target first "settles": it grows its stack, unmaps [vdso] (whose pages
 * every process on the system maps, so their Pss drifts), and populates
 * every mapping it has, so that running further code faults in nothing.
 * The test then drives the workload one step at a time over a pipe and
 * reads smaps_rollup between steps; nothing runs in the target between two
 * steps.
 *
 * Targets run with PR_SET_THP_DISABLE unless their workload wants THP, so
 * that khugepaged cannot collapse a range behind a test's back.
 *
 * Helpers.  A target may fork a helper that shares some memory with it.  The
 * helper settles too: writing every private page breaks copy-on-write, so
 * the target keeps its private pages private.
 *
 * Cleanup.  Targets and helpers die with the process that started them
 * (PR_SET_PDEATHSIG, and EOF on their command pipe), so tests never kill
 * them.  Fixtures that change system state (KSM, huge pages, sysctls, a
 * set-user-ID file) restore it in FIXTURE_TEARDOWN_PARENT(): after a failed
 * ASSERT_*() longjmp()s back into the harness's test wrapper, the wrapper's
 * local "child" is indeterminate and a teardown run in the child may be
 * skipped.  Such fixture data is shared with every fork of the test, so
 * never store a fork() result into it directly.
 */
#ifndef SELFTESTS_PROC_SMAPS_ROLLUP_H
#define SELFTESTS_PROC_SMAPS_ROLLUP_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT		21
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

#define SR_KB(bytes)		((long long)((bytes) >> 10))

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

/* Why the last sr_parse_rollup() or sr_read_rollup() failed. */
static char sr_error[2048];

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
 * Parse and check one complete smaps_rollup.  Returns 0, or -1 with the
 * reason in sr_error.  Every line must be byte for byte what stock would
 * print for the values parsed from it.
 */
static inline int sr_parse_rollup(const char *buf, size_t len,
				  struct sr_rollup *r)
{
	const char *p = buf, *end = buf + len, *nl, *q;
	char want[256];
	int f, n;

	memset(r, 0, sizeof(*r));
	if (memchr(buf, '\t', len)) {
		snprintf(sr_error, sizeof(sr_error), "output contains a tab");
		return -1;
	}
	nl = memchr(p, '\n', end - p);
	if (!nl) {
		snprintf(sr_error, sizeof(sr_error), "no complete header line");
		return -1;
	}
	q = p;
	r->start = sr_parse_number(&q, nl, 16);
	if (q < nl && *q == '-') {
		q++;
		r->end = sr_parse_number(&q, nl, 16);
	}
	n = sr_render_header(want, sizeof(want), r->start, r->end);
	if (n != nl + 1 - p || memcmp(want, p, n)) {
		snprintf(sr_error, sizeof(sr_error),
			 "header '%.*s' is not '%.*s'",
			 (int)(nl - p), p, n - 1, want);
		return -1;
	}
	p = nl + 1;
	for (f = 0; f < SR_NR_FIELDS; f++) {
		nl = memchr(p, '\n', end - p);
		if (!nl) {
			snprintf(sr_error, sizeof(sr_error),
				 "output ends before %s", sr_label[f]);
			return -1;
		}
		q = p + strlen(sr_label[f]);
		if (q > nl || memcmp(p, sr_label[f], q - p)) {
			snprintf(sr_error, sizeof(sr_error),
				 "line %d is '%.*s', expected label %s",
				 f + 2, (int)(nl - p), p, sr_label[f]);
			return -1;
		}
		while (q < nl && *q == ' ')
			q++;
		r->kb[f] = sr_parse_number(&q, nl, 10);
		n = sr_render_field(want, sizeof(want), f, r->kb[f]);
		if (n != nl + 1 - p || memcmp(want, p, n)) {
			snprintf(sr_error, sizeof(sr_error),
				 "line %d is '%.*s', expected '%.*s'",
				 f + 2, (int)(nl - p), p, n - 1, want);
			return -1;
		}
		p = nl + 1;
	}
	if (p != end) {
		snprintf(sr_error, sizeof(sr_error),
			 "%zu bytes after Locked: '%.*s'", (size_t)(end - p),
			 (int)(end - p > 40 ? 40 : end - p), p);
		return -1;
	}
	return 0;
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
 * meanwhile, because stock adds each page to all of its fields at once:
 * the four Shared_/Private_ fields split Rss; Pss_Anon, Pss_File and
 * Pss_Shmem split Pss but are rounded down separately, so their sum is
 * Pss, Pss - 1 or Pss - 2; Pss-type values never exceed what they weigh.
 * Returns 0, or -1 with the broken relation in sr_error.
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

/* Expected changes of each field in kB; SR_ANY for "not checked". */
#define SR_ANY	LLONG_MIN

static inline void sr_delta_init(long long *want)
{
	int f;

	for (f = 0; f < SR_NR_FIELDS; f++)
		want[f] = 0;
	/* Whether a page is young is up to the hardware and to reclaim. */
	want[SR_REFERENCED] = SR_ANY;
}

static inline long long sr_delta(const struct sr_rollup *before,
				 const struct sr_rollup *after, int f)
{
	return (long long)after->kb[f] - (long long)before->kb[f];
}

static inline void sr_expect_delta(struct __test_metadata *_metadata,
				   const struct sr_rollup *before,
				   const struct sr_rollup *after,
				   const long long *want)
{
	int f;

	for (f = 0; f < SR_NR_FIELDS; f++) {
		long long d = sr_delta(before, after, f);

		if (want[f] == SR_ANY)
			continue;
		EXPECT_EQ(want[f], d) {
			TH_LOG("%s changed by %lld kB (%llu -> %llu), expected %lld kB",
			       sr_label[f], d, before->kb[f], after->kb[f],
			       want[f]);
		}
	}
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
 * Every field smaps has must sum to the rollup's value.  Stock's smaps
 * prints each VMA's Pss, Pss_Dirty, Locked and SwapPss as
 * (sum >> PSS_SHIFT) >> 10 of that VMA's fixed-point sum, that is rounded
 * down to a whole kB; smaps_rollup adds the fixed-point sums of all VMAs and
 * rounds once.  A VMA's value has a fraction only if one of its pages is
 * mapped more than once (for SwapPss: one of its swap entries is referenced
 * more than once), and then that VMA shows Pss < Rss (SwapPss < Swap).
 * With k such VMAs the rounded-off fractions add up to less than k kB, so
 *
 *	0 <= rollup - sum(smaps) <= k - 1	(and == 0 when k == 0)
 *
 * Every other field is a plain sum of whole pages and must match exactly,
 * as must the header's range: the first VMA's start, the last VMA's end.
 */
static inline void sr_expect_matches_smaps(struct __test_metadata *_metadata,
					   const struct sr_rollup *r,
					   const struct sr_smaps *s)
{
	int f;

	for (f = 0; f < SR_NR_FIELDS; f++) {
		unsigned long long slack = 0;

		if (!sr_field_in_smaps(f))
			continue;
		if (f == SR_PSS || f == SR_PSS_DIRTY || f == SR_LOCKED)
			slack = s->nr_pss_shared ? s->nr_pss_shared - 1 : 0;
		if (f == SR_SWAP_PSS)
			slack = s->nr_swap_shared ? s->nr_swap_shared - 1 : 0;
		EXPECT_TRUE(r->kb[f] >= s->kb[f] && r->kb[f] - s->kb[f] <= slack) {
			TH_LOG("%s rollup %llu kB, smaps sum %llu kB, %s 0..%llu kB",
			       sr_label[f], r->kb[f], s->kb[f],
			       "rounding allowed", slack);
		}
	}
	EXPECT_EQ(s->start, r->start);
	EXPECT_EQ(s->end, r->end);
}

/*
 * Read rollup, smaps, rollup, until the two rollups agree (the target did
 * not change meanwhile), then compare.
 */
static inline void sr_expect_rollup_is_smaps_sum(struct __test_metadata *_metadata,
						 pid_t pid)
{
	struct sr_rollup r1, r2;
	struct sr_smaps s;
	int i;

	for (i = 0; i < 10; i++) {
		ASSERT_EQ(0, sr_read_rollup_stable(pid, &r1))
			TH_LOG("%s", sr_error);
		ASSERT_EQ(0, sr_sum_smaps(pid, &s));
		ASSERT_EQ(0, sr_read_rollup_stable(pid, &r2))
			TH_LOG("%s", sr_error);
		if (!memcmp(&r1, &r2, sizeof(r1)))
			break;
	}
	ASSERT_LT(i, 10) TH_LOG("target %d never held still", pid);
	ASSERT_GT(s.nr_vmas, 0);
	sr_expect_matches_smaps(_metadata, &r1, &s);
}

/* The value of @label in the smaps entry of the VMA starting at @addr. */
static inline long long sr_smaps_vma_field(pid_t pid, unsigned long addr,
					   const char *label)
{
	static char buf[1 << 20];
	unsigned long start, end;
	char path[64], *line, *nl, *stop;
	bool in = false;
	ssize_t n;

	sr_path(path, sizeof(path), pid, "smaps");
	n = sr_read_path(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	stop = buf + n;
	for (line = buf; (nl = memchr(line, '\n', stop - line)); line = nl + 1) {
		size_t l = strlen(label);
		const char *q = line + l;

		if (sr_is_vma_header(line, nl, &start, &end)) {
			in = start == addr;
			continue;
		}
		if (!in || (size_t)(nl - line) <= l || memcmp(line, label, l))
			continue;
		while (q < nl && *q == ' ')
			q++;
		return sr_parse_number(&q, nl, 10);
	}
	return -ENOENT;
}

/* Read a number from a /proc or /sys file: 0 or -errno. */
static inline int sr_read_long(const char *path, long *val)
{
	char buf[64];
	ssize_t n;

	n = sr_read_path(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return n;
	buf[n] = 0;
	*val = strtol(buf, NULL, 10);
	return 0;
}

static inline int sr_write_long(const char *path, long val)
{
	char buf[32];
	int fd, n, ret = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%ld\n", val);
	if (write(fd, buf, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

/* --- Settling a process: see the comment at the top. --- */

struct sr_vma {
	unsigned long start, end;
	char perms[5];
	unsigned long inode;
	const char *name;	/* "" for anonymous */
};

/* A cursor over /proc/self/maps, read into a static buffer: no malloc. */
struct sr_maps {
	char *pos, *end;
};

static inline int sr_maps_read(struct sr_maps *m)
{
	static char maps[1 << 16];
	ssize_t n;

	n = sr_read_path("/proc/self/maps", maps, sizeof(maps) - 1);
	m->pos = maps;
	m->end = maps + (n < 0 ? 0 : n);
	return n < 0 ? n : 0;
}

static inline bool sr_maps_next(struct sr_maps *m, struct sr_vma *v)
{
	char *line, *nl;
	int name;

	while (m->pos < m->end && (nl = memchr(m->pos, '\n', m->end - m->pos))) {
		line = m->pos;
		m->pos = nl + 1;
		*nl = 0;
		name = 0;
		memset(v, 0, sizeof(*v));
		if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %lu %n", &v->start,
			   &v->end, v->perms, &v->inode, &name) < 4)
			continue;
		v->name = name ? line + name : "";
		return true;
	}
	return false;
}

#define SR_SETTLE_UNMAP_VDSO	0x1	/* drop [vdso]: no clock_gettime() then */
#define SR_SETTLE_THP		0x2	/* a target that may use THP */

struct sr_settle_args {
	unsigned long ex_start, ex_end;	/* leave this range alone */
	int flags;
};

static inline void sr_settle_vma(const struct sr_vma *v,
				 const struct sr_settle_args *a)
{
	unsigned long start = v->start, end = v->end;
	int advice;

	if (!strcmp(v->name, "[vdso]")) {
		if (a->flags & SR_SETTLE_UNMAP_VDSO)
			munmap((void *)start, end - start);
		return;
	}
	if (v->perms[0] != 'r' ||
	    (v->name[0] == '[' && strcmp(v->name, "[stack]") &&
	     strcmp(v->name, "[heap]")))
		return;
	/* Writing a private page gives us our own copy of it. */
	advice = v->perms[1] == 'w' && v->perms[3] == 'p' ?
		 MADV_POPULATE_WRITE : MADV_POPULATE_READ;
	if (a->ex_start < end && start < a->ex_end) {
		if (a->ex_start > start)
			madvise((void *)start, a->ex_start - start, advice);
		if (a->ex_end >= end)
			return;
		start = a->ex_end;
	}
	/* Errors (a page past EOF, say) only leave a page unpopulated. */
	madvise((void *)start, end - start, advice);
}

/* Fault in 256 KiB of stack, more than any later call chain needs. */
static inline void sr_grow_stack(void)
{
	char pad[256 << 10];

	memset(pad, 0, sizeof(pad));
	/* Keep the compiler from dropping the memset(). */
	asm volatile("" : : "r"(pad) : "memory");
}

static inline void sr_settle(unsigned long ex_start, unsigned long ex_end,
			     int flags)
{
	struct sr_settle_args a = { ex_start, ex_end, flags };
	struct sr_maps m;
	struct sr_vma v;

	sr_grow_stack();
	if (sr_maps_read(&m))
		return;
	while (sr_maps_next(&m, &v))
		sr_settle_vma(&v, &a);
}

/* --- Targets --- */

#define SR_TARGET_ENV	"SMAPS_ROLLUP_TARGET"

struct sr_workload {
	const char *name;
	/* Returns 0 or -errno; may store a value to pass back in *val. */
	int (*step)(int step, long arg, unsigned long *val);
	int settle_flags;
};

struct sr_target {
	pid_t pid;
	int cmd;	/* write a step number */
	int ack;	/* read a status byte and an unsigned long */
};

/* In the target (and inherited by its helpers): its end of the pipes. */
static int sr_target_cmd_fd = -1, sr_target_ack_fd = -1;

static inline int sr_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

static inline int sr_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* Send a step's result, 0 or -errno, and a value. */
static inline int sr_send_status(int fd, int status, unsigned long val)
{
	unsigned char msg[1 + sizeof(val)];

	msg[0] = -status;
	memcpy(msg + 1, &val, sizeof(val));
	return sr_write_full(fd, msg, sizeof(msg));
}

/* Receive a step's result: 0 or -errno, -EPIPE if the sender died. */
static inline int sr_recv_status(int fd, unsigned long *val)
{
	unsigned char msg[1 + sizeof(*val)];

	if (sr_read_full(fd, msg, sizeof(msg)))
		return -EPIPE;
	if (val)
		memcpy(val, msg + 1, sizeof(*val));
	return -msg[0];
}

/*
 * The target's main loop; called from the constructor SR_TARGET_MAIN makes
 * with the workloads, a table ending in an entry without a name.
 */
static inline void sr_target_main(const struct sr_workload *w)
{
	const char *env = getenv(SR_TARGET_ENV);
	unsigned long val;
	char name[64];
	unsigned char step;
	int status;
	long arg;
	size_t i;

	if (!env)
		return;
	if (sscanf(env, "%63[^,],%d,%d,%ld", name, &sr_target_cmd_fd,
		   &sr_target_ack_fd, &arg) != 4)
		_exit(125);
	for (i = 0; w[i].name && strcmp(w[i].name, name); i++)
		;
	if (!w[i].name)
		_exit(126);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Or khugepaged might collapse a range some day, adding to Rss. */
	if (!(w[i].settle_flags & SR_SETTLE_THP))
		prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	sr_settle(0, 0, w[i].settle_flags);
	if (sr_send_status(sr_target_ack_fd, 0, getpid()))
		_exit(1);
	while (sr_read_full(sr_target_cmd_fd, &step, 1) == 0) {
		val = 0;
		status = w[i].step(step, arg, &val);
		if (sr_send_status(sr_target_ack_fd, status, val))
			_exit(1);
	}
	_exit(0);
}

/*
 * Runs before the harness's constructors, so a target never registers or
 * runs tests.
 */
#define SR_TARGET_MAIN(table)						\
	static void __attribute__((constructor(101))) sr_target_ctor(void) \
	{								\
		sr_target_main(table);					\
	}

#ifndef MFD_EXEC
#define MFD_EXEC	0x0010U
#endif

/* A memfd holding a copy of this binary, or -1. */
static inline int sr_exe_copy(void)
{
	char buf[65536];
	int in, out;
	ssize_t n;

	out = memfd_create("smaps_rollup-target", MFD_CLOEXEC | MFD_EXEC);
	if (out < 0)	/* before 6.3, MFD_EXEC was unknown */
		out = memfd_create("smaps_rollup-target", MFD_CLOEXEC);
	in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			n = -1;
	if (in < 0 || out < 0 || n < 0) {
		if (out >= 0)
			close(out);
		out = -1;
	}
	if (in >= 0)
		close(in);
	return out;
}

/*
 * Start workload @name with @arg, executing @exe (NULL: a private copy of
 * this binary); wait until it has settled.  Returns 0, or -errno (-EPIPE
 * if it died).
 */
static inline int sr_target_start_exe(struct sr_target *t, const char *exe,
				      const char *name, long arg)
{
	char env[128], *envp[] = { env, NULL }, *argv[] = { (char *)name, NULL };
	int cmd[2], ack[2], ret, copy;
	pid_t pid;

	t->pid = -1;
	if (pipe2(cmd, O_CLOEXEC))
		return -errno;
	if (pipe2(ack, O_CLOEXEC)) {
		ret = -errno;
		close(cmd[0]);
		close(cmd[1]);
		return ret;
	}
	snprintf(env, sizeof(env), "%s=%s,%d,%d,%ld", SR_TARGET_ENV, name,
		 cmd[0], ack[1], arg);
	copy = exe ? -1 : sr_exe_copy();
	/* Not t->pid = fork(): *t may be shared with the child. */
	pid = fork();
	if (pid == 0) {
		fcntl(cmd[0], F_SETFD, 0);
		fcntl(ack[1], F_SETFD, 0);
		if (copy >= 0)
			fexecve(copy, argv, envp);
		/* No copy, or vm.memfd_noexec forbids running it. */
		execve(exe ? exe : "/proc/self/exe", argv, envp);
		_exit(127);
	}
	t->pid = pid;
	ret = pid < 0 ? -errno : 0;
	if (copy >= 0)
		close(copy);
	close(cmd[0]);
	close(ack[1]);
	t->cmd = cmd[1];
	t->ack = ack[0];
	if (!ret && sr_recv_status(t->ack, NULL))
		ret = -EPIPE;
	return ret;
}

static inline int sr_target_start(struct sr_target *t, const char *name,
				  long arg)
{
	return sr_target_start_exe(t, NULL, name, arg);
}

/* Run step @step: 0 or -errno, -EPIPE if the target died. */
static inline int sr_target_step(struct sr_target *t, int step,
				 unsigned long *val)
{
	unsigned char c = step;

	if (sr_write_full(t->cmd, &c, 1))
		return -EPIPE;
	return sr_recv_status(t->ack, val);
}

/* Let the target exit; returns its wait status. */
static inline int sr_target_stop(struct sr_target *t)
{
	int status = -1;

	if (t->pid <= 0)
		return -1;
	close(t->cmd);
	close(t->ack);
	waitpid(t->pid, &status, 0);
	t->pid = -1;
	return status;
}

/* --- Helpers a target forks --- */

struct sr_helper {
	pid_t pid;
	int cmd, ack;
};

/*
 * Fork a helper that settles, leaving [@ex_start, @ex_end) alone, and then
 * runs @op (returning 0 or -errno) for each command byte it gets.
 * Returns 0 or -errno.
 */
static inline int sr_helper_start(struct sr_helper *h, unsigned long ex_start,
				  unsigned long ex_end, int (*op)(int cmd))
{
	int cmd[2], ack[2];
	unsigned char c;
	pid_t pid;

	if (pipe(cmd) || pipe(ack))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* The test must see EOF on the target's pipes when it dies. */
		close(sr_target_cmd_fd);
		close(sr_target_ack_fd);
		close(cmd[1]);
		close(ack[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sr_settle(ex_start, ex_end, 0);
		if (sr_send_status(ack[1], 0, 0))
			_exit(1);
		while (sr_read_full(cmd[0], &c, 1) == 0)
			if (sr_send_status(ack[1], op(c), 0))
				_exit(1);
		_exit(0);
	}
	close(cmd[0]);
	close(ack[1]);
	h->pid = pid;
	h->cmd = cmd[1];
	h->ack = ack[0];
	return sr_recv_status(h->ack, NULL);
}

static inline int sr_helper_cmd(struct sr_helper *h, int cmd)
{
	unsigned char c = cmd;

	if (sr_write_full(h->cmd, &c, 1))
		return -EPIPE;
	return sr_recv_status(h->ack, NULL);
}

/* Touch one byte of each page: write @val, or read if @val < 0. */
static inline void sr_touch(void *addr, size_t len, int val)
{
	char *p = addr;
	size_t i;

	for (i = 0; i < len; i += getpagesize()) {
		if (val < 0)
			asm volatile("" : : "r"(p[i]));	/* load it */
		else
			p[i] = val;
	}
	asm volatile("" : : : "memory");
}

/* mmap(), returning 0 or -errno. */
static inline int sr_mmap(void **addr, size_t len, int prot, int flags, int fd)
{
	*addr = mmap(NULL, len, prot, flags, fd, 0);
	return *addr == MAP_FAILED ? -errno : 0;
}

#endif /* SELFTESTS_PROC_SMAPS_ROLLUP_H */
