// SPDX-License-Identifier: GPL-2.0
/*
 * Quiescent targets, for smaps_rollup_faultinject: a private copy of the
 * program (so that no other process shares its file pages), with
 * anonymous, shared, memfd, swapped, mlocked, lazily freed, THP and
 * hugetlb memory and a few hundred VMAs, blocked on a pipe.  Its
 * smaps_rollup does not change: it gives the reference bytes.
 */
#include "stress.h"

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

void start_quiet(struct quiet *q)
{
	int exe = copy_self(), cmd, ack;
	pid_t pid = fork_piped(&cmd, &ack);

	if (pid == 0) {
		char s[2][16];
		char *args[] = { "smaps_rollup_quiet", "--quiet-target", s[0], s[1], NULL };
		char *env[] = { NULL };

		snprintf(s[0], 16, "%d", cmd);
		snprintf(s[1], 16, "%d", ack);
		fexecve(exe, args, env);
		die("fexecve");
	}
	close(exe);
	if (read_byte(ack, 300000) != 'A')
		die("the quiescent target did not start");
	close(ack);
	q->pid = pid;
	q->cmd = cmd;
	pthread_mutex_init(&q->lock, NULL);
	snprintf(q->path, sizeof(q->path), "/proc/%d/smaps_rollup", (int)pid);
}

/* The quiescent target's bytes, read twice alike. */
bool reference(struct quiet *q, char *out, size_t *len)
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

/* `PROG --quiet-target CMD ACK`: be a quiescent target. */
void quiet_target_entry(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[1], "--quiet-target"))
		return;
	/* Counters that nobody reads, so that the helpers work. */
	sh = calloc(1, sizeof(*sh));
	if (!sh)
		_exit(3);
	quiet_target_main(atoi(argv[2]), atoi(argv[3]));
}
