#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every source file names its license (Apache-2.0) in its first comment;
# scripts/spdx names those that do not (and puts it in when run alone).
exec python3 "${srcdir:-.}/scripts/spdx" --check "${srcdir:-.}"
