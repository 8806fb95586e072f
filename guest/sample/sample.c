// SPDX-License-Identifier: GPL-2.0
/*
 * sample: a process with a known memory layout, for reading its
 * /proc/PID/smaps_rollup while it is quiescent.
 *
 *   sample [-f FILE]
 *
 * It maps and touches:
 *   16 MiB private anonymous memory, written;
 *    8 MiB of FILE (default: argv[0] with ".data" appended; scripts/build-sample
 *          makes it) mapped private read-only and read through; FILE
 *          is opened read-only, so it can live on the guest's read-only host
 *          root, and fsync'ed so its page cache is clean; it must not be on
 *          tmpfs (that would count as Shmem) nor be mapped by anyone else;
 *    4 MiB memfd (shmem) mapped shared, written;
 *    4 MiB MAP_SHARED|MAP_ANONYMOUS, written, and read by a forked child
 *          that keeps it mapped, so its Pss is halved.
 * The child is forked before the other regions exist, so it shares only the
 * start-up mappings and the shared region.
 *
 * To be deterministic across boots and kernels it disables THP for itself
 * (PR_SET_THP_DISABLE), re-executes itself once without address-space
 * randomisation (ADDR_NO_RANDOMIZE), so stack and heap pages line up, and
 * unmaps its [vdso], whose Pss depends on how many processes exist, and
 * maps all pages of its own file mappings (parent and child alike), since
 * fault-around maps a timing-dependent subset of them.
 *
 * It then prints "key: value" lines (pid, the sizes in kB) and "ready", and
 * blocks reading standard input until EOF; then it exits and the child,
 * which blocks on a pipe from the parent, sees EOF and exits too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define MiB (1024UL * 1024UL)
#define ANON_PRIVATE (16 * MiB)
#define FILE_PRIVATE (8 * MiB)
#define MEMFD_SHMEM (4 * MiB)
#define SHARED_ANON (4 * MiB)
#define TMPFS_MAGIC_ 0x01021994

static void die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	fputs("sample: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(e));
	exit(2);
}

static char *map(size_t len, int prot, int flags, int fd, const char *what)
{
	char *p = mmap(NULL, len, prot, flags, fd, 0);

	if (p == MAP_FAILED)
		die("mmap %s", what);
	return p;
}

static void write_pages(char *p, size_t len, long pg, int val)
{
	for (size_t off = 0; off < len; off += pg)
		p[off] = (char)val;
}

static unsigned long read_pages(const volatile char *p, size_t len, long pg)
{
	unsigned long sum = 0;

	for (size_t off = 0; off < len; off += pg)
		sum += (unsigned char)p[off];
	return sum;
}

static void file_mapping(const char *path, long pg)
{
	struct statfs sfs;
	struct stat st;
	char *p;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open %s", path);
	if (fstat(fd, &st) || st.st_size < (off_t)FILE_PRIVATE) {
		errno = EINVAL;
		die("%s: need a file of at least %lu bytes", path, FILE_PRIVATE);
	}
	if (fstatfs(fd, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC_) {
		errno = EINVAL;
		die("%s is on tmpfs, whose pages count as Shmem", path);
	}
	/* Clean page cache: dirty file pages would show as *_Dirty. */
	if (fsync(fd) && errno != EINVAL && errno != EROFS)
		fprintf(stderr, "sample: warning: fsync %s: %s\n", path, strerror(errno));
	p = map(FILE_PRIVATE, PROT_READ, MAP_PRIVATE, fd, path);
	close(fd);
	read_pages(p, FILE_PRIVATE, pg);
}

/*
 * Every process maps the vDSO's pages, so their Pss share changes whenever
 * some process starts or exits: unmap it (nothing here calls into it).
 */
static void unmap_vdso(void)
{
	unsigned long start, end;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		die("open /proc/self/maps");
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "[vdso]"))
			continue;
		if (sscanf(line, "%lx-%lx", &start, &end) != 2 ||
		    munmap((void *)start, end - start))
			die("unmap [vdso]");
	}
	fclose(f);
}

/*
 * Map every page of every file mapping (the binary's text and data).
 * Otherwise which of them are mapped depends on fault-around, which maps
 * only the pages that readahead happened to have brought in by then.
 */
static void populate_file_mappings(void)
{
	unsigned long start, end;
	char line[512], perms[8];
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		die("open /proc/self/maps");
	while (fgets(line, sizeof(line), f)) {
		if (!strchr(line, '/'))
			continue;
		if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3)
			die("cannot parse /proc/self/maps");
		if (perms[0] == 'r' &&
		    madvise((void *)start, end - start, MADV_POPULATE_READ))
			die("MADV_POPULATE_READ of %.*s", (int)strcspn(line, "\n"), line);
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	char path[4096];
	const char *file = path;
	int ready[2], hold[2];
	long pg = sysconf(_SC_PAGESIZE);
	char *shared, *anon, *mem, c;
	pid_t child;
	int opt, fd;

	snprintf(path, sizeof(path), "%s.data", argv[0]);
	while ((opt = getopt(argc, argv, "f:")) != -1) {
		switch (opt) {
		case 'f':
			file = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-f FILE]\n", argv[0]);
			return 2;
		}
	}

	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	{
		int pers = personality(0xffffffff);

		if (pers != -1 && !(pers & ADDR_NO_RANDOMIZE) &&
		    personality(pers | ADDR_NO_RANDOMIZE) != -1) {
			execv("/proc/self/exe", argv);
			/* Not fatal: carry on with randomisation. */
		}
	}

	unmap_vdso();
	populate_file_mappings();

	/* Shared anonymous region, shared with a child that reads it all. */
	shared = map(SHARED_ANON, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, "shared anonymous");
	write_pages(shared, SHARED_ANON, pg, 1);
	if (pipe2(ready, O_CLOEXEC) || pipe2(hold, O_CLOEXEC))
		die("pipe");
	fflush(NULL);
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		close(ready[0]);
		close(hold[1]);
		/*
		 * fork copies no PTEs of shared or file mappings: fault them
		 * all in, so the parent's file pages are all mapped twice.
		 */
		populate_file_mappings();
		read_pages(shared, SHARED_ANON, pg);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		/* Block until the parent exits (EOF). */
		while (read(hold[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	if (read(ready[0], &c, 1) != 1)
		die("child did not become ready");
	close(ready[0]);

	anon = map(ANON_PRIVATE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, "private anonymous");
	write_pages(anon, ANON_PRIVATE, pg, 1);

	fd = memfd_create("sample-memfd", MFD_CLOEXEC);
	if (fd < 0)
		die("memfd_create");
	if (ftruncate(fd, MEMFD_SHMEM))
		die("ftruncate memfd");
	mem = map(MEMFD_SHMEM, PROT_READ | PROT_WRITE, MAP_SHARED, fd, "memfd");
	close(fd);
	write_pages(mem, MEMFD_SHMEM, pg, 1);

	file_mapping(file, pg);

	printf("pid: %d\n", (int)getpid());
	printf("child_pid: %d\n", (int)child);
	printf("anon_private_kb: %lu\n", ANON_PRIVATE / 1024);
	printf("file_private_kb: %lu\n", FILE_PRIVATE / 1024);
	printf("memfd_shmem_kb: %lu\n", MEMFD_SHMEM / 1024);
	printf("shared_anon_kb: %lu\n", SHARED_ANON / 1024);
	printf("shared_anon_mappers: 2\n");
	printf("ready\n");
	fflush(stdout);

	/* Quiescent until standard input reaches EOF. */
	for (;;) {
		ssize_t n = read(0, &c, 1);

		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	close(hold[1]);
	waitpid(child, NULL, 0);
	return 0;
}
