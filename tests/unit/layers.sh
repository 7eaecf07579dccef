#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The layer rule (docs/architecture.md): no room includes a header of a
# room above it, but for the shrinking list in scripts/layers.allow.
exec python3 "${srcdir:-.}/scripts/layers" "${srcdir:-.}"
