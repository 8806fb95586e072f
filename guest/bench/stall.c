// SPDX-License-Identifier: GPL-2.0
/*
 * bench-stall: how long the target stalls while others read its smaps_rollup.
 *
 *   bench-stall VMAS RSS_MIB FILE SECONDS OUTDIR TAG COND...
 *
 * Starts bench-target VMAS RSS_MIB FILE once and pins it to CPU 0 (with
 * two CPUs or more), then for each COND starts the readers on CPU 1, waits until each has
 * finished one read (a byte on a pipe), has the target loop mmap + touch
 * 64 KiB + munmap for SECONDS, and stops the readers. COND is "none", or
 * "status:N", "rollup:N" or "rollup=FILE:N": N readers looping on
 * /proc/PID/status (the control: the same reader load without the page
 * walk), /proc/PID/smaps_rollup or /proc/PID/FILE (smaps_rollup_stock).
 * Pinned, the target never competes with its readers for a CPU, so what
 * they add to its latency is their hold of its mmap_lock. The target's
 * per-operation records go to OUTDIR/stall-TAG-VMAS-RSS_MIB-COND.bin
 * (records.h STALL_OPS_FILE: TAG is the boot's, ':' and '=' of COND are
 * written as '_'). Prints per COND (records.h RECORD_STALL_FORMAT):
 *   stall,VMAS,RSS_MIB,NVMAS,RSS_KB,COND,READERS,OPS,OP_P50,OP_P99,OP_MAX,
 *   READS,READ_P50,READ_P99
 * (ns; READS counts the readers' reads that ended while the target ran).
 */
#include "common.h"

int main(int argc, char **argv)
{
	char dir[4096], line[256];
	int target_cpu, reader_cpu;
	struct readers rs;
	struct target t;
	double secs;

	if (argc < 8)
		die("usage: bench-stall VMAS RSS_MIB FILE SECONDS OUTDIR TAG COND...");
	secs = atof(argv[4]);
	self_dir(dir, sizeof(dir));
	readers_init(&rs);
	target_start(&t, dir, argv + 1);
	pin_cpus("bench-stall", &target_cpu, &reader_cpu);
	pin_to_cpu(t.pid, target_cpu);
	pin_to_cpu(0, reader_cpu);	/* this program too: it only waits */

	for (int c = 7; c < argc; c++) {
		char out[8300], cmd[8400];
		uint64_t t_go, t_end, ops, p50, p99, max;
		uint64_t *lat = NULL;
		size_t nlat = 0;
		struct method m;

		if (!strcmp(argv[c], "none"))
			parse_method(&m, "status:0", 0);
		else
			parse_method(&m, argv[c], 1);
		if ((m.kind != M_STATUS && m.kind != M_ROLLUP) || m.count < 0)
			die("bad condition %s (none, status:N or rollup[=FILE]:N)", argv[c]);
		readers_start(&rs, &m, t.pid, reader_cpu, 0);

		snprintf(out, sizeof(out), "%s/" STALL_OPS_FILE, argv[5], argv[6],
			 argv[1], argv[2], argv[c]);
		for (char *p = strrchr(out, '/'); *p; p++)
			if (strchr(STALL_OPS_UNSAFE, *p))
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
		readers_stop(&rs);

		/* reads that ended while the target looped */
		for (int r = 0; r < rs.n; r++) {
			const struct reader_log *log = &rs.log[r];
			uint64_t cnt = log->count < READ_CAP ? log->count : READ_CAP;

			lat = realloc(lat, (nlat + cnt + 1) * sizeof(*lat));
			if (!lat)
				die("realloc");
			for (uint64_t i = 0; i < cnt; i++)
				if (log->end[i] >= t_go && log->end[i] <= t_end)
					lat[nlat++] = log->ns[i];
		}
		qsort(lat, nlat, sizeof(*lat), cmp_u64);
		printf(RECORD_STALL_FORMAT,
		       argv[1], argv[2], t.nvmas, t.rss_kb, argv[c], rs.n,
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
