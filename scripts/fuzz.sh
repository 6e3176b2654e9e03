#!/usr/bin/env bash
# The fuzzing job (tests/fuzz/README.md): builds the libFuzzer targets of tests/fuzz with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into build-fuzz/, seeds each target's corpus from the repository's own inputs, and runs
# every target for a fixed time. Any crash, sanitizer report, uncaught exception other than dfmp2's own errors,
# timeout or memory blow-up is a defect: its input is kept in build-fuzz/crashes/<target>/ and the script exits 1.
#   scripts/fuzz.sh                 every target for FUZZ_SECONDS (default 600) each
#   scripts/fuzz.sh fuzz_gbs 3600   one target, one hour
# Not part of scripts/test.sh (it runs for as long as it is told to); the corpus of tests/bad_inputs keeps what it
# found.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

scripts/setup.sh --tests >/dev/null  # the project's own packages (and a gcc build; the fuzz build is separate)
fuzz_packages=(clang libclang-rt-14-dev libomp-14-dev)
missing=()
for p in "${fuzz_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

targets=(fuzz_yaml_input fuzz_qcschema fuzz_gbs fuzz_xyz fuzz_integral_file fuzz_instances fuzz_calibration_cache)
seconds="${FUZZ_SECONDS:-600}"
if (($# > 0)); then
  targets=("$1")
  seconds="${2:-$seconds}"
fi

build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDFMP2_FUZZ=ON -DDFMP2_MPI=OFF \
  -DDFMP2_PYTHON=OFF -DDFMP2_BUILD_TESTS=OFF -DDFMP2_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

# Seeds: what the repository already holds of each kind of input.
seed() {  # seed TARGET FILE...
  local dir="$build/corpus/$1"
  mkdir -p "$dir"
  shift
  for f in "$@"; do [[ -f "$f" ]] && cp "$f" "$dir/$(basename "$f").$(cksum <"$f" | cut -d' ' -f1)"; done
  return 0
}
seed fuzz_yaml_input inputs/*.yaml tests/validation/decks/*.yaml bench/traces/*.yaml
# Each case of the bad-input corpus as its own seed.
mkdir -p "$build/corpus/fuzz_yaml_input"
/usr/bin/python3 - "$build/corpus/fuzz_yaml_input" tests/bad_inputs/*.cases <<'PY'
import os, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    body, name = [], None
    for line in open(path, encoding="utf-8").read().splitlines(True) + ["=== end\n"]:
        if line.startswith("=== "):
            if name:
                open(os.path.join(out, "case-" + name), "w").write("".join(body))
            name, body = line[4:].strip(), []
        elif name and not line.startswith("#! "):
            body.append(line)
PY
mkdir -p "$build/corpus/fuzz_qcschema"
cat >"$build/corpus/fuzz_qcschema/water.json" <<'JSON'
{"schema_name": "qcschema_input", "schema_version": 1, "id": "w", "driver": "energy",
 "model": {"method": "mp2", "basis": "sto-3g"},
 "molecule": {"symbols": ["O", "H", "H"], "geometry": [0, 0, 0.22, 0, 1.43, -0.89, 0, -1.43, -0.89],
              "molecular_charge": 0.0, "molecular_multiplicity": 1, "name": "water", "fix_com": false},
 "keywords": {"scf_type": "df", "freeze_core": true, "dfmp2_threads": 1, "dfmp2_scf": {"max_iterations": 50}},
 "extras": {"note": [1, 2.5, null, true, "x"]}, "protocols": {}}
JSON
mkdir -p "$build/corpus/fuzz_gbs"
# The first element block of a few library files (the fuzzer's first byte picks the element: H, C, O).
for f in sto-3g cc-pvdz def2-svp-jkfit; do
  awk '/^\*\*\*\*/{n++} n<=2' "inputs/basis/$f.gbs" | head -c 6000 >"$build/corpus/fuzz_gbs/$f"
done
printf '\x00' | cat - "$build/corpus/fuzz_gbs/sto-3g" >"$build/corpus/fuzz_gbs/sto-3g-h"
mkdir -p "$build/corpus/fuzz_xyz"
printf '\x01\x00\x00\x01\x00\x00O 0 0 0.117790\nH 0 0.755453 -0.471161\nH 0 -0.755453 -0.471161\n' >"$build/corpus/fuzz_xyz/water"
# Fragments and ghosts as Psi4 writes them (the first bytes give the complex's charge and multiplicity or not).
printf '\x00\x00\x00\x00\x00\x000 1\nO 0 0 0\nH 0 0 0.97\nH 0.9 0 -0.3\n--\n1 2\nO 3 0 0\nH 3 0 0.97\n--\nGh(He) 0 3 0\n@Ne 0 0 3\n' \
  >"$build/corpus/fuzz_xyz/fragments"
mkdir -p "$build/corpus/fuzz_instances"
cp devices/instances.yaml "$build/corpus/fuzz_instances/builtin"
mkdir -p "$build/corpus/fuzz_calibration_cache"
printf '\x01rate eigen 61.2 0.0412\nrate openblas 80.1 0.0315\n' >"$build/corpus/fuzz_calibration_cache/rates"
mkdir -p "$build/corpus/fuzz_integral_file"

status=0
summary=()
for t in "${targets[@]}"; do
  crashes="$build/crashes/$t"
  mkdir -p "$crashes"
  log="$build/$t.log"
  echo "fuzz: $t for $seconds s (log $log)"
  set +e
  max_len=8192
  [[ $t == fuzz_instances ]] && max_len=16384  # the built-in table is 6.4 kB
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$build/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  found=$(find "$crashes" -type f | wc -l)
  summary+=("$t: exit $rc, $runs inputs in $seconds s, $found crash file(s)")
  if ((rc != 0 || found > 0)); then status=1; fi
done
printf '%s\n' "${summary[@]}"
exit $status
