// SPDX-License-Identifier: GPL-2.0
/*
 * smaps_rollup_faultinject: fault injection on smaps_rollup's open and
 * read paths.
 *
 *   smaps_rollup_faultinject [-t SECONDS] [-j THREADS] [-s SEED] [-q]
 *
 * Run as root, with failslab and fail_page_alloc configured in debugfs by
 * the caller: see guest/faultinject.  Two quiescent targets
 * (quiet.c) give reference bytes; two churning targets (target.c) give
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
 * Output: progress and any violation on stderr; on stdout the summary line
 * "smaps_rollup_stress: seconds S, scripts N, ... faults injected by
 * fail-nth N, failed calls N ... violations V" (the prefix is the stress
 * program's, as callers expect) and a line with every counter.  Exit
 * status 0 when there was no violation, 1 otherwise, 4 when the kernel has
 * no fault injection.
 */
#include <sys/uio.h>

#include "stress.h"

/* This thread's fault-injection file @name, or die. */
static int thread_self_fd(const char *name, int flags)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/thread-self/%s", name);
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		die("open %s", path);
	return fd;
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
	f.buf = calloc(1, f.size);
	if (!f.buf)
		die("calloc");
	mif_fd = thread_self_fd("make-it-fail", O_WRONLY);
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
	double start = now(), secs;
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
	f.buf = calloc(1, f.size);
	if (!f.buf)
		die("calloc");

	/* 1. The sweep: fail the 1st, 2nd, ... fault site of each script. */
	nthfd = thread_self_fd("fail-nth", O_RDWR);
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
	secs = now() - start;
	summary("smaps_rollup_stress: seconds %.1f, scripts %" PRIu64 ", reads %" PRIu64
	       ", read calls %" PRIu64 ", faults injected by fail-nth %" PRIu64
	       ", failed calls %" PRIu64 " (ENOMEM %" PRIu64 ", ENOENT %" PRIu64
	       "; open %" PRIu64 ", read %" PRIu64 ", lseek %" PRIu64 "), retries %" PRIu64
	       ", violations %" PRIu64 "\n",
	       secs, counter(C_FI_SCRIPTS), counter(C_READS), counter(C_READ_CALLS),
	       counter(C_FI_NTH), counter(C_ENOMEM) + counter(C_ENOENT_FI),
	       counter(C_ENOMEM), counter(C_ENOENT_FI), counter(C_FI_OPEN_ERR),
	       counter(C_FI_READ_ERR), counter(C_FI_SEEK_ERR), counter(C_FI_RETRIES),
	       counter(C_VIOLATIONS));
	print_counters("faultinject", secs);
	return counter(C_VIOLATIONS) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct options o = { .seconds = 120, .cpi = 10, .nt = 4, .np = 2, .nj = 2 };

	target_entry(argc, argv);
	quiet_target_entry(argc, argv);
	parse_options(argc, argv, &o);
	return faultinject_main(o.seconds, o.nj, o.seed);
}
