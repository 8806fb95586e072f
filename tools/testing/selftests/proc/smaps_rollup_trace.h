/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Seeing where a read of smaps_rollup stopped and restarted, with tracefs.
 *
 * smaps_rollup counts in short batches: each takes mmap_lock for reading,
 * counts about one page table's entries (the part of a large VMA up to the
 * end of a page table, or a run of small VMAs), lets go of the lock, and
 * the next one resumes at the address the last one counted up to, with
 * whatever VMA spans it then.  So a read stops within every VMA larger
 * than a page table, many times.  Each batch end fires the trace event
 * proc/smaps_rollup_walk_stop (CONFIG_TRACING) in the reading task, with
 * fields mm, addr (where the walk resumes) and lock: "none" when the batch
 * let go of mmap_lock, "mmap_lock" when the walk keeps it across batches.
 *
 * A pass that sees that page tables were moved in the mm while it read
 * (mremap() moving pages, UFFDIO_MOVE) throws its counts away and starts
 * again from address 0: that fires proc/smaps_rollup_walk_restart, with
 * fields mm, addr (where the pass noticed) and final, 1 when the new pass
 * keeps mmap_lock from start to end (the last try), so that nothing can
 * move under it.
 *
 * Whether a read() did either is invisible in its output.  The events go
 * to a tracefs instance of our own, filtered on the reading task, so that
 * nothing else that traces is disturbed.  The restart event is optional: a
 * kernel may have the stop event without it.
 */
#ifndef SELFTESTS_PROC_SMAPS_ROLLUP_TRACE_H
#define SELFTESTS_PROC_SMAPS_ROLLUP_TRACE_H

#include "smaps_rollup.h"

#define SR_TRACEFS		"/sys/kernel/tracing"
#define SR_STOP_EVENT		"events/proc/smaps_rollup_walk_stop"
#define SR_RESTART_EVENT	"events/proc/smaps_rollup_walk_restart"
#define SR_STOP_MARK		"smaps_rollup_walk_stop: "
#define SR_RESTART_MARK		"smaps_rollup_walk_restart: "

struct sr_stop_trace {
	char dir[96];		/* the tracefs instance, "" if none */
	int pipe;		/* its trace_pipe, non-blocking; -1 if none */
	unsigned long lo, hi;	/* count stops at [lo, hi) only; hi 0: all */
	bool restarts;		/* the restart event is enabled too */
	size_t len;		/* bytes of a line carried over in buf */
	char buf[16384];
};

/* What the walk held across a stop, as the event's field lock says. */
enum sr_held { SR_HELD_MMAP_LOCK, SR_HELD_NONE, SR_NR_HELD };

static const char *const sr_held_names[SR_NR_HELD] = {
	[SR_HELD_MMAP_LOCK] = "mmap_lock",
	[SR_HELD_NONE] = "none",
};

/* What sr_stop_trace_count() saw since its last call. */
struct sr_trace_counts {
	int stops;			/* at [lo, hi) */
	int held[SR_NR_HELD];		/* of those, by what the walk held */
	int restarts;			/* passes restarted, anywhere */
	int final_restarts;		/* of those, into a final pass */
};

static inline void sr_stop_trace_init(struct sr_stop_trace *st)
{
	st->dir[0] = 0;
	st->pipe = -1;
	st->lo = 0;
	st->hi = 0;
	st->restarts = false;
	st->len = 0;
}

/*
 * Remove the instance; a process other than the one that started the
 * trace (a fixture's parent) may, once that one has exited.
 */
static inline void sr_stop_trace_remove(struct sr_stop_trace *st)
{
	if (st->dir[0])
		rmdir(st->dir);
	st->dir[0] = 0;
}

/* Stop recording and remove the instance. */
static inline void sr_stop_trace_stop(struct sr_stop_trace *st)
{
	if (st->pipe >= 0)
		close(st->pipe);
	st->pipe = -1;
	sr_stop_trace_remove(st);
}

/* The tracefs instance for task @tid, created: 0, or -1 with the reason. */
static inline int sr_stop_trace_instance(struct sr_stop_trace *st, pid_t tid,
					 char *why, size_t size)
{
	struct stat st_buf;

	if (stat(SR_TRACEFS "/instances", &st_buf) &&
	    mount("tracefs", SR_TRACEFS, "tracefs", 0, NULL)) {
		snprintf(why, size, "no tracefs at %s, mount: %s (CONFIG_TRACING? root?)",
			 SR_TRACEFS, strerror(errno));
		return -1;
	}
	snprintf(st->dir, sizeof(st->dir),
		 SR_TRACEFS "/instances/smaps_rollup-%d", tid);
	if (mkdir(st->dir, 0700)) {
		snprintf(why, size, "cannot create tracefs instance %s: %s",
			 st->dir, strerror(errno));
		st->dir[0] = 0;
		return -1;
	}
	return 0;
}

/* Filter @event of the instance on task @tid and enable it: 0 or -errno. */
static inline int sr_stop_trace_enable(struct sr_stop_trace *st,
				       const char *event, pid_t tid)
{
	char path[192], filter[64];
	int ret;

	snprintf(path, sizeof(path), "%s/%s/filter", st->dir, event);
	snprintf(filter, sizeof(filter), "common_pid == %d", tid);
	ret = sr_write_str(path, filter);
	snprintf(path, sizeof(path), "%s/%s/enable", st->dir, event);
	return ret ?: sr_write_str(path, "1");
}

/*
 * Start recording the stops, and the restarts if the kernel has the event,
 * of the reads by task @tid.  Returns 0, or -1, with nothing left behind,
 * and the reason (tracefs or the stop event missing, not root) in @why.
 */
static inline int sr_stop_trace_start(struct sr_stop_trace *st, pid_t tid,
				      char *why, size_t size)
{
	struct stat st_buf;
	char path[192];
	int ret;

	sr_stop_trace_init(st);
	if (sr_stop_trace_instance(st, tid, why, size))
		return -1;
	snprintf(path, sizeof(path), "%s/" SR_STOP_EVENT, st->dir);
	if (stat(path, &st_buf)) {
		snprintf(why, size, "no trace event %s: %s",
			 "proc/smaps_rollup_walk_stop",
			 "a kernel without it, or CONFIG_TRACING off");
		goto fail;
	}
	ret = sr_stop_trace_enable(st, SR_STOP_EVENT, tid);
	if (ret) {
		snprintf(why, size, "cannot filter and enable %s: %s",
			 SR_STOP_EVENT, strerror(-ret));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/" SR_RESTART_EVENT, st->dir);
	if (!stat(path, &st_buf)) {
		ret = sr_stop_trace_enable(st, SR_RESTART_EVENT, tid);
		if (ret) {
			snprintf(why, size, "cannot filter and enable %s: %s",
				 SR_RESTART_EVENT, strerror(-ret));
			goto fail;
		}
		st->restarts = true;
	}
	snprintf(path, sizeof(path), "%s/trace_pipe", st->dir);
	st->pipe = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (st->pipe < 0) {
		snprintf(why, size, "cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	sr_stop_trace_stop(st);
	return -1;
}

/* The unsigned value of " @field=" in @p, 0 if none. */
static inline unsigned long sr_trace_field(const char *p, const char *field,
					   int base)
{
	char key[32];
	const char *q;

	snprintf(key, sizeof(key), " %s=", field);
	q = strstr(p, key);
	return q ? strtoul(q + strlen(key), NULL, base) : 0;
}

/* Add what an event line shows to @c. */
static inline void sr_stop_trace_line(const struct sr_stop_trace *st,
				      const char *line,
				      struct sr_trace_counts *c)
{
	const char *p = strstr(line, SR_STOP_MARK), *lock;
	unsigned long a;
	int held;

	if (!p) {
		p = strstr(line, SR_RESTART_MARK);
		if (p && strstr(p, " addr=")) {
			c->restarts++;
			c->final_restarts += sr_trace_field(p, "final", 10) != 0;
		}
		return;
	}
	lock = strstr(p, " lock=");
	if (!strstr(p, " addr=") || !lock)
		return;
	a = sr_trace_field(p, "addr", 16);
	if (st->hi && (a < st->lo || a >= st->hi))
		return;
	lock += strlen(" lock=");
	for (held = 0; held < SR_NR_HELD; held++) {
		size_t len = strlen(sr_held_names[held]);

		if (!strncmp(lock, sr_held_names[held], len) &&
		    (!lock[len] || lock[len] == ' ')) {
			c->stops++;
			c->held[held]++;
			return;
		}
	}
}

/*
 * What the reads of the task did since the last call (or the start): how
 * many times they stopped at an address in [lo, hi), by what the walk held,
 * and how many times a pass restarted, in @c (if not NULL).  Call it right
 * before a read() of smaps_rollup, to forget what came before, and right
 * after it.  Returns the count of stops, or -errno.
 */
static inline int sr_stop_trace_count(struct sr_stop_trace *st,
				      struct sr_trace_counts *c)
{
	struct sr_trace_counts counts;
	int ret = 0;
	char *line, *nl;
	ssize_t n;

	memset(&counts, 0, sizeof(counts));
	for (;;) {
		n = read(st->pipe, st->buf + st->len,
			 sizeof(st->buf) - 1 - st->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			ret = -errno;
		if (n <= 0)
			break;
		st->len += n;
		st->buf[st->len] = 0;
		for (line = st->buf; (nl = strchr(line, '\n')); line = nl + 1) {
			*nl = 0;
			sr_stop_trace_line(st, line, &counts);
		}
		st->len = st->buf + st->len - line;
		/* A line that fills the buffer is no event line: drop it. */
		if (st->len == sizeof(st->buf) - 1)
			st->len = 0;
		memmove(st->buf, line, st->len);
	}
	if (c)
		*c = counts;
	return ret ?: counts.stops;
}

#endif /* SELFTESTS_PROC_SMAPS_ROLLUP_TRACE_H */
