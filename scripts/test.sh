#!/usr/bin/env bash
# README command 2: install what is missing (Psi4 included), build in Release, run the whole test suite.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L validation` or `scripts/test.sh -LE psi4`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
ctest --test-dir "${DFMP2_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
