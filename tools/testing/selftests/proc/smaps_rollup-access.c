// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup of a task that has no memory or loses it, and the
 * exact bytes of its output.  As on stock 6.12, open() fails with ESRCH if
 * the task has no mm; the fd pins the mm_struct but not the address space,
 * so once the task exits or execs, read() fails with ESRCH.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "smaps_rollup.h"

static int idle_step(int step, long arg, unsigned long *val)
{
	return 0;
}

static const struct sr_workload workloads[] = {
	{ "idle", idle_step, SR_SETTLE_UNMAP_VDSO },
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

FIXTURE(access) {
	struct sr_target t;
	pid_t child;
	int child_pipe;
};

FIXTURE_SETUP(access)
{
	self->t.pid = -1;
	self->child = -1;
	self->child_pipe = -1;
}

FIXTURE_TEARDOWN(access)
{
}

TEST_F(access, zombie_open_fails_esrch)
{
	self->child = fork_waiter(&self->child_pipe);
	ASSERT_LT(0, self->child);
	close(self->child_pipe);
	ASSERT_EQ(0, wait_zombie(self->child));
	EXPECT_EQ(ESRCH, open_errno(self->child, O_RDONLY));
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

TEST_F(access, read_after_task_exits_fails_esrch)
{
	expect_read_fails_esrch(_metadata, open_then_exit(_metadata, false));
}

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

/*
 * The fd holds the old mm_struct, which exec() leaves without users: the
 * fd never shows the new image, and reads fail with ESRCH.
 */
TEST_F(access, fd_opened_before_exec_fails_esrch)
{
	char buf[4096];
	int fd, ack;
	ssize_t n;

	self->child = fork_execer("/proc/self/exe", &self->child_pipe, &ack);
	ASSERT_LT(0, self->child);
	fd = open_rollup(self->child);
	ASSERT_LE(0, fd);
	n = read(fd, buf, sizeof(buf));
	ASSERT_LT(0, n);
	ASSERT_EQ(0, sr_parse_rollup(buf, n, &(struct sr_rollup){}));
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));

	ASSERT_EQ(1, write(self->child_pipe, "x", 1));
	ASSERT_EQ(0, sr_recv_status(ack, NULL)) TH_LOG("exec failed");
	expect_read_fails_esrch(_metadata, fd);
	/* A new open sees the new image. */
	EXPECT_EQ(0, open_errno(self->child, O_RDONLY));
	close(ack);
}

/*
 * The first VMA's start and the last VMA's end in /proc/@pid/maps, the
 * gate VMA left out, as smaps_rollup leaves it out.
 */
static int maps_range(pid_t pid, unsigned long *first, unsigned long *last)
{
	char buf[65536], *line, *nl;
	unsigned long s, e;
	ssize_t n;

	sr_path(buf, sizeof(buf), pid, "maps");
	n = sr_read_path(buf, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	*first = strtoul(buf, NULL, 16);
	for (line = buf; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = 0;
		if (sscanf(line, "%lx-%lx", &s, &e) == 2 &&
		    !strstr(line, "[vsyscall]") && !strstr(line, "[vectors]"))
			*last = e;
	}
	return 0;
}

/* Every read checks the header's shape (sr_parse_rollup()); this its range. */
TEST_F(access, header_spans_first_vma_start_to_last_vma_end)
{
	unsigned long first = 0, last = 0;
	struct sr_rollup r;

	ASSERT_EQ(0, sr_target_start(&self->t, "idle", 0));
	sr_assert_read(_metadata, self->t.pid, &r);
	ASSERT_EQ(0, maps_range(self->t.pid, &first, &last));
	EXPECT_EQ(first, r.start);
	EXPECT_EQ(last, r.end);
}

static const char empty_rollup[] =
"00000000-00000000 ---p 00000000 00:00 0                                  [rollup]\n"
"Rss:                   0 kB\n"
"Pss:                   0 kB\n"
"Pss_Dirty:             0 kB\n"
"Pss_Anon:              0 kB\n"
"Pss_File:              0 kB\n"
"Pss_Shmem:             0 kB\n"
"Shared_Clean:          0 kB\n"
"Shared_Dirty:          0 kB\n"
"Private_Clean:         0 kB\n"
"Private_Dirty:         0 kB\n"
"Referenced:            0 kB\n"
"Anonymous:             0 kB\n"
"KSM:                   0 kB\n"
"LazyFree:              0 kB\n"
"AnonHugePages:         0 kB\n"
"ShmemPmdMapped:        0 kB\n"
"FilePmdMapped:         0 kB\n"
"Shared_Hugetlb:        0 kB\n"
"Private_Hugetlb:       0 kB\n"
"Swap:                  0 kB\n"
"SwapPss:               0 kB\n"
"Locked:                0 kB\n";

/*
 * As proc-empty-vm.c does: a traced child unmaps everything it has, faults
 * on its next instruction and stops for us with SIGSEGV, its address
 * space empty but for the gate VMA, which smaps_rollup leaves out.
 */
TEST_F(access, empty_address_space_prints_stock_zero_rollup_byte_for_byte)
{
	char buf[4096];
	int status;
	ssize_t n;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		unsigned long first, end = 0;

		maps_range(getpid(), &first, &end);
		setrlimit(RLIMIT_CORE, &(struct rlimit){});
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(3);
		syscall(SYS_munmap, 0UL, end);
		_exit(4);	/* not reached: there is no code left */
	}
	self->child = pid;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		SKIP(return, "ptrace(PTRACE_TRACEME) refused (traced already?)");
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(SIGSEGV, WSTOPSIG(status));

	sr_path(buf, sizeof(buf), pid, "smaps_rollup");
	n = sr_read_path(buf, buf, sizeof(buf));
	ASSERT_LT(0, n) TH_LOG("%s", strerror(-n));
	if (sizeof(void *) == 8) {
		EXPECT_EQ(sizeof(empty_rollup) - 1, n);
		EXPECT_EQ(0, memcmp(buf, empty_rollup, n))
			TH_LOG("got:\n%.*s", (int)n, buf);
	} else {
		struct sr_rollup r = {}, zero = {};

		EXPECT_EQ(0, sr_parse_rollup(buf, n, &r)) TH_LOG("%s", sr_error);
		EXPECT_EQ(0, memcmp(&r, &zero, sizeof(r)));
	}
}

TEST_HARNESS_MAIN
