/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The records of the bench programs, defined here once. The programs
 * print each record with its RECORD_<KIND>_FORMAT; the analysis
 * (scripts/analysis/bench_load.py) reads this header for the names of
 * each record's fields, RECORD_<KIND>_FIELDS, in the order printed, as
 * guest/sample/rollup.py reads the smaps_rollup format from
 * smaps_rollup_format.h. A record is one CSV line: its kind (the first
 * word of the format), then one field per conversion of the format; the
 * analysis checks that the names and the conversions agree in number.
 * Times are in ns, sizes in kB unless a name says otherwise.
 */
#ifndef BENCH_RECORDS_H
#define BENCH_RECORDS_H

/* bench-read cost: one timed read of a cell by a method. */
#define RECORD_COST_FIELDS "vmas,rss_mib,nvmas,rss_kb,method,i,ns,pss_kb"
#define RECORD_COST_FORMAT "cost,%s,%s,%ld,%lld,%s,%ld,%llu,%lld\n"

/*
 * bench-read cost, once per cell: the target's totals from smaps_rollup
 * (or summed smaps), then one ",Name=KB" per field of
 * smaps_rollup_format.h (RECORD_TOTALS_FIELD_FORMAT), then a newline.
 */
#define RECORD_TOTALS_FIELDS "vmas,rss_mib,nvmas,rss_kb,source"
#define RECORD_TOTALS_FORMAT "fields,%s,%s,%ld,%lld,%s"
#define RECORD_TOTALS_FIELD_FORMAT ",%.*s=%llu"

/* bench-read fleet: one sweep of a method over every /proc/PID. */
#define RECORD_FLEET_FIELDS "procs,method,i,ns,pids,read_ok"
#define RECORD_FLEET_FORMAT "fleet,%ld,%s,%ld,%llu,%ld,%ld\n"

/* bench-stall: one condition of a stall cell. */
#define RECORD_STALL_FIELDS \
	"vmas,rss_mib,nvmas,rss_kb,cond,readers,ops,op_p50,op_p99,op_max,reads,read_p50,read_p99"
#define RECORD_STALL_FORMAT \
	"stall,%s,%s,%ld,%lld,%s,%d,%llu,%llu,%llu,%llu,%zu,%llu,%llu\n"

/* bench-invert: one run of one condition (means and maxima in ns). */
#define RECORD_INVERT_FIELDS \
	"cond,readers,run,ops,mmap_mean,mmap_max,munmap_mean,munmap_max,reads"
#define RECORD_INVERT_FORMAT "invert,%s,%d,%d,%llu,%llu,%llu,%llu,%llu,%llu\n"
/*
 * A bench-invert condition that ends in this (status:1+swap, rollup:1+swap)
 * keeps every SWAP_EVERY-th page of the mapper's region (common.h) paged
 * out to swap while the mapper runs; its control is status:N with it too.
 */
#define INVERT_SWAP_SUFFIX "+swap"
/*
 * A bench-invert condition that ends in this (status:1+move, rollup:1+move)
 * has a thread of the mapper on its CPU move 8 MiB of populated anonymous
 * memory back and forth with UFFDIO_MOVE all along, as ART's garbage
 * collector does; its control is status:N with it too. The two suffixes
 * combine (rollup:1+swap+move).
 */
#define INVERT_MOVE_SUFFIX "+move"

/* bench-moves: one method of one moves cell. */
#define RECORD_MOVES_FIELDS \
	"mib,period_us,method,rss_kb,moves,reads,wrong,over,under,min_kb,max_kb,read_p50"
#define RECORD_MOVES_FORMAT \
	"moves,%s,%s,%s,%lld,%llu,%zu,%llu,%llu,%llu,%lld,%lld,%llu\n"
/*
 * A bench-moves record whose method ends in this (rollup+uffd,
 * rollup=smaps_rollup_stock+uffd, status+uffd) is of a cell whose mover
 * moved the memory with UFFDIO_MOVE (bench-moves -m uffd; the plan's
 * cell MIB:PERIOD_US:uffd), as ART's garbage collector does; without it,
 * with mremap (-m mremap, the default).
 */
#define MOVES_UFFD_SUFFIX "+uffd"

/*
 * The stall target's per-operation records, one file per condition of a
 * stall cell: OUTDIR/STALL_OPS_FILE with the boot's tag, the cell's VMAS
 * and RSS_MIB and the condition, in which each of STALL_OPS_UNSAFE is
 * written as '_'. Per operation, one uint32_t per name of STALL_OPS_FIELDS
 * (ns, native byte order).
 */
#define STALL_OPS_FILE "stall-%s-%s-%s-%s.bin"
#define STALL_OPS_UNSAFE ":="
#define STALL_OPS_FIELDS "mmap,touch,munmap"
#define STALL_OPS_WORDS 3

#endif
