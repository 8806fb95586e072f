/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the smaps_rollup-*.c selftests (the format: smaps_rollup_format.h).
 *
 * A target is this test binary executed afresh from a private memfd copy
 * (no other process maps its text) with SMAPS_ROLLUP_TARGET set, so that a
 * constructor runs the named workload instead of the tests.  It settles
 * first (grows its stack, unmaps [vdso], populates every mapping), then
 * runs one workload step per byte it reads from its pipe, so that nothing
 * runs in it between two reads of its smaps_rollup.  A helper it forks
 * settles too.  Both die with their parent (PR_SET_PDEATHSIG, EOF).
 */
#ifndef SELFTESTS_PROC_SMAPS_ROLLUP_H
#define SELFTESTS_PROC_SMAPS_ROLLUP_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
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

#define SR_THP_DIR		"/sys/kernel/mm/transparent_hugepage/"
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
		EXPECT_EQ(want[f], d)
			TH_LOG("%s changed by %lld kB (%llu -> %llu)", sr_label[f],
			       d, before->kb[f], after->kb[f]);
	}
}

/*
 * Read rollup, smaps, rollup, until the two rollups agree (the target did
 * not change meanwhile); then every field smaps has must sum to the
 * rollup's value, within the rounding sr_smaps_slack() allows, as must the
 * header's range.
 */
static inline void sr_expect_rollup_is_smaps_sum(struct __test_metadata *_metadata,
						 pid_t pid)
{
	struct sr_rollup r1, r2;
	struct sr_smaps s;
	int i, f;

	for (i = 0; i < 10; i++) {
		ASSERT_EQ(0, sr_read_rollup_stable(pid, &r1)) TH_LOG("%s", sr_error);
		ASSERT_EQ(0, sr_sum_smaps(pid, &s));
		ASSERT_EQ(0, sr_read_rollup_stable(pid, &r2)) TH_LOG("%s", sr_error);
		if (!memcmp(&r1, &r2, sizeof(r1)))
			break;
	}
	ASSERT_LT(i, 10) TH_LOG("target %d never held still", pid);
	ASSERT_GT(s.nr_vmas, 0);
	for (f = 0; f < SR_NR_FIELDS; f++) {
		EXPECT_TRUE(!sr_field_in_smaps(f) ||
			    (r1.kb[f] >= s.kb[f] &&
			     r1.kb[f] - s.kb[f] <= sr_smaps_slack(&s, f)))
			TH_LOG("%s rollup %llu kB, smaps sum %llu kB", sr_label[f],
			       r1.kb[f], s.kb[f]);
	}
	EXPECT_EQ(s.start, r1.start);
	EXPECT_EQ(s.end, r1.end);
}

/* Read a number from a /proc or /sys file: 0 or -errno. */
static inline int sr_read_long(const char *path, long *val)
{
	char buf[64];
	ssize_t n = sr_read_path(path, buf, sizeof(buf) - 1);

	if (n < 0)
		return n;
	buf[n] = 0;
	*val = strtol(buf, NULL, 10);
	return 0;
}

/* Write @str to a /proc or /sys file in one write(): 0 or -errno. */
static inline int sr_write_str(const char *path, const char *str)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, str, strlen(str)) != (ssize_t)strlen(str))
		ret = -errno;
	close(fd);
	return ret;
}

/* The value of @key ("SwapFree:", say) in /proc/meminfo, or -1. */
static inline long sr_meminfo_kb(const char *key)
{
	char buf[8192], *p;
	ssize_t n = sr_read_path("/proc/meminfo", buf, sizeof(buf) - 1);

	buf[n < 0 ? 0 : n] = 0;
	p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

#define SR_SETTLE_UNMAP_VDSO	0x1	/* drop [vdso]: no clock_gettime() then */
#define SR_SETTLE_THP		0x2	/* a target that may use THP */

/* Fault in 256 KiB of stack, more than any later call chain needs. */
static inline void sr_grow_stack(void)
{
	char pad[256 << 10];

	memset(pad, 0, sizeof(pad));
	asm volatile("" : : "r"(pad) : "memory");
}

/* madvise() what lies in [@start, @end) but outside [@ex_start, @ex_end). */
static inline void sr_populate(unsigned long start, unsigned long end,
			       unsigned long ex_start, unsigned long ex_end,
			       int advice)
{
	if (ex_start < end && start < ex_end) {
		if (ex_start > start)
			madvise((void *)start, ex_start - start, advice);
		start = ex_end;
	}
	/* Errors (a page past EOF, say) only leave a page unpopulated. */
	if (start < end)
		madvise((void *)start, end - start, advice);
}

/*
 * Populate every readable mapping but [@ex_start, @ex_end) and special
 * ones; writing a private page gives us our own copy of it.
 */
static inline void sr_settle(unsigned long ex_start, unsigned long ex_end,
			     int flags)
{
	static char maps[1 << 16];
	unsigned long start, end;
	char perms[5], *line, *nl, *name;
	ssize_t n;
	int off;

	sr_grow_stack();
	n = sr_read_path("/proc/self/maps", maps, sizeof(maps) - 1);
	for (line = maps; n > 0 && (nl = memchr(line, '\n', maps + n - line));
	     line = nl + 1) {
		*nl = 0;
		off = 0;
		if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %*u %n", &start, &end,
			   perms, &off) < 3)
			continue;
		name = off ? line + off : "";
		if (!strcmp(name, "[vdso]") && (flags & SR_SETTLE_UNMAP_VDSO))
			munmap((void *)start, end - start);
		if (perms[0] != 'r' || (name[0] == '[' && strcmp(name, "[stack]") &&
					strcmp(name, "[heap]")))
			continue;
		sr_populate(start, end, ex_start, ex_end,
			    perms[1] == 'w' && perms[3] == 'p' ?
			    MADV_POPULATE_WRITE : MADV_POPULATE_READ);
	}
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

#define SR_TARGET_ENV	"SMAPS_ROLLUP_TARGET"

struct sr_workload {
	const char *name;
	int (*step)(int step, long arg, unsigned long *val);	/* 0, -errno */
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

/* The target's main loop; @w ends in an entry without a name. */
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

/* Runs before the harness's constructors: a target runs no test. */
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
	if (in >= 0)
		close(in);
	if (out >= 0 && (in < 0 || n < 0)) {
		close(out);
		out = -1;
	}
	return out;
}

/*
 * Start workload @name with @arg, executing a private copy of this binary;
 * wait until it has settled.  0, or -errno (-EPIPE if it died).
 */
static inline int sr_target_start(struct sr_target *t, const char *name,
				  long arg)
{
	char env[128], *envp[] = { env, NULL }, *argv[] = { (char *)name, NULL };
	int cmd[2], ack[2], ret, copy;
	pid_t pid;

	t->pid = -1;
	if (pipe2(cmd, O_CLOEXEC) || pipe2(ack, O_CLOEXEC))
		return -errno;
	snprintf(env, sizeof(env), "%s=%s,%d,%d,%ld", SR_TARGET_ENV, name,
		 cmd[0], ack[1], arg);
	copy = sr_exe_copy();
	/* Not t->pid = fork(): *t may be shared with the child. */
	pid = fork();
	if (pid == 0) {
		fcntl(cmd[0], F_SETFD, 0);
		fcntl(ack[1], F_SETFD, 0);
		if (copy >= 0)
			fexecve(copy, argv, envp);
		/* No copy, or vm.memfd_noexec forbids running it. */
		execve("/proc/self/exe", argv, envp);
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

/* Run step @step: 0 or -errno, -EPIPE if the target died. */
static inline int sr_target_step(struct sr_target *t, int step,
				 unsigned long *val)
{
	unsigned char c = step;

	if (sr_write_full(t->cmd, &c, 1))
		return -EPIPE;
	return sr_recv_status(t->ack, val);
}

struct sr_helper {
	pid_t pid;
	int cmd, ack;
};

/*
 * Fork a helper that settles, leaving [@ex_start, @ex_end) alone, then
 * runs @op (0 or -errno) for each command byte it gets.  0 or -errno.
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
 * Pin the calling thread to one of its CPUs: reclaim batches pages per
 * CPU, and madvise() drains only the batches of the CPU it runs on.
 */
static inline int sr_pin_to_one_cpu(void)
{
	cpu_set_t set;
	int cpu;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -errno;
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

#define SR_PAGEOUT_TRIES	8

/*
 * MADV_PAGEOUT @len bytes at @p until mincore() finds none of its pages in
 * memory, SR_PAGEOUT_TRIES times at most: reclaim may leave a folio it
 * could not isolate.  Each page left is read, so that the next MADV_PAGEOUT
 * finds it mapped.  0, -errno, or -EBUSY after saying how much is left.
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

/*
 * Keep khugepaged and THP faults out of 4 kB-page workloads: 0 or -errno.
 * A kernel without THP, whose pages are all 4 kB, refuses the advice.
 */
static inline int sr_nohuge(void *addr, size_t len)
{
	if (!madvise(addr, len, MADV_NOHUGEPAGE))
		return 0;
	return errno == EINVAL && access(SR_THP_DIR, F_OK) ? 0 : -errno;
}

/* Anonymous memory of 4 kB pages, @flags MAP_PRIVATE or MAP_SHARED. */
static inline int sr_map_anon(char **addr, size_t len, int flags)
{
	int ret = sr_mmap((void **)addr, len, PROT_READ | PROT_WRITE,
			  flags | MAP_ANONYMOUS, -1);

	return ret ?: sr_nohuge(*addr, len);
}

/* mlock(), raising RLIMIT_MEMLOCK first if we may: 0 or -errno. */
static inline int sr_lock_range(void *addr, size_t len)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	setrlimit(RLIMIT_MEMLOCK, &rl);
	return mlock(addr, len) ? -errno : 0;
}

/*
 * An unlinked file of @size written bytes on a new ramfs mount, in a mount
 * namespace of our own: page cache that is not shmem, and that no one else
 * maps.  An fd, or -1 (mounting needs root).
 */
static inline int sr_ramfs_file(size_t size)
{
	char dir[] = "/tmp/smaps_rollup.XXXXXX", path[64], buf[4096];
	size_t done = 0;
	int fd = -1;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    !mkdtemp(dir))
		return -1;
	if (!mount("none", dir, "ramfs", 0, NULL)) {
		snprintf(path, sizeof(path), "%s/file", dir);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		unlink(path);
		umount2(dir, MNT_DETACH);
	}
	rmdir(dir);
	memset(buf, 0x33, sizeof(buf));
	while (fd >= 0 && done < size && write(fd, buf, sizeof(buf)) == sizeof(buf))
		done += sizeof(buf);
	return done == size ? fd : -1;
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

/* The change that writing (@kb < 0: unmapping) @kb of private anon makes. */
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

/* The change that @kb of dirty shmem mapped by the target alone makes. */
static inline void sr_want_private_shmem(long long *want, long long kb)
{
	sr_delta_init(want);
	want[SR_RSS] = kb;
	want[SR_PSS] = kb;
	want[SR_PSS_DIRTY] = kb;
	want[SR_PSS_SHMEM] = kb;
	want[SR_PRIVATE_DIRTY] = kb;
}

/* The change when @kb of dirty anon shared with one task is ours alone. */
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
