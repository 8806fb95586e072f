// SPDX-License-Identifier: GPL-2.0
/*
 * The reader processes of smaps_rollup_stress.  THREADS threads each open,
 * read, pread, readv, lseek and close smaps_rollup of the targets, their
 * children (alive or zombie), of the targets' threads
 * (task/TID/smaps_rollup), of themselves, of init and of a kernel thread,
 * in chunks of 1, 7, 64, 333, 4096 and 65536 bytes and random sizes, into
 * buffers that end at an inaccessible page (EFAULT and short copies), and
 * through one fd that all threads of a process share.  Every read of a
 * whole file in one pass must parse as stock's format and satisfy the
 * relations that hold for every pass, with every value bounded by what
 * the target can map.  Errors must be clean: ENOENT/ESRCH for a target
 * that is gone, ESRCH for a kernel thread or a zombie, EFAULT for the bad
 * buffer.
 */
#include "stress.h"

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

void reader_main(int threads)
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
