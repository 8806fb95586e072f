// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/smaps_rollup read in pieces, at offsets and again: a reader
 * gets the bytes of one large read(), which seq_file replays for every
 * read below the current position.  The target does nothing, so every
 * read gives the same bytes but for Referenced, which reclaim may age.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "smaps_rollup.h"

#define BUF	(64 << 10)

/* A target that does nothing. */
static int idle_step(int step, long arg, unsigned long *val)
{
	return 0;
}

static const struct sr_workload workloads[] = {
	{ "idle", idle_step, SR_SETTLE_UNMAP_VDSO },
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

FIXTURE(seq) {
	struct sr_target t;
	struct ref ref;
	char buf[BUF];
};

/* Start an idle target, read its smaps_rollup into @ref. */
static void start(struct __test_metadata *_metadata, struct sr_target *t,
		  struct ref *ref)
{
	const char *p;
	int fd;

	ASSERT_EQ(0, sr_target_start(t, "idle", 0));
	sr_path(ref->path, sizeof(ref->path), t->pid, "smaps_rollup");
	fd = open(ref->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ref->len = read(fd, ref->data, sizeof(ref->data));
	close(fd);
	ASSERT_LT(0, ref->len);
	ASSERT_EQ(0, sr_parse_rollup(ref->data, ref->len, &(struct sr_rollup){}))
		TH_LOG("%s", sr_error);
	/* The bytes of the Referenced value, from its label to " kB". */
	p = memmem(ref->data, ref->len, "\nReferenced:", 12);
	ASSERT_NE(NULL, p);
	ref->referenced = p + 12 - ref->data;
	ref->referenced_end = (char *)memmem(p, ref->data + ref->len - p, " kB\n", 4) -
			      ref->data;
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

/* start(), then open the target's smaps_rollup: the fd. */
static int start_and_open(struct __test_metadata *_metadata,
			  struct sr_target *t, struct ref *ref)
{
	int fd;

	start(_metadata, t, ref);
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

/* 4,096 reads of the whole file: 3.4 s on a KASAN kernel in a TCG guest. */
TEST_F_TIMEOUT(seq, every_read_size_1_to_4096_gives_one_read, 60)
{
	size_t size;
	ssize_t n;
	int fd;

	start(_metadata, &self->t, &self->ref);
	for (size = 1; size <= 4096; size++) {
		fd = open(self->ref.path, O_RDONLY);
		ASSERT_LE(0, fd);
		n = sr_read_fd(fd, self->buf, sizeof(self->buf), size);
		close(fd);
		ASSERT_EQ(self->ref.len, n) TH_LOG("reads of %zu bytes", size);
		ASSERT_TRUE(ref_matches(&self->ref, 0, self->buf, n))
			TH_LOG("reads of %zu bytes differ from one large read",
			       size);
	}
}

TEST_F(seq, pread_at_every_offset_gives_one_read)
{
	ssize_t off, n, want, len;
	int fd, pass;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	/* Up, then down: going backwards makes seq_file start over. */
	for (pass = 0; pass < 2; pass++) {
		for (off = 0; off <= self->ref.len + 2; off++) {
			ssize_t o = pass ? self->ref.len + 2 - off : off;

			len = 1 + (o * 13) % 97;
			want = o < self->ref.len ? self->ref.len - o : 0;
			if (want > len)
				want = len;
			n = pread(fd, self->buf, len, o);
			ASSERT_EQ(want, n) TH_LOG("pread(%zd, %zd)", len, o);
			expect_ref(_metadata, &self->ref, o, self->buf, n);
		}
	}
	close(fd);
}

TEST_F(seq, lseek_set_to_every_offset_then_read_gives_the_rest)
{
	ssize_t off, n;
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	for (off = self->ref.len; off >= 0; off--) {
		ASSERT_EQ(off, lseek(fd, off, SEEK_SET));
		n = sr_read_fd(fd, self->buf, sizeof(self->buf), 4096);
		ASSERT_EQ(self->ref.len - off, n) TH_LOG("after lseek(%zd)", off);
		expect_ref(_metadata, &self->ref, off, self->buf, n);
	}
	close(fd);
}

TEST_F(seq, reread_after_lseek_0_gives_what_a_fresh_open_gives)
{
	ssize_t n;
	int fd;

	fd = start_and_open(_metadata, &self->t, &self->ref);
	ASSERT_EQ(self->ref.len, sr_read_fd(fd, self->buf, sizeof(self->buf), 13));
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	n = sr_read_fd(fd, self->buf, sizeof(self->buf), 17);
	ASSERT_EQ(self->ref.len, n);
	expect_ref(_metadata, &self->ref, 0, self->buf, n);
	/* A partial read, then back to the start. */
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	ASSERT_EQ(300, read(fd, self->buf, 300));
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	n = sr_read_fd(fd, self->buf, sizeof(self->buf), 4096);
	ASSERT_EQ(self->ref.len, n);
	expect_ref(_metadata, &self->ref, 0, self->buf, n);
	close(fd);
}

/*
 * The first read() of 64 bytes produces the record; then the target exits,
 * and is reaped if @reap.  The reads that follow must give the rest of it,
 * then EOF: stock keeps the record in seq_file's buffer, and asked for what
 * comes after it, has nothing more to show and needs no task for that.
 * Nothing a reader got must be taken back with ESRCH.
 */
static void expect_rest_after_exit(struct __test_metadata *_metadata,
				   struct sr_target *t, struct ref *ref,
				   char *buf, bool reap)
{
	siginfo_t info;
	size_t len;
	ssize_t n;
	int fd, err;

	start(_metadata, t, ref);
	fd = open(ref->path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(64, read(fd, buf, 64));
	/* EOF on its command pipe makes the target exit. */
	close(t->cmd);
	if (reap) {
		ASSERT_EQ(t->pid, waitpid(t->pid, NULL, 0));
		t->pid = -1;
	} else {
		ASSERT_EQ(0, waitid(P_PID, t->pid, &info, WEXITED | WNOWAIT));
	}
	for (len = 64; len + 64 <= BUF; len += n) {
		n = read(fd, buf + len, 64);
		err = errno;
		ASSERT_LE(0, n)
			TH_LOG("read() at offset %zu, after the target exited: %s",
			       len, strerror(err));
		if (!n)
			break;
	}
	close(fd);
	ASSERT_EQ(ref->len, (ssize_t)len);
	expect_ref(_metadata, ref, 0, buf, len);
}

TEST_F(seq, small_reads_after_target_exits_give_the_rest_then_eof)
{
	expect_rest_after_exit(_metadata, &self->t, &self->ref, self->buf,
			       false);
}

TEST_F(seq, small_reads_after_target_is_reaped_give_the_rest_then_eof)
{
	expect_rest_after_exit(_metadata, &self->t, &self->ref, self->buf,
			       true);
}

TEST_HARNESS_MAIN
