#!/usr/bin/env bash
# Builds bench_pair_energy in Release (configuring the build directory if it is new) and runs it.
#
#   bench/run_pair_energy.sh [--build-dir DIR] [--json FILE] [-- BENCH_FLAGS...]
#
#   --build-dir DIR  build directory (default: build, relative to the repository root); an existing directory must
#                    have been configured as Release
#   --json FILE      also write the results as JSON to FILE (default: text report on stdout only)
#   BENCH_FLAGS      passed to bench_pair_energy unchanged, e.g. -- --threads 1 --memory "1 GiB"
#
# Environment variables such as OPENBLAS_CORETYPE are passed through to the benchmark.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="build"
json=""
bench_args=()

usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) [[ $# -ge 2 ]] || { echo "run_pair_energy.sh: --build-dir needs a value" >&2; exit 2; }
                 build_dir="$2"; shift 2 ;;
    --build-dir=*) build_dir="${1#*=}"; shift ;;
    --json) [[ $# -ge 2 ]] || { echo "run_pair_energy.sh: --json needs a value" >&2; exit 2; }
            json="$2"; shift 2 ;;
    --json=*) json="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; bench_args=("$@"); break ;;
    *) echo "run_pair_energy.sh: unknown argument '$1' (benchmark flags go after --; see --help)" >&2; exit 2 ;;
  esac
done

[[ "$build_dir" = /* ]] || build_dir="$root/$build_dir"

if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
  if [[ "$build_type" != "Release" ]]; then
    echo "run_pair_energy.sh: $build_dir is configured as '${build_type:-<none>}', not Release;" \
         "use another --build-dir" >&2
    exit 2
  fi
else
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build_dir" --target bench_pair_energy -j "$(nproc)" >&2

bench="$build_dir/bench/bench_pair_energy"
if [[ -n "$json" ]]; then
  exec "$bench" --json "$json" "${bench_args[@]}"
else
  exec "$bench" "${bench_args[@]}"
fi
