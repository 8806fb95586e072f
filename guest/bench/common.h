/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers for the smaps_rollup benchmarks (the bench programs):
 * clocks, percentiles, the read methods (a sampler's ways to get a
 * process's memory totals), readers looping on a /proc file, CPU pinning,
 * swap entries in a region's page tables, UFFDIO_MOVE (userfaultfd), a
 * forked child's ready/go handshake and the bench-target handshake.
 * The smaps_rollup format (field list, parser, smaps summing) is the
 * selftests' smaps_rollup_format.h.
 * Header-only: each program is one translation unit, linked statically.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/userfaultfd.h>

#include "smaps_rollup_format.h"
#include "records.h"

/* The page size the programs assume (x86). */
#define PAGE 4096ul

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

static inline void write_all(int fd, const void *p, size_t n)
{
	if (sr_write_full(fd, p, n))
		die("write");
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

/*
 * pin_cpus: CPU numbers for a program that pins its parts to CPU 0 and
 * CPU 1, or -1 for both (no pinning, said on stderr) when the system has
 * a single CPU online.
 */
static inline void pin_cpus(const char *prog, int *first, int *second)
{
	*first = 0;
	*second = 1;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "%s: one CPU online: nothing pinned\n", prog);
		*first = *second = -1;
	}
}

/* pin_to_cpu: run PID (0: the caller) on CPU only; CPU -1: do nothing. */
static inline void pin_to_cpu(pid_t pid, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(pid, sizeof(set), &set))
		die("pin %d to CPU %d", (int)pid, cpu);
}

/*
 * sum_smaps_path: read an smaps-format file (smaps, or maps: every line a
 * VMA header) in 256 KiB read()s, as a lean sampler would, and sum it
 * with the format header's line parser. 0 or -errno (ESRCH for a task
 * that exited).
 */
#define READ_CHUNK (256 * 1024)
static char read_buf[READ_CHUNK];

static inline int sum_smaps_path(const char *path, struct sr_smaps *s)
{
	struct sr_smaps_vma vma;
	size_t have = 0;
	int fd;

	memset(s, 0, sizeof(*s));
	memset(&vma, 0, sizeof(vma));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, read_buf + have, READ_CHUNK - have);
		char *line = read_buf, *nl;

		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		have += (size_t)n;
		while ((nl = memchr(line, '\n', (size_t)(read_buf + have - line)))) {
			sr_smaps_line(s, &vma, line, nl);
			line = nl + 1;
		}
		have = (size_t)(read_buf + have - line);
		if (n == 0 || have == READ_CHUNK) /* EOF, or a line longer than the buffer */
			break;
		memmove(read_buf, line, have);
	}
	sr_smaps_close_vma(s, &vma);
	close(fd);
	return 0;
}

/* read_rollup_path: read and parse one smaps_rollup-format file. */
static inline int read_rollup_path(const char *path, struct sr_rollup *r)
{
	char buf[4096];
	ssize_t n = sr_read_path(path, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	if (sr_parse_rollup(buf, (size_t)n, r)) {
		fprintf(stderr, "bench: %s: %s\n", path, sr_error);
		return -EPROTO;
	}
	return 0;
}

/*
 * proc_kb: the value of the line "NAME: N kB" of PATH (/proc/PID/status:
 * VmRSS, VmSwap; /proc/meminfo: SwapTotal) into *KB, -1 when PATH has no
 * such line; 0 or -errno.
 */
static inline int proc_kb(const char *path, const char *name, long long *kb)
{
	char buf[8192], key[64], *p;
	ssize_t n = sr_read_path(path, buf + 1, sizeof(buf) - 2);

	*kb = -1;
	if (n < 0)
		return (int)n;
	buf[0] = '\n';	/* so that the first line matches too */
	buf[n + 1] = '\0';
	snprintf(key, sizeof(key), "\n%s:", name);
	p = strstr(buf, key);
	if (p)
		*kb = strtoll(p + strlen(key), NULL, 10);
	return 0;
}

/*
 * Swap entries in a process's page tables: every SWAP_EVERY-th page of a
 * region paged out with MADV_PAGEOUT to the guest's swap (guest/setup
 * turns on a zram device): bench-invert's +swap conditions
 * (records.h INVERT_SWAP_SUFFIX), bench-target's layout p.
 */
#define SWAP_EVERY 64

/* swap_require: die, saying why, unless swap is on with KB kB free. */
static inline void swap_require(long long kb)
{
	long long total, free;

	if (proc_kb("/proc/meminfo", "SwapTotal", &total) ||
	    proc_kb("/proc/meminfo", "SwapFree", &free))
		die("read /proc/meminfo");
	errno = 0;
	if (total <= 0)
		die("no swap on: the swap cells need it (guest/setup turns on a zram device)");
	if (free < kb)
		die("%lld kB of swap free, %lld kB needed", free, kb);
}

/*
 * page_out_every: MADV_PAGEOUT pages 0, SWAP_EVERY, 2 * SWAP_EVERY... of
 * [START, START + LEN), one call each (one call over the range would page
 * out all of it). With PENDING, one flag per such page, only the pages
 * flagged, each flag cleared first. A page unmapped meanwhile (ENOMEM) is
 * passed over. Returns the pages asked for.
 */
static inline long page_out_every(char *start, size_t len, unsigned char *pending)
{
	long n = 0;

	for (size_t i = 0; i * SWAP_EVERY * PAGE < len; i++) {
		if (pending && !__atomic_exchange_n(&pending[i], 0, __ATOMIC_ACQ_REL))
			continue;
		if (madvise(start + i * SWAP_EVERY * PAGE, PAGE, MADV_PAGEOUT) && errno != ENOMEM)
			die("MADV_PAGEOUT");
		n++;
	}
	return n;
}

/*
 * swap_check: the caller's VmSwap in kB; dies, saying WHEN, if it is
 * below MIN_KB (the pages did not go to swap, or came back).
 */
static inline long long swap_check(long long min_kb, const char *when)
{
	long long kb;

	if (proc_kb("/proc/self/status", "VmSwap", &kb))
		die("read /proc/self/status");
	errno = 0;
	if (kb < min_kb)
		die("%s: VmSwap %lld kB, below %lld kB: the pages did not go to swap (is swap on? guest/setup)",
		    when, kb, min_kb);
	return kb;
}

/*
 * UFFDIO_MOVE (userfaultfd, Linux 6.8 and later), as ART's garbage
 * collector moves memory: bench-invert's +move conditions
 * (records.h INVERT_MOVE_SUFFIX) and bench-moves -m uffd
 * (records.h MOVES_UFFD_SUFFIX). Each die() names WHAT, the caller's
 * condition or mode.
 */
/* UFFDIO_MOVE (Linux 6.8) for older userspace headers: its uapi. */
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
	__u64 mode;
	__s64 move;
};
#endif

/*
 * uffd_open: a userfaultfd with UFFD_FEATURE_MOVE, and with
 * UFFD_FEATURE_SIGBUS: a fault on a missing page of its areas (a bug:
 * nothing handles faults) kills the caller with SIGBUS instead of waiting
 * forever. Dies saying why when there is none: no userfaultfd in the
 * kernel, not permitted, or no UFFDIO_MOVE (before Linux 6.8).
 */
static inline int uffd_open(const char *what)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = -1;

	for (int pass = 0; pass < 2; pass++) {
		fd = syscall(SYS_userfaultfd, O_CLOEXEC);
		if (fd < 0 && errno == ENOSYS)
			die("%s: this kernel has no userfaultfd (CONFIG_USERFAULTFD), so no UFFDIO_MOVE",
			    what);
		if (fd < 0 && errno == EPERM) {
			char sysctl[16] = "?";
			int s = open("/proc/sys/vm/unprivileged_userfaultfd", O_RDONLY);

			if (s >= 0) {
				read_line(s, sysctl, sizeof(sysctl));
				sysctl[strcspn(sysctl, "\n")] = '\0';
				close(s);
			}
			die("%s: userfaultfd not permitted (vm.unprivileged_userfaultfd = %s, uid %d): run as root or set the sysctl to 1",
			    what, sysctl, (int)getuid());
		}
		if (fd < 0)
			die("%s: userfaultfd", what);
		/* The first pass asks what the kernel has, the second enables it. */
		api.features = pass ? UFFD_FEATURE_MOVE | UFFD_FEATURE_SIGBUS : 0;
		if (ioctl(fd, UFFDIO_API, &api))
			die("%s: UFFDIO_API", what);
		if (!(api.features & UFFD_FEATURE_MOVE)) {
			errno = 0;
			die("%s: this kernel's userfaultfd has no UFFDIO_MOVE (UFFD_FEATURE_MOVE, Linux 6.8 and later)",
			    what);
		}
		if (pass)
			break;
		close(fd);
	}
	return fd;
}

/*
 * uffd_register_move: register [START, START + LEN) with UFFD as
 * UFFDIO_MOVE needs (mode missing); dies unless UFFDIO_MOVE is then
 * available on it.
 */
static inline void uffd_register_move(int uffd, char *start, size_t len, const char *what)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)start, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		die("%s: UFFDIO_REGISTER %zu bytes at %p", what, len, (void *)start);
	if (!(reg.ioctls & (1ull << _UFFDIO_MOVE))) {
		errno = 0;
		die("%s: UFFDIO_MOVE not available on the registered area at %p", what,
		    (void *)start);
	}
}

/*
 * uffd_move: move the LEN bytes at SRC to DST with one UFFDIO_MOVE (no
 * source holes allowed), move N of the caller's; dies when it fails or
 * moves less than LEN.
 */
static inline void uffd_move(int uffd, char *dst, char *src, size_t len, const char *what,
			     unsigned long long n)
{
	struct uffdio_move m = {
		.dst = (uintptr_t)dst,
		.src = (uintptr_t)src,
		.len = len,
		.mode = UFFDIO_MOVE_MODE_DONTWAKE,	/* nothing waits on a fault there */
	};

	if (ioctl(uffd, UFFDIO_MOVE, &m))
		die("%s: move %llu of UFFDIO_MOVE failed: %lld of %zu bytes moved", what, n,
		    (long long)m.move, len);
	if (m.move != (long long)len) {
		errno = 0;
		die("%s: move %llu of UFFDIO_MOVE moved %lld of %zu bytes", what, n,
		    (long long)m.move, len);
	}
}

/*
 * A read method, given as METHOD[=FILE][:COUNT]:
 *   smaps   /proc/PID/smaps summed with a C parser
 *   awk     awk over /proc/PID/smaps (bench-read only)
 *   rollup  /proc/PID/smaps_rollup, or /proc/PID/FILE (rollup=FILE, e.g.
 *           rollup=smaps_rollup_stock), parsed
 *   status  /proc/PID/status, VmRSS (the floor: no PSS)
 *   maps    /proc/PID/maps, its lines counted (code the series does not
 *           change: a yardstick for how fast a boot runs the kernel)
 * COUNT is a read or reader count whose meaning is the caller's.
 */
enum method_kind { M_SMAPS, M_AWK, M_ROLLUP, M_STATUS, M_MAPS };

struct method {
	char name[64];		/* as given, without :COUNT */
	enum method_kind kind;
	char file[48];		/* the file under /proc/PID/ */
	long count;		/* :COUNT, or the caller's default */
};

static inline void parse_method(struct method *m, const char *spec, long count)
{
	static const struct { const char *name, *file; enum method_kind kind; } known[] = {
		{ "smaps", "smaps", M_SMAPS }, { "awk", "smaps", M_AWK },
		{ "rollup", "smaps_rollup", M_ROLLUP }, { "status", "status", M_STATUS },
		{ "maps", "maps", M_MAPS },
	};
	char *colon, *eq;
	size_t i;

	snprintf(m->name, sizeof(m->name), "%s", spec);
	m->count = count;
	colon = strchr(m->name, ':');
	if (colon) {
		*colon = '\0';
		m->count = atol(colon + 1);
	}
	eq = strchr(m->name, '=');
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		size_t len = eq ? (size_t)(eq - m->name) : strlen(m->name);

		if (strlen(known[i].name) != len || strncmp(known[i].name, m->name, len))
			continue;
		m->kind = known[i].kind;
		snprintf(m->file, sizeof(m->file), "%s", eq ? eq + 1 : known[i].file);
		if (eq && (m->kind != M_ROLLUP || strchr(m->file, '/') || !m->file[0]))
			break;
		return;
	}
	errno = 0;
	die("unknown method %s (METHOD[=FILE][:COUNT]; FILE for rollup only)", spec);
}

/*
 * read_method: one read of PID by M (not awk); *VALUE gets Pss in kB
 * (status: VmRSS; maps: its line count). 0 or -errno.
 */
static inline int read_method(const struct method *m, int pid, long long *value)
{
	struct sr_rollup r;
	struct sr_smaps s;
	char path[96];
	int ret;

	sr_path(path, sizeof(path), pid, m->file);
	switch (m->kind) {
	case M_STATUS:
		return proc_kb(path, "VmRSS", value);
	case M_ROLLUP:
		ret = read_rollup_path(path, &r);
		*value = ret ? -1 : (long long)r.kb[SR_PSS];
		return ret;
	case M_MAPS:
	case M_SMAPS:
		ret = sum_smaps_path(path, &s);
		*value = m->kind == M_MAPS ? (long long)s.nr_vmas : (long long)s.kb[SR_PSS];
		return ret;
	default:
		return -EINVAL;
	}
}

/*
 * Readers looping on a /proc file of a target, as forked children: each
 * logs when every read ended and how long it took (shared memory), and
 * signals its first read with a byte on a pipe.
 */
#define MAX_READERS 4
#define READ_CAP (1 << 16)

struct reader_log {
	uint64_t count;
	uint64_t end[READ_CAP];	/* when each read ended */
	uint64_t ns[READ_CAP];	/* how long it took */
};

struct readers {
	int n;
	pid_t pid[MAX_READERS];
	struct reader_log *log;	/* [MAX_READERS], shared with the children */
};

static inline void readers_init(struct readers *rs)
{
	rs->n = 0;
	rs->log = mmap(NULL, MAX_READERS * sizeof(*rs->log), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rs->log == MAP_FAILED)
		die("mmap the reader logs");
}

static inline void reader_loop(struct reader_log *log, const struct method *m, int pid, int ready)
{
	for (;;) {
		uint64_t t0 = now_ns(), t1;
		long long value;

		if (read_method(m, pid, &value))
			_exit(3);
		t1 = now_ns();
		if (log->count < READ_CAP) {
			log->end[log->count] = t1;
			log->ns[log->count] = t1 - t0;
		}
		__atomic_store_n(&log->count, log->count + 1, __ATOMIC_RELEASE);
		if (ready >= 0) {
			write_all(ready, "r", 1);
			close(ready);
			ready = -1;
		}
	}
}

/*
 * readers_start: M->count readers of M on PID, pinned to CPU (-1: not
 * pinned) at nice NICE; returns once each has finished one read.
 */
static inline void readers_start(struct readers *rs, const struct method *m,
				 int pid, int cpu, int nice)
{
	int ready[2];
	char b;

	if (m->count < 0 || m->count > MAX_READERS)
		die("%ld readers: 0 to %d", m->count, MAX_READERS);
	rs->n = (int)m->count;
	memset(rs->log, 0, MAX_READERS * sizeof(*rs->log));
	if (pipe2(ready, O_CLOEXEC))
		die("pipe");
	for (int i = 0; i < rs->n; i++) {
		rs->pid[i] = fork();
		if (rs->pid[i] < 0)
			die("fork");
		if (rs->pid[i] == 0) {
			close(ready[0]);
			pin_to_cpu(0, cpu);
			if (setpriority(PRIO_PROCESS, 0, nice))
				die("nice %d", nice);
			reader_loop(&rs->log[i], m, pid, ready[1]);
		}
	}
	close(ready[1]);
	for (int i = 0; i < rs->n; i++)
		if (read(ready[0], &b, 1) != 1)
			die("a %s reader failed before its first read", m->name);
	close(ready[0]);
}

static inline void readers_stop(struct readers *rs)
{
	for (int i = 0; i < rs->n; i++)
		kill(rs->pid[i], SIGKILL);
	for (int i = 0; i < rs->n; i++)
		waitpid(rs->pid[i], NULL, 0);
}

/* The readers' reads in all: 0 for none. */
static inline uint64_t readers_count(const struct readers *rs)
{
	uint64_t n = 0;

	for (int i = 0; i < rs->n; i++)
		n += rs->log[i].count;
	return n;
}

/*
 * A child forked with a ready/go handshake: the child runs FN(READY, GO,
 * ARG) with its ends of two pipes (FN must not return: it _exit()s) and
 * writes a byte on READY once it is ready; the parent keeps the other
 * ends, @ready to read what the child writes (that first byte, then
 * whatever FN sends) and @go to write to it (EOF there: the parent is
 * gone or done).
 */
struct child {
	pid_t pid;
	int ready, go;
};

/* child_start: fork FN(ready, go, ARG) and wait for its first byte. */
static inline void child_start(struct child *c, void (*fn)(int ready, int go, void *arg),
			       void *arg, const char *what)
{
	int ready[2], go[2];
	char b;

	if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC))
		die("pipe");
	fflush(NULL);	/* the child must not print the parent's buffers again */
	c->pid = fork();
	if (c->pid < 0)
		die("fork");
	if (c->pid == 0) {
		close(ready[0]);
		close(go[1]);
		fn(ready[1], go[0], arg);
		_exit(1);
	}
	close(ready[1]);
	close(go[0]);
	c->ready = ready[0];
	c->go = go[1];
	if (read(c->ready, &b, 1) != 1)
		die("%s did not get ready", what);
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

/* self_dir: the directory of the running program (where its siblings are). */
static inline void self_dir(char *buf, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);
	char *slash;

	if (n <= 0)
		die("readlink /proc/self/exe");
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
}

#endif
