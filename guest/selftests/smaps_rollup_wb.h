/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The workbench's smaps_rollup selftests (guest/selftests/, never sent):
 * the series' helpers (tools/testing/selftests/proc/smaps_rollup.h) and
 * those that only the workbench's programs use.  scripts/lib.sh builds
 * these programs beside the series' selftests, with the same include
 * paths (the exported tools/testing/selftests/proc first).
 */
#ifndef SMAPS_ROLLUP_WB_H
#define SMAPS_ROLLUP_WB_H

#include <linux/magic.h>
#include <sys/vfs.h>

#include "smaps_rollup.h"

static inline int sr_write_long(const char *path, long val)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld\n", val);
	return sr_write_str(path, buf);
}

/* The value of @label in the smaps entry of the VMA starting at @addr. */
static inline long long sr_smaps_vma_field(pid_t pid, unsigned long addr,
					   const char *label)
{
	static char buf[1 << 20];
	unsigned long start, end;
	char path[64], *line, *nl, *stop;
	bool in = false;
	ssize_t n;

	sr_path(path, sizeof(path), pid, "smaps");
	n = sr_read_path(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	stop = buf + n;
	for (line = buf; (nl = memchr(line, '\n', stop - line)); line = nl + 1) {
		size_t l = strlen(label);
		const char *q = line + l;

		if (sr_is_vma_header(line, nl, &start, &end)) {
			in = start == addr;
			continue;
		}
		if (!in || (size_t)(nl - line) <= l || memcmp(line, label, l))
			continue;
		while (q < nl && *q == ' ')
			q++;
		return sr_parse_number(&q, nl, 10);
	}
	return -ENOENT;
}

struct sr_vma {
	unsigned long start, end;
	char perms[5];
	unsigned long inode;
	const char *name;	/* "" for anonymous */
};

/* A cursor over /proc/self/maps, read into a static buffer: no malloc. */
struct sr_maps {
	char *pos, *end;
};

static inline int sr_maps_read(struct sr_maps *m)
{
	static char maps[1 << 16];
	ssize_t n;

	n = sr_read_path("/proc/self/maps", maps, sizeof(maps) - 1);
	m->pos = maps;
	m->end = maps + (n < 0 ? 0 : n);
	return n < 0 ? n : 0;
}

static inline bool sr_maps_next(struct sr_maps *m, struct sr_vma *v)
{
	char *line, *nl;
	int name;

	while (m->pos < m->end && (nl = memchr(m->pos, '\n', m->end - m->pos))) {
		line = m->pos;
		m->pos = nl + 1;
		*nl = 0;
		name = 0;
		memset(v, 0, sizeof(*v));
		if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %lu %n", &v->start,
			   &v->end, v->perms, &v->inode, &name) < 4)
			continue;
		v->name = name ? line + name : "";
		return true;
	}
	return false;
}

/* Write the @pages pages at @p, then make every other one read-only. */
static inline int sr_write_and_split(char *p, long pages)
{
	size_t page = getpagesize(), i;

	sr_touch(p, pages * page, 1);
	for (i = 1; i < (size_t)pages; i += 2)
		if (mprotect(p + i * page, page, PROT_READ))
			return -errno;
	return 0;
}

/* Write a pattern (non-zero, so no zero-page tricks) of @size bytes. */
static inline int sr_fill_file(int fd, size_t size)
{
	char buf[4096];
	size_t done;

	memset(buf, 0x33, sizeof(buf));
	for (done = 0; done < size; done += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			return -1;
	fsync(fd);
	return 0;
}

/*
 * An unlinked file of @size bytes in @dir, if @dir is (@tmpfs) or is not
 * (!@tmpfs) a tmpfs.  A tmpfs file is left sparse, others are written.
 */
static inline int sr_file_in(const char *dir, bool tmpfs, size_t size)
{
	char path[PATH_MAX];
	struct statfs sfs;
	bool is_tmpfs;
	int fd;

	if (!dir || statfs(dir, &sfs))
		return -1;
	is_tmpfs = sfs.f_type == TMPFS_MAGIC;
	if (is_tmpfs != tmpfs)
		return -1;
	snprintf(path, sizeof(path), "%s/smaps_rollup.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	if (tmpfs ? ftruncate(fd, size) : sr_fill_file(fd, size)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A file of @size bytes that only we map: on tmpfs if @tmpfs, else page
 * cache that is not shmem (a disk file system, or ramfs).  Looks in the
 * usual places, then (as root) mounts a private tmpfs or ramfs.  Returns
 * an fd (not close-on-exec) or -1.
 */
static inline int sr_open_private_file(bool tmpfs, size_t size,
				       const char **where)
{
	static const char *const dirs[] = { "/dev/shm", "/tmp", "/var/tmp" };
	char dir[] = "/tmp/smaps_rollup.XXXXXX";
	size_t i;
	int fd;

	*where = getenv("TMPDIR");
	fd = sr_file_in(*where, tmpfs, size);
	for (i = 0; fd < 0 && i < ARRAY_SIZE(dirs); i++) {
		*where = dirs[i];
		fd = sr_file_in(*where, tmpfs, size);
	}
	if (fd >= 0)
		return fd;
	/* The mount lives in this test's own mount namespace. */
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -1;
	if (!mkdtemp(dir))
		return -1;
	*where = tmpfs ? "a new tmpfs mount" : "a new ramfs mount";
	fd = -1;
	if (!mount("none", dir, tmpfs ? "tmpfs" : "ramfs", 0, NULL)) {
		fd = sr_file_in(dir, tmpfs, size);
		umount2(dir, MNT_DETACH);
	}
	rmdir(dir);
	return fd;
}

/* A target step that failed because mlock() was refused. */
static inline bool sr_mlock_refused(int ret)
{
	return ret == -EPERM || ret == -ENOMEM || ret == -EAGAIN;
}

/*
 * Start workload @name with @arg and run its step 1, read @before, run its
 * step 2, and read @after.
 */
static inline void sr_assert_two_steps(struct __test_metadata *_metadata,
				       struct sr_target *t, const char *name,
				       long arg, struct sr_rollup *before,
				       struct sr_rollup *after)
{
	sr_assert_start(_metadata, t, name, arg);
	sr_assert_step(_metadata, t, 1, NULL);
	sr_assert_read(_metadata, t->pid, before);
	sr_assert_step(_metadata, t, 2, NULL);
	sr_assert_read(_metadata, t->pid, after);
}

#endif /* SMAPS_ROLLUP_WB_H */
