#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check_store without its crash loops (CK_EXCLUDE_TAGS=crash): make check runs check_store
# in three parts side by side (tests/integration/check_store.c, main).
exec env CK_EXCLUDE_TAGS=crash "${top_builddir:-.}/tests/integration/check_store"
