// SPDX-License-Identifier: GPL-2.0
/*
 * The helpers of both programs: shared state and counters, options,
 * messages and violations, the RNG, and reading smaps_rollup in every
 * pattern with the checks of each pass.
 */
#include <getopt.h>
#include <stdarg.h>
#include <sys/uio.h>
#include <time.h>

#include "stress.h"

struct shared *sh;
int shm_fd = -1;
bool quiet;
const char *self_exe = "/proc/self/exe";
unsigned long long sys_cap_kb;
bool hugetlb_ok;
bool pid2_is_kthread;

/* ---- the checks of one pass ------------------------------------------------ */

/*
 * What holds for every single pass, however the target changes meanwhile
 * (each page is added to all of its fields at once), and the bounds.
 */
static int check_rollup(const struct sr_rollup *r, unsigned long long cap_kb,
			char *why, size_t wsz)
{
	int f;

	for (f = 0; f < SR_NR_FIELDS; f++)
		if (r->kb[f] > cap_kb) {
			snprintf(why, wsz, "%s %llu kB is above the bound %llu kB",
				 sr_label[f], r->kb[f], cap_kb);
			return -1;
		}
	if (sr_rollup_consistent(r)) {
		snprintf(why, wsz, "%s", sr_error);
		return -1;
	}
	if (r->end > (1UL << 57)) {
		snprintf(why, wsz, "end %lx beyond the user address space", r->end);
		return -1;
	}
	return 0;
}

/* Parse a whole smaps_rollup (stock's format, byte for byte) and check it. */
int parse_check_rollup(const char *buf, size_t len, struct sr_rollup *r,
		       unsigned long long cap_kb, char *why, size_t wsz)
{
	if (sr_parse_rollup(buf, len, r)) {
		snprintf(why, wsz, "%s", sr_error);
		return -1;
	}
	return check_rollup(r, cap_kb, why, wsz);
}

/* ---- shared state ------------------------------------------------------------ */

static const char *const cname[NR_C] = {
	"opens", "reads", "read_calls", "seeks", "bytes", "shared_fd_calls",
	"operations", "mmap", "munmap", "mremap", "mprotect", "mlock",
	"madvise", "pageout", "swapin", "fork", "exec", "exit", "smaps_reads",
	"checkpoints", "checked_targets", "unstable_targets", "compares",
	"gone", "kthread_esrch", "zombie_esrch", "efault", "enomem",
	"enoent_injected",
	"nth_injected", "fi_scripts", "fi_retries", "fi_gave_up",
	"fi_reference_moved", "fi_failed_open", "fi_failed_read",
	"fi_failed_lseek", "hammer_ops", "contended_reads", "violations",
};

void map_shared(int fd)
{
	shm_fd = fd;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (sh == MAP_FAILED)
		die("mmap shared fd %d", fd);
}

void setup_shared(void)
{
	int fd = memfd_create("smaps_rollup_stress-shared", 0);

	if (fd < 0 || ftruncate(fd, sizeof(struct shared)))
		die("memfd");
	map_shared(fd);
}

void system_facts(void)
{
	char buf[8192], *p;
	unsigned long long total = 0, swap = 0, huge = 0, hsz = 0;
	ssize_t n;

	n = read_path("/proc/meminfo", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		if ((p = strstr(buf, "MemTotal:")))
			total = strtoull(p + 9, NULL, 10);
		if ((p = strstr(buf, "SwapTotal:")))
			swap = strtoull(p + 10, NULL, 10);
		if ((p = strstr(buf, "HugePages_Total:")))
			huge = strtoull(p + 16, NULL, 10);
		if ((p = strstr(buf, "Hugepagesize:")))
			hsz = strtoull(p + 13, NULL, 10);
	}
	sys_cap_kb = total + swap + huge * hsz;
	hugetlb_ok = huge > 0;
	/* A kernel thread has an empty maps file; kthreadd is pid 2. */
	n = read_path("/proc/2/maps", buf, sizeof(buf));
	pid2_is_kthread = n == 0;
}

/* The line after the summary: every counter. */
void print_counters(const char *mode, double secs)
{
	char line[4096];
	int n;

	n = snprintf(line, sizeof(line), "smaps_rollup_stress: %s counters: seconds %.1f", mode, secs);
	for (int c = 0; c < NR_C; c++)
		n += snprintf(line + n, sizeof(line) - n, ", %s %" PRIu64,
			      cname[c], counter(c));
	printf("%s\n", line);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: smaps_rollup_stress [-t SECONDS] [-n TARGETS] [-p READER_PROCS]\n"
		"                           [-j THREADS] [-c CHECKPOINT_SECONDS] [-s SEED] [-q]\n"
		"       " FAULTINJECT_PROG " [-t SECONDS] [-j THREADS] [-s SEED] [-q]\n"
		"       smaps_rollup_stress --faultinject ARGS runs " FAULTINJECT_PROG " ARGS.\n"
		"SECONDS defaults to $SMAPS_STRESS_SECONDS or 120.\n");
	exit(2);
}

/*
 * Parse the options into @o (which holds the defaults), then set up what
 * every run needs: the shared state and the facts about the system.
 */
void parse_options(int argc, char **argv, struct options *o)
{
	const char *env = getenv("SMAPS_STRESS_SECONDS");
	int opt;

	if (env && *env)
		o->seconds = atof(env);
	while ((opt = getopt(argc, argv, "t:n:p:j:c:s:q")) != -1) {
		switch (opt) {
		case 't': o->seconds = atof(optarg); break;
		case 'n': o->nt = atoi(optarg); break;
		case 'p': o->np = atoi(optarg); break;
		case 'j': o->nj = atoi(optarg); break;
		case 'c': o->cpi = atof(optarg); break;
		case 's': o->seed = strtoull(optarg, NULL, 0); break;
		case 'q': quiet = true; break;
		default: usage();
		}
	}
	if (optind != argc || o->seconds <= 0 || o->nt < 1 || o->nt > MAX_TARGETS ||
	    o->np < 1 || o->np > 64 || o->nj < 1 || o->nj > 32 || o->cpi <= 0)
		usage();
	if (!o->seed)
		o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup_shared();
	system_facts();
}

/* ---- messages -------------------------------------------------------------- */

/*
 * The program's result: one summary line on stdout and, when the guest's
 * plan runner gives it a result file (RESULT_FILE, guest/run-plan), in
 * that file too, which is what the host reads.
 */
void summary(const char *fmt, ...)
{
	const char *path = getenv("RESULT_FILE");
	char buf[4096];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fputs(buf, stdout);
	fflush(stdout);
	if (!path || !*path)
		return;
	f = fopen(path, "a");
	if (!f) {
		msg("cannot write the result file %s: %s", path, strerror(errno));
		return;
	}
	fputs(buf, f);
	fclose(f);
}

void msg(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(2, buf, n) < 0)
		return;
}

__thread bool defer_mode;
__thread int deferred;
__thread char deferred_msg[3500];

void violation(const char *fmt, ...)
{
	char buf[3500];
	va_list ap;

	if (defer_mode) {
		if (!deferred++) {
			va_start(ap, fmt);
			vsnprintf(deferred_msg, sizeof(deferred_msg), fmt, ap);
			va_end(ap);
		}
		return;
	}
	count(C_VIOLATIONS, 1);
	if (__atomic_fetch_add(&sh->printed, 1, __ATOMIC_RELAXED) >= 40)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	msg("VIOLATION (pid %d): %s", (int)getpid(), buf);
}

void die(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	msg("smaps_rollup_stress: fatal: %s (errno %d: %s)", buf, errno,
	    strerror(errno));
	exit(2);
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the RNG ----------------------------------------------------------------- */

static __thread uint64_t rs = 88172645463325252ULL;

uint64_t rnd64(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

unsigned long rnd(unsigned long n)
{
	return n ? rnd64() % n : 0;
}

void seed_rng(uint64_t s)
{
	rs = s * 0x9e3779b97f4a7c15ULL + 1;
	if (!rs)
		rs = 1;
	rnd64();
}

/* ---- reading ------------------------------------------------------------------ */

/* One byte from @fd, waiting at most @ms: the byte, 0 on EOF, -1 on timeout. */
int read_byte(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;
	int r;

	for (;;) {
		r = poll(&pfd, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		return r == 1 ? (unsigned char)c : 0;
	}
}

/* One readv() of 7, 1, 333, 64 and 4096 bytes, as far as @left goes. */
static ssize_t readv_some(int fd, char *buf, size_t left)
{
	static const size_t sz[] = { 7, 1, 333, 64, 4096 };
	struct iovec iov[5];
	size_t off = 0;
	int n;

	for (n = 0; n < 5 && off < left; n++) {
		iov[n].iov_base = buf + off;
		iov[n].iov_len = sz[n] < left - off ? sz[n] : left - off;
		off += iov[n].iov_len;
	}
	return readv(fd, iov, n);
}

enum how { BY_READ, BY_PREAD, BY_READV };

/*
 * Read to EOF in read()s of at most @chunk bytes, in pread()s at the
 * offsets those read()s would have, or in readv_some()s: the length, or
 * -errno.  A full buffer ends it too when @upto, else it is -EFBIG.
 */
static ssize_t read_loop(int fd, char *buf, size_t size, size_t chunk,
			 enum how how, bool upto)
{
	size_t len = 0;

	for (;;) {
		size_t want = size - len < chunk ? size - len : chunk;
		ssize_t n;

		if (!want)
			return upto ? (ssize_t)len : -EFBIG;
		if (how == BY_READV)
			n = readv_some(fd, buf + len, want);
		else if (how == BY_PREAD)
			n = pread(fd, buf + len, want, len);
		else
			n = read(fd, buf + len, want);
		count(C_READ_CALLS, 1);
		if (n < 0)
			return -errno;
		if (!n)
			return len;
		len += n;
	}
}

ssize_t read_to_eof(int fd, char *buf, size_t size, size_t chunk)
{
	return read_loop(fd, buf, size, chunk, BY_READ, false);
}

ssize_t pread_to_eof(int fd, char *buf, size_t size, size_t chunk)
{
	return read_loop(fd, buf, size, chunk, BY_PREAD, false);
}

static ssize_t readv_to_eof(int fd, char *buf, size_t size)
{
	return read_loop(fd, buf, size, size, BY_READV, false);
}

/* Read @want bytes (fewer at EOF) in one or more read()s: the count or -errno. */
ssize_t read_n(int fd, char *buf, size_t want)
{
	return read_loop(fd, buf, want, want, BY_READ, true);
}

ssize_t read_path(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read_to_eof(fd, buf, size, size);
	close(fd);
	return n;
}

int sum_smaps(pid_t pid, struct sr_smaps *s)
{
	count(C_SMAPS, 1);
	return sr_sum_smaps(pid, s);
}

static const size_t chunks[] = { 1, 7, 64, 333, 4096, 65536 };

size_t pick_chunk(void)
{
	if (!rnd(5))
		return 1 + rnd(2000);
	return chunks[rnd(sizeof(chunks) / sizeof(chunks[0]))];
}

/* Check one complete pass; false (and a violation) when it is wrong. */
bool check_pass(const struct expect *e, const char *buf, size_t len,
		const char *how)
{
	struct sr_rollup r;
	char why[512];

	count(C_READS, 1);
	count(C_BYTES, len);
	if (e->ref) {
		if (len == e->reflen && !memcmp(buf, e->ref, len))
			return true;
		violation("%s: %s gave %zu bytes that differ from the %zu of the reference:\n"
			  "---- got ----\n%.*s---- reference ----\n%.*s----",
			  e->what, how, len, e->reflen, (int)len, buf,
			  (int)e->reflen, e->ref);
		return false;
	}
	if (!parse_check_rollup(buf, len, &r, e->cap_kb, why, sizeof(why)))
		return true;
	violation("%s: %s: %s:\n%.*s", e->what, how, why, (int)len, buf);
	return false;
}

void guard_init(struct guard *g)
{
	char *p = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap guard");
	memset(p, 0, PS);
	if (mprotect(p + PS, PS, PROT_NONE))
		die("mprotect guard");
	g->end = p + PS;
}

/* ---- the patterns ------------------------------------------------------------- */

/*
 * 10 bytes fit before the inaccessible page: a short read, or EFAULT if
 * the copy gave up before them.  Then no byte fits: EFAULT, and the bytes
 * stay for the next read.
 */
static int pattern_guard(int fd, const struct expect *e, char *buf,
			 size_t size, struct guard *g, size_t c)
{
	ssize_t n, m;

	n = read(fd, g->end - 10, 100);
	count(C_READ_CALLS, 1);
	if (n < 0 && errno != EFAULT)
		return -errno;
	if (n < 0) {
		count(C_EFAULT, 1);
		n = 0;
	}
	if (n > 10) {
		violation("%s: read() of 100 bytes into 10 accessible ones returned %zd",
			  e->what, n);
		return 0;
	}
	memcpy(buf, g->end - 10, n);
	m = read(fd, g->end, 100);
	count(C_READ_CALLS, 1);
	if (m >= 0) {
		violation("%s: read() into an inaccessible buffer returned %zd",
			  e->what, m);
		return 0;
	}
	if (errno != EFAULT)
		return -errno;
	count(C_EFAULT, 1);
	m = read_to_eof(fd, buf + n, size - n, c);
	if (m < 0)
		return m;
	check_pass(e, buf, n + m, "read() partly into an inaccessible page, EFAULT, read() on");
	return 0;
}

/* Exact only: these mix passes when the target moves. */
static int pattern_exact(int fd, int pat, const struct expect *e, char *buf,
			 size_t size, size_t c)
{
	ssize_t n;
	off_t o;
	size_t k;

	switch (pat) {
	case P_RANDOM_PREAD:
		for (int i = 0; i < 8; i++) {
			size_t off = rnd(e->reflen + 20), len = 1 + rnd(600);
			size_t want = off >= e->reflen ? 0 :
				      (len < e->reflen - off ? len : e->reflen - off);

			n = pread(fd, buf, len, off);
			count(C_READ_CALLS, 1);
			if (n < 0)
				return -errno;
			count(C_READS, 1);
			if ((size_t)n != want || memcmp(buf, e->ref + off, n))
				violation("%s: pread(%zu bytes at %zu) returned %zd bytes '%.*s', expected %zu '%.*s'",
					  e->what, len, off, n, (int)n, buf, want,
					  (int)want, e->ref + off);
		}
		return 0;
	case P_SEEK_SET:
	case P_SEEK_CUR:
		k = rnd(e->reflen + 10);
		if (pat == P_SEEK_SET) {
			o = lseek(fd, k, SEEK_SET);
		} else {
			size_t first = rnd(k + 1);

			n = read_n(fd, buf, first);
			if (n < 0)
				return n;
			k = n + (k - first);
			o = lseek(fd, k - n, SEEK_CUR);
		}
		count(C_SEEKS, 1);
		if (o < 0)
			return -errno;
		if ((size_t)o != k)
			violation("%s: lseek to %zu returned %lld", e->what, k,
				  (long long)o);
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		count(C_READS, 1);
		{
			size_t want = k >= e->reflen ? 0 : e->reflen - k;

			if ((size_t)n != want || memcmp(buf, e->ref + k, n))
				violation("%s: after lseek(%zu, %s), read() in %zu-byte chunks gave %zd bytes '%.*s', expected '%.*s'",
					  e->what, k, pat == P_SEEK_SET ? "SEEK_SET" : "SEEK_CUR",
					  c, n, (int)n, buf, (int)want, e->ref + k);
		}
		return 0;
	case P_SEEK_END:
		o = lseek(fd, 0, SEEK_END);
		count(C_SEEKS, 1);
		if (o >= 0 || errno != EINVAL)
			violation("%s: lseek(0, SEEK_END) returned %lld (errno %d), stock gives EINVAL",
				  e->what, (long long)o, o < 0 ? errno : 0);
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "lseek(SEEK_END), then read()");
		return 0;
	}
	return 0;
}

/*
 * Run pattern @pat on one open fd: 0, or -errno for an error a reader may
 * see (the caller decides which are clean).  With an exact reference, the
 * patterns that mix passes are checked too.
 */
int run_pattern(int fd, int pat, const struct expect *e, char *buf,
		size_t size, struct guard *g)
{
	char how[128];
	ssize_t n, m;
	off_t o;
	size_t c = pick_chunk(), k;

	switch (pat) {
	case P_CHUNK:
	case P_PREAD:
		n = read_loop(fd, buf, size, c, pat == P_PREAD ? BY_PREAD : BY_READ,
			      false);
		if (n < 0)
			return n;
		snprintf(how, sizeof(how), "%s() in %zu-byte chunks",
			 pat == P_PREAD ? "pread" : "read", c);
		check_pass(e, buf, n, how);
		if (pat == P_PREAD)
			return 0;
		m = read(fd, buf, size);
		count(C_READ_CALLS, 1);
		if (m < 0)
			return -errno;
		if (m)
			violation("%s: read() after EOF returned %zd bytes", e->what, m);
		return 0;
	case P_SEEK0:
		k = rnd(300);
		n = read_n(fd, buf, k);
		if (n < 0)
			return n;
		o = lseek(fd, 0, SEEK_SET);
		count(C_SEEKS, 1);
		if (o < 0)
			return -errno;
		if (o != 0)
			violation("%s: lseek(0, SEEK_SET) returned %lld", e->what,
				  (long long)o);
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		snprintf(how, sizeof(how), "read() of %zu bytes, lseek(0), read() in %zu-byte chunks", k, c);
		check_pass(e, buf, n, how);
		return 0;
	case P_REREAD:
		n = read_to_eof(fd, buf, size, c);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "read() to EOF");
		o = lseek(fd, 0, SEEK_CUR);
		count(C_SEEKS, 1);
		if (o < 0)
			return -errno;
		if (o != n)
			violation("%s: lseek(0, SEEK_CUR) at EOF returned %lld, read %zd bytes",
				  e->what, (long long)o, n);
		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		count(C_SEEKS, 1);
		n = read_to_eof(fd, buf, size, pick_chunk());
		if (n < 0)
			return n;
		check_pass(e, buf, n, "read() to EOF, lseek(0), read() to EOF");
		return 0;
	case P_READV:
		n = readv_to_eof(fd, buf, size);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "readv() of 7, 1, 333, 64, 4096 bytes");
		return 0;
	case P_GUARD:
		return pattern_guard(fd, e, buf, size, g, c);
	case P_PREAD0:
		/* pread(0) whatever the file position; then read() goes on. */
		k = rnd(200);
		n = read_n(fd, buf, k);
		if (n < 0)
			return n;
		n = pread_to_eof(fd, buf, size, 4096);
		if (n < 0)
			return n;
		check_pass(e, buf, n, "pread() at 0 with the file position elsewhere");
		return 0;
	case P_OPEN_ONLY:
		return 0;
	case P_PARTIAL:
		n = read(fd, buf, 1 + rnd(100));
		count(C_READ_CALLS, 1);
		return n < 0 ? -errno : 0;
	}
	return pattern_exact(fd, pat, e, buf, size, c);
}
