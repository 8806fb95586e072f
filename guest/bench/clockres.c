// SPDX-License-Identifier: GPL-2.0
/*
 * bench-clock: can CLOCK_MONOTONIC time a microsecond-scale operation here?
 *
 * Prints clock_getres(CLOCK_MONOTONIC), then the smallest and the median
 * non-zero difference between consecutive clock_gettime() calls and how
 * many consecutive calls returned the same value, as CSV lines
 * "clock,NAME,VALUE". A clock that ticks in jiffies (4 ms) shows a
 * resolution or a smallest delta in the millions of ns.
 */
#include "common.h"

#define CALLS 200000

static uint64_t deltas[CALLS];

int main(void)
{
	struct timespec res;
	uint64_t prev, same = 0;
	size_t n = 0;

	if (clock_getres(CLOCK_MONOTONIC, &res))
		die("clock_getres");
	prev = now_ns();
	for (int i = 0; i < CALLS; i++) {
		uint64_t t = now_ns();

		if (t == prev)
			same++;
		else
			deltas[n++] = t - prev;
		prev = t;
	}
	qsort(deltas, n, sizeof(*deltas), cmp_u64);
	printf("clock,getres_ns,%lld\n",
	       (long long)res.tv_sec * 1000000000ll + res.tv_nsec);
	printf("clock,min_delta_ns,%llu\n", (unsigned long long)(n ? deltas[0] : 0));
	printf("clock,median_delta_ns,%llu\n", (unsigned long long)pct(deltas, n, 0.5));
	printf("clock,max_delta_ns,%llu\n", (unsigned long long)(n ? deltas[n - 1] : 0));
	printf("clock,equal_calls,%llu\n", (unsigned long long)same);
	printf("clock,calls,%d\n", CALLS);
	return 0;
}
