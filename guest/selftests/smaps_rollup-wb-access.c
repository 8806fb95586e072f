// SPDX-License-Identifier: GPL-2.0
/*
 * Workbench (guest/selftests/, not sent): the cases that the series'
 * smaps_rollup-access.c does not carry.
 *
 * /proc/PID/smaps_rollup: who may open it, what happens when its task has
 * no memory or loses it, where else it appears, and the exact shape of
 * its output.  Errors are those of stock 6.12:
 *
 *  - open() takes the mm with PTRACE_MODE_READ_FSCREDS: EACCES if that is
 *    refused, ESRCH if the task has no mm (kernel thread, zombie);
 *  - the fd pins the mm_struct but not the address space: once the task
 *    exits or execs, read() fails with ESRCH;
 *  - the file is 0444 and has no write method.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>

#include "smaps_rollup_wb.h"

#define NOBODY		65534
#define PF_KTHREAD	0x00200000

static int idle_step(int step, long arg, unsigned long *val)
{
	return 0;
}

static int thread_ready[2];

static void *thread_fn(void *arg)
{
	char c = 0;

	if (write(thread_ready[1], &c, 1) != 1)
		return NULL;
	for (;;)
		pause();
	return NULL;
}

/* A second thread that waits forever. */
static int thread_step(int step, long arg, unsigned long *val)
{
	pthread_t thread;
	char c;

	if (pipe(thread_ready))
		return -errno;
	if (pthread_create(&thread, NULL, thread_fn, NULL))
		return -EAGAIN;
	return read(thread_ready[0], &c, 1) == 1 ? 0 : -EPIPE;
}

static const struct sr_workload workloads[] = {
	{ "idle", idle_step, SR_SETTLE_UNMAP_VDSO },
	{ "thread", thread_step, SR_SETTLE_UNMAP_VDSO },
	{}
};

SR_TARGET_MAIN(workloads)

/* errno of open(/proc/@pid/smaps_rollup), 0 if it opens. */
static int open_errno(pid_t pid, int flags)
{
	char path[64];
	int fd;

	sr_path(path, sizeof(path), pid, "smaps_rollup");
	fd = open(path, flags);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int open_rollup(pid_t pid)
{
	char path[64];

	sr_path(path, sizeof(path), pid, "smaps_rollup");
	return open(path, O_RDONLY);
}

/* A child that waits until *pipe_w is closed, then exits. */
static pid_t fork_waiter(int *pipe_w)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		while (read(p[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(p[0]);
	*pipe_w = p[1];
	return pid;
}

/* Wait until @pid is a zombie, without reaping it. */
static int wait_zombie(pid_t pid)
{
	siginfo_t info;

	return waitid(P_PID, pid, &info, WEXITED | WNOWAIT);
}

static int drop_to_nobody(void)
{
	if (geteuid())
		return 0;
	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -1;
	/* Changing uid made us non-dumpable; be an ordinary nobody process. */
	return prctl(PR_SET_DUMPABLE, 1);
}

/*
 * Run @fn in a child, as nobody if we are root, and return what it
 * returned (an errno), or -1 if it did not exit normally.
 */
static int run_unprivileged(int (*fn)(long), long arg)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		if (drop_to_nobody())
			_exit(255);
		_exit(fn(arg));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

FIXTURE(access) {
	struct sr_target t;
	pid_t child;
	int child_pipe;
	char exe_copy[PATH_MAX];
};

FIXTURE_SETUP(access)
{
	self->t.pid = -1;
	self->child = -1;
	self->child_pipe = -1;
	self->exe_copy[0] = 0;
}

FIXTURE_TEARDOWN_PARENT(access)
{
	if (self->exe_copy[0])
		unlink(self->exe_copy);
}

/* --- Tasks without memory --- */

static bool is_kthread(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long flags;
	ssize_t n;

	sr_path(path, sizeof(path), pid, "stat");
	n = sr_read_path(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* state ppid pgrp session tty_nr tpgid flags */
	return p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1 &&
	       (flags & PF_KTHREAD);
}

TEST_F(access, kernel_thread_open_fails_esrch)
{
	struct dirent *de;
	pid_t pid = 2;
	DIR *d;

	/* kthreadd is 2, unless we are in a PID namespace: look around. */
	if (!is_kthread(pid)) {
		pid = 0;
		d = opendir("/proc");
		ASSERT_NE(NULL, d);
		while (!pid && (de = readdir(d)))
			if (atoi(de->d_name) > 0 && is_kthread(atoi(de->d_name)))
				pid = atoi(de->d_name);
		closedir(d);
		if (!pid)
			SKIP(return, "no kernel thread visible (PID namespace?)");
	}
	EXPECT_EQ(ESRCH, open_errno(pid, O_RDONLY)) TH_LOG("kernel thread %d", pid);
}

/*
 * Fork a waiter, open its smaps_rollup, and let it exit: wait until it is
 * a zombie, and reap it if @reap.  Returns the fd.
 */
static int open_then_exit(struct __test_metadata *_metadata, bool reap)
{
	int fd, pipe_w;
	pid_t child;

	child = fork_waiter(&pipe_w);
	ASSERT_LT(0, child);
	fd = open_rollup(child);
	ASSERT_LE(0, fd);
	close(pipe_w);
	ASSERT_EQ(0, wait_zombie(child));
	if (reap)
		ASSERT_EQ(child, waitpid(child, NULL, 0));
	return fd;
}

/* read() of @fd fails with ESRCH; then close @fd. */
static void expect_read_fails_esrch(struct __test_metadata *_metadata, int fd)
{
	char buf[4096];

	errno = 0;
	EXPECT_EQ(-1, read(fd, buf, sizeof(buf)));
	EXPECT_EQ(ESRCH, errno);
	close(fd);
}

TEST_F(access, read_after_task_is_reaped_fails_esrch)
{
	expect_read_fails_esrch(_metadata, open_then_exit(_metadata, true));
}

/*
 * seq_lseek() to a non-zero offset regenerates the output, and so fails
 * like read(); seeking to 0 only resets the buffer and succeeds.
 */
TEST_F(access, lseek_after_task_exits_fails_esrch_except_to_0)
{
	int fd = open_then_exit(_metadata, false);

	EXPECT_EQ(0, lseek(fd, 0, SEEK_SET));
	errno = 0;
	EXPECT_EQ(-1, lseek(fd, 10, SEEK_SET));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_EQ(0, lseek(fd, 0, SEEK_CUR));
	close(fd);
}

/* --- Permission --- */

static int open_errno_fn(long pid)
{
	return open_errno(pid, O_RDONLY);
}

TEST_F(access, other_users_task_open_fails_eacces)
{
	struct stat st;
	pid_t pid;

	if (!geteuid()) {
		/* A root-owned child, opened by nobody. */
		self->child = fork_waiter(&self->child_pipe);
		ASSERT_LT(0, self->child);
		pid = self->child;
	} else {
		pid = 1;
		if (stat("/proc/1", &st) || st.st_uid == geteuid())
			SKIP(return, "not root, and no task of another user visible as pid 1");
	}
	EXPECT_EQ(EACCES, run_unprivileged(open_errno_fn, pid));
}

/* errno of opening a child of ours that made itself non-dumpable. */
static int nondumpable_fn(long unused)
{
	int go[2], ready[2], ret;
	pid_t pid;
	char c;

	if (pipe(go) || pipe(ready))
		return 254;
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		prctl(PR_SET_DUMPABLE, 0);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		while (read(go[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	ret = read(ready[0], &c, 1) == 1 ? open_errno(pid, O_RDONLY) : 253;
	close(go[1]);
	waitpid(pid, NULL, 0);
	return ret;
}

TEST_F(access, non_dumpable_task_of_same_user_open_fails_eacces)
{
	EXPECT_EQ(EACCES, run_unprivileged(nondumpable_fn, 0));
}

TEST_F(access, file_mode_is_0444)
{
	struct stat st;

	ASSERT_EQ(0, stat("/proc/self/smaps_rollup", &st));
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT_EQ(0444, st.st_mode & 07777);
}

TEST_F(access, write_to_read_only_fd_fails_ebadf)
{
	int fd;

	fd = open("/proc/self/smaps_rollup", O_RDONLY);
	ASSERT_LE(0, fd);
	errno = 0;
	EXPECT_EQ(-1, write(fd, "x", 1));
	EXPECT_EQ(EBADF, errno);
	close(fd);
}

static int open_self_for_write_fn(long flags)
{
	return open_errno(getpid(), flags);
}

TEST_F(access, open_for_write_unprivileged_fails_eacces)
{
	EXPECT_EQ(EACCES, run_unprivileged(open_self_for_write_fn, O_WRONLY));
	EXPECT_EQ(EACCES, run_unprivileged(open_self_for_write_fn, O_RDWR));
}

/*
 * CAP_DAC_OVERRIDE gets root past the 0444 mode, and open() succeeds; the
 * file has no write method, so write() fails with EINVAL.
 */
TEST_F(access, root_open_for_write_succeeds_but_write_fails_einval)
{
	int fd;

	if (geteuid())
		SKIP(return, "needs root");
	fd = open("/proc/self/smaps_rollup", O_WRONLY);
	ASSERT_LE(0, fd) TH_LOG("open(O_WRONLY): %s", strerror(errno));
	errno = 0;
	EXPECT_EQ(-1, write(fd, "x", 1));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

/* --- exec --- */

/*
 * A child that, when told, executes @exe as target "idle"; returns the
 * pipe to tell it on, and the pipe on which the target reports it is up.
 */
static pid_t fork_execer(const char *exe, int *go_w, int *ack_r)
{
	int go[2], ack[2];
	char env[128];
	pid_t pid;
	char c;

	if (pipe(go) || pipe(ack))
		return -1;
	pid = fork();
	if (pid == 0) {
		static char *const argv[] = { "idle", NULL };
		char *const envp[] = { env, NULL };

		close(go[1]);
		close(ack[0]);
		snprintf(env, sizeof(env), "%s=idle,%d,%d,0", SR_TARGET_ENV,
			 go[0], ack[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		execve(exe, argv, envp);
		_exit(127);
	}
	close(go[0]);
	close(ack[1]);
	*go_w = go[1];
	*ack_r = ack[0];
	return pid;
}

/* Copy /proc/self/exe to a set-user-ID-root file in a suid-capable dir. */
static int make_setuid_copy(char *path, size_t size)
{
	static const char *const dirs[] = { "/tmp", "/var/tmp", "/dev/shm" };
	char buf[65536];
	struct statvfs sv;
	int in, out = -1;
	ssize_t n;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(dirs) && out < 0; i++) {
		if (statvfs(dirs[i], &sv) || (sv.f_flag & ST_NOSUID))
			continue;
		snprintf(path, size, "%s/smaps_rollup-setuid.XXXXXX", dirs[i]);
		out = mkstemp(path);
	}
	if (out < 0)
		return -1;
	in = open("/proc/self/exe", O_RDONLY);
	while (in >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			n = -1;
	if (in < 0 || n < 0 || fchown(out, 0, 0) || fchmod(out, 04755)) {
		close(out);
		unlink(path);
		return -1;
	}
	close(in);
	close(out);
	return 0;
}

/* As nobody: 0 if an fd kept across a setuid exec fails as it should. */
static int setuid_exec_fn(long exe)
{
	char buf[4096];
	int fd, go, ack;
	pid_t pid;
	int ret = 0;

	pid = fork_execer((const char *)exe, &go, &ack);
	if (pid < 0)
		return 250;
	fd = open_rollup(pid);
	if (fd < 0)
		ret = 251;
	else if (write(go, "x", 1) != 1 || sr_recv_status(ack, NULL))
		ret = 252;
	else if (read(fd, buf, sizeof(buf)) != -1 || errno != ESRCH)
		ret = 1;	/* the old fd must not read the new image */
	else if (open_errno(pid, O_RDONLY) != EACCES)
		ret = 2;	/* nor may nobody open the set-uid task */
	close(go);
	close(ack);
	waitpid(pid, NULL, 0);
	return ret;
}

TEST_F(access, fd_opened_before_setuid_exec_fails_esrch)
{
	int ret;

	if (geteuid())
		SKIP(return, "making a set-user-ID root binary needs root");
	if (make_setuid_copy(self->exe_copy, sizeof(self->exe_copy))) {
		self->exe_copy[0] = 0;
		SKIP(return, "no suid-capable writable directory for a set-user-ID copy");
	}
	ret = run_unprivileged(setuid_exec_fn, (long)self->exe_copy);
	ASSERT_NE(250, ret);
	ASSERT_NE(251, ret);
	ASSERT_NE(252, ret) TH_LOG("the set-user-ID copy did not start");
	EXPECT_NE(1, ret) TH_LOG("read() of the old fd did not fail with ESRCH");
	EXPECT_NE(2, ret) TH_LOG("nobody could open the set-user-ID task");
	EXPECT_EQ(0, ret);
}

/* --- Other paths --- */

TEST_F(access, task_tid_file_equals_tgid_file)
{
	char tgid_path[64], tid_path[320], a[4096], b[4096], a2[4096];
	ssize_t na, nb, na2;
	struct dirent *de;
	int tids = 0, i;
	DIR *d;

	ASSERT_EQ(0, sr_target_start(&self->t, "thread", 0));
	ASSERT_EQ(0, sr_target_step(&self->t, 1, NULL));
	sr_path(tgid_path, sizeof(tgid_path), self->t.pid, "smaps_rollup");
	snprintf(tid_path, sizeof(tid_path), "/proc/%d/task", self->t.pid);
	d = opendir(tid_path);
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		if (atoi(de->d_name) <= 0)
			continue;
		tids++;
		snprintf(tid_path, sizeof(tid_path),
			 "/proc/%d/task/%s/smaps_rollup", self->t.pid,
			 de->d_name);
		/* Compare with two equal reads of the tgid file around it. */
		for (i = 0; i < 10; i++) {
			na = sr_read_path(tgid_path, a, sizeof(a));
			nb = sr_read_path(tid_path, b, sizeof(b));
			na2 = sr_read_path(tgid_path, a2, sizeof(a2));
			ASSERT_LT(0, na);
			ASSERT_LT(0, nb) TH_LOG("%s", tid_path);
			if (na == na2 && !memcmp(a, a2, na))
				break;
		}
		ASSERT_LT(i, 10);
		EXPECT_TRUE(na == nb && !memcmp(a, b, na)) TH_LOG("%s", tid_path);
	}
	closedir(d);
	EXPECT_EQ(2, tids);
}

TEST_F(access, self_and_thread_self_paths_exist)
{
	struct sr_rollup r;
	char buf[4096];
	ssize_t n;

	/* How consumers probe for the file. */
	EXPECT_EQ(0, access("/proc/self/smaps_rollup", R_OK));
	n = sr_read_path("/proc/thread-self/smaps_rollup", buf, sizeof(buf));
	ASSERT_LT(0, n);
	EXPECT_EQ(0, sr_parse_rollup(buf, n, &r)) TH_LOG("%s", sr_error);
}

/* --- Format --- */

/* Start an idle target in @t, read its smaps_rollup into @buf. */
static ssize_t read_idle_target(struct __test_metadata *_metadata,
				struct sr_target *t, char *buf, size_t size)
{
	char path[64];
	ssize_t n;

	ASSERT_EQ(0, sr_target_start(t, "idle", 0));
	sr_path(path, sizeof(path), t->pid, "smaps_rollup");
	n = sr_read_path(path, buf, size - 1);
	ASSERT_LT(0, n);
	buf[n] = 0;
	return n;
}

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Column where "[rollup]" starts: 73 on 64-bit, 49 on 32-bit. */
#define ROLLUP_COL	(25 + 6 * (int)sizeof(void *))

TEST_F(access, header_line_has_stock_shape)
{
	unsigned long first = 0, last = 0, s, e;
	char buf[4096], maps[65536], *p, *nl;
	const char *mid = " ---p 00000000 00:00 0";
	ssize_t n;
	int i;

	ASSERT_LT(0, read_idle_target(_metadata, &self->t, buf, sizeof(buf)));
	nl = strchr(buf, '\n');
	ASSERT_NE(NULL, nl);
	p = buf;
	for (i = 0; is_lower_hex(p[i]); i++)
		;
	EXPECT_LE(8, i) TH_LOG("start has %d hex digits", i);
	p += i;
	ASSERT_EQ('-', *p++);
	for (i = 0; is_lower_hex(p[i]); i++)
		;
	EXPECT_LE(8, i) TH_LOG("end has %d hex digits", i);
	p += i;
	ASSERT_EQ(0, strncmp(p, mid, strlen(mid))) TH_LOG("'%.30s'", p);
	for (p += strlen(mid); p < buf + ROLLUP_COL; p++)
		ASSERT_EQ(' ', *p) TH_LOG("column %d", (int)(p - buf));
	EXPECT_EQ(0, strncmp(buf + ROLLUP_COL, "[rollup]\n", 9));
	EXPECT_EQ(buf + ROLLUP_COL + 8, nl);

	/* The range runs from the first VMA's start to the last VMA's end. */
	sr_path(maps, sizeof(maps), self->t.pid, "maps");
	n = sr_read_path(maps, maps, sizeof(maps) - 1);
	ASSERT_LT(0, n);
	maps[n] = 0;
	for (p = maps; sscanf(p, "%lx-%lx", &s, &e) == 2; p = nl + 1) {
		nl = strchr(p, '\n');
		ASSERT_NE(NULL, nl);
		*nl = 0;
		if (p == maps)
			first = s;
		if (!strstr(p, "[vsyscall]"))
			last = e;
	}
	EXPECT_EQ(first, strtoul(buf, NULL, 16));
	EXPECT_EQ(last, strtoul(strchr(buf, '-') + 1, NULL, 16));
}

TEST_F(access, field_labels_are_stock_labels_in_stock_order)
{
	static const char *const labels[] = {
		"Rss", "Pss", "Pss_Dirty", "Pss_Anon", "Pss_File", "Pss_Shmem",
		"Shared_Clean", "Shared_Dirty", "Private_Clean",
		"Private_Dirty", "Referenced", "Anonymous", "KSM", "LazyFree",
		"AnonHugePages", "ShmemPmdMapped", "FilePmdMapped",
		"Shared_Hugetlb", "Private_Hugetlb", "Swap", "SwapPss",
		"Locked",
	};
	char buf[4096], *line, *nl;
	size_t i = 0, l;

	ASSERT_LT(0, read_idle_target(_metadata, &self->t, buf, sizeof(buf)));
	line = strchr(buf, '\n') + 1;
	for (; (nl = strchr(line, '\n')); line = nl + 1, i++) {
		ASSERT_LT(i, ARRAY_SIZE(labels))
			TH_LOG("extra line '%.*s'", (int)(nl - line), line);
		l = strlen(labels[i]);
		EXPECT_TRUE(!strncmp(line, labels[i], l) && line[l] == ':')
			TH_LOG("line %zu is '%.*s', expected %s:", i + 2,
			       (int)(nl - line), line, labels[i]);
	}
	EXPECT_EQ(ARRAY_SIZE(labels), i);
	EXPECT_EQ(0, *line);
}

/*
 * "Label:", spaces, the value in kB ending at column 24 (if it has at
 * most 8 digits; 7 for Private_Hugetlb, whose label is one column wider),
 * " kB".
 */
TEST_F(access, field_values_end_at_column_24_followed_by_kb)
{
	char buf[4096], *line, *nl, *colon, *q;
	size_t digits;

	ASSERT_LT(0, read_idle_target(_metadata, &self->t, buf, sizeof(buf)));
	line = strchr(buf, '\n') + 1;
	for (; (nl = strchr(line, '\n')); line = nl + 1) {
		colon = strchr(line, ':');
		ASSERT_TRUE(colon && colon < nl);
		for (q = colon + 1; *q == ' '; q++)
			;
		for (digits = 0; q[digits] >= '0' && q[digits] <= '9'; digits++)
			;
		EXPECT_LT(0, digits);
		EXPECT_LE(1, q - colon - 1) TH_LOG("no space after the label");
		if (digits <= 8 && (digits <= 7 || strncmp(line, "Private_Hugetlb:", 16)))
			EXPECT_EQ(24, q + digits - line)
				TH_LOG("'%.*s'", (int)(nl - line), line);
		EXPECT_EQ(0, strncmp(q + digits, " kB\n", 4))
			TH_LOG("'%.*s'", (int)(nl - line), line);
	}
}

TEST_F(access, output_has_23_lines_and_no_tabs)
{
	char buf[4096];
	ssize_t n, i;
	int lines = 0;

	n = read_idle_target(_metadata, &self->t, buf, sizeof(buf));
	ASSERT_LT(0, n);
	for (i = 0; i < n; i++) {
		EXPECT_NE('\t', buf[i]) TH_LOG("tab at byte %zd", i);
		lines += buf[i] == '\n';
	}
	EXPECT_EQ(23, lines);
	EXPECT_EQ('\n', buf[n - 1]);
}

TEST_HARNESS_MAIN
