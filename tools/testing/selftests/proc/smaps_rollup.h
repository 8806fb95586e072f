/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the smaps_rollup-*.c selftests.
 *
 * Parsing: smaps_rollup_format.h.  Seeing where a read stopped and
 * restarted: smaps_rollup_trace.h.  Readers racing a target that churns its
 * address space: smaps_rollup_race.h.
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
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "smaps_rollup_format.h"

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

/*
 * Every field smaps has must sum to the rollup's value, within the rounding
 * sr_smaps_slack() allows, as must the header's range.
 */
static inline void sr_expect_matches_smaps(struct __test_metadata *_metadata,
					   const struct sr_rollup *r,
					   const struct sr_smaps *s)
{
	int f;

	for (f = 0; f < SR_NR_FIELDS; f++) {
		unsigned long long slack = sr_smaps_slack(s, f);

		if (!sr_field_in_smaps(f))
			continue;
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

/* Write @str to a /proc, /sys or tracefs file in one write(): 0 or -errno. */
static inline int sr_write_str(const char *path, const char *str)
{
	size_t len = strlen(str);
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, str, len) != (ssize_t)len)
		ret = -errno;
	close(fd);
	return ret;
}

/* The value of @key ("SwapFree:", say) in /proc/meminfo, or -1. */
static inline long sr_meminfo_kb(const char *key)
{
	char buf[8192], *p;
	ssize_t n;

	n = sr_read_path("/proc/meminfo", buf, sizeof(buf) - 1);
	if (n < 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static inline int sr_write_long(const char *path, long val)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld\n", val);
	return sr_write_str(path, buf);
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

/*
 * The selected word of a THP setting file ("always [madvise] never"), in
 * @word: 0 or -errno.
 */
static inline int sr_thp_setting(const char *path, char *word, size_t size)
{
	char buf[128], *open, *close;
	ssize_t n = sr_read_path(path, buf, sizeof(buf) - 1);

	if (n < 0)
		return n;
	buf[n] = 0;
	open = strchr(buf, '[');
	close = open ? strchr(open, ']') : NULL;
	if (!close || close - open > (ssize_t)size)
		return -EINVAL;
	*close = 0;
	snprintf(word, size, "%s", open + 1);
	return 0;
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
 * A target killed by SIGSEGV or SIGBUS says where, and what was mapped
 * there, on stderr before it dies (nothing that allocates).
 */
static inline void sr_target_fault(int sig, siginfo_t *si, void *uc)
{
	char buf[4096];
	ssize_t n;
	int fd;

	n = snprintf(buf, sizeof(buf),
		     "target %d: signal %d code %d at %p; its maps:\n",
		     getpid(), sig, si->si_code, si->si_addr);
	if (write(2, buf, n) < 0)
		_exit(128 + sig);
	fd = open("/proc/self/maps", O_RDONLY);
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		if (write(2, buf, n) != n)
			break;
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void sr_target_report_faults(void)
{
	struct sigaction sa = { .sa_sigaction = sr_target_fault,
				.sa_flags = SA_SIGINFO | SA_RESETHAND };

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
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
	sr_target_report_faults();
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

/*
 * Pin the calling thread to one of its CPUs, saving its mask in @old (if
 * not NULL): reclaim batches pages per CPU, and madvise() drains only the
 * batches of the CPU it runs on.  0 or -errno.
 */
static inline int sr_pin_to_one_cpu(cpu_set_t *old)
{
	cpu_set_t set;
	int cpu;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -errno;
	if (old)
		*old = set;
	for (cpu = 0; cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set); cpu++)
		;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

/* Distinct, non-zero pages: nothing to deduplicate on the way to swap. */
static inline void sr_fill_distinct(char *p, size_t len)
{
	size_t page = getpagesize(), i;

	for (i = 0; i < len; i += page) {
		memset(p + i, 0x77, page);
		*(size_t *)(p + i) = i;
	}
}

/* How often sr_page_out() asks reclaim for what it left in memory. */
#define SR_PAGEOUT_TRIES	8

/*
 * MADV_PAGEOUT @len bytes at @p until mincore() finds none of its pages in
 * memory, SR_PAGEOUT_TRIES times at most: reclaim may leave a folio it
 * could not isolate or lock, or unmap one it could not write out.  Each page
 * left is read, so that the next MADV_PAGEOUT finds it mapped.  Allocates
 * nothing: the target's Rss must not change.  0, -errno, or -EBUSY after
 * saying how much is left.
 */
static inline int sr_page_out(char *p, size_t len)
{
	size_t page = getpagesize(), left = len, off, n, i;
	unsigned char vec[256];
	int try;

	for (try = 0; left && try < SR_PAGEOUT_TRIES; try++) {
		if (madvise(p, len, MADV_PAGEOUT))
			return -errno;
		left = 0;
		for (off = 0; off < len; off += n * page) {
			n = (len - off) / page;
			if (n > sizeof(vec))
				n = sizeof(vec);
			if (mincore(p + off, n * page, vec))
				return -errno;
			for (i = 0; i < n; i++) {
				if (!(vec[i] & 1))
					continue;
				left += page;
				sr_touch(p + off + i * page, page, -1);
			}
		}
	}
	if (!left)
		return 0;
	fprintf(stderr, "# MADV_PAGEOUT left %zu of %zu kB in memory, %d times\n",
		left >> 10, len >> 10, SR_PAGEOUT_TRIES);
	return -EBUSY;
}

/* Write the @pages pages at @p, then make every other one read-only. */
static inline int sr_write_and_split(char *p, long pages)
{
	size_t page = getpagesize(), i;

	sr_touch(p, pages * page, 1);
	for (i = 1; i < (size_t)pages; i += 2)
		if (mprotect(p + i * page, page, PROT_READ))
			return -errno;
	return 0;
}

/* --- Helpers of the totals tests (smaps_rollup-totals*.c) --- */

/* Keep khugepaged and THP faults out of 4 kB-page workloads: 0 or -errno. */
static inline int sr_nohuge(void *addr, size_t len)
{
	return madvise(addr, len, MADV_NOHUGEPAGE) ? -errno : 0;
}

/* Anonymous memory of 4 kB pages, @flags MAP_PRIVATE or MAP_SHARED. */
static inline int sr_map_anon(char **addr, size_t len, int flags)
{
	int ret = sr_mmap((void **)addr, len, PROT_READ | PROT_WRITE,
			  flags | MAP_ANONYMOUS, -1);

	return ret ?: sr_nohuge(*addr, len);
}

/*
 * mlock(), raising RLIMIT_MEMLOCK to its hard limit if that helps: 0 or
 * -errno (ENOMEM or EPERM for a limit too low without CAP_IPC_LOCK).
 */
static inline int sr_lock_range(void *addr, size_t len)
{
	struct rlimit rl;
	int err;

	if (!mlock(addr, len))
		return 0;
	err = errno;
	if ((err != ENOMEM && err != EPERM) || getrlimit(RLIMIT_MEMLOCK, &rl) ||
	    rl.rlim_cur == rl.rlim_max)
		return -err;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return -err;
	return mlock(addr, len) ? -errno : 0;
}

/* Write a pattern (non-zero, so no zero-page tricks) of @size bytes. */
static inline int sr_fill_file(int fd, size_t size)
{
	char buf[4096];
	size_t done;

	memset(buf, 0x33, sizeof(buf));
	for (done = 0; done < size; done += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			return -1;
	fsync(fd);
	return 0;
}

/*
 * An unlinked file of @size bytes in @dir, if @dir is (@tmpfs) or is not
 * (!@tmpfs) a tmpfs.  A tmpfs file is left sparse, others are written.
 */
static inline int sr_file_in(const char *dir, bool tmpfs, size_t size)
{
	char path[PATH_MAX];
	struct statfs sfs;
	bool is_tmpfs;
	int fd;

	if (!dir || statfs(dir, &sfs))
		return -1;
	is_tmpfs = sfs.f_type == TMPFS_MAGIC;
	if (is_tmpfs != tmpfs)
		return -1;
	snprintf(path, sizeof(path), "%s/smaps_rollup.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	if (tmpfs ? ftruncate(fd, size) : sr_fill_file(fd, size)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A file of @size bytes that only we map: on tmpfs if @tmpfs, else page
 * cache that is not shmem (a disk file system, or ramfs).  Looks in the
 * usual places, then (as root) mounts a private tmpfs or ramfs.  Returns
 * an fd (not close-on-exec) or -1.
 */
static inline int sr_open_private_file(bool tmpfs, size_t size,
				       const char **where)
{
	static const char *const dirs[] = { "/dev/shm", "/tmp", "/var/tmp" };
	char dir[] = "/tmp/smaps_rollup.XXXXXX";
	size_t i;
	int fd;

	*where = getenv("TMPDIR");
	fd = sr_file_in(*where, tmpfs, size);
	for (i = 0; fd < 0 && i < ARRAY_SIZE(dirs); i++) {
		*where = dirs[i];
		fd = sr_file_in(*where, tmpfs, size);
	}
	if (fd >= 0)
		return fd;
	/* The mount lives in this test's own mount namespace. */
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -1;
	if (!mkdtemp(dir))
		return -1;
	*where = tmpfs ? "a new tmpfs mount" : "a new ramfs mount";
	fd = -1;
	if (!mount("none", dir, tmpfs ? "tmpfs" : "ramfs", 0, NULL)) {
		fd = sr_file_in(dir, tmpfs, size);
		umount2(dir, MNT_DETACH);
	}
	rmdir(dir);
	return fd;
}

/* A target step that failed because mlock() was refused. */
static inline bool sr_mlock_refused(int ret)
{
	return ret == -EPERM || ret == -ENOMEM || ret == -EAGAIN;
}

static inline void sr_assert_start(struct __test_metadata *_metadata,
				   struct sr_target *t, const char *name,
				   long arg)
{
	ASSERT_EQ(0, sr_target_start(t, name, arg))
		TH_LOG("cannot start target '%s'", name);
}

static inline void sr_assert_step(struct __test_metadata *_metadata,
				  struct sr_target *t, int step,
				  unsigned long *val)
{
	int ret = sr_target_step(t, step, val);

	ASSERT_EQ(0, ret) TH_LOG("target step %d: %s", step, strerror(-ret));
}

static inline void sr_assert_read(struct __test_metadata *_metadata,
				  pid_t pid, struct sr_rollup *r)
{
	ASSERT_EQ(0, sr_read_rollup_stable(pid, r)) TH_LOG("%s", sr_error);
}

/*
 * Start workload @name with @arg and run its step 1, read @before, run its
 * step 2, and read @after.
 */
static inline void sr_assert_two_steps(struct __test_metadata *_metadata,
				       struct sr_target *t, const char *name,
				       long arg, struct sr_rollup *before,
				       struct sr_rollup *after)
{
	sr_assert_start(_metadata, t, name, arg);
	sr_assert_step(_metadata, t, 1, NULL);
	sr_assert_read(_metadata, t->pid, before);
	sr_assert_step(_metadata, t, 2, NULL);
	sr_assert_read(_metadata, t->pid, after);
}

/*
 * The change of every field that writing @kb of private anonymous memory
 * makes (or, with @kb < 0, that unmapping it makes): only that.
 */
static inline void sr_want_private_anon(long long *want, long long kb)
{
	sr_delta_init(want);
	want[SR_RSS] = kb;
	want[SR_PSS] = kb;
	want[SR_PSS_DIRTY] = kb;
	want[SR_PSS_ANON] = kb;
	want[SR_PRIVATE_DIRTY] = kb;
	want[SR_ANONYMOUS] = kb;
}

/*
 * The change of every field that @kb of dirty shmem, which the target
 * alone maps, makes when the target maps it (or, with @kb < 0, when it is
 * paged out): only that.
 */
static inline void sr_want_private_shmem(long long *want, long long kb)
{
	sr_delta_init(want);
	want[SR_RSS] = kb;
	want[SR_PSS] = kb;
	want[SR_PSS_DIRTY] = kb;
	want[SR_PSS_SHMEM] = kb;
	want[SR_PRIVATE_DIRTY] = kb;
}

/*
 * The change when @kb of dirty anonymous memory that the target shared
 * with one other task is its alone again (the other copied or unmapped
 * it): it turns private, and its Pss doubles.
 */
static inline void sr_want_anon_unshared(long long *want, long long kb)
{
	sr_delta_init(want);
	want[SR_PSS] = kb / 2;
	want[SR_PSS_DIRTY] = kb / 2;
	want[SR_PSS_ANON] = kb / 2;
	want[SR_SHARED_DIRTY] = -kb;
	want[SR_PRIVATE_DIRTY] = kb;
}

#endif /* SELFTESTS_PROC_SMAPS_ROLLUP_H */
