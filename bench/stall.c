// SPDX-License-Identifier: GPL-2.0
/*
 * bench-stall: how long the target stalls while others read its smaps_rollup.
 *
 *   bench-stall VMAS RSS_MIB FILE SECONDS OUTDIR TAG COND...
 *
 * Starts bench-target VMAS RSS_MIB FILE once, then for each COND starts
 * the readers, waits until each has finished one read (a byte on a pipe),
 * has the target loop mmap + touch 64 KiB + munmap for SECONDS, and stops
 * the readers. COND is "none", or "status:N" or "rollup:N": N readers
 * looping on /proc/PID/status (the CPU-competition control) or on
 * /proc/PID/smaps_rollup. The target's per-operation records go to
 * OUTDIR/stall-TAG-COND.bin (3 x uint32 ns per op: mmap, touch, munmap).
 * Prints per COND:
 *   stall,VMAS,RSS_MIB,NVMAS,RSS_KB,COND,READERS,OPS,OP_P50,OP_P99,OP_MAX,
 *   READS,READ_P50,READ_P99
 * (ns; READS counts the readers' reads that ended while the target ran).
 */
#include "common.h"
#include <libgen.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define MAX_READERS 4
#define READ_CAP (1 << 16)

struct reader_log {
	uint64_t count;
	uint64_t end[READ_CAP];	/* when each read ended */
	uint64_t ns[READ_CAP];	/* how long it took */
};

static void reader(struct reader_log *log, const char *what, int pid, int ready)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	for (;;) {
		uint64_t t0 = now_ns(), t1;
		struct totals t;
		long long kb;
		int r;

		if (!strcmp(what, "status"))
			r = status_rss(path, &kb);
		else
			r = sum_file(path, &t);
		if (r)
			_exit(3);
		t1 = now_ns();
		if (log->count < READ_CAP) {
			log->end[log->count] = t1;
			log->ns[log->count] = t1 - t0;
		}
		__atomic_store_n(&log->count, log->count + 1, __ATOMIC_RELEASE);
		if (ready >= 0) {
			write_all(ready, "r", 1);
			close(ready);
			ready = -1;
		}
	}
}

int main(int argc, char **argv)
{
	char exe[4096], line[256], *dir;
	struct target t;
	double secs;
	struct reader_log *logs;
	ssize_t n;

	if (argc < 8)
		die("usage: bench-stall VMAS RSS_MIB FILE SECONDS OUTDIR TAG COND...");
	secs = atof(argv[4]);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		die("readlink");
	exe[n] = '\0';
	dir = dirname(exe);

	logs = mmap(NULL, MAX_READERS * sizeof(*logs), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (logs == MAP_FAILED)
		die("mmap logs");

	target_start(&t, dir, argv + 1);

	for (int c = 7; c < argc; c++) {
		char what[32] = "none", out[8300], cmd[8400];
		int nr = 0, ready[2];
		pid_t kids[MAX_READERS];
		uint64_t t_go, t_end, ops, p50, p99, max;
		uint64_t *lat = NULL;
		size_t nlat = 0;

		if (strcmp(argv[c], "none") &&
		    (sscanf(argv[c], "%31[a-z]:%d", what, &nr) != 2 ||
		     (strcmp(what, "status") && strcmp(what, "smaps_rollup") &&
		      strcmp(what, "rollup")) || nr < 1 || nr > MAX_READERS))
			die("bad condition %s", argv[c]);
		if (!strcmp(what, "rollup"))
			strcpy(what, "smaps_rollup");
		memset(logs, 0, MAX_READERS * sizeof(*logs));
		if (pipe2(ready, O_CLOEXEC))
			die("pipe");
		for (int r = 0; r < nr; r++) {
			kids[r] = fork();
			if (kids[r] < 0)
				die("fork");
			if (kids[r] == 0) {
				close(ready[0]);
				reader(&logs[r], what, t.pid, ready[1]);
			}
		}
		close(ready[1]);
		for (int r = 0; r < nr; r++) {
			char b;

			if (read(ready[0], &b, 1) != 1)
				die("a reader failed before its first read");
		}
		close(ready[0]);

		snprintf(out, sizeof(out), "%s/stall-%s-%s.bin", argv[5], argv[6], argv[c]);
		for (char *p = strrchr(out, '/'); *p; p++)
			if (*p == ':')
				*p = '_';
		snprintf(cmd, sizeof(cmd), "stall %g %s\n", secs, out);
		t_go = now_ns();
		write_all(t.in, cmd, strlen(cmd));
		if (read_line(t.out, line, sizeof(line)) <= 0 ||
		    sscanf(line, "stalled %llu %llu %llu %llu",
			   (unsigned long long *)&ops, (unsigned long long *)&p50,
			   (unsigned long long *)&p99, (unsigned long long *)&max) != 4)
			die("the target did not finish the stall loop");
		t_end = now_ns();
		for (int r = 0; r < nr; r++)
			kill(kids[r], SIGKILL);
		for (int r = 0; r < nr; r++)
			waitpid(kids[r], NULL, 0);

		/* reads that ended while the target looped */
		for (int r = 0; r < nr; r++) {
			uint64_t cnt = logs[r].count < READ_CAP ? logs[r].count : READ_CAP;

			lat = realloc(lat, (nlat + cnt + 1) * sizeof(*lat));
			if (!lat)
				die("realloc");
			for (uint64_t i = 0; i < cnt; i++)
				if (logs[r].end[i] >= t_go && logs[r].end[i] <= t_end)
					lat[nlat++] = logs[r].ns[i];
		}
		qsort(lat, nlat, sizeof(*lat), cmp_u64);
		printf("stall,%s,%s,%ld,%lld,%s,%d,%llu,%llu,%llu,%llu,%zu,%llu,%llu\n",
		       argv[1], argv[2], t.nvmas, t.rss_kb, argv[c], nr,
		       (unsigned long long)ops, (unsigned long long)p50,
		       (unsigned long long)p99, (unsigned long long)max, nlat,
		       (unsigned long long)pct(lat, nlat, 0.5),
		       (unsigned long long)pct(lat, nlat, 0.99));
		fflush(stdout);
		free(lat);
	}
	target_stop(&t);
	return 0;
}
