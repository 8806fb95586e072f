// SPDX-License-Identifier: GPL-2.0
/*
 * smaps_rollup_stress: a bounded stress test and a fault-injection driver
 * for /proc/<pid>/smaps_rollup.
 *
 *   smaps_rollup_stress [-t SECONDS] [-n TARGETS] [-p READER_PROCS]
 *                       [-j THREADS] [-c CHECKPOINT_SECONDS] [-s SEED] [-q]
 *   smaps_rollup_stress --faultinject [-t SECONDS] [-j THREADS] [-s SEED]
 *
 * Stress mode.  TARGETS target processes churn their address spaces: mmap,
 * munmap (whole, head, tail, a hole), mremap (grow, shrink, move), mprotect
 * (splitting and merging VMAs), mlock, madvise (DONTNEED, FREE, HUGEPAGE,
 * NOHUGEPAGE, PAGEOUT, COLD, WILLNEED, POPULATE_*), MADV_PAGEOUT to push pages
 * to swap and touching them to bring them back, fork (a child that writes to
 * the shared pages, exits and stays a zombie until reaped), exec (of this
 * program, so the pid gets a new mm) and exit (the slot gets a new target).
 * Each target has a second thread that maps, unmaps and touches memory, so
 * that mmap_lock writers queue up behind the readers.  READER_PROCS
 * processes of THREADS threads each open, read, pread, readv, lseek and
 * close smaps_rollup of the targets, their children (alive or zombie), of
 * the targets' threads (task/TID/smaps_rollup), of themselves, of init and
 * of a kernel thread, in chunks of 1, 7, 64, 333, 4096 and 65536 bytes and
 * random sizes, into buffers that end at an inaccessible page (EFAULT and
 * short copies), and through one fd that all threads of a process share.
 * Every read of a whole file in one pass must parse as stock's format and
 * satisfy the relations that hold for every pass (the Shared/Private
 * fields split Rss, Pss <= Rss, ...), with every value bounded by what the
 * target can map.  Errors must be clean: ENOENT/ESRCH for a target that is
 * gone, ESRCH for a kernel thread or a zombie, EFAULT for the bad buffer.
 *
 * Every CHECKPOINT_SECONDS the targets pause on their command pipe (after
 * reaping their children) and this process checks each of them while the
 * readers go on: smaps_rollup read twice around a read of smaps must agree
 * byte for byte, and then every field must equal the sum over smaps, the
 * Pss-type fields (Pss, Pss_Dirty, Locked; SwapPss) within the rounding of
 * the k VMAs that have shared pages (0 <= rollup - sum <= k - 1), the
 * header must span the first to the last VMA, and reads in odd sizes, at
 * odd offsets (pread, lseek SET/CUR) and after lseek(0) must return exactly
 * the same bytes.  Then the paused target hammers its own mmap_lock with
 * writes that change no total (mmap and munmap of untouched pages,
 * mprotect RW <-> RWX that splits and merges VMAs, populated ones without
 * THP among them): the walk keeps meeting queued writers, drops mmap_lock
 * between and within VMAs and resumes, and every read meanwhile must give
 * the quiescent totals exactly.  Violations found while a target is
 * checked count only if it still reads as before afterwards.
 *
 * Fault-injection mode (root, with failslab and fail_page_alloc configured
 * in debugfs by the caller: see scripts/guest-faultinject).  Two quiescent
 * targets (a private copy of this program, with anonymous, shared, memfd,
 * swapped, mlocked, lazily freed, THP and hugetlb memory and a few hundred
 * VMAs, blocked on a pipe) give reference bytes; two churning targets give
 * moving ones.  First a systematic sweep: for each of several scripts of
 * open/read/pread/readv/lseek/close, fail the 1st, 2nd, 3rd... fault site
 * through /proc/thread-self/fail-nth until the script runs without one.
 * Then THREADS threads run random scripts for SECONDS more with
 * /proc/thread-self/make-it-fail set around their smaps_rollup system calls
 * (the debugfs task-filter restricts failures to them).  Every failed call
 * must fail with ENOMEM (or ENOENT from procfs' inode allocation on open)
 * and leave the file usable: the script retries the call and the bytes it
 * finally gets must equal the reference (quiescent target) or parse
 * (churning one).
 *
 * Output: progress and any violation on stderr; a summary line on stdout:
 * "smaps_rollup_stress: seconds S reads N ... violations V".  Exit status 0
 * when there was no violation, 1 otherwise, 4 when the mode cannot run
 * (fault injection not available).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_COLD
#define MADV_COLD		20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT		21
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC		0x0001U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC		0x0010U
#endif

#define PS		4096UL
#define HPS		(2UL << 20)
#define MAX_TARGETS	16
#define MAX_OUT		8192		/* a rollup is about 1 KiB */
#define TARGET_CAP_KB	(1ULL << 20)	/* 1 GiB: far more than a target maps */
#define SHARED_FD	900		/* the fd all threads of a reader share */

/* ---- the format: shared with the selftests ----------------------------- */

#include "../testing/selftests/proc/smaps_rollup_format.h"

/*
 * What holds for every single pass, however the target changes meanwhile
 * (each page is added to all of its fields at once), and the bounds.
 */
static int check_rollup(const struct sr_rollup *r, unsigned long long cap_kb,
			char *why, size_t wsz)
{
	int f;

	for (f = 0; f < SR_NR_FIELDS; f++)
		if (r->kb[f] > cap_kb) {
			snprintf(why, wsz, "%s %llu kB is above the bound %llu kB",
				 sr_label[f], r->kb[f], cap_kb);
			return -1;
		}
	if (sr_rollup_consistent(r)) {
		snprintf(why, wsz, "%s", sr_error);
		return -1;
	}
	if (r->end > (1UL << 57)) {
		snprintf(why, wsz, "end %lx beyond the user address space", r->end);
		return -1;
	}
	return 0;
}

/* Parse a whole smaps_rollup (stock's format, byte for byte) and check it. */
static int parse_check_rollup(const char *buf, size_t len, struct sr_rollup *r,
			      unsigned long long cap_kb, char *why, size_t wsz)
{
	if (sr_parse_rollup(buf, len, r)) {
		snprintf(why, wsz, "%s", sr_error);
		return -1;
	}
	return check_rollup(r, cap_kb, why, wsz);
}

/* ---- shared state and counters ------------------------------------------ */

enum counter {
	C_OPENS, C_READS, C_READ_CALLS, C_SEEKS, C_BYTES, C_SHARED_FD,
	C_OPS, C_MMAP, C_MUNMAP, C_MREMAP, C_MPROTECT, C_MLOCK, C_MADVISE,
	C_PAGEOUT, C_SWAPIN, C_FORK, C_EXEC, C_EXIT, C_SMAPS,
	C_CHECKPOINTS, C_CP_TARGETS, C_CP_UNSTABLE, C_CP_COMPARES,
	C_GONE, C_KTHREAD, C_ZOMBIE, C_EFAULT, C_ENOMEM, C_ENOENT_FI,
	C_FI_NTH, C_FI_SCRIPTS, C_FI_RETRIES, C_FI_GAVEUP, C_FI_REFMOVED,
	C_FI_OPEN_ERR, C_FI_READ_ERR, C_FI_SEEK_ERR,
	C_HAMMER, C_CONTENDED_READS,
	C_VIOLATIONS, NR_C
};

static const char *const cname[NR_C] = {
	"opens", "reads", "read_calls", "seeks", "bytes", "shared_fd_calls",
	"operations", "mmap", "munmap", "mremap", "mprotect", "mlock",
	"madvise", "pageout", "swapin", "fork", "exec", "exit", "smaps_reads",
	"checkpoints", "checked_targets", "unstable_targets", "compares",
	"gone", "kthread_esrch", "zombie_esrch", "efault", "enomem",
	"enoent_injected",
	"nth_injected", "fi_scripts", "fi_retries", "fi_gave_up",
	"fi_reference_moved", "fi_failed_open", "fi_failed_read",
	"fi_failed_lseek", "hammer_ops", "contended_reads", "violations",
};

struct shared {
	int stop;
	int nt;				/* slots in use */
	int pids[MAX_TARGETS];
	int kids[MAX_TARGETS];
	int tids[MAX_TARGETS];
	int printed;
	uint64_t c[NR_C];
};

static struct shared *sh;
static int shm_fd = -1;		/* the memfd behind *sh */
static bool quiet;
static const char *self_exe = "/proc/self/exe";

static void count(int c, uint64_t n)
{
	__atomic_add_fetch(&sh->c[c], n, __ATOMIC_RELAXED);
}

static uint64_t counter(int c)
{
	return __atomic_load_n(&sh->c[c], __ATOMIC_RELAXED);
}

static bool stopping(void)
{
	return __atomic_load_n(&sh->stop, __ATOMIC_RELAXED);
}

static void __attribute__((format(printf, 1, 2))) msg(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(2, buf, n) < 0)
		return;
}

/*
 * While checking a paused target, violations wait until we know that the
 * target held still; one that moved proves nothing.
 */
static __thread bool defer_mode;
static __thread int deferred;
static __thread char deferred_msg[3500];

static void __attribute__((format(printf, 1, 2))) violation(const char *fmt, ...)
{
	char buf[3500];
	va_list ap;

	if (defer_mode) {
		if (!deferred++) {
			va_start(ap, fmt);
			vsnprintf(deferred_msg, sizeof(deferred_msg), fmt, ap);
			va_end(ap);
		}
		return;
	}
	count(C_VIOLATIONS, 1);
	if (__atomic_fetch_add(&sh->printed, 1, __ATOMIC_RELAXED) >= 40)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	msg("VIOLATION (pid %d): %s", (int)getpid(), buf);
}

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	msg("smaps_rollup_stress: fatal: %s (errno %d: %s)", buf, errno,
	    strerror(errno));
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static __thread uint64_t rs = 88172645463325252ULL;

static uint64_t rnd64(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static unsigned long rnd(unsigned long n)
{
	return n ? rnd64() % n : 0;
}

static void seed_rng(uint64_t s)
{
	rs = s * 0x9e3779b97f4a7c15ULL + 1;
	if (!rs)
		rs = 1;
	rnd64();
}

/* One byte from @fd, waiting at most @ms: the byte, 0 on EOF, -1 on timeout. */
static int read_byte(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;
	int r;

	for (;;) {
		r = poll(&pfd, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		return r == 1 ? (unsigned char)c : 0;
	}
}

/* ---- reading smaps_rollup ----------------------------------------------- */

/* Read to EOF in read()s of at most @chunk bytes: the length or -errno. */
static ssize_t read_to_eof(int fd, char *buf, size_t size, size_t chunk)
{
	size_t len = 0;

	for (;;) {
		size_t want = size - len < chunk ? size - len : chunk;
		ssize_t n;

		if (!want)
			return -EFBIG;
		n = read(fd, buf + len, want);
		count(C_READ_CALLS, 1);
		if (n < 0)
			return -errno;
		if (!n)
			return len;
		len += n;
	}
}

/* Read @want bytes (fewer at EOF) in one or more read()s: the count or -errno. */
static ssize_t read_n(int fd, char *buf, size_t want)
{
	size_t len = 0;

	while (len < want) {
		ssize_t n = read(fd, buf + len, want - len);

		count(C_READ_CALLS, 1);
		if (n < 0)
			return -errno;
		if (!n)
			break;
		len += n;
	}
	return len;
}

/* The same with pread() at the offsets a read() would have. */
static ssize_t pread_to_eof(int fd, char *buf, size_t size, size_t chunk,
			    size_t from)
{
	size_t len = from;

	for (;;) {
		size_t want = size - len < chunk ? size - len : chunk;
		ssize_t n;

		if (!want)
			return -EFBIG;
		n = pread(fd, buf + len, want, len);
		count(C_READ_CALLS, 1);
		if (n < 0)
			return -errno;
		if (!n)
			return len;
		len += n;
	}
}

static ssize_t readv_to_eof(int fd, char *buf, size_t size)
{
	static const size_t sz[] = { 7, 1, 333, 64, 4096 };
	size_t len = 0;

	for (;;) {
		struct iovec iov[5];
		size_t left = size - len, off = 0;
		int i, n = 0;
		ssize_t got;

		for (i = 0; i < 5 && off < left; i++, n++) {
			iov[i].iov_base = buf + len + off;
			iov[i].iov_len = sz[i] < left - off ? sz[i] : left - off;
			off += iov[i].iov_len;
		}
		if (!n)
			return -EFBIG;
		got = readv(fd, iov, n);
		count(C_READ_CALLS, 1);
		if (got < 0)
			return -errno;
		if (!got)
			return len;
		len += got;
	}
}

static const size_t chunks[] = { 1, 7, 64, 333, 4096, 65536 };

static size_t pick_chunk(void)
{
	if (!rnd(5))
		return 1 + rnd(2000);
	return chunks[rnd(sizeof(chunks) / sizeof(chunks[0]))];
}

/* What a reader expects of the bytes of one pass. */
struct expect {
	const char *what;		/* the path, for messages */
	const char *ref;		/* exact bytes, or NULL: check and bound */
	size_t reflen;
	unsigned long long cap_kb;
};

/* Check one complete pass; false (and a violation) when it is wrong. */
static bool check_pass(const struct expect *e, const char *buf, size_t len,
		       const char *how)
{
	struct sr_rollup r;
	char why[512];

	count(C_READS, 1);
	count(C_BYTES, len);
	if (e->ref) {
		if (len == e->reflen && !memcmp(buf, e->ref, len))
			return true;
		violation("%s: %s gave %zu bytes that differ from the %zu of the reference:\n"
			  "---- got ----\n%.*s---- reference ----\n%.*s----",
			  e->what, how, len, e->reflen, (int)len, buf,
			  (int)e->reflen, e->ref);
		return false;
	}
	if (!parse_check_rollup(buf, len, &r, e->cap_kb, why, sizeof(why)))
		return true;
	violation("%s: %s: %s:\n%.*s", e->what, how, why, (int)len, buf);
	return false;
}

/* A buffer that ends where an inaccessible page starts. */
struct guard {
	char *end;
};

static void guard_init(struct guard *g)
{
	char *p = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap guard");
	memset(p, 0, PS);
	if (mprotect(p + PS, PS, PROT_NONE))
		die("mprotect guard");
	g->end = p + PS;
}

/*
 * The reader's patterns on one open fd.  Each returns 0, or -errno for an
 * error a reader may see (the caller decides which are clean).  With an
 * exact reference, the patterns that mix passes are checked too.
 */
enum { P_CHUNK, P_PREAD, P_SEEK0, P_REREAD, P_READV, P_GUARD, P_PREAD0,
       P_OPEN_ONLY, P_PARTIAL, NR_MOVING_P,
       P_RANDOM_PREAD = NR_MOVING_P, P_SEEK_SET, P_SEEK_CUR, P_SEEK_END,
       NR_P };

static int run_pattern(int fd, int pat, const struct expect *e, char *buf,
		       size_t size, struct guard *g)
{
	char how[128];
	ssize_t n, m;
	off_t o;
	size_t c = pick_chunk(), k;

	switch (pat) {
	case P_CHUNK:
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		snprintf(how, sizeof(how), "read() in %zu-byte chunks", c);
		check_pass(e, buf, n, how);
		m = read(fd, buf, size);
		count(C_READ_CALLS, 1);
		if (m < 0)
			return -errno;
		if (m)
			violation("%s: read() after EOF returned %zd bytes", e->what, m);
		return 0;
	case P_PREAD:
		n = pread_to_eof(fd, buf, size, c, 0);
		if (n < 0)
			return n;
		snprintf(how, sizeof(how), "pread() in %zu-byte chunks", c);
		check_pass(e, buf, n, how);
		return 0;
	case P_SEEK0:
		k = rnd(300);
		n = read_n(fd, buf, k);
		if (n < 0)
			return n;
		o = lseek(fd, 0, SEEK_SET);
		count(C_SEEKS, 1);
		if (o < 0)
			return -errno;
		if (o != 0)
			violation("%s: lseek(0, SEEK_SET) returned %lld", e->what,
				  (long long)o);
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		snprintf(how, sizeof(how), "read() of %zu bytes, lseek(0), read() in %zu-byte chunks", k, c);
		check_pass(e, buf, n, how);
		return 0;
	case P_REREAD:
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "read() to EOF");
		o = lseek(fd, 0, SEEK_CUR);
		count(C_SEEKS, 1);
		if (o < 0)
			return -errno;
		if (o != n)
			violation("%s: lseek(0, SEEK_CUR) at EOF returned %lld, read %zd bytes",
				  e->what, (long long)o, n);
		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		count(C_SEEKS, 1);
		n = read_to_eof(fd, buf, size, pick_chunk());
		if (n < 0)
			return n;
		check_pass(e, buf, n, "read() to EOF, lseek(0), read() to EOF");
		return 0;
	case P_READV:
		n = readv_to_eof(fd, buf, size);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "readv() of 7, 1, 333, 64, 4096 bytes");
		return 0;
	case P_GUARD:
		/*
		 * 10 bytes fit before the inaccessible page: a short read, or
		 * EFAULT if the copy gave up before them.
		 */
		n = read(fd, g->end - 10, 100);
		count(C_READ_CALLS, 1);
		if (n < 0 && errno != EFAULT)
			return -errno;
		if (n < 0) {
			count(C_EFAULT, 1);
			n = 0;
		}
		if (n > 10) {
			violation("%s: read() of 100 bytes into 10 accessible ones returned %zd",
				  e->what, n);
			return 0;
		}
		memcpy(buf, g->end - 10, n);
		/* No byte fits: EFAULT, and the bytes stay for the next read. */
		m = read(fd, g->end, 100);
		count(C_READ_CALLS, 1);
		if (m >= 0) {
			violation("%s: read() into an inaccessible buffer returned %zd",
				  e->what, m);
			return 0;
		}
		if (errno != EFAULT)
			return -errno;
		count(C_EFAULT, 1);
		m = read_to_eof(fd, buf + n, size - n, c);
		if (m < 0)
			return m;
		check_pass(e, buf, n + m, "read() partly into an inaccessible page, EFAULT, read() on");
		return 0;
	case P_PREAD0:
		/* pread(0) whatever the file position; then read() goes on. */
		k = rnd(200);
		n = read_n(fd, buf, k);
		if (n < 0)
			return n;
		n = pread_to_eof(fd, buf, size, 4096, 0);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "pread() at 0 with the file position elsewhere");
		return 0;
	case P_OPEN_ONLY:
		return 0;
	case P_PARTIAL:
		n = read(fd, buf, 1 + rnd(100));
		count(C_READ_CALLS, 1);
		return n < 0 ? -errno : 0;
	}

	/* Exact only: these mix passes when the target moves. */
	switch (pat) {
	case P_RANDOM_PREAD:
		for (int i = 0; i < 8; i++) {
			size_t off = rnd(e->reflen + 20), len = 1 + rnd(600);
			size_t want = off >= e->reflen ? 0 :
				      (len < e->reflen - off ? len : e->reflen - off);

			n = pread(fd, buf, len, off);
			count(C_READ_CALLS, 1);
			if (n < 0)
				return -errno;
			count(C_READS, 1);
			if ((size_t)n != want || memcmp(buf, e->ref + off, n))
				violation("%s: pread(%zu bytes at %zu) returned %zd bytes '%.*s', expected %zu '%.*s'",
					  e->what, len, off, n, (int)n, buf, want,
					  (int)want, e->ref + off);
		}
		return 0;
	case P_SEEK_SET:
	case P_SEEK_CUR:
		k = rnd(e->reflen + 10);
		if (pat == P_SEEK_SET) {
			o = lseek(fd, k, SEEK_SET);
		} else {
			size_t first = rnd(k + 1);

			n = read_n(fd, buf, first);
			if (n < 0)
				return n;
			k = n + (k - first);
			o = lseek(fd, k - n, SEEK_CUR);
		}
		count(C_SEEKS, 1);
		if (o < 0)
			return -errno;
		if ((size_t)o != k)
			violation("%s: lseek to %zu returned %lld", e->what, k,
				  (long long)o);
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		count(C_READS, 1);
		{
			size_t want = k >= e->reflen ? 0 : e->reflen - k;

			if ((size_t)n != want || memcmp(buf, e->ref + k, n))
				violation("%s: after lseek(%zu, %s), read() in %zu-byte chunks gave %zd bytes '%.*s', expected '%.*s'",
					  e->what, k, pat == P_SEEK_SET ? "SEEK_SET" : "SEEK_CUR",
					  c, n, (int)n, buf, (int)want, e->ref + k);
		}
		return 0;
	case P_SEEK_END:
		o = lseek(fd, 0, SEEK_END);
		count(C_SEEKS, 1);
		if (o >= 0 || errno != EINVAL)
			violation("%s: lseek(0, SEEK_END) returned %lld (errno %d), stock gives EINVAL",
				  e->what, (long long)o, o < 0 ? errno : 0);
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "lseek(SEEK_END), then read()");
		return 0;
	}
	return 0;
}

/* ---- summing smaps ------------------------------------------------------- */

static int sum_smaps(pid_t pid, struct sr_smaps *s)
{
	count(C_SMAPS, 1);
	return sr_sum_smaps(pid, s);
}

static ssize_t read_path(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read_to_eof(fd, buf, size, size);
	close(fd);
	return n;
}

/* ---- targets --------------------------------------------------------------- */

enum kind { K_ANON, K_ANON_SHARED, K_MEMFD_SHARED, K_MEMFD_PRIVATE,
	    K_FILE_PRIVATE, K_THP, K_HUGETLB, NR_K };

struct region {
	char *addr;
	size_t len;
	int kind;
	off_t off;
	bool thp;	/* may hold a THP: splitting it would change the totals */
};

#define MEMFD_SIZE	(16UL << 20)
#define MAX_REGION	(8UL << 20)

struct tstate {
	struct region *r;
	int nr;
	int memfd, exefd;
	size_t exe_size;		/* rounded up to whole pages */
	bool hugetlb;
	bool can_fork;
};

static bool hugetlb_ok;

static void touch(struct region *r, int stride_pages, bool write)
{
	size_t step = (size_t)stride_pages * PS, off;
	volatile char *p = (volatile char *)r->addr;

	if (r->kind == K_HUGETLB)
		step = HPS;
	for (off = rnd(step) & ~(PS - 1); off < r->len; off += step) {
		if (write)
			p[off] = (char)off + 1;
		else
			(void)p[off];
	}
}

static void map_region(struct tstate *t, struct region *r)
{
	int kind = rnd(NR_K), flags = MAP_PRIVATE | MAP_ANONYMOUS, fd = -1;
	size_t len = (1 + rnd(rnd(4) ? 64 : 512)) * PS;
	off_t off = 0;
	char *a;

	if (kind == K_HUGETLB && !t->hugetlb)
		kind = K_THP;
	switch (kind) {
	case K_ANON:
		break;
	case K_ANON_SHARED:
		flags = MAP_SHARED | MAP_ANONYMOUS;
		break;
	case K_MEMFD_SHARED:
	case K_MEMFD_PRIVATE:
		fd = t->memfd;
		flags = kind == K_MEMFD_SHARED ? MAP_SHARED : MAP_PRIVATE;
		off = rnd(MEMFD_SIZE / PS - 1) * PS;
		if (len > MEMFD_SIZE - off)
			len = MEMFD_SIZE - off;
		break;
	case K_FILE_PRIVATE:
		fd = t->exefd;
		flags = MAP_PRIVATE;
		off = rnd(t->exe_size / PS) * PS;
		if (len > t->exe_size - off)
			len = t->exe_size - off;
		break;
	case K_THP:
		len = (1 + rnd(2)) * HPS;
		break;
	case K_HUGETLB:
		len = HPS;
		flags |= MAP_HUGETLB;
		if (rnd(2))
			flags = MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB;
		break;
	}
	if (kind == K_THP) {
		char *raw = mmap(NULL, len + HPS, PROT_READ | PROT_WRITE, flags,
				 -1, 0);

		if (raw == MAP_FAILED)
			return;
		a = (char *)(((unsigned long)raw + HPS - 1) & ~(HPS - 1));
		if (a > raw)
			munmap(raw, a - raw);
		munmap(a + len, raw + HPS - a);
		madvise(a, len, MADV_HUGEPAGE);
	} else {
		a = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, off);
		if (a == MAP_FAILED)
			return;	/* e.g. no huge page left */
	}
	count(C_MMAP, 1);
	r->addr = a;
	r->len = len;
	r->kind = kind;
	r->off = off;
	r->thp = kind == K_THP;
	touch(r, 1 + rnd(4), rnd(4));
}

static void unmap_region(struct region *r)
{
	munmap(r->addr, r->len);
	r->addr = NULL;
	count(C_MUNMAP, 1);
}

/* A page-aligned subrange [*a, *a + *l) of @r, not empty. */
static bool subrange(struct region *r, size_t *a, size_t *l)
{
	size_t pages = r->len / PS;

	if (r->kind == K_HUGETLB || pages < 1)
		return false;
	*a = rnd(pages) * PS;
	*l = (1 + rnd(pages - *a / PS)) * PS;
	return true;
}

static void op_munmap(struct tstate *t, struct region *r)
{
	size_t a, l, i;

	if (rnd(3) == 0 || !subrange(r, &a, &l) || l == r->len) {
		unmap_region(r);
		return;
	}
	munmap(r->addr + a, l);
	count(C_MUNMAP, 1);
	if (a == 0) {			/* the head */
		r->addr += l;
		r->off += l;
		r->len -= l;
		return;
	}
	if (a + l == r->len) {		/* the tail */
		r->len -= l;
		return;
	}
	/* A hole: the tail becomes a region of its own, if there is room. */
	for (i = 0; i < (size_t)t->nr; i++)
		if (!t->r[i].addr)
			break;
	if (i < (size_t)t->nr) {
		t->r[i] = *r;
		t->r[i].addr = r->addr + a + l;
		t->r[i].len = r->len - a - l;
		t->r[i].off = r->off + a + l;
	} else {
		munmap(r->addr + a + l, r->len - a - l);
	}
	r->len = a;
}

static void op_mremap(struct tstate *t, struct region *r)
{
	size_t nl = r->len;
	char *n;

	if (r->kind == K_HUGETLB)
		return;
	switch (rnd(3)) {
	case 0:	/* grow, where the pages behind it exist */
		nl = r->len + (1 + rnd(64)) * PS;
		if (r->kind == K_THP)
			nl = r->len + HPS;
		if (nl > MAX_REGION || r->kind == K_ANON_SHARED)
			nl = r->len;
		if (r->kind == K_MEMFD_SHARED || r->kind == K_MEMFD_PRIVATE)
			if (r->off + nl > MEMFD_SIZE)
				nl = r->len;
		if (r->kind == K_FILE_PRIVATE && r->off + nl > t->exe_size)
			nl = r->len;
		break;
	case 1:	/* shrink */
		if (r->len > PS)
			nl = r->len - (1 + rnd(r->len / PS - 1)) * PS;
		break;
	case 2: {	/* move to a fresh place */
		char *dst = mmap(NULL, r->len, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (dst == MAP_FAILED)
			return;
		n = mremap(r->addr, r->len, r->len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
		/*
		 * On failure leave dst alone: mremap(MREMAP_FIXED) unmaps the
		 * destination before it checks the source (which fails when
		 * it spans several VMAs), so dst may hold the other thread's
		 * new mapping by now.
		 */
		if (n == MAP_FAILED)
			return;
		r->addr = n;
		count(C_MREMAP, 1);
		return;
	}
	}
	n = mremap(r->addr, r->len, nl, MREMAP_MAYMOVE);
	if (n == MAP_FAILED)
		return;
	r->addr = n;
	r->len = nl;
	count(C_MREMAP, 1);
	if (rnd(2))
		touch(r, 1 + rnd(8), true);
}

static void op_mprotect(struct region *r)
{
	size_t a, l;
	int prot = PROT_READ | PROT_WRITE;

	if (!subrange(r, &a, &l))
		return;
	if (rnd(2) && r->kind != K_ANON_SHARED && r->kind != K_MEMFD_SHARED)
		prot |= PROT_EXEC;
	if (!mprotect(r->addr + a, l, prot))
		count(C_MPROTECT, 1);
}

static void op_mlock(struct region *r)
{
	size_t a, l;

	if (!subrange(r, &a, &l))
		return;
	if (l > (1UL << 20))
		l = 1UL << 20;
	if (rnd(2) ? !mlock(r->addr + a, l) : !munlock(r->addr + a, l))
		count(C_MLOCK, 1);
}

static void op_madvise(struct region *r)
{
	static const int advice[] = {
		MADV_DONTNEED, MADV_FREE, MADV_HUGEPAGE, MADV_NOHUGEPAGE,
		MADV_PAGEOUT, MADV_PAGEOUT, MADV_COLD, MADV_WILLNEED,
		MADV_POPULATE_WRITE, MADV_POPULATE_READ,
	};
	int adv = advice[rnd(sizeof(advice) / sizeof(advice[0]))];
	size_t a = 0, l = r->len;

	if (r->kind != K_HUGETLB && rnd(2) && !subrange(r, &a, &l))
		return;
	if (r->kind == K_HUGETLB && adv != MADV_DONTNEED)
		adv = MADV_POPULATE_WRITE;
	if (adv == MADV_HUGEPAGE)
		r->thp = true;
	if (madvise(r->addr + a, l, adv))
		return;
	count(C_MADVISE, 1);
	if (adv == MADV_PAGEOUT) {
		count(C_PAGEOUT, 1);
		if (rnd(2)) {
			/* and back in */
			struct region sub = *r;

			sub.addr += a;
			sub.len = l;
			touch(&sub, 1 + rnd(3), rnd(2));
			count(C_SWAPIN, 1);
		}
	}
}

static struct region *pick_region(struct tstate *t, bool mapped)
{
	for (int i = 0; i < 4; i++) {
		struct region *r = &t->r[rnd(t->nr)];

		if (!!r->addr == mapped)
			return r;
	}
	return NULL;
}

/* What a target thread is doing, for the fault handler. */
static __thread const char *volatile doing = "nothing";

/*
 * A target must never fault: say where and during what, with the VMA
 * around the address, so that a kernel bug can be told from ours.
 */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	char buf[8192], line[256];
	unsigned long addr = (unsigned long)si->si_addr;
	ssize_t n;
	int fd, l;

	(void)uc;
	l = snprintf(line, sizeof(line), "VIOLATION (pid %d): target got signal %d (code %d) at %#lx while doing %s; its maps near there:\n",
		     (int)getpid(), sig, si->si_code, addr, doing);
	if (write(2, line, l) < 0)
		_exit(128 + sig);
	fd = open("/proc/self/maps", O_RDONLY);
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		char *p = buf, *nl;

		buf[n] = 0;
		while ((nl = strchr(p, '\n'))) {
			unsigned long s0 = strtoul(p, NULL, 16);

			if (s0 + (64UL << 20) > addr && s0 < addr + (64UL << 20))
				if (write(2, p, nl + 1 - p) < 0)
					break;
			p = nl + 1;
		}
	}
	_exit(128 + sig);
}

static void catch_faults(void)
{
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO };

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}

/* One operation on @t's regions; the fork/exec/exit ones are not here. */
static void one_op(struct tstate *t)
{
	struct region *r;
	static const char *const names[10] = {
		"map", "map", "munmap", "mremap", "mprotect", "mlock",
		"madvise", "madvise", "touch", "touch",
	};
	int op = rnd(10);

	count(C_OPS, 1);
	doing = names[op];
	switch (op) {
	case 0:
	case 1:
		r = pick_region(t, false);
		if (r)
			map_region(t, r);
		break;
	case 2:
		r = pick_region(t, true);
		if (r)
			op_munmap(t, r);
		break;
	case 3:
		r = pick_region(t, true);
		if (r)
			op_mremap(t, r);
		break;
	case 4:
		r = pick_region(t, true);
		if (r)
			op_mprotect(r);
		break;
	case 5:
		r = pick_region(t, true);
		if (r)
			op_mlock(r);
		break;
	case 6:
	case 7:
		r = pick_region(t, true);
		if (r)
			op_madvise(r);
		break;
	default:
		r = pick_region(t, true);
		if (r)
			touch(r, 1 + rnd(16), rnd(3));
		break;
	}
}

/* The target's second thread, and how the first one parks it. */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static bool park_req, parked;
static struct tstate worker_t;
static uint64_t worker_seed;

static void *worker_main(void *arg)
{
	(void)arg;
	seed_rng(worker_seed);
	while (!stopping()) {
		pthread_mutex_lock(&park_lock);
		if (park_req) {
			parked = true;
			pthread_cond_broadcast(&park_cond);
			while (park_req)
				pthread_cond_wait(&park_cond, &park_lock);
			parked = false;
		}
		pthread_mutex_unlock(&park_lock);
		one_op(&worker_t);
	}
	return NULL;
}

static void park_worker(bool park)
{
	pthread_mutex_lock(&park_lock);
	park_req = park;
	pthread_cond_broadcast(&park_cond);
	while (park && !parked && !stopping())
		pthread_cond_wait(&park_cond, &park_lock);
	pthread_mutex_unlock(&park_lock);
}

static void reap_kids(int slot, bool all)
{
	int st;

	while (waitpid(-1, &st, all ? __WALL : (WNOHANG | __WALL)) > 0)
		;
	if (all)
		__atomic_store_n(&sh->kids[slot], 0, __ATOMIC_RELAXED);
}

static void op_fork(struct tstate *t, int slot)
{
	pid_t pid = fork();

	if (pid < 0)
		return;
	if (pid == 0) {
		/* Break copy-on-write on some pages, maybe unmap some, go. */
		for (int i = 0; i < 3; i++) {
			struct region *r = pick_region(t, true);

			/* A hugetlb COW could find the pool empty: SIGBUS. */
			if (r && r->kind != K_HUGETLB)
				touch(r, 1 + rnd(8), true);
		}
		if (rnd(2)) {
			struct region *r = pick_region(t, true);

			if (r)
				munmap(r->addr, r->len);
		}
		_exit(0);
	}
	count(C_FORK, 1);
	__atomic_store_n(&sh->kids[slot], pid, __ATOMIC_RELAXED);
}

static void setup_tstate(struct tstate *t, struct region *r, int nr, bool files)
{
	struct stat st;

	memset(t, 0, sizeof(*t));
	t->r = r;
	t->nr = nr;
	t->hugetlb = hugetlb_ok;
	t->memfd = t->exefd = -1;
	if (!files)
		return;
	t->memfd = memfd_create("smaps_rollup_stress", MFD_CLOEXEC);
	if (t->memfd < 0 || ftruncate(t->memfd, MEMFD_SIZE))
		die("memfd");
	t->exefd = open(self_exe, O_RDONLY | O_CLOEXEC);
	if (t->exefd < 0 || fstat(t->exefd, &st))
		die("open %s", self_exe);
	t->exe_size = (st.st_size + PS - 1) & ~(PS - 1);
}

/*
 * While the supervisor reads a paused target: take mmap_lock for writing
 * over and over without changing any total, so that the reader meets a
 * queued writer, lets it in and resumes.  mmap and munmap of untouched
 * pages; mprotect that splits and merges an untouched VMA, and populated
 * ones that hold no THP (RW <-> RWX: the pages stay as they are).  Until
 * a byte arrives on @cmd.
 */
static void hammer(struct tstate *t, int cmd)
{
	char *empty = mmap(NULL, 64 * PS, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pollfd pfd = { .fd = cmd, .events = POLLIN };

	while (poll(&pfd, 1, 0) == 0) {
		struct region *r;
		size_t a, l;
		void *p;

		switch (rnd(3)) {
		case 0:
			l = (1 + rnd(16)) * PS;
			p = mmap(NULL, l, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p != MAP_FAILED)
				munmap(p, l);
			break;
		case 1:
			if (empty != MAP_FAILED)
				mprotect(empty + rnd(60) * PS, (1 + rnd(4)) * PS,
					 rnd(2) ? PROT_READ : PROT_READ | PROT_WRITE);
			break;
		case 2:
			r = pick_region(t, true);
			if (r && !r->thp && r->kind != K_ANON_SHARED &&
			    r->kind != K_MEMFD_SHARED && subrange(r, &a, &l))
				mprotect(r->addr + a, l, PROT_READ | PROT_WRITE |
					 (rnd(2) ? PROT_EXEC : 0));
			break;
		}
		count(C_HAMMER, 1);
	}
	if (empty != MAP_FAILED)
		munmap(empty, 64 * PS);
}

/*
 * A churning target: main loop.  Commands on @cmd: 'P' pause (reap the
 * children, park the worker, answer 'A' on @ack, wait for 'R'), EOF stop.
 */
static void target_main(int slot, int cmd, int ack, uint64_t seed, bool may_exit)
{
	static struct region regions[24], wregions[8];
	struct tstate t;
	pthread_t worker;
	struct pollfd pfd = { .fd = cmd, .events = POLLIN };
	bool have_worker = false;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	catch_faults();
	seed_rng(seed);
	setup_tstate(&t, regions, 24, true);
	setup_tstate(&worker_t, wregions, 8, false);
	worker_t.memfd = t.memfd;
	worker_t.exefd = t.exefd;
	worker_t.exe_size = t.exe_size;
	worker_seed = seed ^ 0x5555;
	__atomic_store_n(&sh->pids[slot], getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&sh->tids[slot], 0, __ATOMIC_RELAXED);
	if (pthread_create(&worker, NULL, worker_main, NULL) == 0) {
		have_worker = true;
		__atomic_store_n(&sh->tids[slot], 1, __ATOMIC_RELAXED);
	}

	while (!stopping()) {
		if (poll(&pfd, 1, 0) > 0) {
			int c = read_byte(cmd, 0);

			if (c <= 0 || c == 'S')
				break;
			if (c == 'P') {
				if (have_worker)
					park_worker(true);
				reap_kids(slot, true);
				if (sr_write_full(ack, "A", 1))
					break;
				/* 'H': hammer mmap_lock until 'h'; 'R': resume. */
				while ((c = read_byte(cmd, -1)) == 'H') {
					if (sr_write_full(ack, "A", 1))
						break;
					doing = "hammer";
					hammer(&t, cmd);
					if (read_byte(cmd, -1) != 'h' || sr_write_full(ack, "A", 1))
						break;
				}
				if (have_worker)
					park_worker(false);
				if (c != 'R')
					break;
			}
		}
		if (rnd(2))
			reap_kids(slot, false);
		switch (rnd(400)) {
		case 0 ... 7:
			doing = "fork";
			op_fork(&t, slot);
			break;
		case 8: {
			char s[5][32];
			char *args[] = { "smaps_rollup_stress", "--target", s[0],
					 s[1], s[2], s[3], s[4], NULL };
			if (!may_exit)
				break;
			reap_kids(slot, true);
			snprintf(s[0], 32, "%d", slot);
			snprintf(s[1], 32, "%d", shm_fd);
			snprintf(s[2], 32, "%d", cmd);
			snprintf(s[3], 32, "%d", ack);
			snprintf(s[4], 32, "%" PRIu64 "%s", rnd64() >> 1,
				 may_exit ? "" : "n");
			count(C_EXEC, 1);
			execv(self_exe, args);
			die("execv %s", self_exe);
		}
		case 9:
			if (!may_exit)
				break;
			reap_kids(slot, true);
			count(C_EXIT, 1);
			_exit(0);
		default:
			one_op(&t);
			break;
		}
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	if (have_worker) {
		park_worker(false);
		pthread_join(worker, NULL);
	}
	reap_kids(slot, true);
	_exit(0);
}

/* ---- readers ----------------------------------------------------------- */

static unsigned long long sys_cap_kb;
static bool pid2_is_kthread;

struct reader {
	char *buf;
	size_t size;
	struct guard g;
	char path[96];
};

static bool clean_open_error(int err, int kind)
{
	/* A target may be gone; a kernel thread or a zombie has no mm. */
	if (err == ENOENT || err == ESRCH)
		return true;
	(void)kind;
	return false;
}

static void *reader_thread(void *arg)
{
	struct reader rd = { .size = 1 << 17 };
	int me = (int)(intptr_t)arg;

	seed_rng(((uint64_t)getpid() << 16) ^ (uint64_t)me ^ (uint64_t)now());
	rd.buf = malloc(rd.size);
	if (!rd.buf)
		die("malloc");
	guard_init(&rd.g);

	while (!stopping()) {
		struct expect e = { .what = rd.path, .cap_kb = TARGET_CAP_KB };
		int which = rnd(100), slot = rnd(sh->nt), pid, fd, ret, pat;
		int kind = 0;	/* 0 target, 1 kid, 2 kthread, 3 other */

		pid = __atomic_load_n(&sh->pids[slot], __ATOMIC_RELAXED);
		if (which < 60 || !pid) {
			if (!pid)
				continue;
			snprintf(rd.path, sizeof(rd.path), "/proc/%d/smaps_rollup", pid);
		} else if (which < 70) {
			snprintf(rd.path, sizeof(rd.path), "/proc/%d/task/%d/smaps_rollup",
				 pid, pid);
		} else if (which < 80) {
			pid = __atomic_load_n(&sh->kids[slot], __ATOMIC_RELAXED);
			if (!pid)
				continue;
			kind = 1;
			snprintf(rd.path, sizeof(rd.path), "/proc/%d/smaps_rollup", pid);
		} else if (which < 85) {
			kind = 2;
			snprintf(rd.path, sizeof(rd.path), "/proc/2/smaps_rollup");
		} else if (which < 90) {
			kind = 3;
			e.cap_kb = sys_cap_kb;
			snprintf(rd.path, sizeof(rd.path), "/proc/self/smaps_rollup");
		} else if (which < 93) {
			kind = 3;
			e.cap_kb = sys_cap_kb;
			snprintf(rd.path, sizeof(rd.path), "/proc/1/smaps_rollup");
		} else if (which < 97) {
			/* The fd all threads of this process share. */
			int sfd;

			count(C_SHARED_FD, 1);
			switch (rnd(4)) {
			case 0:
				snprintf(rd.path, sizeof(rd.path), "/proc/%d/smaps_rollup", pid);
				sfd = open(rd.path, O_RDONLY | O_CLOEXEC);
				if (sfd >= 0) {
					dup3(sfd, SHARED_FD, O_CLOEXEC);
					close(sfd);
				}
				break;
			case 1:
				lseek(SHARED_FD, 0, SEEK_SET);
				break;
			default:
				if (read(SHARED_FD, rd.buf, 1 + rnd(64)) > (ssize_t)MAX_OUT)
					violation("read() of at most 64 bytes returned more");
				break;
			}
			continue;
		} else {
			/* smaps itself, for more mmap_lock readers */
			struct sr_smaps s;

			sum_smaps(pid, &s);
			continue;
		}

		fd = open(rd.path, O_RDONLY | O_CLOEXEC);
		count(C_OPENS, 1);
		if (fd < 0) {
			int err = errno;

			if (kind == 2 && pid2_is_kthread) {
				if (err != ESRCH)
					violation("%s: open() of a kernel thread's file failed with %s, stock gives ESRCH",
						  rd.path, strerror(err));
				count(C_KTHREAD, 1);
			} else if (kind == 3 && err == EACCES) {
				count(C_GONE, 1);	/* init may be out of our reach */
			} else if (clean_open_error(err, kind)) {
				count(kind == 1 && err == ESRCH ? C_ZOMBIE : C_GONE, 1);
			} else {
				violation("%s: open() failed with %s", rd.path, strerror(err));
			}
			continue;
		}
		if (kind == 2 && pid2_is_kthread)
			violation("%s: open() of a kernel thread's smaps_rollup succeeded", rd.path);
		pat = rnd(NR_MOVING_P);
		ret = run_pattern(fd, pat, &e, rd.buf, rd.size, &rd.g);
		if (ret && ret != -ESRCH)
			violation("%s: pattern %d failed with %s", rd.path, pat,
				  strerror(-ret));
		else if (ret)
			count(C_GONE, 1);
		close(fd);
	}
	free(rd.buf);
	return NULL;
}

static void reader_main(int threads)
{
	pthread_t tid[64];
	int n = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (int i = 0; i < threads && i < 64; i++)
		if (!pthread_create(&tid[n], NULL, reader_thread, (void *)(intptr_t)i))
			n++;
	if (!n)
		die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	_exit(0);
}

/* ---- the supervisor -------------------------------------------------------- */

struct tslot {
	pid_t pid;
	int cmd, ack;	/* our ends */
};

static struct tslot ts[MAX_TARGETS];

static void spawn_target(int slot, uint64_t seed, bool may_exit)
{
	int c[2], a[2];
	pid_t pid;

	if (pipe(c) || pipe(a))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char s[5][32];
		char *args[] = { "smaps_rollup_stress", "--target", s[0], s[1],
				 s[2], s[3], s[4], NULL };

		close(c[1]);
		close(a[0]);
		for (int i = 0; i < MAX_TARGETS; i++)
			if (ts[i].pid > 0) {
				close(ts[i].cmd);
				close(ts[i].ack);
			}
		snprintf(s[0], 32, "%d", slot);
		snprintf(s[1], 32, "%d", shm_fd);
		snprintf(s[2], 32, "%d", c[0]);
		snprintf(s[3], 32, "%d", a[1]);
		snprintf(s[4], 32, "%" PRIu64 "%s", seed >> 1, may_exit ? "" : "n");
		execv(self_exe, args);
		die("execv %s", self_exe);
	}
	close(c[0]);
	close(a[1]);
	fcntl(c[1], F_SETFD, FD_CLOEXEC);
	fcntl(a[0], F_SETFD, FD_CLOEXEC);
	ts[slot].pid = pid;
	ts[slot].cmd = c[1];
	ts[slot].ack = a[0];
}

static void forget_target(int slot)
{
	close(ts[slot].cmd);
	close(ts[slot].ack);
	ts[slot].pid = 0;
	__atomic_store_n(&sh->pids[slot], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->kids[slot], 0, __ATOMIC_RELAXED);
}

static ssize_t read_rollup_bytes(pid_t pid, char *buf, size_t size)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	return read_path(path, buf, size);
}

/*
 * Check a paused target: rollup == summed smaps, and every pattern gives
 * the same bytes.  false when the target did not hold still.
 */
static bool check_quiescent(pid_t pid, const char *name, struct sr_rollup *out)
{
	static char r1[MAX_OUT], r2[MAX_OUT], buf[1 << 17];
	struct sr_smaps s;
	struct sr_rollup r;
	struct guard g;
	char why[512], path[96];
	ssize_t n1 = -1, n2 = -1;
	int i;

	for (i = 0; i < 20; i++) {
		n1 = read_rollup_bytes(pid, r1, sizeof(r1));
		if (n1 < 0 || sum_smaps(pid, &s))
			return false;
		n2 = read_rollup_bytes(pid, r2, sizeof(r2));
		if (n2 < 0)
			return false;
		if (n1 == n2 && !memcmp(r1, r2, n1))
			break;
	}
	if (i == 20)
		return false;
	count(C_CP_COMPARES, 1);
	if (parse_check_rollup(r1, n1, &r, TARGET_CAP_KB, why, sizeof(why))) {
		violation("%s: %s:\n%.*s", name, why, (int)n1, r1);
		return true;
	}
	for (int f = 0; f < SR_NR_FIELDS; f++) {
		unsigned long long slack = sr_smaps_slack(&s, f);

		if (!sr_field_in_smaps(f))
			continue;
		if (r.kb[f] < s.kb[f] || r.kb[f] - s.kb[f] > slack)
			violation("%s: %s is %llu kB in smaps_rollup but %llu kB summed over smaps "
				  "(%lu VMAs; rounding allows 0..%llu kB more):\n%.*s",
				  name, sr_label[f], r.kb[f], s.kb[f], s.nr_vmas, slack,
				  (int)n1, r1);
	}
	if (r.start != s.start || r.end != s.end)
		violation("%s: header %lx-%lx, smaps spans %lx-%lx", name,
			  r.start, r.end, s.start, s.end);

	/* Every way of reading gives these bytes. */
	guard_init(&g);
	defer_mode = true;
	deferred = 0;
	for (int pat = 0; pat < NR_P; pat++) {
		struct expect e = { .what = path, .ref = r1, .reflen = n1,
				    .cap_kb = TARGET_CAP_KB };
		int fd, ret;

		if (pat == P_GUARD && rnd(2))
			snprintf(path, sizeof(path), "/proc/%d/task/%d/smaps_rollup",
				 (int)pid, (int)pid);
		else
			snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			violation("%s: open() of a paused target failed: %s", path,
				  strerror(errno));
			continue;
		}
		count(C_OPENS, 1);
		ret = run_pattern(fd, pat, &e, buf, sizeof(buf), &g);
		if (ret)
			violation("%s: pattern %d on a paused target failed with %s",
				  path, pat, strerror(-ret));
		close(fd);
	}
	munmap(g.end - PS, 2 * PS);
	defer_mode = false;
	/* What went wrong counts only if the target held still meanwhile. */
	n2 = read_rollup_bytes(pid, r2, sizeof(r2));
	if (n2 != n1 || memcmp(r1, r2, n1))
		return false;
	if (deferred)
		violation("%s: %d read pattern(s) gave other bytes than smaps_rollup read whole; the first: %s",
			  name, deferred, deferred_msg);
	*out = r;
	return true;
}

/*
 * The paused target hammers mmap_lock (see hammer()); every read meanwhile
 * must give the same totals as the quiescent one, @ref.  The walk lets the
 * queued writers in between and within VMAs and resumes where it was: a
 * VMA skipped or counted twice shows here.
 */
static void check_contended(int slot, const char *name, const struct sr_rollup *ref)
{
	static char buf[MAX_OUT];
	pid_t pid = ts[slot].pid;
	struct sr_rollup r;
	double until;
	int reads = 0;
	ssize_t n;

	if (sr_write_full(ts[slot].cmd, "H", 1) || read_byte(ts[slot].ack, 60000) != 'A')
		return;
	defer_mode = true;
	deferred = 0;
	until = now() + 2;
	while ((now() < until || reads < 10) && reads < 300) {
		char path[64];
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		n = read_to_eof(fd, buf, sizeof(buf), pick_chunk());
		close(fd);
		if (n < 0)
			break;
		reads++;
		if (sr_parse_rollup(buf, n, &r)) {
			violation("%s: under mmap_lock contention: %s:\n%.*s", name,
				  sr_error, (int)n, buf);
			continue;
		}
		for (int f = 0; f < SR_NR_FIELDS; f++)
			if (r.kb[f] != ref->kb[f]) {
				violation("%s: under mmap_lock contention %s is %llu kB, but %llu kB without it:\n%.*s",
					  name, sr_label[f], r.kb[f], ref->kb[f], (int)n, buf);
				break;
			}
	}
	defer_mode = false;
	count(C_CONTENDED_READS, reads);
	if (sr_write_full(ts[slot].cmd, "h", 1) || read_byte(ts[slot].ack, 60000) != 'A')
		return;
	/* It counts only if the target still reads as before. */
	n = read_rollup_bytes(pid, buf, sizeof(buf));
	if (n < 0 || sr_parse_rollup(buf, n, &r) ||
	    memcmp(r.kb, ref->kb, sizeof(r.kb))) {
		count(C_CP_UNSTABLE, 1);
		return;
	}
	if (deferred)
		violation("%s: %d of %d reads under mmap_lock contention were wrong; the first: %s",
			  name, deferred, reads, deferred_msg);
}

static void checkpoint(void)
{
	bool paused[MAX_TARGETS] = { false };
	char name[64];

	count(C_CHECKPOINTS, 1);
	for (int i = 0; i < MAX_TARGETS; i++)
		if (ts[i].pid > 0 && !sr_write_full(ts[i].cmd, "P", 1))
			paused[i] = true;
	for (int i = 0; i < MAX_TARGETS; i++) {
		if (!paused[i])
			continue;
		/* A target may be in a long MADV_PAGEOUT under TCG. */
		if (read_byte(ts[i].ack, 300000) != 'A')
			paused[i] = false;	/* it exited meanwhile */
	}
	for (int i = 0; i < MAX_TARGETS; i++) {
		if (!paused[i])
			continue;
		snprintf(name, sizeof(name), "target %d (pid %d)", i, ts[i].pid);
		struct sr_rollup ref;

		count(C_CP_TARGETS, 1);
		if (!check_quiescent(ts[i].pid, name, &ref))
			count(C_CP_UNSTABLE, 1);
		else
			check_contended(i, name, &ref);
	}
	for (int i = 0; i < MAX_TARGETS; i++)
		if (paused[i])
			sr_write_full(ts[i].cmd, "R", 1);
}

static void setup_shared(void)
{
	shm_fd = memfd_create("smaps_rollup_stress-shared", 0);
	if (shm_fd < 0 || ftruncate(shm_fd, sizeof(struct shared)))
		die("memfd");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	if (sh == MAP_FAILED)
		die("mmap shared");
}

static void system_facts(void)
{
	char buf[8192], *p;
	unsigned long long total = 0, swap = 0, huge = 0, hsz = 0;
	ssize_t n;

	n = read_path("/proc/meminfo", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		if ((p = strstr(buf, "MemTotal:")))
			total = strtoull(p + 9, NULL, 10);
		if ((p = strstr(buf, "SwapTotal:")))
			swap = strtoull(p + 10, NULL, 10);
		if ((p = strstr(buf, "HugePages_Total:")))
			huge = strtoull(p + 16, NULL, 10);
		if ((p = strstr(buf, "Hugepagesize:")))
			hsz = strtoull(p + 13, NULL, 10);
	}
	sys_cap_kb = total + swap + huge * hsz;
	hugetlb_ok = huge > 0;
	/* A kernel thread has an empty maps file; kthreadd is pid 2. */
	n = read_path("/proc/2/maps", buf, sizeof(buf));
	pid2_is_kthread = n == 0;
}

static void print_counts(const char *mode, double secs)
{
	char line[4096];
	int n;

	/* The summary, then every counter. */
	if (!strcmp(mode, "stress"))
		printf("smaps_rollup_stress: seconds %.1f, reads %" PRIu64 ", read calls %" PRIu64
		       ", operations %" PRIu64 ", checkpoints %" PRIu64 " (%" PRIu64
		       " targets checked, %" PRIu64 " did not hold still, %" PRIu64
		       " reads under mmap_lock contention), faults injected %" PRIu64
		       " (EFAULT), clean errors %" PRIu64 ", violations %" PRIu64 "\n",
		       secs, counter(C_READS), counter(C_READ_CALLS), counter(C_OPS),
		       counter(C_CHECKPOINTS), counter(C_CP_TARGETS), counter(C_CP_UNSTABLE),
		       counter(C_CONTENDED_READS), counter(C_EFAULT),
		       counter(C_GONE) + counter(C_KTHREAD) + counter(C_ZOMBIE) + counter(C_EFAULT),
		       counter(C_VIOLATIONS));
	else
		printf("smaps_rollup_stress: seconds %.1f, scripts %" PRIu64 ", reads %" PRIu64
		       ", read calls %" PRIu64 ", faults injected by fail-nth %" PRIu64
		       ", failed calls %" PRIu64 " (ENOMEM %" PRIu64 ", ENOENT %" PRIu64
		       "; open %" PRIu64 ", read %" PRIu64 ", lseek %" PRIu64 "), retries %" PRIu64
		       ", violations %" PRIu64 "\n",
		       secs, counter(C_FI_SCRIPTS), counter(C_READS), counter(C_READ_CALLS),
		       counter(C_FI_NTH), counter(C_ENOMEM) + counter(C_ENOENT_FI),
		       counter(C_ENOMEM), counter(C_ENOENT_FI), counter(C_FI_OPEN_ERR),
		       counter(C_FI_READ_ERR), counter(C_FI_SEEK_ERR), counter(C_FI_RETRIES),
		       counter(C_VIOLATIONS));
	n = snprintf(line, sizeof(line), "smaps_rollup_stress: %s counters: seconds %.1f", mode, secs);
	for (int c = 0; c < NR_C; c++)
		n += snprintf(line + n, sizeof(line) - n, ", %s %" PRIu64,
			      cname[c], counter(c));
	printf("%s\n", line);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: smaps_rollup_stress [-t SECONDS] [-n TARGETS] [-p READER_PROCS]\n"
		"                           [-j THREADS] [-c CHECKPOINT_SECONDS] [-s SEED] [-q]\n"
		"       smaps_rollup_stress --faultinject [-t SECONDS] [-j THREADS] [-s SEED]\n"
		"SECONDS defaults to $SMAPS_STRESS_SECONDS or 120.\n");
	exit(2);
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

static int stress_main(double seconds, int nt, int np, int nj, double cpi,
		       uint64_t seed)
{
	double start = now(), deadline = start + seconds, next_cp;
	pid_t readers[64];
	sigset_t set;
	int st;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	seed_rng(seed);
	sh->nt = nt;
	if (!quiet)
		msg("smaps_rollup_stress: %d targets, %d reader processes x %d threads, "
		    "%.0f s, checkpoint every %.0f s, seed %" PRIu64 ", hugetlb %s",
		    nt, np, nj, seconds, cpi, seed, hugetlb_ok ? "yes" : "no");
	for (int i = 0; i < nt; i++)
		spawn_target(i, rnd64(), true);
	for (int i = 0; i < np; i++) {
		readers[i] = fork();
		if (readers[i] < 0)
			die("fork");
		if (readers[i] == 0) {
			sigprocmask(SIG_UNBLOCK, &set, NULL);
			for (int j = 0; j < MAX_TARGETS; j++)
				if (ts[j].pid > 0) {
					close(ts[j].cmd);
					close(ts[j].ack);
				}
			reader_main(nj);
		}
	}

	next_cp = start + cpi;
	for (;;) {
		double t = now(), until = next_cp < deadline ? next_cp : deadline;
		struct timespec to;
		pid_t pid;

		if (t < until) {
			to.tv_sec = (time_t)(until - t);
			to.tv_nsec = (long)((until - t - to.tv_sec) * 1e9);
			sigtimedwait(&set, NULL, &to);
		}
		while ((pid = waitpid(-1, &st, WNOHANG | __WALL)) > 0) {
			for (int i = 0; i < nt; i++)
				if (ts[i].pid == pid) {
					forget_target(i);
					if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
						violation("target %d (pid %d) died: status 0x%x",
							  i, pid, st);
					spawn_target(i, rnd64(), true);
				}
			for (int i = 0; i < np; i++)
				if (readers[i] == pid) {
					readers[i] = 0;
					violation("reader process %d died early: status 0x%x",
						  pid, st);
				}
		}
		t = now();
		if (t >= deadline)
			break;
		if (t >= next_cp) {
			checkpoint();
			if (!quiet)
				msg("smaps_rollup_stress: %.0f s: %" PRIu64 " reads, %" PRIu64
				    " operations, %" PRIu64 " checkpoints, %" PRIu64 " violations",
				    now() - start, counter(C_READS), counter(C_OPS),
				    counter(C_CHECKPOINTS), counter(C_VIOLATIONS));
			next_cp = now() + cpi;
		}
	}
	/* A last checkpoint, so that even a short run has one. */
	checkpoint();
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nt; i++)
		if (ts[i].pid > 0)
			sr_write_full(ts[i].cmd, "S", 1);

	/* Everything must stop by itself within 5 minutes. */
	signal(SIGALRM, on_alarm);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	alarm(300);
	for (;;) {
		pid_t pid = waitpid(-1, &st, __WALL);

		if (pid < 0 && errno == EINTR && alarmed) {
			violation("the targets and readers did not stop within 300 s");
			kill(0, SIGKILL);
		}
		if (pid < 0 && errno == ECHILD)
			break;
		if (pid <= 0)
			continue;
		for (int i = 0; i < np; i++)
			if (readers[i] == pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
				violation("reader process %d ended with status 0x%x", pid, st);
		for (int i = 0; i < nt; i++)
			if (ts[i].pid == pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
				violation("target %d (pid %d) ended with status 0x%x", i, pid, st);
	}
	alarm(0);
	print_counts("stress", now() - start);
	return counter(C_VIOLATIONS) ? 1 : 0;
}

/* ---- fault injection -------------------------------------------------------- */

/*
 * A quiescent target: builds a varied address space, settles so that
 * nothing in it changes any more, says 'A' and waits for EOF on @cmd.
 */
static void quiet_target_main(int cmd, int ack)
{
	char buf[1 << 16], *p, *a;
	ssize_t n;
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
	/* Grow the stack now; nothing later may fault in a page. */
	{
		volatile char stack[256 << 10];

		for (size_t i = 0; i < sizeof(stack); i += PS)
			stack[i] = 1;
	}
	/* anonymous, partly swapped out, partly lazily freed, partly locked */
	a = mmap(NULL, 256 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		_exit(3);
	memset(a, 1, 256 * PS);
	madvise(a, 64 * PS, MADV_PAGEOUT);
	madvise(a + 64 * PS, 32 * PS, MADV_FREE);
	mlock(a + 128 * PS, 16 * PS);
	mprotect(a + 200 * PS, 8 * PS, PROT_READ);
	/* shared anonymous (shmem), part of it swapped out */
	a = mmap(NULL, 64 * PS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a != MAP_FAILED) {
		memset(a, 2, 64 * PS);
		madvise(a, 16 * PS, MADV_PAGEOUT);
	}
	/* a memfd mapped shared and private */
	fd = memfd_create("smaps_rollup_quiet", MFD_CLOEXEC);
	if (fd >= 0 && !ftruncate(fd, 128 * PS)) {
		a = mmap(NULL, 64 * PS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (a != MAP_FAILED)
			memset(a, 3, 64 * PS);
		a = mmap(NULL, 64 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (a != MAP_FAILED)
			memset(a, 4, 32 * PS);
	}
	/* a THP, if the allocator has one */
	p = mmap(NULL, 2 * HPS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		a = (char *)(((unsigned long)p + HPS - 1) & ~(HPS - 1));
		madvise(a, HPS, MADV_HUGEPAGE);
		madvise(a, HPS, MADV_POPULATE_WRITE);
		madvise(a, HPS, MADV_NOHUGEPAGE);	/* khugepaged: hands off */
	}
	/* a hugetlb page, if there is one */
	a = mmap(NULL, HPS, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (a != MAP_FAILED)
		memset(a, 5, PS);
	/* a few hundred VMAs: alternate protections */
	a = mmap(NULL, 400 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a != MAP_FAILED) {
		for (int i = 0; i < 400; i++)
			a[i * PS] = 6;
		for (int i = 0; i < 400; i += 2)
			mprotect(a + i * PS, PS, PROT_READ);
	}
	/*
	 * Settle: drop [vdso] and [vvar] (every process maps their pages, so
	 * their Pss drifts), then fault in everything else that is readable,
	 * except what was swapped out or freed on purpose (already done: only
	 * untouched pages would be populated, and those map the zero page).
	 */
	n = read_path("/proc/self/maps", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
			unsigned long s, e;
			char *eol = strchr(line, '\n');

			if (!eol || !sr_is_vma_header(line, eol, &s, &e))
				break;
			if (memmem(line, eol - line, "[vdso]", 6) ||
			    memmem(line, eol - line, "[vvar", 5))
				munmap((void *)s, e - s);
		}
	}
	if (sr_write_full(ack, "A", 1))
		_exit(3);
	while (read(cmd, buf, 1) != 0 && errno == EINTR)
		;
	_exit(0);
}

struct quiet {
	pid_t pid;
	int cmd;
	char ref[MAX_OUT];
	size_t reflen;
	char path[64];
	pthread_mutex_t lock;
};

static int copy_self(void)
{
	char buf[1 << 16];
	int in = open(self_exe, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		die("open %s", self_exe);
	out = memfd_create("smaps_rollup_quiet_exe", MFD_CLOEXEC | MFD_EXEC);
	if (out < 0)
		out = memfd_create("smaps_rollup_quiet_exe", MFD_CLOEXEC);
	if (out < 0)
		die("memfd_create");
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (sr_write_full(out, buf, n))
			die("write");
	close(in);
	return out;
}

static void start_quiet(struct quiet *q)
{
	int c[2], a[2], exe = copy_self();
	pid_t pid;

	if (pipe(c) || pipe(a))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char s[2][16];
		char *args[] = { "smaps_rollup_quiet", "--quiet-target", s[0], s[1], NULL };
		char *env[] = { NULL };

		close(c[1]);
		close(a[0]);
		snprintf(s[0], 16, "%d", c[0]);
		snprintf(s[1], 16, "%d", a[1]);
		fexecve(exe, args, env);
		die("fexecve");
	}
	close(exe);
	close(c[0]);
	close(a[1]);
	if (read_byte(a[0], 300000) != 'A')
		die("the quiescent target did not start");
	close(a[0]);
	q->pid = pid;
	q->cmd = c[1];
	pthread_mutex_init(&q->lock, NULL);
	snprintf(q->path, sizeof(q->path), "/proc/%d/smaps_rollup", (int)pid);
}

/* The quiescent target's bytes, read twice alike. */
static bool reference(struct quiet *q, char *out, size_t *len)
{
	char a[MAX_OUT], b[MAX_OUT];

	for (int i = 0; i < 20; i++) {
		ssize_t n = read_path(q->path, a, sizeof(a));
		ssize_t m = read_path(q->path, b, sizeof(b));

		if (n > 0 && n == m && !memcmp(a, b, n)) {
			memcpy(out, a, n);
			*len = n;
			return true;
		}
	}
	return false;
}

static int fail_nth_fd(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/thread-self/fail-nth");
	return open(path, O_RDWR | O_CLOEXEC);
}

static int make_it_fail_fd(void)
{
	return open("/proc/thread-self/make-it-fail", O_WRONLY | O_CLOEXEC);
}

static __thread int mif_fd = -1;

static void arm(bool on)
{
	if (mif_fd >= 0 && pwrite(mif_fd, on ? "1" : "0", 1, 0) != 1)
		die("write make-it-fail");
}

/*
 * Fault-injection scripts.  Each call that fails must fail cleanly and is
 * retried with injection off (the nth fault fires once; make-it-fail is
 * cleared around the retry), so that every script ends with the whole
 * file, which must equal the reference or, for a churning target, parse.
 */
struct fi {
	const char *path;
	int dirfd;
	const char *ref;
	size_t reflen;
	bool random;		/* make-it-fail mode: retries may fail too */
	int errors;		/* failed calls in this script */
	int bad;		/* a failure that was not clean */
	char *buf;
	size_t size;
};

static bool fi_clean(struct fi *f, int err, const char *call, bool open_call)
{
	f->errors++;
	count(open_call ? C_FI_OPEN_ERR : strstr(call, "lseek") ? C_FI_SEEK_ERR :
	      C_FI_READ_ERR, 1);
	if (err == ENOMEM) {
		count(C_ENOMEM, 1);
		return true;
	}
	if (open_call && err == ENOENT) {
		/* procfs answers ENOENT when it cannot allocate the inode */
		count(C_ENOENT_FI, 1);
		return true;
	}
	if (err == EINTR)
		return true;
	f->bad++;
	violation("%s: %s failed with %s under fault injection", f->path, call,
		  strerror(err));
	return false;
}

/* Run @call until it succeeds; injection stays on only in random mode. */
#define FI_RETRY(f, open_call, name, expr)				\
	({								\
		long __r;						\
		int __tries = 0;					\
		for (;;) {						\
			__r = (long)(expr);				\
			if (__r >= 0)					\
				break;					\
			if (!fi_clean((f), errno, (name), (open_call)))	\
				break;					\
			count(C_FI_RETRIES, 1);				\
			if (++__tries > 40) {				\
				count(C_FI_GAVEUP, 1);			\
				arm(false);				\
			}						\
		}							\
		__r;							\
	})

static ssize_t fi_read_to_eof(struct fi *f, int fd, char *buf, size_t chunk,
			      bool use_pread)
{
	size_t len = 0;

	for (;;) {
		size_t want = f->size - len < chunk ? f->size - len : chunk;
		long n;

		if (!want)
			return -EFBIG;
		if (use_pread)
			n = FI_RETRY(f, false, "pread()", pread(fd, buf + len, want, len));
		else
			n = FI_RETRY(f, false, "read()", read(fd, buf + len, want));
		count(C_READ_CALLS, 1);
		if (n < 0)
			return -1;
		if (!n)
			return len;
		len += n;
	}
}

static void fi_check(struct fi *f, const char *buf, size_t len, const char *how)
{
	struct expect e = { .what = f->path, .ref = f->ref, .reflen = f->reflen,
			    .cap_kb = TARGET_CAP_KB };

	if (f->ref && (len != f->reflen || memcmp(buf, f->ref, len))) {
		/* Let the caller decide whether the reference moved. */
		f->bad = -1;
		return;
	}
	check_pass(&e, buf, len, how);
}

static void fi_script(struct fi *f, int script)
{
	char *buf = f->buf;
	ssize_t n;
	int fd;
	off_t o;
	char how[64];

	snprintf(how, sizeof(how), "fault-injection script %d", script);
	if (script == 3 && f->dirfd >= 0)
		fd = FI_RETRY(f, true, "openat()", openat(f->dirfd, "smaps_rollup", O_RDONLY | O_CLOEXEC));
	else
		fd = FI_RETRY(f, true, "open()", open(f->path, O_RDONLY | O_CLOEXEC));
	count(C_OPENS, 1);
	if (fd < 0)
		return;
	switch (script) {
	case 0:	/* read in pages */
		n = fi_read_to_eof(f, fd, buf, 4096, false);
		if (n >= 0)
			fi_check(f, buf, n, how);
		break;
	case 1:	/* 7-byte reads, lseek(0), 333-byte reads */
		n = fi_read_to_eof(f, fd, buf, 7, false);
		if (n >= 0)
			fi_check(f, buf, n, how);
		o = FI_RETRY(f, false, "lseek()", lseek(fd, 0, SEEK_SET));
		count(C_SEEKS, 1);
		if (o != 0)
			break;
		n = fi_read_to_eof(f, fd, buf, 333, false);
		if (n >= 0)
			fi_check(f, buf, n, how);
		break;
	case 2:	/* pread in the middle first, then from 0 */
		n = FI_RETRY(f, false, "pread()", pread(fd, buf, 100, 50));
		count(C_READ_CALLS, 1);
		if (f->ref && n >= 0 && (n != 100 || memcmp(buf, f->ref + 50, 100)))
			f->bad = -1;
		n = fi_read_to_eof(f, fd, buf, 64, true);
		if (n >= 0)
			fi_check(f, buf, n, how);
		break;
	case 3:	/* openat(), lseek(SEEK_SET) into the file, read on; then from 0 */
		o = FI_RETRY(f, false, "lseek()", lseek(fd, 30, SEEK_SET));
		count(C_SEEKS, 1);
		if (o == 30) {
			n = fi_read_to_eof(f, fd, buf, 1 + rnd(700), false);
			if (f->ref && n >= 0 &&
			    ((size_t)n != f->reflen - 30 || memcmp(buf, f->ref + 30, n)))
				f->bad = -1;
		}
		o = FI_RETRY(f, false, "lseek()", lseek(fd, 0, SEEK_SET));
		if (o == 0) {
			n = fi_read_to_eof(f, fd, buf, 65536, false);
			if (n >= 0)
				fi_check(f, buf, n, how);
		}
		break;
	case 4:	/* readv */
		{
			size_t len = 0;

			for (;;) {
				struct iovec iov[3] = {
					{ buf + len, 1 }, { buf + len + 1, 332 },
					{ buf + len + 333, 64 },
				};
				long r = FI_RETRY(f, false, "readv()", readv(fd, iov, 3));

				count(C_READ_CALLS, 1);
				if (r <= 0)
					break;
				len += r;
				if (len + 400 > f->size)
					break;
			}
			fi_check(f, buf, len, how);
		}
		break;
	}
	close(fd);
}

#define NR_SCRIPTS 5

struct fi_thread {
	struct quiet *q;
	int nq;
	double deadline;
	int id;
};

/* One script on a random target with make-it-fail set around it. */
static void *fi_random_thread(void *arg)
{
	struct fi_thread *ft = arg;
	struct fi f = { .size = 1 << 16 };

	seed_rng(0xfeed + ft->id);
	f.buf = malloc(f.size);
	if (!f.buf)
		die("malloc");
	memset(f.buf, 0, f.size);
	mif_fd = make_it_fail_fd();
	if (mif_fd < 0)
		die("open /proc/thread-self/make-it-fail");
	while (now() < ft->deadline) {
		int t = rnd(ft->nq + 2), script = rnd(NR_SCRIPTS);
		char path[64];
		char ref[MAX_OUT];
		size_t reflen = 0;

		f.errors = f.bad = 0;
		f.random = true;
		f.dirfd = -1;
		if (t < ft->nq) {
			struct quiet *q = &ft->q[t];

			pthread_mutex_lock(&q->lock);
			memcpy(ref, q->ref, q->reflen);
			reflen = q->reflen;
			pthread_mutex_unlock(&q->lock);
			f.path = q->path;
			f.ref = ref;
			f.reflen = reflen;
		} else {
			int pid = __atomic_load_n(&sh->pids[t - ft->nq], __ATOMIC_RELAXED);

			if (!pid)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
			f.path = path;
			f.ref = NULL;
		}
		count(C_FI_SCRIPTS, 1);
		arm(true);
		fi_script(&f, script);
		arm(false);
		if (f.bad < 0 && t < ft->nq) {
			/* Did the quiescent target move, or is this wrong? */
			struct quiet *q = &ft->q[t];
			char now_ref[MAX_OUT];
			size_t nl;

			if (reference(q, now_ref, &nl) &&
			    (nl != reflen || memcmp(now_ref, ref, nl))) {
				count(C_FI_REFMOVED, 1);
				pthread_mutex_lock(&q->lock);
				memcpy(q->ref, now_ref, nl);
				q->reflen = nl;
				pthread_mutex_unlock(&q->lock);
			} else {
				violation("%s: script %d ended with bytes other than the reference after %d injected failure(s)",
					  f.path, script, f.errors);
			}
		}
	}
	close(mif_fd);
	free(f.buf);
	return NULL;
}

static int faultinject_main(double seconds, int nj, uint64_t seed)
{
	struct quiet q[2];
	struct fi f = { .size = 1 << 16 };
	double start = now();
	pthread_t tid[32];
	struct fi_thread ft[32];
	int nthfd, n = 0, st;
	int sites_max = 0;

	if (access("/proc/thread-self/fail-nth", W_OK) ||
	    access("/proc/thread-self/make-it-fail", W_OK)) {
		msg("smaps_rollup_stress: no fault injection (CONFIG_FAULT_INJECTION): skipped");
		return 4;
	}
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	seed_rng(seed);
	for (int i = 0; i < 2; i++) {
		start_quiet(&q[i]);
		if (!reference(&q[i], q[i].ref, &q[i].reflen))
			die("quiescent target %d never read the same twice", q[i].pid);
	}
	/* Two churning targets that never exit (there is nobody to respawn them). */
	sh->nt = 2;
	for (int i = 0; i < 2; i++)
		spawn_target(i, rnd64(), false);
	/* Pre-fault and lock everything: no page fault may hit an injected failure. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		msg("smaps_rollup_stress: mlockall: %s (going on)", strerror(errno));
	f.buf = malloc(f.size);
	if (!f.buf)
		die("malloc");
	memset(f.buf, 0, f.size);

	/* 1. The sweep: fail the 1st, 2nd, ... fault site of each script. */
	nthfd = fail_nth_fd();
	if (nthfd < 0)
		die("open /proc/thread-self/fail-nth");
	for (int i = 0; i < 2; i++) {
		char dir[64];

		snprintf(dir, sizeof(dir), "/proc/%d", (int)q[i].pid);
		for (int s = 0; s < NR_SCRIPTS; s++) {
			int nth;

			for (nth = 1; nth < 1000; nth++) {
				char v[16];
				ssize_t len;
				long left;

				f.path = q[i].path;
				f.ref = q[i].ref;
				f.reflen = q[i].reflen;
				f.errors = f.bad = 0;
				f.random = false;
				f.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				len = snprintf(v, sizeof(v), "%d", nth);
				if (pwrite(nthfd, v, len, 0) != len)
					die("write fail-nth");
				count(C_FI_SCRIPTS, 1);
				fi_script(&f, s);
				len = pread(nthfd, v, sizeof(v) - 1, 0);
				if (len <= 0)
					die("read fail-nth");
				v[len] = 0;
				left = strtol(v, NULL, 10);
				if (pwrite(nthfd, "0", 1, 0) != 1)
					die("write fail-nth");
				if (f.dirfd >= 0)
					close(f.dirfd);
				if (f.bad < 0)
					violation("%s: script %d with the %d%s fault site failed gave bytes other than the reference",
						  f.path, s, nth, nth == 1 ? "st" : nth == 2 ? "nd" : nth == 3 ? "rd" : "th");
				if (left > 0)
					break;	/* the script has fewer sites */
				count(C_FI_NTH, 1);
			}
			if (nth - 1 > sites_max)
				sites_max = nth - 1;
			if (!quiet)
				msg("smaps_rollup_stress: fail-nth sweep: target %d, script %d: %d fault sites failed in turn",
				    i, s, nth - 1);
		}
	}
	close(nthfd);

	/* 2. Random failures (make-it-fail) from several threads, SECONDS long. */
	if (!quiet)
		msg("smaps_rollup_stress: random failures for %.0f s, %d threads", seconds, nj);
	for (int i = 0; i < nj && i < 32; i++) {
		ft[i] = (struct fi_thread){ .q = q, .nq = 2, .id = i,
					    .deadline = now() + seconds };
		if (!pthread_create(&tid[n], NULL, fi_random_thread, &ft[i]))
			n++;
	}
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);

	/* The quiescent targets must still read as they did. */
	for (int i = 0; i < 2; i++) {
		char r[MAX_OUT];
		size_t len;

		if (!reference(&q[i], r, &len))
			violation("%s: unstable after the run", q[i].path);
		close(q[i].cmd);
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		close(ts[i].cmd);
	while (waitpid(-1, &st, __WALL) > 0 || errno == EINTR)
		;
	free(f.buf);
	if (!quiet)
		msg("smaps_rollup_stress: fault injection: at most %d fault sites per script", sites_max);
	print_counts("faultinject", now() - start);
	return counter(C_VIOLATIONS) ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	double seconds = 120, cpi = 10;
	int nt = 4, np = 2, nj = 3, opt;
	bool fi = false;
	uint64_t seed = 0;
	const char *env = getenv("SMAPS_STRESS_SECONDS");
	if (argc >= 7 && !strcmp(argv[1], "--target")) {
		int slot = atoi(argv[2]);
		bool may_exit = !strchr(argv[6], 'n');

		shm_fd = atoi(argv[3]);
		sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
		if (sh == MAP_FAILED)
			die("mmap shared fd %d", shm_fd);
		system_facts();
		target_main(slot, atoi(argv[4]), atoi(argv[5]),
			    strtoull(argv[6], NULL, 10), may_exit);
	}
	if (argc >= 4 && !strcmp(argv[1], "--quiet-target")) {
		/* Counters that nobody reads, so that the helpers work. */
		sh = calloc(1, sizeof(*sh));
		if (!sh)
			_exit(3);
		quiet_target_main(atoi(argv[2]), atoi(argv[3]));
	}

	if (env && *env)
		seconds = atof(env);
	if (argc > 1 && !strcmp(argv[1], "--faultinject")) {
		fi = true;
		argv++;
		argc--;
		nj = 2;
	}
	while ((opt = getopt(argc, argv, "t:n:p:j:c:s:q")) != -1) {
		switch (opt) {
		case 't': seconds = atof(optarg); break;
		case 'n': nt = atoi(optarg); break;
		case 'p': np = atoi(optarg); break;
		case 'j': nj = atoi(optarg); break;
		case 'c': cpi = atof(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'q': quiet = true; break;
		default: usage();
		}
	}
	if (optind != argc || seconds <= 0 || nt < 1 || nt > MAX_TARGETS ||
	    np < 1 || np > 64 || nj < 1 || nj > 32 || cpi <= 0)
		usage();
	if (!seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup_shared();
	system_facts();
	if (fi)
		return faultinject_main(seconds, nj, seed);
	return stress_main(seconds, nt, np, nj, cpi, seed);
}
