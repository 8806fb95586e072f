// SPDX-License-Identifier: GPL-2.0
/*
 * bench-read: the ways a sampler gets a process's memory totals, timed.
 *
 *   bench-read cost VMAS RSS_MIB FILE MIN MAX BUDGET_MS METHOD[:MIN]...
 *       Start bench-target VMAS RSS_MIB FILE (beside this program), wait
 *       for its "ready" line, then time reads of it, one METHOD after the
 *       other in rounds so that drift hits every method alike. A method
 *       stops after MAX reads, or after MIN reads (its own MIN if given)
 *       once its reads took BUDGET_MS in all. All but smaps and awk get
 *       one untimed read first. Prints the target's rollup (or summed
 *       smaps) fields once:
 *       fields,VMAS,RSS_MIB,NVMAS,RSS_KB,SOURCE,Name=KB,... (records.h)
 *       and then per read:
 *       cost,VMAS,RSS_MIB,NVMAS,RSS_KB,METHOD,I,NS,PSS_KB (records.h)
 *       (METHOD as given, without :MIN).
 *
 *   bench-read fleet NPROCS SWEEPS METHOD[:SWEEPS]...
 *       Start NPROCS /bin/cat processes, each blocked reading its own
 *       pipe (a handshake through them proves each has run), then sweep
 *       METHOD over every /proc/PID, SWEEPS times per method (or the
 *       method's own count), methods alternating. Prints, per sweep:
 *       fleet,NPROCS,METHOD,I,NS,PIDS,READ_OK (records.h)
 *
 * METHODs (see common.h): smaps (summed with the format header's
 * parser), awk (awk over smaps summing every "kB" field, the 2016 method:
 * fork + exec + awk's parsing are all counted), rollup or rollup=FILE
 * (e.g. rollup=smaps_rollup_stock, the stock implementation beside the
 * series in a bench-only kernel), status, maps.
 */
#include "common.h"
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char **environ;

static const char awk_prog[] =
	"/^[A-Z]/ && $3 == \"kB\" { s[$1] += $2 } "
	"END { for (k in s) print k, s[k] }";

/* read_awk: the awk method on PID; Pss into *PSS. 0 or -1. */
static int read_awk(int pid, long long *pss)
{
	char path[64], out[4096];
	char *argv[] = { "awk", (char *)awk_prog, path, NULL };
	posix_spawn_file_actions_t fa;
	size_t have = 0;
	int pfd[2], st;
	ssize_t n;
	pid_t child;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	if (pipe2(pfd, O_CLOEXEC))
		die("pipe");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	if (posix_spawn(&child, "/usr/bin/awk", &fa, NULL, argv, environ))
		die("spawn awk");
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	while (have < sizeof(out) - 1 &&
	       (n = read(pfd[0], out + have, sizeof(out) - 1 - have)) > 0)
		have += (size_t)n;
	close(pfd[0]);
	out[have] = '\0';
	if (waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	*pss = -1;
	for (p = out; (p = strstr(p, "Pss: ")); p++)
		if (p == out || p[-1] == '\n')
			*pss = strtoll(p + 5, NULL, 10);
	return 0;
}

/* read_one: one read of PID by M; 0 or -errno. */
static int read_one(const struct method *m, int pid, long long *pss)
{
	if (m->kind == M_AWK)
		return read_awk(pid, pss) ? -EIO : 0;
	return read_method(m, pid, pss);
}

/* print_fields: the target's totals, from rollup or else summed smaps. */
static void print_fields(char **argv, int pid, long nvmas, long long rss_kb)
{
	const char *src = "rollup";
	unsigned long long *kb;
	struct sr_rollup r;
	struct sr_smaps s;
	char path[64];

	sr_path(path, sizeof(path), pid, "smaps_rollup");
	kb = r.kb;
	if (read_rollup_path(path, &r)) {
		src = "smaps";
		sr_path(path, sizeof(path), pid, "smaps");
		if (sum_smaps_path(path, &s))
			die("read %s", path);
		kb = s.kb;
	}
	printf(RECORD_TOTALS_FORMAT, argv[1], argv[2], nvmas, rss_kb, src);
	for (int f = 0; f < SR_NR_FIELDS; f++)	/* the labels end in ':' */
		printf(RECORD_TOTALS_FIELD_FORMAT, (int)strlen(sr_label[f]) - 1, sr_label[f], kb[f]);
	printf("\n");
}

/* parse_methods: ARGV[0..N-1] into M, with COUNT where none is given. */
static void parse_methods(struct method *m, char **argv, int n, long count)
{
	for (int i = 0; i < n; i++)
		parse_method(&m[i], argv[i], count);
}

static char bin_dir[4096];

static int cost(int argc, char **argv)
{
	int nm = argc - 7;
	long min, max, budget_ms;
	struct target t;

	if (nm < 1)
		die("usage: bench-read cost VMAS RSS_MIB FILE MIN MAX BUDGET_MS METHOD...");
	min = atol(argv[4]);
	max = atol(argv[5]);
	budget_ms = atol(argv[6]);
	struct method meth[nm > 0 ? nm : 1];

	parse_methods(meth, argv + 7, nm, min);
	target_start(&t, bin_dir, argv + 1);

	{
		long n[nm];
		uint64_t spent[nm];
		int active = nm;

		memset(n, 0, sizeof(n));
		memset(spent, 0, sizeof(spent));
		print_fields(argv, t.pid, t.nvmas, t.rss_kb);
		/* one untimed read of the cheap ones: warm their paths */
		for (int m = 0; m < nm; m++) {
			long long pss;

			if (meth[m].kind == M_SMAPS || meth[m].kind == M_AWK)
				continue;
			if (read_one(&meth[m], t.pid, &pss))
				die("%s of the target failed", meth[m].name);
		}
		while (active) {
			active = 0;
			for (int m = 0; m < nm; m++) {
				long long pss = -1;
				uint64_t t0, dt;

				if (n[m] >= max ||
				    (n[m] >= meth[m].count && spent[m] >= (uint64_t)budget_ms * 1000000ull))
					continue;
				active = 1;
				t0 = now_ns();
				if (read_one(&meth[m], t.pid, &pss))
					die("%s of the target failed", meth[m].name);
				dt = now_ns() - t0;
				spent[m] += dt;
				printf(RECORD_COST_FORMAT,
				       argv[1], argv[2], t.nvmas, t.rss_kb, meth[m].name,
				       n[m], (unsigned long long)dt, pss);
				n[m]++;
			}
		}
	}
	fflush(stdout);
	target_stop(&t);
	return 0;
}

/* sweep: one pass of METHOD over every /proc/PID; counts into *PIDS, *OK. */
static void sweep(const struct method *method, long *pids, long *ok)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (!d)
		die("opendir /proc");
	*pids = *ok = 0;
	while ((e = readdir(d))) {
		long long pss;
		int pid;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		pid = atoi(e->d_name);
		(*pids)++;
		if (read_one(method, pid, &pss) == 0 && pss >= 0)
			(*ok)++;
	}
	closedir(d);
}

static int fleet(int argc, char **argv)
{
	long nprocs = atol(argv[2]), sweeps = atol(argv[3]);
	int nm = argc - 4, back[2];
	pid_t *kids;
	int *feed;
	struct rlimit rl = { 4096, 4096 };
	char c;

	if (nm < 1 || nprocs < 0)
		die("usage: bench-read fleet NPROCS SWEEPS METHOD...");
	struct method meth[nm > 0 ? nm : 1];

	parse_methods(meth, argv + 4, nm, sweeps);
	setrlimit(RLIMIT_NOFILE, &rl);
	kids = calloc((size_t)nprocs, sizeof(*kids));
	feed = calloc((size_t)nprocs, sizeof(*feed));
	if ((nprocs && (!kids || !feed)) || pipe2(back, O_CLOEXEC))
		die("setup");
	/* each cat reads its own pipe and writes to the shared one */
	for (long i = 0; i < nprocs; i++) {
		char *av[] = { "cat", NULL };
		posix_spawn_file_actions_t fa;
		int in[2];

		if (pipe2(in, O_CLOEXEC))
			die("pipe");
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
		posix_spawn_file_actions_adddup2(&fa, back[1], 1);
		if (posix_spawn(&kids[i], "/bin/cat", &fa, NULL, av, environ))
			die("spawn cat");
		posix_spawn_file_actions_destroy(&fa);
		close(in[0]);
		feed[i] = in[1];
		write_all(in[1], "x", 1);
	}
	close(back[1]);
	for (long i = 0; i < nprocs; i++)
		if (read(back[0], &c, 1) != 1)
			die("a cat did not answer");

	for (long s = 0, more = 1; more; s++) {
		more = 0;
		for (int m = 0; m < nm; m++) {
			long pids, ok;
			uint64_t t0, dt;

			if (s >= meth[m].count)
				continue;
			more = 1;
			t0 = now_ns();
			sweep(&meth[m], &pids, &ok);
			dt = now_ns() - t0;
			printf(RECORD_FLEET_FORMAT, nprocs, meth[m].name,
			       s, (unsigned long long)dt, pids, ok);
		}
	}
	fflush(stdout);
	for (long i = 0; i < nprocs; i++)
		close(feed[i]); /* EOF: each cat exits */
	for (long i = 0; i < nprocs; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	self_dir(bin_dir, sizeof(bin_dir));
	if (argc >= 9 && !strcmp(argv[1], "cost"))
		return cost(argc - 1, argv + 1);
	if (argc >= 5 && !strcmp(argv[1], "fleet"))
		return fleet(argc, argv);
	fprintf(stderr,
		"usage: bench-read cost VMAS RSS_MIB FILE MIN MAX BUDGET_MS METHOD...\n"
		"       bench-read fleet NPROCS SWEEPS METHOD...\n");
	return 2;
}
