// SPDX-License-Identifier: GPL-2.0
/*
 * Workbench (guest/selftests/, not sent): the cases that the series'
 * smaps_rollup-seq.c does not carry.
 *
 * /proc/PID/smaps_rollup read in every way a reader can: whatever the read
 * sizes, offsets, seeks and fds, a reader gets the bytes of one large
 * read().  The 2017 implementation got this wrong: it summed across
 * seq_file restarts, so its totals depended on how the file was read.
 * Stock's single_open() file regenerates the whole output on each restart.
 * Where stock's seq_lseek() refuses something (SEEK_END, negative offsets),
 * these tests expect the same errors.
 *
 * The target is a settled process (see smaps_rollup.h) that does nothing,
 * so every read of it must give the same bytes, but for the value of
 * Referenced: reclaim may age a page, clearing its young bit, between two
 * reads.  Comparisons skip that value and nothing else.
 *
 * The replays a reader can cause are covered here: a read() that resumes
 * where the last one stopped, pread() and lseek() to any offset (seq_file
 * then walks again from the start and skips what lies below the offset),
 * and a re-read from 0.  seq_file has one more: when show() prints more
 * than its buffer holds, it throws the output away, doubles the buffer and
 * calls show() again for the same record.  No reader can make that happen
 * to smaps_rollup: seq_read_iter() allocates a PAGE_SIZE buffer before its
 * first show(), and the one record smaps_rollup prints is under 1 KB (an
 * 82-byte header on 64-bit and 22 field lines of at most 41 bytes even
 * with 20-digit values), so it always fits.  Whatever the read size, the
 * record is printed into that buffer once and copied out in pieces.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/uio.h>

#include "smaps_rollup_wb.h"

#define BUF	(64 << 10)

static int idle_step(int step, long arg, unsigned long *val)
{
	return 0;
}

/* @arg pages written, then every other one made read-only: @arg VMAs. */
static int many_vmas_step(int step, long arg, unsigned long *val)
{
	char *p;

	return sr_map_anon(&p, arg * getpagesize(), MAP_PRIVATE) ?:
	       sr_write_and_split(p, arg);
}

static const struct sr_workload workloads[] = {
	{ "idle", idle_step, SR_SETTLE_UNMAP_VDSO },
	{ "many_vmas", many_vmas_step, SR_SETTLE_UNMAP_VDSO },
	{}
};

SR_TARGET_MAIN(workloads)

/* A target's smaps_rollup, as one large read() of a fresh fd gave it. */
struct ref {
	char path[64];
	char data[BUF];
	ssize_t len;
	size_t referenced, referenced_end;	/* its value's bytes */
};

/*
 * Find the bytes of the Referenced value in @ref: from the end of its label
 * to the " kB", the padding included.
 */
static void ref_find_referenced(struct ref *ref)
{
	const char *label = "\nReferenced:", *p, *kb;

	ref->referenced = 0;
	ref->referenced_end = 0;
	p = memmem(ref->data, ref->len, label, strlen(label));
	if (!p)
		return;
	p += strlen(label);
	kb = memmem(p, ref->data + ref->len - p, " kB\n", 4);
	if (!kb)
		return;
	ref->referenced = p - ref->data;
	ref->referenced_end = kb - ref->data;
}

FIXTURE(seq) {
	struct sr_target t;
	struct ref ref;
	char buf[BUF];
};

static void start(struct __test_metadata *_metadata, struct sr_target *t,
		  struct ref *ref, const char *name, long arg)
{
	int fd;

	ASSERT_EQ(0, sr_target_start(t, name, arg));
	ASSERT_EQ(0, sr_target_step(t, 1, NULL));
	sr_path(ref->path, sizeof(ref->path), t->pid, "smaps_rollup");
	fd = open(ref->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ref->len = read(fd, ref->data, sizeof(ref->data));
	close(fd);
	ASSERT_LT(0, ref->len);
	ASSERT_EQ(0, sr_parse_rollup(ref->data, ref->len, &(struct sr_rollup){}))
		TH_LOG("%s", sr_error);
	ref_find_referenced(ref);
	ASSERT_LT(0, ref->referenced);
}

/*
 * Are the @n bytes read at offset @off those of one large read?  In the
 * Referenced value, any digits or spaces will do.
 */
static bool ref_matches(const struct ref *ref, size_t off, const char *data,
			size_t n)
{
	size_t want = off < (size_t)ref->len ? ref->len - off : 0, i;

	if (n > want)
		return false;
	for (i = 0; i < n; i++) {
		size_t o = off + i;

		if (o < ref->referenced || o >= ref->referenced_end) {
			if (data[i] != ref->data[o])
				return false;
		} else if (data[i] != ' ' && (data[i] < '0' || data[i] > '9')) {
			return false;
		}
	}
	return true;
}

static void expect_ref(struct __test_metadata *_metadata,
		       const struct ref *ref, size_t off, const char *data,
		       size_t n)
{
	EXPECT_TRUE(ref_matches(ref, off, data, n))
		TH_LOG("%zu bytes at offset %zu differ from one large read",
		       n, off);
}

/* Start an "idle" target (start()), then open its smaps_rollup: the fd. */
static int start_and_open(struct __test_metadata *_metadata,
			  struct sr_target *t, struct ref *ref)
{
	int fd;

	start(_metadata, t, ref, "idle", 0);
	fd = open(ref->path, O_RDONLY);
	ASSERT_LE(0, fd);
	return fd;
}

FIXTURE_SETUP(seq)
{
	self->t.pid = -1;
}

FIXTURE_TEARDOWN(seq)
{
}

TEST_F(seq, pread_leaves_file_offset_alone)
{
	ssize_t n;
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	ASSERT_EQ(10, read(fd, self->buf, 10));
	ASSERT_EQ(20, pread(fd, self->buf + 10, 20, 200));
	expect_ref(_metadata, &self->ref, 200, self->buf + 10, 20);
	EXPECT_EQ(10, lseek(fd, 0, SEEK_CUR));
	n = sr_read_fd(fd, self->buf + 10, sizeof(self->buf) - 10, 4096);
	close(fd);
	ASSERT_EQ(self->ref.len - 10, n);
	expect_ref(_metadata, &self->ref, 0, self->buf, self->ref.len);
}

TEST_F(seq, lseek_cur_moves_relative_to_offset)
{
	ssize_t n;
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	ASSERT_EQ(100, read(fd, self->buf, 100));
	ASSERT_EQ(100, lseek(fd, 0, SEEK_CUR));
	ASSERT_EQ(50, lseek(fd, -50, SEEK_CUR));
	n = sr_read_fd(fd, self->buf, sizeof(self->buf), 4096);
	ASSERT_EQ(self->ref.len - 50, n);
	expect_ref(_metadata, &self->ref, 50, self->buf, n);
	EXPECT_EQ(self->ref.len, lseek(fd, 0, SEEK_CUR));
	close(fd);
}

static void expect_lseek_einval(struct __test_metadata *_metadata, int fd,
				off_t off, int whence)
{
	errno = 0;
	EXPECT_EQ(-1, lseek(fd, off, whence))
		TH_LOG("lseek(%lld, %d)", (long long)off, whence);
	EXPECT_EQ(EINVAL, errno) TH_LOG("lseek(%lld, %d)", (long long)off, whence);
}

/* seq_lseek() knows SEEK_SET and SEEK_CUR only. */
TEST_F(seq, lseek_end_data_hole_fail_einval)
{
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	ASSERT_EQ(7, read(fd, self->buf, 7));
	expect_lseek_einval(_metadata, fd, 0, SEEK_END);
	expect_lseek_einval(_metadata, fd, 0, SEEK_DATA);
	expect_lseek_einval(_metadata, fd, 0, SEEK_HOLE);
	/* The offset is unchanged. */
	EXPECT_EQ(7, lseek(fd, 0, SEEK_CUR));
	ASSERT_EQ(5, read(fd, self->buf, 5));
	expect_ref(_metadata, &self->ref, 7, self->buf, 5);
	close(fd);
}

TEST_F(seq, lseek_to_negative_offset_fails_einval)
{
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	ASSERT_EQ(7, read(fd, self->buf, 7));
	expect_lseek_einval(_metadata, fd, -1, SEEK_SET);
	expect_lseek_einval(_metadata, fd, -8, SEEK_CUR);
	EXPECT_EQ(7, lseek(fd, 0, SEEK_CUR));
	close(fd);
}

TEST_F(seq, lseek_past_eof_succeeds_then_read_returns_0)
{
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	EXPECT_EQ(self->ref.len + 100, lseek(fd, self->ref.len + 100, SEEK_SET));
	EXPECT_EQ(0, read(fd, self->buf, sizeof(self->buf)));
	EXPECT_EQ(0, pread(fd, self->buf, sizeof(self->buf), self->ref.len));
	EXPECT_EQ(0, pread(fd, self->buf, sizeof(self->buf), self->ref.len + 4096));
	close(fd);
}

TEST_F(seq, interleaved_reads_of_two_fds_each_give_one_read)
{
	static char a[BUF], b[BUF];
	size_t la = 0, lb = 0;
	ssize_t na, nb;
	int fa, fb;

	fa = start_and_open(_metadata, &self->t, &self->ref);
	fb = open(self->ref.path, O_RDONLY);
	ASSERT_LE(0, fb);
	do {
		na = read(fa, a + la, 7);
		nb = read(fb, b + lb, 11);
		ASSERT_LE(0, na);
		ASSERT_LE(0, nb);
		la += na;
		lb += nb;
	} while (na || nb);
	close(fa);
	close(fb);
	ASSERT_EQ(self->ref.len, la);
	ASSERT_EQ(self->ref.len, lb);
	expect_ref(_metadata, &self->ref, 0, a, la);
	expect_ref(_metadata, &self->ref, 0, b, lb);
}

TEST_F(seq, read_after_eof_returns_0)
{
	int fd, i;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	ASSERT_EQ(self->ref.len, sr_read_fd(fd, self->buf, sizeof(self->buf), 64));
	for (i = 0; i < 3; i++)
		EXPECT_EQ(0, read(fd, self->buf, sizeof(self->buf)));
	EXPECT_EQ(self->ref.len, lseek(fd, 0, SEEK_CUR));
	close(fd);
}

TEST_F(seq, zero_length_read_returns_0_and_keeps_offset)
{
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	EXPECT_EQ(0, read(fd, self->buf, 0));
	ASSERT_EQ(5, read(fd, self->buf, 5));
	EXPECT_EQ(0, read(fd, self->buf, 0));
	EXPECT_EQ(5, lseek(fd, 0, SEEK_CUR));
	ASSERT_EQ(5, read(fd, self->buf + 5, 5));
	expect_ref(_metadata, &self->ref, 0, self->buf, 10);
	close(fd);
}

TEST_F(seq, readv_of_small_iovecs_gives_one_read)
{
	struct iovec iov[64];
	size_t total = 0;
	ssize_t n;
	int fd, i;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	for (i = 0; i < 64; i++) {
		iov[i].iov_base = self->buf + total;
		iov[i].iov_len = i + 1;
		total += i + 1;
	}
	ASSERT_LT(self->ref.len, total);
	n = readv(fd, iov, 64);
	close(fd);
	ASSERT_EQ(self->ref.len, n);
	expect_ref(_metadata, &self->ref, 0, self->buf, n);
}

/*
 * A target with thousands of VMAs takes longer to walk than to print; read
 * it in small pieces and at offsets going backwards, which makes seq_file
 * walk it again for nearly every pread().
 */
TEST_F_TIMEOUT(seq, big_target_in_small_pieces_gives_one_read, 120)
{
	static const size_t chunks[] = { 1, 7, 64, 1000 };
	ssize_t n, off;
	size_t i;
	int fd;

	start(_metadata, &self->t, &self->ref, "many_vmas", 5000);
	for (i = 0; i < ARRAY_SIZE(chunks); i++) {
		fd = open(self->ref.path, O_RDONLY);
		ASSERT_LE(0, fd);
		n = sr_read_fd(fd, self->buf, sizeof(self->buf), chunks[i]);
		close(fd);
		ASSERT_EQ(self->ref.len, n) TH_LOG("reads of %zu bytes", chunks[i]);
		expect_ref(_metadata, &self->ref, 0, self->buf, n);
	}
	fd = open(self->ref.path, O_RDONLY);
	ASSERT_LE(0, fd);
	for (off = self->ref.len - 1; off >= 0; off -= 37) {
		n = pread(fd, self->buf, 16, off);
		ASSERT_EQ(self->ref.len - off < 16 ? self->ref.len - off : 16, n);
		expect_ref(_metadata, &self->ref, off, self->buf, n);
	}
	close(fd);
}

TEST_HARNESS_MAIN
