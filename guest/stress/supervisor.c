// SPDX-License-Identifier: GPL-2.0
/*
 * smaps_rollup_stress: a bounded stress test of /proc/<pid>/smaps_rollup.
 *
 *   smaps_rollup_stress [-t SECONDS] [-n TARGETS] [-p READER_PROCS]
 *                       [-j THREADS] [-c CHECKPOINT_SECONDS] [-s SEED] [-q]
 *   smaps_rollup_stress --faultinject ARGS...
 *
 * TARGETS target processes churn their address spaces (target.c) while
 * READER_PROCS processes of THREADS threads each read their smaps_rollup
 * in every way (reader.c).  This process supervises them and makes the
 * checkpoints.
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
 * --faultinject runs the fault-injection program, smaps_rollup_faultinject
 * from this program's directory, with the other arguments (faultinject.c).
 *
 * Output: progress and any violation on stderr; a summary line on stdout
 * and in $RESULT_FILE when set (guest/run-plan sets it):
 * "smaps_rollup_stress: seconds S reads N ... violations V".  Exit status 0
 * when there was no violation, 1 otherwise.
 */
#include <limits.h>
#include <time.h>

#include "stress.h"

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

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

static int stress_main(double seconds, int nt, int np, int nj, double cpi,
		       uint64_t seed)
{
	double start = now(), deadline = start + seconds, next_cp, secs;
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
			close_target_pipes();
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
	secs = now() - start;
	summary("smaps_rollup_stress: seconds %.1f, reads %" PRIu64 ", read calls %" PRIu64
	       ", operations %" PRIu64 ", checkpoints %" PRIu64 " (%" PRIu64
	       " targets checked, %" PRIu64 " did not hold still, %" PRIu64
	       " reads under mmap_lock contention), faults injected %" PRIu64
	       " (EFAULT), clean errors %" PRIu64 ", violations %" PRIu64 "\n",
	       secs, counter(C_READS), counter(C_READ_CALLS), counter(C_OPS),
	       counter(C_CHECKPOINTS), counter(C_CP_TARGETS), counter(C_CP_UNSTABLE),
	       counter(C_CONTENDED_READS), counter(C_EFAULT),
	       counter(C_GONE) + counter(C_KTHREAD) + counter(C_ZOMBIE) + counter(C_EFAULT),
	       counter(C_VIOLATIONS));
	print_counters("stress", secs);
	return counter(C_VIOLATIONS) ? 1 : 0;
}

/* Replace this process with the fault-injection program next to it. */
static void __attribute__((noreturn)) exec_faultinject(char **argv)
{
	static const char prog[] = FAULTINJECT_PROG;
	char path[PATH_MAX];
	ssize_t n = readlink(self_exe, path, sizeof(path));
	char *slash;
	size_t dir;

	if (n < 0 || n == sizeof(path))
		die("readlink %s", self_exe);
	path[n] = 0;
	slash = strrchr(path, '/');
	dir = slash ? (size_t)(slash + 1 - path) : 0;
	if (dir + sizeof(prog) > sizeof(path))
		die("%s: path too long", path);
	memcpy(path + dir, prog, sizeof(prog));
	argv[0] = (char *)prog;
	execv(path, argv);
	die("execv %s", path);
}

int main(int argc, char **argv)
{
	struct options o = { .seconds = 120, .cpi = 10, .nt = 4, .np = 2, .nj = 3 };

	target_entry(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "--faultinject"))
		exec_faultinject(argv + 1);
	parse_options(argc, argv, &o);
	return stress_main(o.seconds, o.nt, o.np, o.nj, o.cpi, o.seed);
}
