#!/usr/bin/env bash
# Installs the Debian packages dfmp2 needs (only those missing) and builds it in Release into build/.
#   scripts/setup.sh            packages to build and run dfmp2
#   scripts/setup.sh --tests    also the packages the test suite needs (GoogleTest, Psi4 for the live tier)
#   scripts/setup.sh --bench    also the peers of bench/: Psi4 (psi4_compare.py) and NWChem with Open MPI
#                               (nwchem_compare.py)
# Runs as root on Debian 12; uses sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make pkg-config libeigen3-dev libhdf5-dev libyaml-cpp-dev libopenblas-dev liblapacke-dev
          pybind11-dev python3-dev python3-numpy
          libopenmpi-dev openmpi-bin libscalapack-openmpi-dev libelpa-dev
          libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libint2-dev libecpint-dev)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(psi4 python3-h5py python3-numpy python3-qcelemental python3-qcengine python3-ase universal-ctags openbabel nwchem)
elif [[ "${1:-}" == "--bench" ]]; then
  packages+=(psi4 python3-h5py python3-numpy nwchem openmpi-bin)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build_dir="${DFMP2_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
