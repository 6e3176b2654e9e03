#!/usr/bin/env bash
# README command 1: install what is missing, build in Release, run the default example (water, cc-pVDZ).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
"${DFMP2_BUILD_DIR:-build}/app/dfmp2" inputs/water.yaml
