# SPDX-License-Identifier: GPL-2.0
# Where the hand-written programs (guest/bench/, guest/stress/) and
# guest/sample/rollup.py find the smaps_rollup format header,
# smaps_rollup_format.h: decided here, in this one place.
#
# The header is part of the series (patch 14, the selftests). Its one copy
# in this repository is the generated tools/testing/selftests/proc/
# (scripts/sync-copies; never edit it there, edit the series). The
# programs include it by its name alone, "smaps_rollup_format.h", and
# their Makefiles add $(FORMAT_CPPFLAGS); rollup.py reads the
# SMAPS_FORMAT_DIR line below. To build against another version of the
# header (a kernel tree's, say), override SMAPS_FORMAT_DIR:
#   make -C guest/bench SMAPS_FORMAT_DIR=$HOME/linux/tools/testing/selftests/proc

# The repository's top directory: this file is in guest/.
REPO_TOP := $(abspath $(dir $(abspath $(lastword $(MAKEFILE_LIST))))..)
SMAPS_FORMAT_DIR ?= $(REPO_TOP)/tools/testing/selftests/proc
FORMAT_H := $(SMAPS_FORMAT_DIR)/smaps_rollup_format.h
FORMAT_CPPFLAGS := -iquote $(SMAPS_FORMAT_DIR)
