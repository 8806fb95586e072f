/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the two programs of guest/stress:
 *
 *   smaps_rollup_stress       readers against churning targets, with
 *                             checkpoints (supervisor.c, reader.c)
 *   smaps_rollup_faultinject  failslab/fail_page_alloc on smaps_rollup's
 *                             open and read paths (faultinject.c, quiet.c)
 *
 * Both run churning targets (target.c) and use the helpers of common.c:
 * counters in memory shared by all processes, messages and violations,
 * the RNG, reading smaps_rollup in every pattern and checking the bytes.
 * The format itself comes from the selftests' smaps_rollup_format.h.
 *
 * Output: progress and any violation on stderr; a summary line on stdout,
 * "smaps_rollup_stress: seconds S ... violations V" (both programs), then
 * a line with every counter.  Exit status 0 when there was no violation,
 * 1 otherwise, 2 on a usage or setup error, 4 when fault injection is not
 * available.
 */
#ifndef SMAPS_ROLLUP_STRESS_H
#define SMAPS_ROLLUP_STRESS_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Debian 12's glibc has MADV_COLD, MADV_PAGEOUT, MADV_POPULATE_*, not this. */
#ifndef MFD_EXEC
#define MFD_EXEC		0x0010U
#endif

#define PS		4096UL
#define HPS		(2UL << 20)
#define MAX_TARGETS	16
#define MAX_OUT		8192		/* a rollup is about 1 KiB */
#define TARGET_CAP_KB	(1ULL << 20)	/* 1 GiB: far more than a target maps */
#define SHARED_FD	900		/* the fd all threads of a reader share */

/* The fault-injection program, found next to the stress program. */
#define FAULTINJECT_PROG "smaps_rollup_faultinject"

/* ---- the format: shared with the selftests ------------------------------ */

#include "smaps_rollup_format.h"

/* ---- shared state and counters (common.c) -------------------------------- */

enum counter {
	C_OPENS, C_READS, C_READ_CALLS, C_SEEKS, C_BYTES, C_SHARED_FD,
	C_OPS, C_MMAP, C_MUNMAP, C_MREMAP, C_MPROTECT, C_MLOCK, C_MADVISE,
	C_PAGEOUT, C_SWAPIN, C_FORK, C_EXEC, C_EXIT, C_SMAPS,
	C_CHECKPOINTS, C_CP_TARGETS, C_CP_UNSTABLE, C_CP_COMPARES,
	C_GONE, C_KTHREAD, C_ZOMBIE, C_EFAULT, C_ENOMEM, C_ENOENT_FI,
	C_FI_NTH, C_FI_SCRIPTS, C_FI_RETRIES, C_FI_GAVEUP, C_FI_REFMOVED,
	C_FI_OPEN_ERR, C_FI_READ_ERR, C_FI_SEEK_ERR,
	C_HAMMER, C_CONTENDED_READS,
	C_VIOLATIONS, NR_C
};

/* In a memfd that every process of a run maps (targets get its fd). */
struct shared {
	int stop;
	int nt;				/* slots in use */
	int pids[MAX_TARGETS];
	int kids[MAX_TARGETS];
	int tids[MAX_TARGETS];
	int printed;
	uint64_t c[NR_C];
};

extern struct shared *sh;
extern int shm_fd;			/* the memfd behind *sh */
extern bool quiet;			/* -q: no progress messages */
extern const char *self_exe;
/* What system_facts() found. */
extern unsigned long long sys_cap_kb;	/* memory + swap + hugetlb pool */
extern bool hugetlb_ok;
extern bool pid2_is_kthread;

static inline void count(int c, uint64_t n)
{
	__atomic_add_fetch(&sh->c[c], n, __ATOMIC_RELAXED);
}

static inline uint64_t counter(int c)
{
	return __atomic_load_n(&sh->c[c], __ATOMIC_RELAXED);
}

static inline bool stopping(void)
{
	return __atomic_load_n(&sh->stop, __ATOMIC_RELAXED);
}

void setup_shared(void);
void map_shared(int fd);
void system_facts(void);
void print_counters(const char *mode, double secs);

/* The options of both programs; each sets its defaults first. */
struct options {
	double seconds, cpi;
	int nt, np, nj;
	uint64_t seed;
};

void parse_options(int argc, char **argv, struct options *o);

/* ---- messages ------------------------------------------------------------ */

/*
 * While a paused target is checked, violations wait until we know that
 * the target held still; one that moved proves nothing.
 */
extern __thread bool defer_mode;
extern __thread int deferred;
extern __thread char deferred_msg[3500];

void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void summary(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
double now(void);

/* ---- the RNG: xorshift64, per thread --------------------------------------- */

uint64_t rnd64(void);
unsigned long rnd(unsigned long n);
void seed_rng(uint64_t s);

/* ---- reading and checking smaps_rollup ----------------------------------- */

int read_byte(int fd, int ms);
ssize_t read_to_eof(int fd, char *buf, size_t size, size_t chunk);
ssize_t pread_to_eof(int fd, char *buf, size_t size, size_t chunk);
ssize_t read_n(int fd, char *buf, size_t want);
ssize_t read_path(const char *path, char *buf, size_t size);
size_t pick_chunk(void);
int sum_smaps(pid_t pid, struct sr_smaps *s);

int parse_check_rollup(const char *buf, size_t len, struct sr_rollup *r,
		       unsigned long long cap_kb, char *why, size_t wsz);

/* What a reader expects of the bytes of one pass. */
struct expect {
	const char *what;		/* the path, for messages */
	const char *ref;		/* exact bytes, or NULL: check and bound */
	size_t reflen;
	unsigned long long cap_kb;
};

bool check_pass(const struct expect *e, const char *buf, size_t len,
		const char *how);

/* A buffer that ends where an inaccessible page starts. */
struct guard {
	char *end;
};

void guard_init(struct guard *g);

/*
 * The reader's patterns on one open fd.  The first NR_MOVING_P work on a
 * target that moves; the others need an exact reference.
 */
enum { P_CHUNK, P_PREAD, P_SEEK0, P_REREAD, P_READV, P_GUARD, P_PREAD0,
       P_OPEN_ONLY, P_PARTIAL, NR_MOVING_P,
       P_RANDOM_PREAD = NR_MOVING_P, P_SEEK_SET, P_SEEK_CUR, P_SEEK_END,
       NR_P };

int run_pattern(int fd, int pat, const struct expect *e, char *buf,
		size_t size, struct guard *g);

/* ---- churning targets (target.c) ------------------------------------------ */

/* The supervisor's end of a target. */
struct tslot {
	pid_t pid;
	int cmd, ack;	/* our ends of its command and answer pipes */
};

extern struct tslot ts[MAX_TARGETS];

pid_t fork_piped(int *cmd, int *ack);
void spawn_target(int slot, uint64_t seed, bool may_exit);
void forget_target(int slot);
void close_target_pipes(void);
/*
 * At the top of main(): when argv is `PROG --target ...` (how
 * spawn_target() starts a target), run that target and never return.
 */
void target_entry(int argc, char **argv);

/* ---- quiescent targets (quiet.c) ------------------------------------------- */

struct quiet {
	pid_t pid;
	int cmd;
	char ref[MAX_OUT];
	size_t reflen;
	char path[64];
	pthread_mutex_t lock;
};

void start_quiet(struct quiet *q);
bool reference(struct quiet *q, char *out, size_t *len);
/* The same for `PROG --quiet-target ...`, how start_quiet() starts one. */
void quiet_target_entry(int argc, char **argv);

/* ---- readers (reader.c) ------------------------------------------------------ */

void reader_main(int threads) __attribute__((noreturn));

#endif
