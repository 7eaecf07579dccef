#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check_store's crash loops tagged crash_a: make check runs check_store
# in three parts side by side (tests/integration/check_store.c, main).
exec env CK_INCLUDE_TAGS=crash_a "${top_builddir:-.}/tests/integration/check_store"
