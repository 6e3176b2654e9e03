#!/usr/bin/env bash
# The sanitizer job: builds dfmp2 and its tests with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-sanitize/ (DFMP2_SANITIZE, RelWithDebInfo) and runs the fast test tiers there (unit, backends, devices, cli, mpi,
# the bad-input corpus included): any invalid memory access or undefined behaviour fails the test that caused it.
# Extra arguments go to ctest, e.g. `scripts/sanitize.sh -R bad_inputs`. Takes about 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests >/dev/null  # packages (the Release build it also makes is not used here)
build_dir="${DFMP2_SANITIZE_BUILD_DIR:-build-sanitize}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDFMP2_SANITIZE=ON -DDFMP2_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
# Leak checking is off: OpenBLAS and HDF5 keep process-lifetime buffers by design, which LeakSanitizer would
# report at every exit. Every other finding stops the program.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=0:abort_on_error=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Scale.TightMemory* runs dfmp2 within `memory: 250 MB` and checks the measured peak: AddressSanitizer's shadow
# memory adds about 250 MiB to the process's own resident size, so that budget cannot hold here (the run stops
# with the memory plan's error, as it should). Every other memory case allows for it.
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -L "unit|backends|devices|cli|mpi" -E "Scale\.TightMemory" "$@"
