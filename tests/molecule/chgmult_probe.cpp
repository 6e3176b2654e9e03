// chem::fill_charges_and_multiplicities on cases read from standard input, for the comparison with qcelemental's
// validate_and_fill_chgmult (chgmult_against_qcelemental.py). One JSON object per line:
//   {"zeff": [8, 1, 0, ...], "separators": [2, ...], "c": 1 | null, "fc": [null, 0], "m": 2 | null, "fm": [null, 1]}
// (zeff 0: a ghost atom); one line back: {"ok": true, "c": .., "fc": [..], "m": .., "fm": [..]} or {"ok": false}.
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chem/system/molecule.hpp"
#include "linalg/errors.hpp"

namespace {

std::optional<int> maybe(const nlohmann::json& v) {
  return v.is_null() ? std::nullopt : std::optional<int>(v.get<int>());
}

nlohmann::json fill(const nlohmann::json& in) {
  dfmp2::chem::Molecule m;
  const auto& zeff = in["zeff"];
  for (std::size_t a = 0; a < zeff.size(); ++a) {
    dfmp2::chem::Atom atom;
    const int z = zeff[a].get<int>();
    atom.atomic_number = z == 0 ? 2 : z;
    atom.ghost = z == 0;
    atom.z = 3.0 * double(a);
    m.atoms.push_back(atom);
  }
  std::vector<std::size_t> starts = {0};
  for (const auto& s : in["separators"]) starts.push_back(s.get<std::size_t>());
  starts.push_back(zeff.size());
  for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
    m.fragments.push_back({starts[k], starts[k + 1] - starts[k], maybe(in["fc"][k]), maybe(in["fm"][k])});
  }
  try {
    dfmp2::chem::fill_charges_and_multiplicities(m, maybe(in["c"]), maybe(in["m"]));
  } catch (const dfmp2::InputError&) {
    return {{"ok", false}};
  }
  nlohmann::json out = {{"ok", true}, {"c", m.charge}, {"m", m.multiplicity}};
  for (const auto& f : m.fragments) {
    out["fc"].push_back(f.charge);
    out["fm"].push_back(f.multiplicity);
  }
  return out;
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) std::cout << fill(nlohmann::json::parse(line)).dump() << "\n";
  return 0;
}
