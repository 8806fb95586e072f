// SPDX-License-Identifier: GPL-2.0
/*
 * Churning targets, run by both programs.  A target process churns its
 * address space: mmap, munmap (whole, head, tail, a hole), mremap (grow,
 * shrink, move), mprotect (splitting and merging VMAs), mlock, madvise
 * (DONTNEED, FREE, HUGEPAGE, NOHUGEPAGE, PAGEOUT, COLD, WILLNEED,
 * POPULATE_*), MADV_PAGEOUT to push pages to swap and touching them to
 * bring them back, fork (a child that writes to the shared pages, exits
 * and stays a zombie until reaped), exec (of this program, so the pid gets
 * a new mm) and exit (the slot gets a new target).  Each target has a
 * second thread that maps, unmaps and touches memory, so that mmap_lock
 * writers queue up behind the readers.
 *
 * The supervisor talks to a target over two pipes: 'P' pauses it (it
 * reaps its children, parks its second thread and answers 'A'); then 'H'
 * makes it hammer its own mmap_lock until 'h' (see hammer()), and 'R'
 * resumes it; 'S' or EOF stops it.
 */
#include <sys/stat.h>

#include "stress.h"

struct tslot ts[MAX_TARGETS];

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
	r = pick_region(t, op >= 2);
	if (!r)
		return;
	switch (op) {
	case 0:
	case 1:
		map_region(t, r);
		break;
	case 2:
		op_munmap(t, r);
		break;
	case 3:
		op_mremap(t, r);
		break;
	case 4:
		op_mprotect(r);
		break;
	case 5:
		op_mlock(r);
		break;
	case 6:
	case 7:
		op_madvise(r);
		break;
	default:
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

/* Become target @slot: exec this program with --target. */
static void __attribute__((noreturn)) exec_target(int slot, int cmd, int ack,
						  uint64_t seed, bool may_exit)
{
	char s[5][32];
	char *args[] = { "smaps_rollup_stress", "--target", s[0], s[1], s[2],
			 s[3], s[4], NULL };

	snprintf(s[0], 32, "%d", slot);
	snprintf(s[1], 32, "%d", shm_fd);
	snprintf(s[2], 32, "%d", cmd);
	snprintf(s[3], 32, "%d", ack);
	snprintf(s[4], 32, "%" PRIu64 "%s", seed >> 1, may_exit ? "" : "n");
	execv(self_exe, args);
	die("execv %s", self_exe);
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
		case 8:
			if (!may_exit)
				break;
			reap_kids(slot, true);
			count(C_EXEC, 1);
			exec_target(slot, cmd, ack, rnd64(), may_exit);
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

/* `PROG --target SLOT SHM_FD CMD ACK SEED[n]`: be that target. */
void target_entry(int argc, char **argv)
{
	if (argc < 7 || strcmp(argv[1], "--target"))
		return;
	map_shared(atoi(argv[3]));
	system_facts();
	target_main(atoi(argv[2]), atoi(argv[4]), atoi(argv[5]),
		    strtoull(argv[6], NULL, 10), !strchr(argv[6], 'n'));
}

/* ---- the supervisor's side ---------------------------------------------------- */

/* In a child: close the pipes to the targets that it must not hold. */
void close_target_pipes(void)
{
	for (int i = 0; i < MAX_TARGETS; i++)
		if (ts[i].pid > 0) {
			close(ts[i].cmd);
			close(ts[i].ack);
		}
}

/*
 * fork() with two pipes, for commands to the child and its answers.  The
 * child gets 0, and in *cmd and *ack its ends (read, write); the parent
 * gets the pid, and its ends (write, read), close-on-exec.
 */
pid_t fork_piped(int *cmd, int *ack)
{
	int c[2], a[2];
	pid_t pid;

	if (pipe(c) || pipe(a))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	close(pid ? c[0] : c[1]);
	close(pid ? a[1] : a[0]);
	*cmd = pid ? c[1] : c[0];
	*ack = pid ? a[0] : a[1];
	if (pid) {
		fcntl(*cmd, F_SETFD, FD_CLOEXEC);
		fcntl(*ack, F_SETFD, FD_CLOEXEC);
	}
	return pid;
}

/* Start target @slot; a target that may not exit never execs or exits. */
void spawn_target(int slot, uint64_t seed, bool may_exit)
{
	int cmd, ack;
	pid_t pid = fork_piped(&cmd, &ack);

	if (pid == 0) {
		close_target_pipes();
		exec_target(slot, cmd, ack, seed, may_exit);
	}
	ts[slot].pid = pid;
	ts[slot].cmd = cmd;
	ts[slot].ack = ack;
}

void forget_target(int slot)
{
	close(ts[slot].cmd);
	close(ts[slot].ack);
	ts[slot].pid = 0;
	__atomic_store_n(&sh->pids[slot], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->kids[slot], 0, __ATOMIC_RELAXED);
}
