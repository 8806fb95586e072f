# Entry points; each target is one script under scripts/.
.PHONY: run test test-debug bench bench-icount bench-native bench-trace patches check-copies check-series send help

run:			## build the series kernel, boot it, show a sample's rollup
	@scripts/run

test:			## the whole test job, ending in "N passed, N failed, N skipped"
	@scripts/run-tests

test-debug:		## the suite, stress and fault injection on the debug kernel
	@scripts/test-debug

bench:			## benchmarks: stock against series, smaps against rollup
	@scripts/bench

bench-icount:		## the cost cells in instructions, series against stock, one boot
	@scripts/bench-icount

bench-native:		## the cost cells at native speed: User-Mode Linux, series against stock
	@scripts/bench-native

bench-trace:		## the inversion traced: where the mapper's waits for mmap_lock go
	@scripts/bench-trace

send:			## git send-email dry run of patches/ (see scripts/send)
	@scripts/send

patches:		## regenerate patches/ (and the copies) from branch dev of the kernel tree
	@scripts/make-patches

check-copies:		## the exploded copies agree with patches/
	@scripts/sync-copies --check

check-series:		## checkpatch --strict and a W=1 build of fs/proc
	@scripts/check-series

help:
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'
