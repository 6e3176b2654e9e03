#include "app/qcschema.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "app/results.hpp"
#include "app/yaml_file.hpp"
#include "chem/system/system.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The AtomicInput's fields; those a program may ignore are accepted and left alone.
const std::vector<std::string> kTopFields = {"schema_name", "schema_version", "id",      "molecule", "driver",
                                             "model",       "keywords",       "protocols", "extras", "provenance"};
const std::vector<std::string> kModelFields = {"method", "basis"};
const std::vector<std::string> kMoleculeFields = {
    "symbols",         "geometry",        "molecular_charge", "molecular_multiplicity", "real",
    "schema_name",     "schema_version",  "name",             "comment",                "identifiers",
    "masses",          "mass_numbers",    "atomic_numbers",   "atom_labels",            "connectivity",
    "fragments",       "fragment_charges", "fragment_multiplicities", "fix_com",         "fix_orientation",
    "fix_symmetry",    "provenance",      "extras",           "id",                     "validated"};

// Psi4's keyword names that dfmp2 takes, and the dfmp2 input key each becomes (README "QCSchema").
const std::map<std::string, std::string> kQcKeywords = {
    {"df_basis_mp2", "aux_basis"},      {"df_basis_scf", "scf.jk_basis"}, {"scf_type", "scf.type"},
    {"mp2_type", ""},                   {"freeze_core", "frozen_core"},   {"e_convergence", "scf.e_convergence"},
    {"d_convergence", "scf.d_convergence"}, {"maxiter", "scf.max_iterations"}, {"guess", "scf.guess"},
    {"reference", "reference"},         {"mp2_os_scale", "mp2_os_scale"}, {"mp2_ss_scale", "mp2_ss_scale"},
    {"mp2_sos_scale", "mp2_sos_scale"}, {"perturb_h", ""},           {"perturb_with", ""},
    {"perturb_dipole", "perturb_dipole"}};
// dfmp2 input keys that the AtomicInput gives in its own fields, never as dfmp2_<key>.
const std::map<std::string, std::string> kOwnedByQcSchema = {
    {"molecule", "molecule"},          {"basis", "model.basis"},         {"aux_basis", "keywords.df_basis_mp2"},
    {"driver", "driver"},              {"method", "model.method"},
    {"frozen_core", "keywords.freeze_core"}, {"integrals", "molecule"}, {"synthetic", "molecule"},
    {"output", "the command line's --json"}};

// What qcelemental 0.25's models take for the fields an AtomicResult echoes from its AtomicInput without dfmp2
// reading them. An input whose field is of another type would give a result that does not validate, so it is refused
// naming the field. Per-atom lists must also have one entry per atom.
enum class Echo { string, string_or_null, integer, boolean, object, numbers, integers, strings, booleans, list, integer_lists };
struct EchoedField {
  const char* name;
  Echo kind;
  bool per_atom = false;
};
const std::vector<EchoedField> kEchoedTop = {
    {"id", Echo::string_or_null}, {"schema_version", Echo::integer}, {"extras", Echo::object},
    {"protocols", Echo::object},  {"provenance", Echo::object}};
const std::vector<EchoedField> kEchoedMolecule = {
    {"name", Echo::string},           {"comment", Echo::string},         {"identifiers", Echo::object},
    {"masses", Echo::numbers, true},  {"mass_numbers", Echo::integers, true}, {"atomic_numbers", Echo::integers, true},
    {"atom_labels", Echo::strings, true}, {"real", Echo::booleans, true}, {"connectivity", Echo::list},
    {"fragments", Echo::integer_lists}, {"fragment_charges", Echo::numbers}, {"fragment_multiplicities", Echo::integers},
    {"molecular_multiplicity", Echo::integer},
    {"fix_com", Echo::boolean},       {"fix_orientation", Echo::boolean}, {"fix_symmetry", Echo::string},
    {"provenance", Echo::object},     {"extras", Echo::object},          {"id", Echo::string_or_null},
    {"validated", Echo::boolean},     {"schema_name", Echo::string},     {"schema_version", Echo::integer}};

bool is_kind(const nlohmann::json& v, Echo kind) {
  auto all = [&](auto pred) { return v.is_array() && std::all_of(v.begin(), v.end(), pred); };
  switch (kind) {
    case Echo::string: return v.is_string();
    case Echo::string_or_null: return v.is_string() || v.is_null();
    case Echo::integer: return v.is_number_integer();
    case Echo::boolean: return v.is_boolean();
    case Echo::object: return v.is_object();
    case Echo::numbers: return all([](const nlohmann::json& x) { return x.is_number(); });
    case Echo::integers: return all([](const nlohmann::json& x) { return x.is_number_integer(); });
    case Echo::strings: return all([](const nlohmann::json& x) { return x.is_string(); });
    case Echo::booleans: return all([](const nlohmann::json& x) { return x.is_boolean(); });
    case Echo::list: return v.is_array();
    case Echo::integer_lists: return all([](const nlohmann::json& x) {
      return x.is_array() && std::all_of(x.begin(), x.end(), [](const nlohmann::json& i) { return i.is_number_integer(); });
    });
  }
  return false;
}

const char* kind_name(Echo kind) {
  switch (kind) {
    case Echo::string: return "a string";
    case Echo::string_or_null: return "a string or null";
    case Echo::integer: return "an integer";
    case Echo::boolean: return "true or false";
    case Echo::object: return "an object";
    case Echo::numbers: return "a list of numbers";
    case Echo::integers: return "a list of integers";
    case Echo::strings: return "a list of strings";
    case Echo::booleans: return "a list of true or false";
    case Echo::list: return "a list";
    case Echo::integer_lists: return "a list of lists of integers (atom indices)";
  }
  return "";
}

class QcReader {
 public:
  explicit QcReader(const YamlReader& ctx) : ctx_(ctx) {}
  [[noreturn]] void fail(const YAML::Node& node, const std::string& field, const std::string& what) const {
    ctx_.fail(node, fmt::format("field '{}': {}", field, what));
  }
  void check_fields(const YAML::Node& map, const std::string& parent, const std::vector<std::string>& allowed) const {
    for (const auto& kv : map) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      const auto guess = nearest(key, allowed);
      const std::string field = parent.empty() ? key : parent + "." + key;
      fail(kv.first, field,
           guess ? fmt::format("not a field of a QCSchema AtomicInput that dfmp2 takes (did you mean '{}'?)", *guess)
                 : fmt::format("not a field of a QCSchema AtomicInput that dfmp2 takes (expected {})",
                               fmt::join(allowed, ", ")));
    }
  }
  YAML::Node require(const YAML::Node& parent, const char* key, const std::string& field, const char* expected) const {
    if (!parent[key]) ctx_.fail(fmt::format("missing field '{}' ({})", field, expected));
    return parent[key];
  }
  std::string text(const YAML::Node& node, const std::string& field, const char* expected) const {
    if (!node.IsScalar()) fail(node, field, fmt::format("expected {}, got {}", expected, YamlReader::kind(node)));
    return node.Scalar();
  }
  double number(const YAML::Node& node, const std::string& field) const {
    const auto v = node.IsScalar() && node.Tag() != "!" ? as_number(node.Scalar()) : std::nullopt;
    if (!v || !std::isfinite(*v)) fail(node, field, fmt::format("expected a number, got {}", YamlReader::kind(node)));
    return *v;
  }
  // The echoed fields of `parent` (node and JSON of the same object): of their kind, per-atom lists one per atom.
  void check_echoed(const YAML::Node& node, const nlohmann::json& json, const std::string& prefix,
                    const std::vector<EchoedField>& fields, std::size_t atoms) const {
    for (const auto& f : fields) {
      if (!json.contains(f.name)) continue;
      const nlohmann::json& v = json[f.name];
      const std::string field = prefix + f.name;
      if (!is_kind(v, f.kind)) fail(node[f.name], field, fmt::format("expected {}, got {}", kind_name(f.kind), YamlReader::kind(node[f.name])));
      if (f.per_atom && v.size() != atoms) {
        fail(node[f.name], field, fmt::format("expected one entry per atom ({}), got {}", atoms, v.size()));
      }
    }
  }
  long long whole_number(const YAML::Node& node, const std::string& field, long long min, long long max) const {
    const double v = number(node, field);
    if (v != std::floor(v)) fail(node, field, fmt::format("expected a whole number, got {}", node.Scalar()));
    if (v < double(min) || v > double(max)) {
      fail(node, field, fmt::format("{} is out of range (expected {} to {})", node.Scalar(), min, max));
    }
    return static_cast<long long>(v);
  }

 private:
  const YamlReader& ctx_;
};

}  // namespace

std::string qcschema_field(const std::string& key) {
  static const std::map<std::string, std::string> fields = [] {
    std::map<std::string, std::string> f = {{"basis", "model.basis"}, {"method", "model.method"},
                                            {"driver", "driver"},  {"molecule", "molecule"},
                                            {"molecule.xyz", "molecule.geometry"},
                                            {"molecule.charge", "molecule.molecular_charge"},
                                            {"molecule.multiplicity", "molecule.molecular_multiplicity"}};
    for (const auto& [qc, input_key] : kQcKeywords)
      if (!input_key.empty()) f[input_key] = "keywords." + qc;
    return f;
  }();
  if (auto f = fields.find(key); f != fields.end()) return f->second;
  // A fragment of the molecule: QCSchema's fragments count from 0.
  if (const std::string fragment = "molecule fragment "; key.rfind(fragment, 0) == 0) {
    return fmt::format("molecule.fragments[{}]", std::stoul(key.substr(fragment.size())) - 1);
  }
  return "keywords.dfmp2_" + key;  // scf.guess: keywords.dfmp2_scf.guess
}

bool is_qcschema_path(const std::string& path) {
  return path.size() > 5 && lower(path.substr(path.size() - 5)) == ".json";
}

std::string qcschema_default_output(const std::string& input_path) {
  return input_path.substr(0, input_path.size() - 5) + ".result.json";
}

namespace {

// The AtomicInput as nlohmann::json, from text that read_json_text let through. A number too large for a double
// (1e999, even in a field dfmp2 ignores) cannot be echoed into the AtomicResult: refused, at the first such scalar.
nlohmann::json parse_atomic_input(const std::string& text, const YAML::Node& root, const YamlReader& ctx) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    ctx.fail(fmt::format("not valid JSON (a QCSchema AtomicInput was expected): {}", e.what()));
  } catch (const nlohmann::json::exception& e) {  // out_of_range 406: a number that overflows a double
    // The first such scalar and its field (the dotted path to it).
    std::string field;
    std::function<std::optional<YAML::Node>(const YAML::Node&, const std::string&)> overflowing =
        [&](const YAML::Node& n, const std::string& path) -> std::optional<YAML::Node> {
      if (n.IsScalar()) {
        if (n.Tag() == "!" || n.Scalar().empty()) return std::nullopt;  // a string
        char* end = nullptr;
        const double v = std::strtod(n.Scalar().c_str(), &end);
        if (*end != '\0' || std::isfinite(v)) return std::nullopt;
        field = path;
        return n;
      }
      std::size_t i = 0;
      for (const auto& child : n) {
        const std::string sub = n.IsMap() ? (path.empty() ? "" : path + ".") + child.first.Scalar()
                                          : fmt::format("{}[{}]", path, i++);
        if (auto hit = overflowing(n.IsMap() ? child.second : child, sub)) return hit;
      }
      return std::nullopt;
    };
    if (const auto hit = overflowing(root, "")) {
      ctx.fail(*hit, fmt::format("field '{}': the number {} is beyond the range of a double (about 1.8e308)", field,
                                 hit->Scalar()));
    }
    ctx.fail(fmt::format("not valid JSON (a QCSchema AtomicInput was expected): {}", e.what()));
  }
}

}  // namespace

namespace {

// QCSchema's fragments (with fragment_charges and fragment_multiplicities) as Psi4's "--" lines and "charge
// multiplicity" lines in the xyz text, the line(s) that start a fragment at each atom. dfmp2 takes fragments of
// consecutive atoms in order, as Psi4 writes them. The charges and multiplicities not given are completed as
// qcelemental completes them (chem::fill_charges_and_multiplicities), so the AtomicResult that echoes the molecule
// validates to the same ones; each fragment then has its line, and `charge` and `multiplicity` are the complex's.
std::vector<std::string> fragment_lines(const QcReader& qc, const YAML::Node& mol, const std::vector<std::string>& symbols,
                                        const std::vector<bool>& ghost, std::optional<int>& charge,
                                        std::optional<int>& multiplicity) {
  std::vector<std::string> before(symbols.size());
  const YAML::Node frags = mol["fragments"], charges = mol["fragment_charges"], mults = mol["fragment_multiplicities"];
  const bool listed = frags && frags.IsSequence() && frags.size() > 0;
  if (!listed && !charges && !mults) return before;
  // As in qcelemental: without `fragments` the molecule is one fragment, and every per-fragment list has one entry
  // per fragment.
  const std::size_t count = listed ? frags.size() : 1;
  for (const auto& [list, field] : {std::pair{charges, "molecule.fragment_charges"}, {mults, "molecule.fragment_multiplicities"}}) {
    if (list && list.IsSequence() && list.size() != count) {
      qc.fail(list, field, fmt::format("expected one entry per fragment ({}), got {}", count, list.size()));
    }
  }
  chem::Molecule shape;  // the atoms' elements and ghosts, and the fragments: what the completion needs
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    chem::Atom a;
    a.symbol = symbols[i];
    a.atomic_number = chem::atomic_number(symbols[i]);
    a.ghost = ghost[i];
    shape.atoms.push_back(a);
  }
  std::size_t next = 0;
  for (std::size_t k = 0; k < count; ++k) {
    chem::Fragment f{next, symbols.size()};
    if (listed) {
      const std::string field = fmt::format("molecule.fragments[{}]", k);
      if (!frags[k].IsSequence() || frags[k].size() == 0) qc.fail(frags[k], field, "expected a list of atom indices");
      for (std::size_t a = 0; a < frags[k].size(); ++a) {
        if (qc.whole_number(frags[k][a], fmt::format("{}[{}]", field, a), 0, 1000000) != static_cast<long long>(next)) {
          qc.fail(frags[k][a], fmt::format("{}[{}]", field, a),
                  "dfmp2 takes fragments of consecutive atoms in order (atom indices 0, 1, 2, ... across the fragments)");
        }
        ++next;
      }
      f.count = frags[k].size();
    } else {
      next = symbols.size();
    }
    if (charges) f.given_charge = int(qc.whole_number(charges[k], fmt::format("molecule.fragment_charges[{}]", k), -1000, 1000));
    if (mults) {
      f.given_multiplicity = int(qc.whole_number(mults[k], fmt::format("molecule.fragment_multiplicities[{}]", k), 1, 1001));
    }
    shape.fragments.push_back(f);
  }
  if (next != symbols.size()) {
    qc.fail(frags, "molecule.fragments", fmt::format("the fragments hold {} atoms of {}", next, symbols.size()));
  }
  try {
    chem::fill_charges_and_multiplicities(shape, charge, multiplicity);
  } catch (const InputError& e) {
    const std::string& key = e.key();
    const YAML::Node at = key == "molecule.charge" && mol["molecular_charge"]             ? mol["molecular_charge"]
                          : key == "molecule.multiplicity" && mol["molecular_multiplicity"] ? mol["molecular_multiplicity"]
                          : listed                                                      ? frags
                                                                                        : mol;
    const std::string field = qcschema_field(key);
    std::string text = e.text();  // "{key}: what" or "{key} is what"
    if (text.rfind("{key}: ", 0) == 0) text.erase(0, 7);
    else if (text.rfind("{key} ", 0) == 0) text.erase(0, 6);
    qc.fail(at, field, text);
  }
  for (const chem::Fragment& f : shape.fragments) {
    before[f.first] = fmt::format("{}{} {}\n", f.first > 0 ? "--\n" : "", f.charge, f.multiplicity);
  }
  charge = shape.charge;
  multiplicity = shape.multiplicity;
  return before;
}

// The molecule, as the YAML input's molecule: {xyz, units: bohr, charge, multiplicity}, its fields checked as
// qcelemental would (so that the AtomicResult that echoes it validates).
YAML::Node molecule_mapping(const QcReader& qc, const YAML::Node& root, const nlohmann::json& as_json) {
  const YAML::Node mol = qc.require(root, "molecule", "molecule", "a QCSchema molecule");
  if (!mol.IsMap()) qc.fail(mol, "molecule", fmt::format("expected a QCSchema molecule (a mapping), got {}", YamlReader::kind(mol)));
  qc.check_fields(mol, "molecule", kMoleculeFields);
  const YAML::Node symbols = qc.require(mol, "symbols", "molecule.symbols", "a list of element symbols");
  if (!symbols.IsSequence() || symbols.size() == 0)
    qc.fail(symbols, "molecule.symbols", fmt::format("expected a list of element symbols, got {}", YamlReader::kind(symbols)));
  const YAML::Node geometry = qc.require(mol, "geometry", "molecule.geometry", "3 coordinates per atom in bohr");
  std::vector<double> xyz;
  if (geometry.IsSequence()) {
    for (std::size_t i = 0; i < geometry.size(); ++i) {
      const YAML::Node g = geometry[i];
      if (g.IsSequence()) {  // [[x, y, z], ...], as qcelemental also takes
        if (g.size() != 3) qc.fail(g, fmt::format("molecule.geometry[{}]", i), fmt::format("expected 3 coordinates, got {}", g.size()));
        for (std::size_t k = 0; k < 3; ++k) xyz.push_back(qc.number(g[k], fmt::format("molecule.geometry[{}][{}]", i, k)));
      } else {
        xyz.push_back(qc.number(g, fmt::format("molecule.geometry[{}]", i)));
      }
    }
  }
  if (!geometry.IsSequence() || xyz.size() != 3 * symbols.size()) {
    qc.fail(geometry, "molecule.geometry",
            fmt::format("expected {} numbers (3 coordinates in bohr for each of the {} symbols), got {}",
                        3 * symbols.size(), symbols.size(),
                        geometry.IsSequence() ? fmt::format("{}", xyz.size()) : YamlReader::kind(geometry)));
  }
  qc.check_echoed(root, as_json, "", kEchoedTop, symbols.size());
  qc.check_echoed(mol, as_json["molecule"], "molecule.", kEchoedMolecule, symbols.size());
  // real: false makes a ghost atom (its basis functions, no nucleus, no electrons): Gh(X) in the xyz lines.
  std::vector<bool> ghost(symbols.size(), false);
  if (const YAML::Node real = mol["real"]) {
    for (std::size_t i = 0; real.IsSequence() && i < real.size(); ++i) {
      const auto b = real[i].IsScalar() ? as_bool(real[i].Scalar()) : std::nullopt;
      if (!b) qc.fail(real[i], fmt::format("molecule.real[{}]", i), "expected true or false");
      if (i < ghost.size()) ghost[i] = !*b;
    }
  }
  std::vector<std::string> atom_symbols;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const std::string field = fmt::format("molecule.symbols[{}]", i);
    const std::string sym = qc.text(symbols[i], field, "an element symbol");
    // Checked here, not left to the xyz reader: a symbol holding a blank or a newline would add fields or atoms.
    if (chem::atomic_number(sym) == 0) qc.fail(symbols[i], field, fmt::format("'{}' is not an element symbol", sym));
    atom_symbols.push_back(sym);
  }
  // Whole numbers (qcelemental writes charges as 0.0; a multiplicity must be an integer, as in qcelemental) within
  // what the YAML input takes; the molecule's own checks (the electron count) follow in the input reader, naming
  // the same fields.
  std::optional<int> charge, multiplicity;
  if (const YAML::Node c = mol["molecular_charge"]) charge = int(qc.whole_number(c, "molecule.molecular_charge", -1000, 1000));
  if (const YAML::Node mu = mol["molecular_multiplicity"]) {
    multiplicity = int(qc.whole_number(mu, "molecule.molecular_multiplicity", 1, 1001));
  }
  const std::vector<std::string> before = fragment_lines(qc, mol, atom_symbols, ghost, charge, multiplicity);
  std::string lines;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    lines += before[i];
    lines += fmt::format("{} {:.17g} {:.17g} {:.17g}\n", ghost[i] ? "Gh(" + atom_symbols[i] + ")" : atom_symbols[i],
                         xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]);
  }
  YAML::Node m(YAML::NodeType::Map);
  m["xyz"] = lines;
  m["units"] = "bohr";
  if (charge) m["charge"] = *charge;
  if (multiplicity) m["multiplicity"] = *multiplicity;
  return m;
}

// The keywords, Psi4's names and dfmp2_<key>, into `out` (the YAML input's keys); each setting from one keyword only.
void keywords_into(const QcReader& qc, const YAML::Node& root, YAML::Node& out) {
  YAML::Node scf(YAML::NodeType::Map);
  std::optional<YAML::Node> perturb_h, perturb_dipole;  // keywords.perturb_h and keywords.perturb_dipole as given
  if (const YAML::Node kw = root["keywords"]) {
    if (!kw.IsMap()) qc.fail(kw, "keywords", fmt::format("expected a mapping, got {}", YamlReader::kind(kw)));
    std::vector<std::string> known;
    for (const auto& [name, key] : kQcKeywords) known.push_back(name);
    for (const auto& key : input_keys())
      if (!kOwnedByQcSchema.count(key)) known.push_back("dfmp2_" + key);
    // Each dfmp2 setting from one keyword only: Psi4 reads keywords in any case, so 'scf_type' and 'SCF_TYPE' are
    // the same keyword, and 'maxiter' and 'dfmp2_scf.max_iterations' the same setting; given twice, one would win
    // silently.
    std::map<std::string, std::string> set_by;
    auto claim = [&](const std::string& setting, const YAML::Node& at, const std::string& field) {
      const auto [it, fresh] = set_by.emplace(setting, field);
      if (!fresh) {
        qc.fail(at, field, fmt::format("sets the same thing as '{}'; give it once", it->second));
      }
    };
    for (const auto& kv : kw) {
      const std::string given = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const std::string name = lower(given);
      const std::string field = "keywords." + name;
      const YAML::Node value = kv.second;
      if (name.rfind("dfmp2_", 0) == 0) {
        const std::string key = name.substr(6);
        if (auto owned = kOwnedByQcSchema.find(key); owned != kOwnedByQcSchema.end()) {
          qc.fail(kv.first, field, fmt::format("dfmp2's '{}' comes from '{}' in QCSchema input", key, owned->second));
        }
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          const auto guess = nearest(name, known);
          qc.fail(kv.first, field, fmt::format("unknown keyword{}", guess ? fmt::format(" (did you mean '{}'?)", *guess)
                                                                          : std::string()));
        }
        if (key == "scf") {  // merged with the SCF keywords given by Psi4's names
          if (!value.IsMap()) qc.fail(value, field, fmt::format("expected a mapping, got {}", YamlReader::kind(value)));
          for (const auto& s : value) {
            const std::string sub = s.first.IsScalar() ? s.first.Scalar() : "";
            claim("scf." + sub, s.first, "keywords." + given + "." + sub);
            scf[sub] = s.second;
          }
        } else {
          claim(key, kv.first, "keywords." + given);
          out[key] = value;
        }
        continue;
      }
      const auto it = kQcKeywords.find(name);
      if (it == kQcKeywords.end()) {
        const auto guess = nearest(name, known);
        qc.fail(kv.first, field,
                fmt::format("unknown keyword{} (dfmp2 takes {} and its own input keys as dfmp2_<key>)",
                            guess ? fmt::format(" (did you mean '{}'?)", *guess) : std::string(),
                            fmt::join(std::vector<std::string>(known.begin(), known.begin() + long(kQcKeywords.size())), ", ")));
      }
      claim(it->second.empty() ? name : it->second, kv.first, "keywords." + given);
      const std::string v = value.IsScalar() ? lower(value.Scalar()) : "";
      if (name == "mp2_type") {
        if (v != "df") qc.fail(value, field, fmt::format("'{}' is not supported; dfmp2 computes density-fitted MP2 (mp2_type: df)", v));
      } else if (name == "scf_type") {
        if (v == "df" || v == "mem_df" || v == "disk_df") scf["type"] = "df";
        else if (v == "pk" || v == "direct" || v == "out_of_core") scf["type"] = "exact";
        else qc.fail(value, field, fmt::format("'{}' is not supported (df, mem_df and disk_df run dfmp2's DF-SCF; pk, direct and out_of_core its exact SCF)", v));
      } else if (name == "perturb_h") {  // Psi4 applies perturb_dipole only with perturb_h true
        const std::optional<bool> b = as_bool(v);
        if (!b) qc.fail(value, field, fmt::format("expected true or false, got '{}'", value.IsScalar() ? value.Scalar() : YamlReader::kind(value)));
        perturb_h = value;
      } else if (name == "perturb_dipole") {
        perturb_dipole = value;
        out["perturb_dipole"] = value;
      } else if (name == "perturb_with") {
        if (v != "dipole") qc.fail(value, field, fmt::format("'{}' is not supported; dfmp2 takes a uniform field (perturb_with: dipole, with perturb_dipole)", value.IsScalar() ? value.Scalar() : YamlReader::kind(value)));
      } else if (name == "reference") {
        out["reference"] = value.IsScalar() ? YAML::Node(v) : value;  // Psi4 takes UHF as well as uhf
      } else if (name == "freeze_core") {
        // Psi4 takes true/false and 1/0 here (and policies dfmp2 does not have).
        if (v == "1") out["frozen_core"] = true;
        else if (v == "0") out["frozen_core"] = false;
        else if (as_bool(v)) out["frozen_core"] = *as_bool(v);
        else qc.fail(value, field, fmt::format("expected true or false, got '{}'", value.IsScalar() ? value.Scalar() : YamlReader::kind(value)));
      } else {
        const std::string key = it->second;
        if (key.rfind("scf.", 0) == 0) scf[key.substr(4)] = value;
        else out[key] = value;
      }
    }
  }
  if (scf.size() > 0) out["scf"] = scf;
  // Psi4's field: perturb_dipole counts only with perturb_h true; either alone is a field half given.
  const bool field_on = perturb_h && *as_bool(lower(perturb_h->Scalar()));
  if (perturb_dipole && !field_on) {
    qc.fail(*perturb_dipole, "keywords.perturb_dipole", "needs perturb_h: true (as in Psi4, the field applies only then)");
  }
  if (field_on && !perturb_dipole) {
    qc.fail(*perturb_h, "keywords.perturb_h", "true needs perturb_dipole: [Fx, Fy, Fz] (a.u.)");
  }

}

}  // namespace

Input read_qcschema_input(const std::string& path, int node_ranks) {
  YamlReader ctx(path);
  // The bytes first (UTF-8, nesting depth), before any parser recurses into them. JSON is YAML, so the one loader (its
  // node limits, keys given twice) reads it and keeps every value's line:column; but YAML also takes what JSON does not
  // (unquoted words, comments), so the text must also parse as JSON.
  const std::string text = read_json_text(path, path);
  const YAML::Node root = load_yaml_file(path, path, kMaxYamlNodes, "field");
  const nlohmann::json as_json = parse_atomic_input(text, root, ctx);
  const QcReader qc(ctx);
  if (!root.IsMap()) ctx.fail(root, fmt::format("expected a QCSchema AtomicInput (a JSON object), got {}", YamlReader::kind(root)));
  qc.check_fields(root, "", kTopFields);
  if (const YAML::Node n = root["schema_name"]) {
    const std::string name = qc.text(n, "schema_name", "a string");
    if (name != "qcschema_input") qc.fail(n, "schema_name", fmt::format("expected 'qcschema_input', got '{}'", name));
  }
  const std::string driver = lower(qc.text(qc.require(root, "driver", "driver", "energy"), "driver", "a string"));
  // The drivers are the YAML input's (driver_names): a new driver is known here without a change.
  const std::vector<std::string> drivers = linalg::names_of(driver_names());
  if (std::find(drivers.begin(), drivers.end(), driver) == drivers.end()) {
    qc.fail(root["driver"], "driver",
            fmt::format("'{}' is not supported; dfmp2 computes energies, DF-MP2 gradients, Hessians and MP2 properties (driver: {})",
                        driver, fmt::join(drivers, ", ")));
  }
  const YAML::Node model = qc.require(root, "model", "model", "{method: mp2, basis: ...}");
  if (!model.IsMap()) qc.fail(model, "model", fmt::format("expected a mapping {{method, basis}}, got {}", YamlReader::kind(model)));
  qc.check_fields(model, "model", kModelFields);
  const std::string method = lower(qc.text(qc.require(model, "method", "model.method", "mp2"), "model.method", "a string"));
  // The methods are the YAML input's (chem::mp2_method_names), as Psi4 names them.
  const std::vector<std::string> methods = linalg::names_of(chem::mp2_method_names());
  if (std::find(methods.begin(), methods.end(), method) == methods.end()) {
    qc.fail(model["method"], "model.method",
            fmt::format("'{}' is not supported; dfmp2 computes density-fitted MP2 and its spin-scaled forms (method: "
                        "{})", method, fmt::join(methods, ", ")));
  }
  const YAML::Node basis = qc.require(model, "basis", "model.basis", "an orbital basis set name");
  qc.text(basis, "model.basis", "a basis set name");

  YAML::Node out(YAML::NodeType::Map);
  out["molecule"] = molecule_mapping(qc, root, as_json);
  out["basis"] = basis;
  out["method"] = method;
  keywords_into(qc, root, out);
  if (driver != "energy") out["driver"] = driver;

  Input in;
  try {
    in = input_from_mapping(out, ctx, node_ranks);
  } catch (const InputError& e) {
    throw in_qcschema_names(e);
  } catch (const UnsupportedError& e) {
    throw in_qcschema_names(e);
  }
  in.molecule_source = path + " (QCSchema molecule, bohr)";
  in.as_read = as_json;
  in.qcschema = as_json;
  return in;
}

nlohmann::json qcschema_result(const Calculation& calc) {
  nlohmann::json j = results_json(calc);
  const nlohmann::json& q = *calc.input.qcschema;
  j["id"] = q.contains("id") ? q["id"] : nlohmann::json(nullptr);
  j["molecule"] = q["molecule"];
  j["driver"] = q["driver"];
  j["model"] = q["model"];
  j["keywords"] = q.contains("keywords") ? q["keywords"] : nlohmann::json::object();
  j["protocols"] = q.contains("protocols") ? q["protocols"] : nlohmann::json::object();
  if (q.contains("extras") && q["extras"].is_object())
    for (const auto& [k, v] : q["extras"].items())
      if (k != "dfmp2") j["extras"][k] = v;
  return j;
}

nlohmann::json qcschema_failure(const nlohmann::json& input, const linalg::FailureReport& report,
                                const std::string& printed_line) {
  // QCEngine's error types: what the input asked for cannot be done as given, the machine ran short, the numbers
  // did not converge, or a bug.
  std::string type = "input_error";
  switch (report.exit_code) {
    case 5: type = "convergence_error"; break;
    case 6: type = "resource_error"; break;
    case 70: type = "unknown_error"; break;
    default: break;
  }
  nlohmann::json f;
  f["id"] = input.is_object() && input.contains("id") && input["id"].is_string() ? input["id"] : nlohmann::json(nullptr);
  f["input_data"] = input;
  f["success"] = false;
  f["error"] = {{"error_type", type},
                {"error_message", printed_line},
                {"extras", {{"exit_code", report.exit_code}}}};
  f["extras"] = nlohmann::json::object();
  return f;
}

}  // namespace dfmp2::app
