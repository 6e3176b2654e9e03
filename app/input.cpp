#include "app/input.hpp"
#include "app/yaml_file.hpp"
#include "app/counterpoise_gradient.hpp"
#include "app/mp2_options.hpp"
#include "app/cbs_options.hpp"
#include "app/driver_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <regex>
#include <set>
#include <thread>

#include <sched.h>
#include <unistd.h>

#include "chem/system/system.hpp"
#include "devices/registry.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"
#include "linalg/kept_files.hpp"
#include "linalg/inverse_sqrt.hpp"

namespace dfmp2::app {
namespace fs = std::filesystem;

namespace {

// Without `memory`, a run may use this share of the memory available when it starts: most of it, with room left for
// the system and the page cache that scratch files live in.
constexpr double kDefaultMemoryShare = 0.5;

// `memory` beyond any machine is a slip (a unit or an exponent too many), not a promise the run can keep.
constexpr double kMaxMemoryBytes = 1125899906842624.0;  // 1 PiB

const std::vector<std::string> kKeys = {"integrals", "synthetic", "molecule",  "basis",   "aux_basis",
                                        "reference", "scf",       "save_integrals", "frozen_core", "interaction", "driver", "backends", "precision",
                                        "metric",    "screening", "memory",      "threads",  "output",
                                        "device",    "scratch",   "mp2_storage", "mpi", "cost", "method", "mp2_os_scale", "mp2_ss_scale", "mp2_sos_scale", "perturb_dipole", "properties", "external_charges", "cbs"};
}  // namespace

const std::vector<std::string>& input_keys() { return kKeys; }

linalg::DenseOptions default_dense_options() {
  const auto library = linalg::have_elpa() ? linalg::DenseLibrary::elpa : linalg::DenseLibrary::scalapack;
  return {library, library, 64};
}

namespace {

const std::vector<std::string> kCostKeys = {"instances", "cpu_instance"};
const std::vector<std::string> kDeviceKeys = {"compile_cache", "host_fallback", "step_precision", "trn1", "trn2"};
const std::vector<std::string> kMoleculeKeys = {"xyz", "file", "units", "charge", "multiplicity"};
const std::vector<std::string> kScfKeys = {"type", "jk_basis", "e_convergence", "d_convergence", "max_iterations",
                                           "guess", "jk_storage", "precision"};
const std::vector<std::string> kScreeningKeys = {"threshold", "block", "compare"};
const std::vector<std::string> kSyntheticKeys = {"shape", "nbasis", "nocc", "naux", "seed"};
const std::vector<std::string> kMetricKeys = {"method", "threshold", "tolerance", "max_iterations"};
const std::vector<std::string> kInteractionKeys = {"bsse"};
const std::vector<std::string> kMpiKeys = {"distributed_min_order", "cholesky", "eigensolver"};



// YAML node -> JSON, keeping scalars' types as YAML would resolve them (for the results file's echo).
nlohmann::json to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : node) j[kv.first.IsScalar() ? kv.first.Scalar() : std::string("?")] = to_json(kv.second);
    return j;
  }
  if (node.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& v : node) j.push_back(to_json(v));
    return j;
  }
  if (node.IsNull()) return nullptr;
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: a string whatever it looks like
  if (auto i = as_integer(s)) return *i;
  if (auto b = as_bool(s)) return *b;
  if (auto d = as_number(s)) return *d;
  return s;
}

// Only regular files are read: a FIFO would block the run forever, a folder or a device is a mistake.
void require_regular_file(const fs::path& path, const std::function<void(const std::string&)>& fail) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) fail(fmt::format("'{}' does not exist", path.string()));
  if (fs::is_directory(status)) fail(fmt::format("'{}' is a folder, expected a file", path.string()));
  if (!fs::is_regular_file(status)) {
    fail(fmt::format("'{}' is not a regular file (a FIFO, socket or device?)", path.string()));
  }
}

}  // namespace

// $XDG_CACHE_HOME/dfmp2/neuron, else ~/.cache/dfmp2/neuron; empty (no persistent cache) when neither is set.
std::string default_compile_cache() {
  const std::string cache = linalg::user_cache_folder();
  return cache.empty() ? cache : cache + "/neuron";
}


// MemAvailable of /proc/meminfo (what the kernel can give without swapping), else physical memory.
double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
}

// With several ranks on a node (mpirun), each rank's share of that.
double default_memory_bytes(int node_ranks) {
  return kDefaultMemoryShare * available_memory_bytes() / double(std::max(1, node_ranks));
}

// $TMPDIR, else /tmp: where large temporary files belong on Unix machines and clusters.
std::string default_scratch_folder() {
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') return t;
  return "/tmp";
}

// Hardware threads this process may run on (its CPU affinity), which is what `threads` can usefully use.
int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The cores this process may use, shared with the other ranks on its node when they may use the same ones (mpirun
// binds each rank to its own cores when there are enough, and then the affinity alone says it).
int default_threads(int node_ranks) {
  const int node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) / std::max(1, node_ranks);
  return std::max(1, std::min(available_cores(), node));
}

namespace {

std::string& program_location() {
  static std::string location;
  return location;
}

bool is_under(const fs::path& path, const fs::path& folder) {
  const auto rel = path.lexically_relative(folder);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

void set_program_location(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  program_location() = ec ? path : canonical.string();
}

// The library that came with this program. A build tree's program (or a test program, which says nothing of where
// it is) reads the source tree's inputs/basis; an installed one reads <prefix>/share/dfmp2/basis, found from its
// own place (<prefix>/bin/dfmp2, <prefix>/lib/python3/dist-packages/dfmp2.so), so the install can move and needs
// no source tree.
std::string library_basis_dir() {
  const std::string& location = program_location();
  std::error_code ec;
  if (location.empty() || is_under(location, fs::weakly_canonical(DFMP2_BUILD_DIR, ec))) return DFMP2_SOURCE_BASIS_DIR;
  const fs::path installed = fs::path("share") / "dfmp2" / "basis";
  fs::path folder = fs::path(location).parent_path();
  for (int up = 0; up < 4 && !folder.empty(); ++up, folder = folder.parent_path()) {
    if (fs::is_directory(folder / installed, ec)) return (folder / installed).string();
    if (folder == folder.root_path()) break;
  }
  // Not found: where an install puts it beside bin/, so that the "no such basis" message names the place.
  return (fs::path(location).parent_path().parent_path() / installed).string();
}

// The folders of $DFMP2_BASIS_DIR (':'-separated, searched in order, as Psi4 searches PSIPATH), then the library
// that came with the program.
std::string default_basis_dir() {
  if (const char* env = std::getenv("DFMP2_BASIS_DIR"); env != nullptr && *env != '\0')
    return std::string(env) + ":" + library_basis_dir();
  return library_basis_dir();
}

std::string default_memory_text(int node_ranks) {
  return fmt::format("{} (default: {:.0f}% of the {} available)", linalg::format_bytes(default_memory_bytes(node_ranks)),
                     100 * kDefaultMemoryShare, linalg::format_bytes(available_memory_bytes()));
}


std::optional<double> parse_memory_size(const std::string& text) {
  static const std::regex size(R"(^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, size)) return std::nullopt;
  // strtod, not stod: an out-of-range number ("1e400", "1e-400") is a bad size, not an exception.
  const double value = std::strtod(m[1].str().c_str(), nullptr);
  std::string unit = m[2].str();
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::vector<std::pair<std::string, double>> units = {
      {"", 1.0},      {"b", 1.0},      {"kb", 1e3},          {"mb", 1e6},          {"gb", 1e9},
      {"tb", 1e12},   {"kib", 1024.0}, {"mib", 1048576.0},   {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const auto& [name, factor] : units) {
    if (unit == name) {
      const double bytes = value * factor;
      if (!std::isfinite(bytes) || bytes <= 0) return std::nullopt;
      return bytes;
    }
  }
  return std::nullopt;
}

namespace {


double positive_number(const YAML::Node& n, const YamlReader& ctx, const std::string& key) {
  const std::string value = ctx.scalar(n, key, "a positive number");
  if (const auto v = as_number(value); v && std::isfinite(*v) && *v > 0) return *v;
  ctx.fail_key(n, key, fmt::format("{{key}}: expected a positive number, got '{}'", value));
}

}  // namespace

// The fitting set Psi4 1.3.2 uses when none is named: <basis>-ri / <basis>-jkfit, except for orbital bases that have
// none of their own (inputs/basis/README.md), as Psi4 reports them (BasisSet.build(mol, "DF_BASIS_MP2", "", "RIFIT",
// basis).blend(), and the same for JKFIT): the Pople sets take the correlation-consistent set of their zeta level,
// augmented as their diffuse functions are, the (X+d) sets that of X, def2-SVPD and -TZVPD their own RI set and the
// undiffuse JKFIT one.
std::string default_fitting(const std::string& basis, const std::string& kind) {
  std::string b = basis;
  std::transform(b.begin(), b.end(), b.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool ri = kind == "ri";
  // Pople: 6-31G and 6-311G, with or without polarisation (*, **, (d), (d,p)), by their diffuse functions.
  const auto pople = [&](const std::string& stem, const char* zeta) -> std::optional<std::string> {
    if (b.rfind(stem, 0) != 0) return std::nullopt;
    const std::string rest = b.substr(stem.size());
    const std::string diffuse = rest.rfind("++g", 0) == 0 ? "aug-" : rest.rfind("+g", 0) == 0 ? "heavy-aug-" : "";
    if (diffuse.empty() && rest.rfind("g", 0) != 0) return std::nullopt;
    return diffuse + "cc-pv" + zeta + "z-" + kind;
  };
  if (b == "sto-3g" || b == "3-21g") return ri ? "def2-qzvpp-ri" : "def2-svp-jkfit";
  if (const auto f = pople("6-311", "t")) return *f;
  if (const auto f = pople("6-31", "d")) return *f;
  if (b == "jun-cc-pv(d+d)z") return "jun-cc-pvdz-" + kind;
  if (b == "aug-cc-pv(d+d)z") return "aug-cc-pvdz-" + kind;
  if (b == "aug-cc-pv(t+d)z") return "aug-cc-pvtz-" + kind;
  if (b == "def2-svpd") return ri ? "def2-svpd-ri" : "def2-svp-jkfit";
  if (b == "def2-tzvpd") return ri ? "def2-tzvpd-ri" : "def2-tzvp-jkfit";
  return b + "-" + kind;
}

namespace {

// The charges and multiplicities a molecule or fragment may have: beyond them a value is a slip, not a molecule.
constexpr std::pair<int, int> kCharges{-1000, 1000}, kMultiplicities{1, 1001};

// An integer key in [low, high], or none when the key is absent; `expected` says what the message expects.
std::optional<int> integer_key(const YAML::Node& n, const YamlReader& ctx, const std::string& key, int low, int high,
                               const std::string& expected) {
  if (!n) return std::nullopt;
  const auto v = as_integer(ctx.scalar(n, key, expected.c_str()));
  if (!v || *v < low || *v > high) {
    ctx.fail_key(n, key, fmt::format("{{key}}: expected {}, got '{}'", expected, n.Scalar()));
  }
  return static_cast<int>(*v);
}

// A molecule whose spin nobody gave (neither `multiplicity` nor a fragment's) is taken as a singlet; when its
// fragments' electrons make it an open shell instead, that is a guess of its spin state, not the user's: refused.
void require_open_shell_asked_for(const chem::Molecule& mol, bool multiplicity_given, const YAML::Node& at,
                                  const YamlReader& ctx) {
  if (multiplicity_given || mol.multiplicity == 1) return;
  std::vector<int> parts;
  for (const auto& f : mol.fragments) parts.push_back(f.multiplicity);
  ctx.fail_key(at, "molecule.multiplicity",
               fmt::format("{{key}}: not given, and the fragments' electrons make this an open shell (by the rules "
                           "Psi4 and qcelemental apply, multiplicity {} from the fragments' {}); give "
                           "molecule.multiplicity, or each fragment's multiplicity",
                           mol.multiplicity, fmt::join(parts, ", ")));
}

// The molecule's charge and multiplicity (keys `charge`, `multiplicity`, and the fragments' own lines): the
// fragments' and the complex's completed from what was given as Psi4 and qcelemental complete them
// (chem::fill_charges_and_multiplicities), and a whole number of alpha and beta electrons.
void read_charge_and_multiplicity(const YAML::Node& node, const YamlReader& ctx, chem::Molecule& mol) {
  const std::optional<int> charge =
      integer_key(node["charge"], ctx, "molecule.charge", kCharges.first, kCharges.second, "an integer");
  const std::optional<int> multiplicity = integer_key(node["multiplicity"], ctx, "molecule.multiplicity",
                                                      kMultiplicities.first, kMultiplicities.second,
                                                      "an integer 2S + 1 >= 1");
  try {
    chem::fill_charges_and_multiplicities(mol, charge, multiplicity);
  } catch (const InputError& e) {
    const YAML::Node at = e.key() == "molecule.charge" && node["charge"]                 ? node["charge"]
                          : e.key() == "molecule.multiplicity" && node["multiplicity"] ? node["multiplicity"]
                          : node["xyz"]                                                 ? node["xyz"]
                                                                                        : node;
    ctx.fail_key(at, e.key(), e.text());
  }
  const bool multiplicity_given =
      node["multiplicity"] || std::any_of(mol.fragments.begin(), mol.fragments.end(),
                                          [](const chem::Fragment& f) { return f.given_multiplicity.has_value(); });
  require_open_shell_asked_for(mol, multiplicity_given, node["xyz"] ? node["xyz"] : node, ctx);
  // The charge and the multiplicity must leave a whole number of alpha and beta electrons: the error names both.
  // Without a multiplicity the charge is what the user gave, so the error is the charge's and says what to add.
  try {
    chem::spin_occupied(mol, mol.multiplicity);
  } catch (const InputError& e) {
    const int electrons = chem::electron_count(mol);
    if (multiplicity_given && electrons > 0)
      ctx.fail_key(node["multiplicity"] ? node["multiplicity"] : node, e.key(), e.text());
    ctx.fail_key(node["charge"] ? node["charge"] : node, "molecule.charge",
                 fmt::format("{{key}}: charge {} leaves {} electron{}, {}", mol.charge, electrons,
                             std::abs(electrons) == 1 ? "" : "s",
                             electrons <= 0 ? "none at all"
                                            : "an odd count, and molecule.multiplicity is 1 when not given; an open "
                                              "shell needs its multiplicity (2 for a doublet)"));
  }
}

// Key `reference` (molecule input): rhf, uhf or rohf; by default RHF for a singlet and UHF otherwise (as PySCF's
// scf.HF chooses). What cannot run is refused here: RHF for an open shell, ROHF with the mixed-precision SCF.
void read_reference(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const int multiplicity = in.molecule->multiplicity;
  in.reference = multiplicity == 1 ? chem::ScfReference::rhf : chem::ScfReference::uhf;
  const YAML::Node n = root["reference"];
  if (n) in.reference = ctx.choice(n, "reference", chem::scf_reference_names(), "reference");
  if (in.reference == chem::ScfReference::rhf && multiplicity != 1) {
    ctx.fail_key(n, "reference", fmt::format("{{key}}: rhf is for closed shells, and molecule.multiplicity is {}; use "
                                             "uhf or rohf", multiplicity));
  }
  if (in.reference == chem::ScfReference::rohf && in.scf.precision == chem::ScfPrecision::mixed) {
    ctx.fail_key(n, "reference", "{key}: rohf runs its SCF in fp64; scf.precision mixed is offered for rhf and uhf");
  }
}

// The atoms of a molecule mapping (or of one fragment of a list): `xyz` lines or an .xyz `file`, in `units`; `key`
// names it in messages ("molecule", "molecule[1]").
chem::Molecule read_atoms(const YAML::Node& node, const YamlReader& ctx, const std::string& key, Input& in) {
  if (node["xyz"] && node["file"]) {
    ctx.fail(node["file"], fmt::format("keys '{0}.xyz' and '{0}.file' exclude each other", key));
  }
  std::string text, source;
  if (const YAML::Node n = node["xyz"]) {
    text = ctx.scalar(n, key + ".xyz", "xyz lines 'Symbol x y z'");
    source = ctx.where(n) + " (" + key + ".xyz)";
  } else if (const YAML::Node n = node["file"]) {
    const fs::path path = ctx.resolve(ctx.scalar(n, key + ".file", "a file path"));
    require_regular_file(path, [&](const std::string& what) { ctx.fail_key(n, key + ".file", "{key}: " + what); });
    std::ifstream f(path);
    if (!f) ctx.fail_key(n, key + ".file", fmt::format("{{key}}: cannot read '{}'", path.string()));
    in.molecule_file = path.string();
    text.assign(std::istreambuf_iterator<char>(f), {});
    // A standard .xyz file starts with the atom count and a comment line.
    std::istringstream lines(text);
    std::string first, rest;
    std::getline(lines, first);
    if (as_integer(first)) {
      std::getline(lines, rest);  // comment
      text.assign(std::istreambuf_iterator<char>(lines), {});
    }
    source = path.string();
  } else {
    ctx.fail_key(node, key, "{key}: missing 'xyz' (inline lines) or 'file' (an .xyz file)");
  }
  if (in.molecule_source.empty()) in.molecule_source = source;
  chem::Molecule mol = chem::parse_xyz_lines(text, source);
  if (const YAML::Node n = node["units"]) {
    const std::string units = ctx.scalar(n, key + ".units", "angstrom or bohr");
    if (units == "bohr") {
      for (auto& a : mol.atoms) {
        a.x /= chem::kBohrPerAngstrom;
        a.y /= chem::kBohrPerAngstrom;
        a.z /= chem::kBohrPerAngstrom;
      }
    } else if (units != "angstrom") {
      ctx.fail_key(n, key + ".units", fmt::format("{{key}}: expected angstrom or bohr, got '{}'", units));
    }
  }
  return mol;
}

// `molecule` as a list of fragments, each a mapping with its own atoms and, when given, its charge and multiplicity:
// the complex is their atoms in order; what was not given is completed as Psi4 and qcelemental complete it.
chem::Molecule read_fragment_list(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  if (node.size() == 0) ctx.fail_key(node, "molecule", "{key}: an empty list of fragments");
  chem::Molecule mol;
  bool multiplicity_given = false;
  for (std::size_t k = 0; k < node.size(); ++k) {
    const std::string key = fmt::format("molecule[{}]", k);
    const YAML::Node item = node[k];
    if (!item.IsMap()) {
      ctx.fail_key(item, key, fmt::format("{{key}}: expected a fragment {{xyz: ..., charge: 0, multiplicity: 1}}, got {}",
                                          YamlReader::kind(item)));
    }
    ctx.check_keys(item, key, kMoleculeKeys);
    const chem::Molecule part = read_atoms(item, ctx, key, in);
    if (!part.fragments.empty()) {
      ctx.fail_key(item["xyz"] ? item["xyz"] : item, key,
                   "{key}: a fragment of the list is one fragment (no '--' or charge lines in it; give charge and "
                   "multiplicity as its keys)");
    }
    auto bounded = [&](const char* field, std::pair<int, int> range) {
      return integer_key(item[field], ctx, key + "." + field, range.first, range.second,
                         fmt::format("an integer from {} to {}", range.first, range.second));
    };
    chem::Fragment f{mol.atoms.size(), part.atoms.size(), bounded("charge", kCharges), bounded("multiplicity", kMultiplicities)};
    multiplicity_given |= f.given_multiplicity.has_value();
    mol.atoms.insert(mol.atoms.end(), part.atoms.begin(), part.atoms.end());
    mol.fragments.push_back(f);
  }
  in.molecule_source = fmt::format("{} ({} fragments)", ctx.where(node), node.size());
  chem::check_geometry(mol, in.molecule_source);
  try {
    chem::fill_charges_and_multiplicities(mol, std::nullopt, std::nullopt);
    chem::spin_occupied(mol, mol.multiplicity);
  } catch (const InputError& e) {
    const std::string& k = e.key();
    const auto at = k.rfind("molecule fragment ", 0) == 0 ? std::stoul(k.substr(18)) - 1 : 0;
    ctx.fail_key(node[at], k, e.text());
  }
  require_open_shell_asked_for(mol, multiplicity_given, node, ctx);
  return mol;
}

void read_molecule_input(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node node = root["molecule"];
  chem::Molecule mol;
  if (node.IsSequence()) {
    mol = read_fragment_list(node, ctx, in);
  } else {
    if (!node.IsMap()) {
      ctx.fail_key(node, "molecule", fmt::format("{{key}}: expected a mapping {{xyz: ..., units: angstrom, charge: 0}} "
                                                 "or a list of fragments, got {}", YamlReader::kind(node)));
    }
    ctx.check_keys(node, "molecule", kMoleculeKeys);
    mol = read_atoms(node, ctx, "molecule", in);
    chem::check_geometry(mol, in.molecule_source);
    read_charge_and_multiplicity(node, ctx, mol);
  }
  if (!root["basis"]) ctx.fail("missing key 'basis' (the orbital basis, e.g. cc-pvdz) for 'molecule' input");
  in.basis = ctx.scalar(root["basis"], "basis", "a basis set name");
  read_cbs_options(root, ctx, in);  // a series (cc-pv[dt]z): in.basis becomes its largest basis
  in.aux_basis = root["aux_basis"] ? ctx.scalar(root["aux_basis"], "aux_basis", "a basis set name")
                                    : default_fitting(in.basis, "ri");
  in.jk_basis = default_fitting(in.basis, "jkfit");
  // Paths to .gbs files are relative to the YAML file, like every path in it.
  auto resolve_basis = [&](std::string& name) {
    if (chem::is_basis_file_path(name)) {
      name = ctx.resolve(name).string();
    }
  };
  resolve_basis(in.basis);
  resolve_basis(in.aux_basis);
  // The orbital basis's effective core potentials set each atom's nuclear charge and electrons before anything
  // counts them (occupations, frozen cores, fragments).
  try {
    chem::assign_core_electrons(mol, in.basis, in.basis_dir, "basis");
  } catch (const InputError& e) {
    if (e.where().empty() && !e.key().empty()) ctx.fail_key(root["basis"], e.key(), e.text());
    throw;
  }
  in.molecule = mol;

  if (const YAML::Node scf = root["scf"]) {
    if (!scf.IsMap()) ctx.fail_key(scf, "scf", fmt::format("{{key}}: expected a mapping {{type: df, ...}}, got {}", YamlReader::kind(scf)));
    ctx.check_keys(scf, "scf", kScfKeys);
    if (const YAML::Node n = scf["type"]) {
      const std::string type = ctx.scalar(n, "scf.type", "df or exact");
      if (type == "df") in.scf.type = chem::ScfType::df;
      else if (type == "exact" || type == "pk") in.scf.type = chem::ScfType::exact;
      else ctx.fail_key(n, "scf.type", fmt::format("{{key}}: expected df or exact, got '{}'", type));
    }
    if (const YAML::Node n = scf["jk_basis"]) {
      if (in.scf.type != chem::ScfType::df) ctx.fail_key(n, "scf.jk_basis", "{key} applies to scf type df only");
      in.jk_basis = ctx.scalar(n, "scf.jk_basis", "a basis set name");
      in.jk_basis_given = true;
    }
    if (const YAML::Node n = scf["e_convergence"]) in.scf.e_convergence = positive_number(n, ctx, "scf.e_convergence");
    if (const YAML::Node n = scf["d_convergence"]) in.scf.d_convergence = positive_number(n, ctx, "scf.d_convergence");
    if (const YAML::Node n = scf["max_iterations"]) {
      const auto v = as_integer(ctx.scalar(n, "scf.max_iterations", "a count >= 1"));
      if (!v || *v < 1 || *v > 10000) ctx.fail_key(n, "scf.max_iterations", fmt::format("{{key}}: expected a count >= 1, got '{}'", n.Scalar()));
      in.scf.max_iterations = static_cast<int>(*v);
    }
    if (const YAML::Node n = scf["jk_storage"]) {
      if (in.scf.type != chem::ScfType::df) ctx.fail_key(n, "scf.jk_storage", "{key} applies to scf type df only");
      in.jk_storage = ctx.choice(n, "scf.jk_storage", chem::jk_storage_names(), "storage");
    }
    if (const YAML::Node n = scf["guess"]) {
      const std::string guess = ctx.scalar(n, "scf.guess", "sad or core");
      if (guess == "sad") in.scf.guess = chem::ScfGuess::sad;
      else if (guess == "core") in.scf.guess = chem::ScfGuess::core;
      else ctx.fail_key(n, "scf.guess", fmt::format("{{key}}: expected sad or core, got '{}'", guess));
    }
    if (const YAML::Node n = scf["precision"]) {
      in.scf.precision = ctx.choice(n, "scf.precision", chem::scf_precision_names(), "precision");
      // The fp32 exchange is the DF K build of the stored tensor (chem/scf/scf.hpp).
      if (in.scf.precision == chem::ScfPrecision::mixed && in.scf.type != chem::ScfType::df)
        ctx.fail_key(n, "scf.precision", "{key}: mixed applies to scf type df only (the exact J/K is fp64)");
      if (in.scf.precision == chem::ScfPrecision::mixed && in.jk_storage == chem::JkStorage::recompute)
        ctx.fail_key(n, "scf.precision", "{key}: mixed needs scf.jk_storage memory or scratch (recompute builds K in fp64)");
    }
  }
  resolve_basis(in.jk_basis);
  read_reference(root, ctx, in);

  // Saving the orbitals and the AO integrals (nbf^2 naux doubles: a gigabyte for 16 waters in cc-pVDZ) is asked for,
  // never done by default: `true` saves beside the input as <input name>.h5, a path saves there.
  if (const YAML::Node n = root["save_integrals"]) {
    const std::string value = ctx.scalar(n, "save_integrals", "a file path, true or false");
    if (const auto b = as_bool(value)) {
      if (*b) {
        const fs::path stem = fs::path(ctx.file()).stem();
        in.save_integrals = (fs::path(ctx.file()).parent_path() / (stem.string() + ".h5")).string();
      }
    } else {
      in.save_integrals = ctx.resolve(value).string();
    }
  }
}

// Key `synthetic` (README, "Input keys"): one parser per key, each filling its part of `in`.
void read_synthetic(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  const auto names = chem::synthetic_shape_names();
  auto named = [&](const YAML::Node& n, const std::string& key) {
    in.synthetic_name = names[ctx.choice_index(n, key, names, "shape")];
    return *chem::named_synthetic_shape(in.synthetic_name);
  };
  auto count = [&](const YAML::Node& n, const std::string& key, long long min) {
    const auto v = as_integer(ctx.scalar(n, key, "an integer"));
    if (!v || *v < min || *v > 1000000) {
      ctx.fail_key(n, key, fmt::format("{{key}}: expected an integer >= {}, got '{}'", min, n.Scalar()));
    }
    return *v;
  };
  chem::SyntheticShape shape;
  if (node.IsMap()) {
    ctx.check_keys(node, "synthetic", kSyntheticKeys);
    const bool explicit_shape = node["nbasis"] || node["nocc"] || node["naux"];
    if (node["shape"] && explicit_shape) {
      ctx.fail_key(node, "synthetic", "{key}: give either 'shape' or 'nbasis', 'nocc' and 'naux', not both");
    }
    if (node["shape"]) {
      shape = named(node["shape"], "synthetic.shape");
    } else {
      for (const char* key : {"nbasis", "nocc", "naux"}) {
        if (!node[key]) ctx.fail_key(node, "synthetic", fmt::format("{{key}}: missing '{}' (or give a 'shape')", key));
      }
      shape.nbasis = count(node["nbasis"], "synthetic.nbasis", 2);
      shape.nocc = count(node["nocc"], "synthetic.nocc", 1);
      shape.naux = count(node["naux"], "synthetic.naux", 1);
      shape.seed = chem::kDefaultSyntheticSeed;
      if (shape.nocc >= shape.nbasis) {
        ctx.fail_key(node["nocc"], "synthetic.nocc", fmt::format("{{key}}: {} leaves no virtual orbitals (nbasis {})", shape.nocc, shape.nbasis));
      }
    }
    if (node["seed"]) shape.seed = static_cast<std::uint64_t>(count(node["seed"], "synthetic.seed", 0));
  } else {
    shape = named(node, "synthetic");
  }
  in.synthetic = shape;
}

// Key `backends`.
void read_backends(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  if (!node.IsSequence()) {
    ctx.fail_key(node, "backends", fmt::format("{{key}}: expected a list such as [openblas, eigen], got {}", YamlReader::kind(node)));
  }
  if (node.size() == 0) ctx.fail_key(node, "backends", "{key}: the list is empty; name at least one backend");
  in.backends.clear();
  const auto built = devices::built_backends();
  const auto known = devices::known_backends();
  for (const auto& item : node) {
    const std::string name = ctx.scalar(item, "backends", "a backend name");
    if (std::find(built.begin(), built.end(), name) == built.end()) {
      if (std::find(known.begin(), known.end(), name) != known.end()) {
        const std::string why = devices::unavailable_reason(name);
        throw UnsupportedError(ctx.where(item), "backends",
                               fmt::format("{{key}}: backend '{}' {} (built: {})", name,
                                           why.empty() ? std::string("is not built into this dfmp2")
                                                       : "cannot run here: " + why,
                                           fmt::join(built, ", ")));
      }
      const auto guess = nearest(name, known);
      ctx.fail_key(item, "backends", fmt::format("{{key}}: unknown backend '{}'{} (built: {})", name, guess ? fmt::format(" (did you mean '{}'?)", *guess) : "", fmt::join(built, ", ")));
    }
    if (std::find(in.backends.begin(), in.backends.end(), name) != in.backends.end()) {
      ctx.fail_key(item, "backends", fmt::format("{{key}}: backend '{}' is named twice", name));
    }
    in.backends.push_back(name);
  }
}

// Key `precision`.
void read_precision(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  // A single precision or a list of them, each backend running in each in order; or a mapping backend ->
  // precision(s), so that, say, eigen in fp64 and trn1 in bf16 compare in one input.
  auto parse_list = [&](const YAML::Node& n, const std::string& key) {
    std::vector<YAML::Node> items;
    if (n.IsSequence()) {
      if (n.size() == 0) {
        std::vector<std::string> names;
        for (const auto& [p, name] : chem::precision_names()) names.push_back(name);
        ctx.fail_key(n, key, fmt::format("{{key}}: the list is empty; name at least one of {}", fmt::join(names, ", ")));
      }
      for (const auto& item : n) items.push_back(item);
    } else {
      items.push_back(n);
    }
    std::vector<chem::Precision> out;
    for (const auto& item : items) {
      const auto p = ctx.choice(item, key, chem::precision_names(), "precision");
      if (std::find(out.begin(), out.end(), p) != out.end()) {
        ctx.fail_key(item, key, fmt::format("{{key}}: '{}' is named twice", item.Scalar()));
      }
      out.push_back(p);
    }
    return out;
  };
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string backend = ctx.scalar(kv.first, "precision", "a backend name");
      if (std::find(in.backends.begin(), in.backends.end(), backend) == in.backends.end()) {
        ctx.fail_key(kv.first, "precision", fmt::format("{{key}}: '{}' is not one of the backends ({})", backend, fmt::join(in.backends, ", ")));
      }
      in.backend_precisions[backend] = parse_list(kv.second, "precision." + backend);
    }
  } else {
    in.precisions = parse_list(node, "precision");
  }
}

// Key `metric`.
void read_metric(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  auto method = [&](const YAML::Node& n) {
    return ctx.choice(n, "metric", chem::metric_names(), "method");
  };
  if (node.IsMap()) {
    ctx.check_keys(node, "metric", kMetricKeys);
    if (!node["method"]) ctx.fail_key(node, "metric", "{key}: missing 'method' (cholesky, eigh or newton-schulz)");
    in.metric = method(node["method"]);
    const auto only_for = [&](const char* key, chem::MetricMethod m) {
      if (node[key] && in.metric != m) {
        ctx.fail_key(node[key], std::string("metric.") + key,
                     fmt::format("{{key}} applies to method {} only, not {}", chem::metric_name(m),
                                 chem::metric_name(in.metric)));
      }
    };
    only_for("threshold", chem::MetricMethod::eigh);
    only_for("tolerance", chem::MetricMethod::newton_schulz);
    only_for("max_iterations", chem::MetricMethod::newton_schulz);
    if (node["threshold"]) {
      in.eigh_threshold = positive_number(node["threshold"], ctx, "metric.threshold");
      if (const std::string why = linalg::eigh_threshold_problem(in.eigh_threshold); !why.empty())
        ctx.fail_key(node["threshold"], "metric.threshold", "{key}: " + why);
    }
    if (node["tolerance"]) in.newton_schulz.tolerance = positive_number(node["tolerance"], ctx, "metric.tolerance");
    if (const YAML::Node n = node["max_iterations"]) {
      const auto count = as_integer(ctx.scalar(n, "metric.max_iterations", "a count >= 1"));
      if (!count || *count < 1 || *count > linalg::kMaxNewtonSchulzIterations) {
        ctx.fail_key(n, "metric.max_iterations", fmt::format("{{key}}: expected a count >= 1, got '{}'", n.Scalar()));
      }
      in.newton_schulz.max_iterations = static_cast<int>(*count);
    }
  } else {
    in.metric = method(node);
  }
}

// Key `device`.
void read_device(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  if (!node.IsMap()) {
    ctx.fail_key(node, "device", fmt::format("{{key}}: expected a mapping {{compile_cache, host_fallback, step_precision, trn1, "
                               "trn2}}, got {}", YamlReader::kind(node)));
  }
  ctx.check_keys(node, "device", kDeviceKeys);
  if (const YAML::Node n = node["compile_cache"]) {
    const std::string value = ctx.scalar(n, "device.compile_cache", "a folder or false");
    if (const auto b = as_bool(value); b && !*b) {
      in.device.compile_cache.clear();
    } else if (b) {
      ctx.fail_key(n, "device.compile_cache", "{key}: expected a folder or false, got 'true'");
    } else {
      in.device.compile_cache = ctx.resolve(value).string();
    }
  }
  if (const YAML::Node n = node["host_fallback"]) {
    const auto b = as_bool(ctx.scalar(n, "device.host_fallback", "true or false"));
    if (!b) ctx.fail_key(n, "device.host_fallback", fmt::format("{{key}}: expected true or false, got '{}'", n.Scalar()));
    in.host_fallback = *b;
  }
  if (const YAML::Node steps = node["step_precision"]) {
    // Per-step operand format of bf16 and bf16x3 runs, e.g. {metric: bf16} for an all-bf16 metric, which is
    // never the default (chem::step_matmul_modes).
    if (!steps.IsMap()) {
      ctx.fail_key(steps, "device.step_precision", fmt::format("{{key}}: expected a mapping of step: precision ({} to fp32, "
                                  "bf16, bf16x3), got {}", fmt::join(chem::matmul_steps(), ", "), YamlReader::kind(steps)));
    }
    for (const auto& kv : steps) {
      const auto& steps = chem::matmul_steps();
      const std::string step = steps[ctx.choice_index(kv.first, "device.step_precision", steps, "step")];
      in.step_modes[step] =
          ctx.choice(kv.second, "device.step_precision." + step, linalg::matmul_mode_names(), "precision");
    }
    bool any_device_precision = false;
    for (const auto& b : in.backends)
      for (const auto p : in.precisions_of(b))
        any_device_precision = any_device_precision || p == chem::Precision::bf16 || p == chem::Precision::bf16x3;
    if (!any_device_precision) {
      ctx.fail_key(steps, "device.step_precision", "{key}: it applies to bf16 and bf16x3 runs, and no backend runs in "
                      "either precision");
    }
  }
  for (const char* device : {"trn1", "trn2"}) {
    const YAML::Node params = node[device];
    if (!params) continue;
    const std::string key = fmt::format("device.{}", device);
    if (!params.IsMap()) {
      ctx.fail_key(params, key, fmt::format("{{key}}: expected a mapping of parameter: value, got {}", YamlReader::kind(params)));
    }
    for (const auto& kv : params) {
      const std::string name = ctx.scalar(kv.first, key, "a parameter name");
      const std::string value = ctx.scalar(kv.second, key + "." + name, "a number");
      const auto v = as_number(value);
      if (!v || !std::isfinite(*v) || *v < 0) {
        ctx.fail_key(kv.second, key + "." + name, fmt::format("{{key}}: expected a number >= 0, got '{}'", value));
      }
      in.device.overrides[device][name] = *v;
    }
  }
}

// Key `cost`: whether the runs are priced, on which table of instances, and the instance CPU runs are priced as.
// Without the key the runs are priced when a device model runs (its prediction is the question the price answers).
void read_cost(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  bool priced = std::any_of(in.backends.begin(), in.backends.end(), devices::is_device_model);
  std::string file;
  std::optional<YAML::Node> cpu_node;
  if (node && node.IsMap()) {
    ctx.check_keys(node, "cost", kCostKeys);
    priced = true;
    if (const YAML::Node n = node["instances"]) {
      const std::string value = ctx.scalar(n, "cost.instances", "an instances file");
      if (value.empty()) ctx.fail_key(n, "cost.instances", "{key}: expected an instances file, got an empty string");
      file = ctx.resolve(value).string();
      std::error_code ec;
      if (!fs::exists(file, ec)) ctx.fail_key(n, "cost.instances", fmt::format("{{key}}: file '{}' does not exist", file));
    }
    if (const YAML::Node n = node["cpu_instance"]) cpu_node = n;
  } else if (node) {
    const auto b = as_bool(ctx.scalar(node, "cost", "true, false or a mapping {instances, cpu_instance}"));
    if (!b) {
      ctx.fail_key(node, "cost", fmt::format("{{key}}: expected true, false or a mapping {{instances, cpu_instance}}, "
                                             "got '{}'", node.Scalar()));
    }
    priced = *b;
  }
  if (!priced) return;
  CostSettings cost{load_instance_table(file), {}};
  const auto cpu_names = cost.table.names("cpu");
  cost.cpu_instance = cpu_node ? cpu_names[ctx.choice_index(*cpu_node, "cost.cpu_instance", cpu_names, "CPU instance")]
                               : cost.table.default_cpu;
  in.cost = std::move(cost);
}

// Key `screening`.
void read_screening(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  if (node.IsMap()) {
    ctx.check_keys(node, "screening", kScreeningKeys);
    in.screening.enabled = true;
    if (const YAML::Node n = node["threshold"]) {
      const std::string value = ctx.scalar(n, "screening.threshold", "a number >= 0");
      const auto v = as_number(value);
      if (!v || !std::isfinite(*v) || *v < 0) {
        ctx.fail_key(n, "screening.threshold", fmt::format("{{key}}: expected a number >= 0, got '{}'", value));
      }
      in.screening.threshold = *v;
    }
    if (const YAML::Node n = node["block"]) {
      const auto v = as_integer(ctx.scalar(n, "screening.block", "a block size >= 1"));
      if (!v || *v < 1 || *v > 4096) {
        ctx.fail_key(n, "screening.block", fmt::format("{{key}}: expected a block size from 1 to 4096, got '{}'", n.Scalar()));
      }
      in.screening.block = static_cast<linalg::Index>(*v);
    }
    if (const YAML::Node n = node["compare"]) {
      const auto b = as_bool(ctx.scalar(n, "screening.compare", "true or false"));
      if (!b) ctx.fail_key(n, "screening.compare", fmt::format("{{key}}: expected true or false, got '{}'", n.Scalar()));
      in.screening_compare = *b;
    }
  } else {
    const auto b = as_bool(ctx.scalar(node, "screening", "true, false or a mapping {threshold, block, compare}"));
    if (!b) {
      ctx.fail_key(node, "screening", fmt::format("{{key}}: expected true, false or a mapping {{threshold, block, compare}}, "
                                 "got '{}'", node.Scalar()));
    }
    in.screening.enabled = *b;
  }
}

// Key `mpi`: which factorisations are distributed over the ranks, and by which library (README "MPI").
void read_mpi(const YAML::Node& node, const YamlReader& ctx, Input& in) {
  if (!node.IsMap()) ctx.fail_key(node, "mpi", "{key}: expected a mapping {distributed_min_order, cholesky, eigensolver}");
  ctx.check_keys(node, "mpi", kMpiKeys);
  if (const YAML::Node n = node["distributed_min_order"]) {
    const auto v = as_integer(ctx.scalar(n, "mpi.distributed_min_order", "an order >= 1"));
    if (!v || *v < 1) {
      ctx.fail_key(n, "mpi.distributed_min_order",
                   fmt::format("{{key}}: expected a matrix order >= 1, got '{}'", n.Scalar()));
    }
    in.distributed_min_order = static_cast<linalg::Index>(*v);
  }
  auto library = [&](const char* key, linalg::DenseLibrary& out) {
    const YAML::Node n = node[key];
    if (!n) return;
    const std::string field = std::string("mpi.") + key;
    const std::string value = ctx.scalar(n, field, "scalapack or elpa");
    if (value == "scalapack") {
      out = linalg::DenseLibrary::scalapack;
    } else if (value == "elpa") {
      if (!linalg::have_elpa())
        throw UnsupportedError(in.path, field, "{key}: 'elpa' is not in this build (DFMP2_ELPA=OFF); use scalapack");
      out = linalg::DenseLibrary::elpa;
    } else {
      ctx.fail_key(n, field, fmt::format("{{key}}: expected scalapack or elpa, got '{}'", value));
    }
  };
  library("cholesky", in.dense.cholesky);
  library("eigensolver", in.dense.eigh);
}

}  // namespace

Input read_input(const std::string& path, int node_ranks) {
  YamlReader ctx(path);
  const YAML::Node root = load_yaml_file(path, path);
  if (root.IsNull()) ctx.fail("the input is empty; expected a mapping with at least 'integrals'");
  if (!root.IsMap()) ctx.fail(root, fmt::format("expected a mapping of keys (integrals, backends, ...), got {}", YamlReader::kind(root)));
  return input_from_mapping(root, ctx, node_ranks);
}

namespace {

// Key `interaction` (molecule input): {bsse: cp | nocp | both}. It needs fragments to interact, each of which is a
// calculation of its own: what cannot be honoured for each (a frozen-core count, one integral file) is refused.
void read_interaction(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node node = root["interaction"];
  if (!node.IsMap()) {
    ctx.fail_key(node, "interaction", fmt::format("{{key}}: expected a mapping {{bsse: cp | nocp | both}}, got {}",
                                                  YamlReader::kind(node)));
  }
  ctx.check_keys(node, "interaction", kInteractionKeys);
  InteractionOptions options;
  if (const YAML::Node n = node["bsse"]) {
    const std::string bsse = ctx.scalar(n, "interaction.bsse", "cp, nocp or both");
    if (bsse == "cp" || bsse == "both" || bsse == "nocp") {
      options.counterpoise = bsse != "nocp";
      options.uncorrected = bsse != "cp";
    } else {
      ctx.fail_key(n, "interaction.bsse", fmt::format("{{key}}: expected cp, nocp or both, got '{}'", bsse));
    }
  }
  const std::size_t fragments = in.molecule->fragments.size();
  if (fragments < 2) {
    ctx.fail_key(node, "interaction", "{key}: needs a molecule of two or more fragments ('--' lines in its xyz, or "
                                      "molecule as a list of fragments), and this one is a single fragment");
  }
  // Every fragment is a calculation of its own, so each needs electrons: a fragment of ghost atoms only, or one whose
  // charge takes every electron away (H+), has no energy to take away from the complex's.
  for (std::size_t k = 0; k < fragments; ++k) {
    const chem::Fragment& f = in.molecule->fragments[k];
    const chem::Molecule part = chem::fragment_molecule(*in.molecule, f);
    if (chem::electron_count(part) > 0) continue;
    const bool ghosts = std::all_of(part.atoms.begin(), part.atoms.end(), [](const chem::Atom& a) { return a.ghost; });
    ctx.fail_key(root["molecule"], fmt::format("molecule fragment {}", k + 1),
                 fmt::format("{{key}} (atoms {}-{}) {}; an interaction energy needs electrons in every fragment "
                             "(ghost atoms belong inside a fragment, beside its real atoms)",
                             f.first + 1, f.first + f.count,
                             ghosts ? "holds only ghost atoms" : fmt::format("has no electrons at charge {}", f.charge)));
  }
  if (in.frozen_core.kind == FrozenCore::Kind::count) {
    ctx.fail_key(root["frozen_core"], "frozen_core",
                 "{key}: a number of orbitals is one calculation's; with 'interaction' give true (each fragment "
                 "freezes its own atoms' core, as Psi4 does) or false");
  }
  if (in.save_integrals) {
    ctx.fail_key(root["save_integrals"], "save_integrals",
                 "{key}: an integral file holds one calculation's orbitals, and 'interaction' runs one per fragment "
                 "besides the complex; save them from single-point inputs");
  }
  in.interaction = options;
}

}  // namespace

Input input_from_mapping(const YAML::Node& root, const YamlReader& ctx, int node_ranks) {
  const std::string& path = ctx.file();
  std::error_code ec;
  Input in;
  in.path = path;
  // The defaults that share the node with the other ranks on it.
  in.memory_bytes = default_memory_bytes(node_ranks);
  in.memory_text = default_memory_text(node_ranks);
  in.threads = default_threads(node_ranks);
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      const auto guess = nearest(key, kKeys);
      ctx.fail(kv.first, guess ? fmt::format("unknown key '{}' (did you mean '{}'?)", key, *guess)
                               : fmt::format("unknown key '{}' (valid keys: {})", key, fmt::join(kKeys, ", ")));
    }
    if (!seen.insert(key).second) ctx.fail_key(kv.first, key, "{key} is given twice");
  }
  in.as_read = to_json(root);

  // integrals, synthetic or molecule: exactly one
  {
    std::vector<std::string> given;
    for (const char* key : {"integrals", "synthetic", "molecule"}) {
      if (root[key]) given.push_back(key);
    }
    if (given.size() > 1) {
      ctx.fail(root[given[1]], fmt::format("keys '{}' and '{}' exclude each other; give one", given[0], given[1]));
    }
    if (given.empty()) {
      ctx.fail("missing required key 'integrals' (path of the HDF5 integral file), 'synthetic' (a synthetic "
               "problem) or 'molecule' (with basis)");
    }
    if (!root["molecule"]) {
      for (const char* key : {"basis", "aux_basis", "reference", "scf", "save_integrals", "interaction", "cbs"}) {
        if (root[key]) ctx.fail_key(root[key], key, "{key} applies to 'molecule' input only");
      }
    }
  }
  if (root["molecule"]) read_molecule_input(root, ctx, in);
  if (const YAML::Node node = root["integrals"]) {
    const std::string value = ctx.scalar(node, "integrals", "a file path");
    if (value.empty()) ctx.fail_key(node, "integrals", "{key}: expected a file path, got an empty string");
    const fs::path resolved = ctx.resolve(value);
    if (!fs::exists(resolved, ec)) {
      ctx.fail_key(node, "integrals", fmt::format("{{key}}: file '{}' does not exist", resolved.string()));
    }
    require_regular_file(resolved, [&](const std::string& what) { ctx.fail_key(node, "integrals", "{key}: " + what); });
    in.integrals = resolved.string();
  }
  if (const YAML::Node node = root["synthetic"]) read_synthetic(node, ctx, in);

  if (const YAML::Node node = root["frozen_core"]) {
    const std::string value = ctx.scalar(node, "frozen_core", "true, false or a number of orbitals");
    if (auto b = as_bool(value)) {
      in.frozen_core.kind = *b ? FrozenCore::Kind::psi4_rule : FrozenCore::Kind::none;
    } else if (auto n = as_integer(value); n && *n >= 0 && *n <= 1000000) {
      in.frozen_core = {FrozenCore::Kind::count, static_cast<int>(*n)};
    } else {
      ctx.fail_key(node, "frozen_core", fmt::format("{{key}}: expected true, false or a number of orbitals >= 0, got '{}'", value));
    }
  }

  if (root["interaction"]) read_interaction(root, ctx, in);

  if (const YAML::Node node = root["backends"]) read_backends(node, ctx, in);
  else in.backends = {devices::default_backend()};

  if (const YAML::Node node = root["precision"]) read_precision(node, ctx, in);

  if (!root["precision"] || root["precision"].IsMap()) {
    // A backend whose precision is not given runs in fp64 on a CPU backend and in fp32 on a device model (it has
    // no fp64). A precision that is given is taken as given: fp64 on a device model is then an error (or a
    // counted host fallback).
    for (const auto& name : in.backends)
      if (devices::is_device_model(name) && !in.backend_precisions.count(name))
        in.backend_precisions[name] = {chem::Precision::fp32};
  }

  if (const YAML::Node node = root["metric"]) read_metric(node, ctx, in);

  if (const YAML::Node node = root["device"]) read_device(node, ctx, in);

  if (const YAML::Node node = root["screening"]) read_screening(node, ctx, in);

  read_cost(root["cost"], ctx, in);

  if (const YAML::Node node = root["mpi"]) read_mpi(node, ctx, in);

  if (const YAML::Node node = root["memory"]) {
    const std::string value = ctx.scalar(node, "memory", "a size such as '2 GiB'");
    const auto bytes = parse_memory_size(value);
    if (!bytes) ctx.fail_key(node, "memory", fmt::format("{{key}}: expected a size such as '2 GiB' or '500 MB', got '{}'", value));
    if (*bytes > kMaxMemoryBytes) {
      ctx.fail_key(node, "memory", fmt::format("{{key}}: '{}' is {}, beyond any machine (at most {})", value, linalg::format_bytes(*bytes), linalg::format_bytes(kMaxMemoryBytes)));
    }
    in.memory_bytes = *bytes;
    in.memory_text = value;
  }

  if (const YAML::Node node = root["scratch"]) {
    const std::string value = ctx.scalar(node, "scratch", "a folder");
    if (value.empty()) ctx.fail_key(node, "scratch", "{key}: expected a folder, got an empty string");
    in.scratch = ctx.resolve(value).string();
  }
  read_mp2_options(root, ctx, in);

  const int cores = available_cores();  // the default of `threads` (Input), and its limit
  if (const YAML::Node node = root["threads"]) {
    const std::string value = ctx.scalar(node, "threads", "a number of threads >= 1");
    const auto n = as_integer(value);
    if (!n || *n < 1) ctx.fail_key(node, "threads", fmt::format("{{key}}: expected a number of threads >= 1, got '{}'", value));
    // More threads than cores only slows the kernels down (they contend for the same cores); a larger number is
    // far more likely a slip than a wish.
    if (*n > cores) {
      ctx.fail_key(node, "threads", fmt::format("{{key}}: {} is more than the {} cores this run may use; give at most {} (or "
                                 "leave 'threads' out to use them all)", value, cores, cores));
    }
    in.threads = static_cast<int>(*n);
  }

  read_driver_options(root, ctx, in);

  if (const YAML::Node node = root["output"]) {
    const std::string value = ctx.scalar(node, "output", "a file path");
    if (value.empty()) ctx.fail_key(node, "output", "{key}: expected a file path, got an empty string");
    in.output = ctx.resolve(value).string();
  }
  return in;
}

}  // namespace dfmp2::app
