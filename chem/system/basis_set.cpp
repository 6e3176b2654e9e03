#include "chem/system/basis_set.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "linalg/errors.hpp"

namespace dfmp2::chem {
namespace {

namespace fs = std::filesystem;

// What a shell may hold. Far beyond every basis set in the library (exponents 0.0066 to 1.2e7), they keep a damaged
// file from reaching the integral code with numbers it cannot handle (overflow in the Boys function, a
// normalisation of zero).
constexpr int kMaxPrimitives = 100;
constexpr double kMinScale = 1e-2, kMaxScale = 1e2;
constexpr double kMinExponent = 1e-6, kMaxExponent = 1e11;
constexpr double kMaxCoefficient = 1e6;
// The def2 potentials (Rb to Rn) have lmax 3 to 5 and replace 28, 46, 60 or 78 electrons.
constexpr int kMaxPotentialL = 5;
constexpr int kMaxCoreElectrons = 92;

// One contracted shell as read from a file, before it is placed on an atom.
struct RawShell {
  int l = 0;
  int line = 0;  // of the shell's header line, for messages
  std::vector<double> exponents;
  std::vector<double> coefficients;
};

// An element's effective core potential as read from a file.
struct RawPotential {
  int core_electrons = 0;
  int lmax = 0;
  int line = 0;  // of the `SYMBOL-ECP` line, for messages
  std::vector<CorePotentialTerm> terms;
};

struct ElementEntry {
  std::vector<RawShell> shells;
  bool has_basis = false;  // a `Symbol 0` block with shells (possibly none) and `****`
  std::optional<RawPotential> potential;  // a `SYMBOL-ECP` block: core electrons the potential replaces
  std::string error;       // "<file>:<line>: <what>" when the element's block is malformed
};

struct ParsedFile {
  bool pure = true;                      // header `spherical` (or none) / `cartesian`
  std::map<int, ElementEntry> elements;  // by atomic number
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string token;
  while (in >> token) out.push_back(token);
  return out;
}

// A real number in Fortran or C notation ("1.5D+02", "0.3e-1", ".41806", "2"); false unless the whole token is one
// finite number.
bool parse_real(std::string token, double& value) {
  for (auto& c : token) {
    if (c == 'D' || c == 'd') c = 'e';
  }
  if (token.empty()) return false;
  const char* begin = token.c_str();
  char* end = nullptr;
  value = std::strtod(begin, &end);
  return end == begin + token.size() && std::isfinite(value);
}

bool parse_int(const std::string& token, int& value) {
  const auto* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// Angular momentum of a single-letter shell type (Gaussian94: S P D F G H I), -1 if unknown.
int shell_letter_l(char c) {
  switch (std::toupper(static_cast<unsigned char>(c))) {
    case 'S':
      return 0;
    case 'P':
      return 1;
    case 'D':
      return 2;
    case 'F':
      return 3;
    case 'G':
      return 4;
    case 'H':
      return 5;
    case 'I':
      return 6;
    default:
      return -1;
  }
}

const char* l_letter(int l) {
  static constexpr const char* kLetters[] = {"S", "P", "D", "F", "G", "H", "I"};
  return (l >= 0 && l < 7) ? kLetters[l] : "?";
}

// Reads a .gbs file line by line with line numbers; comments (`!` to the end of the line) and blank lines are
// skipped by next().
class LineReader {
 public:
  LineReader(std::istream& in, std::string file) : in_(in), file_(std::move(file)) {}

  // The next line with content, comment removed; false at the end of the file.
  bool next(std::string& line) {
    if (pending_) {
      line = std::move(*pending_);
      pending_.reset();
      return true;
    }
    std::string raw;
    while (std::getline(in_, raw)) {
      ++number_;
      if (!raw.empty() && raw.back() == '\r') raw.pop_back();
      if (const auto bang = raw.find('!'); bang != std::string::npos) raw.erase(bang);
      // Blank: nothing but white space as split() reads it (a vertical tab or form feed too), so that every line
      // returned has a first field.
      if (split(raw).empty()) continue;
      line = raw;
      last_ = raw;
      ++returned_;
      return true;
    }
    return false;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", file_, number_, what));
  }

  int number() const { return number_; }
  const std::string& file() const { return file_; }
  const std::string& last() const { return last_; }  // the last line next() returned
  long returned() const { return returned_; }        // lines next() has returned from the file

  // Gives `line` (the last line read) back to the next call of next().
  void unread(std::string line) { pending_ = std::move(line); }

 private:
  std::optional<std::string> pending_;
  std::string last_;
  long returned_ = 0;
  std::istream& in_;
  std::string file_;
  int number_ = 0;
};

std::string trimmed(const std::string& line) {
  const auto first = line.find_first_not_of(" \t");
  const auto last = line.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : line.substr(first, last - first + 1);
}

bool is_separator(const std::string& line) { return trimmed(line).rfind("****", 0) == 0; }

// `SYMBOL-ECP lmax ncore`: the potential, lmax + 1 parts, each a title line ("f-ul potential", "s-ul potential",
// ...), a count and that many lines `rpower exponent coefficient`. The first part is the local one (its terms carry
// l = lmax), the others the semilocal corrections of s, p, ... in order (l = 0, 1, ..., lmax - 1).
RawPotential read_ecp(LineReader& reader, const std::vector<std::string>& header, const std::string& symbol) {
  RawPotential potential;
  if (header.size() != 3 || !parse_int(header[1], potential.lmax) || !parse_int(header[2], potential.core_electrons) ||
      potential.lmax < 0 || potential.lmax > kMaxPotentialL || potential.core_electrons <= 0 ||
      potential.core_electrons % 2 != 0 || potential.core_electrons > kMaxCoreElectrons) {
    reader.fail(fmt::format("expected '{}-ECP lmax ncore' (lmax 0 to {}, ncore an even number of electrons up to {})",
                            symbol, kMaxPotentialL, kMaxCoreElectrons));
  }
  potential.line = reader.number();
  std::string line;
  for (int part = 0; part <= potential.lmax; ++part) {
    const int l = part == 0 ? potential.lmax : part - 1;
    if (!reader.next(line)) reader.fail(fmt::format("unexpected end of file in the ECP of {}", symbol));
    // title, e.g. "f-ul potential"
    if (!reader.next(line)) reader.fail(fmt::format("unexpected end of file in the ECP of {}", symbol));
    const auto count_fields = split(line);
    int count = 0;
    if (count_fields.size() != 1 || !parse_int(count_fields[0], count) || count < 1 || count > kMaxPrimitives) {
      reader.fail(fmt::format("expected the number of terms (1 to {}) of an ECP part of {}, got '{}'", kMaxPrimitives,
                              symbol, trimmed(line)));
    }
    for (int term = 0; term < count; ++term) {
      if (!reader.next(line)) reader.fail(fmt::format("unexpected end of file in the ECP of {}", symbol));
      const auto f = split(line);
      int power = 0;
      double a = 0, b = 0;
      if (f.size() != 3 || !parse_int(f[0], power) || !parse_real(f[1], a) || !parse_real(f[2], b)) {
        reader.fail(
            fmt::format("expected 'rpower exponent coefficient' in the ECP of {}, got '{}'", symbol, trimmed(line)));
      }
      // r^(power - 2): the def2 potentials have 1 and 2; the integral library's radial quadrature takes 0 to 4.
      if (power < 0 || power > 4) {
        reader.fail(fmt::format("ECP of {}: r power {} (expected 0 to 4; the term is r^(n-2) c exp(-a r^2))", symbol,
                                f[0]));
      }
      if (!(a >= kMinExponent && a <= kMaxExponent) || std::abs(b) > kMaxCoefficient) {
        reader.fail(fmt::format("ECP of {}: exponent {} or coefficient {} outside {:.0e} to {:.0e} and +-{:.0e}", symbol,
                                f[1], f[2], kMinExponent, kMaxExponent, kMaxCoefficient));
      }
      potential.terms.push_back(CorePotentialTerm{l, power, a, b});
    }
  }
  return potential;
}

// The shells of one element block, up to and including `****`.
std::vector<RawShell> read_shells(LineReader& reader, std::string line, const std::string& symbol) {
  std::vector<RawShell> shells;
  while (true) {
    if (is_separator(line)) return shells;
    const auto f = split(line);
    const std::string type = f.empty() ? std::string() : upper(f[0]);
    int nprim = 0;
    double scale = 0;
    const bool sp = type == "SP" || type == "L";
    const int l = (type.size() == 1 && !sp) ? shell_letter_l(type[0]) : (sp ? 0 : -1);
    if (f.size() != 3 || l < 0 || !parse_int(f[1], nprim) || !parse_real(f[2], scale)) {
      reader.fail(
          fmt::format("expected a shell 'S|P|D|F|G|H|I|SP|L nprim scale' or '****' in the block of {}, "
                      "got '{}'",
                      symbol, trimmed(line)));
    }
    const std::string what = sp ? "SP" : l_letter(l);
    if (nprim < 1 || nprim > kMaxPrimitives) {
      reader.fail(fmt::format("{} shell of {}: {} primitives (must be 1 to {})", what, symbol, nprim, kMaxPrimitives));
    }
    if (!(scale >= kMinScale && scale <= kMaxScale)) {
      reader.fail(fmt::format("{} shell of {}: scale factor {} (must be from {} to {}; it multiplies the exponents by "
                              "its square)",
                              what, symbol, f[2], kMinScale, kMaxScale));
    }
    RawShell s, p;
    s.l = l;
    p.l = 1;
    s.line = p.line = reader.number();
    for (int k = 0; k < nprim; ++k) {
      if (!reader.next(line)) {
        reader.fail(
            fmt::format("{} shell of {}: unexpected end of file after {} of {} primitives", what, symbol, k, nprim));
      }
      const auto g = split(line);
      double exponent = 0, c1 = 0, c2 = 0;
      const std::size_t want = sp ? 3 : 2;
      if (g.size() != want || !parse_real(g[0], exponent) || !parse_real(g[1], c1) || (sp && !parse_real(g[2], c2))) {
        reader.fail(fmt::format("{} shell of {}, primitive {} of {}: expected '{}', got '{}'", what, symbol, k + 1,
                                nprim, sp ? "exponent s-coefficient p-coefficient" : "exponent coefficient",
                                trimmed(line)));
      }
      if (!(exponent > 0)) reader.fail(fmt::format("{} shell of {}: exponent {} is not positive", what, symbol, g[0]));
      exponent *= scale * scale;
      if (exponent < kMinExponent || exponent > kMaxExponent) {
        reader.fail(fmt::format("{} shell of {}: exponent {} (scaled {:.6g}) is outside {:.0e} to {:.0e} bohr^-2, the "
                                "range the integrals are accurate in",
                                what, symbol, g[0], exponent, kMinExponent, kMaxExponent));
      }
      for (const double c : {c1, c2}) {
        if (std::abs(c) > kMaxCoefficient) {
          reader.fail(fmt::format("{} shell of {}: contraction coefficient {:.6g} is beyond {:.0e}", what, symbol, c,
                                  kMaxCoefficient));
        }
      }
      s.exponents.push_back(exponent);
      s.coefficients.push_back(c1);
      if (sp) {
        p.exponents.push_back(exponent);
        p.coefficients.push_back(c2);
      }
    }
    // A shell whose coefficients are all zero is no function at all (its normalisation divides by zero).
    auto all_zero = [](const RawShell& r) {
      return std::all_of(r.coefficients.begin(), r.coefficients.end(), [](double c) { return c == 0; });
    };
    if (all_zero(s) || (sp && all_zero(p))) {
      throw InputError(fmt::format("{}:{}: {} shell of {}: every contraction coefficient is zero", reader.file(),
                                   s.line, what, symbol));
    }
    shells.push_back(std::move(s));
    if (sp) shells.push_back(std::move(p));
    if (!reader.next(line)) reader.fail(fmt::format("unexpected end of file in the block of {} (no '****')", symbol));
  }
}

// `Symbol ... 0`: one or more element symbols (letters only) and a 0. Other free text between blocks is
// ignored, as Psi4 ignores it (def2-qzvpp-jkfit.gbs has a line of prose there).
bool is_element_line(const std::vector<std::string>& f) {
  if (f.size() < 2 || f.back() != "0") return false;
  for (std::size_t i = 0; i + 1 < f.size(); ++i) {
    if (f[i].size() > 2 ||
        !std::all_of(f[i].begin(), f[i].end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
      return false;
    }
  }
  return true;
}

// A line that belongs inside an element block: a shell header or a line of numbers.
bool is_block_line(const std::vector<std::string>& f) {
  double x = 0;
  int n = 0;
  if (parse_real(f[0], x)) return true;
  const std::string type = upper(f[0]);
  const bool shell_type = (type.size() == 1 && shell_letter_l(type[0]) >= 0) || type == "SP" || type == "L";
  return f.size() == 3 && shell_type && parse_int(f[1], n);
}

// Errors inside an element block are kept with the element and thrown only when a molecule needs that element,
// as Psi4 parses only the blocks it needs: Psi4 1.3.2's def2-svp-ri.gbs has a stray '*' line in the block of
// Sr, which must not stop water. Errors outside blocks are thrown at once.
ParsedFile parse_gbs(std::istream& in, const std::string& file) {
  ParsedFile parsed;
  LineReader reader(in, file);
  std::string line;
  bool seen_element = false;
  while (reader.next(line)) {
    const auto f = split(line);
    const std::string word = lower(f[0]);
    if (f.size() == 1 && (word == "spherical" || word == "cartesian")) {
      if (seen_element) reader.fail(fmt::format("'{}' after the first element block", f[0]));
      parsed.pure = word == "spherical";
      continue;
    }
    if (is_separator(line)) continue;
    if (!is_element_line(f)) {
      if (is_block_line(f)) {
        reader.fail(fmt::format("'{}' outside an element block (no 'Symbol 0' line before it)", trimmed(line)));
      }
      continue;  // free text
    }
    std::vector<int> zs;
    for (std::size_t i = 0; i + 1 < f.size(); ++i) {
      const int z = atomic_number(f[i]);
      if (z == 0) reader.fail(fmt::format("'{}' is not an element symbol", f[i]));
      zs.push_back(z);
    }
    seen_element = true;
    const int element_line = reader.number();
    const long element_index = reader.returned();
    const std::string symbol = element_symbol(zs.front());
    std::vector<RawShell> shells;
    try {
      if (!reader.next(line)) reader.fail(fmt::format("unexpected end of file after the element line of {}", symbol));
      const auto g = split(line);
      if (upper(g[0]) == upper(f[0]) + "-ECP") {
        const RawPotential potential = read_ecp(reader, g, symbol);
        for (const int z : zs) {
          auto& entry = parsed.elements[z];
          if (entry.potential && entry.error.empty()) {
            entry.error = fmt::format("{}:{}: second ECP for element {}", file, element_line, element_symbol(z));
          }
          entry.potential = potential;
        }
        continue;
      }
      shells = read_shells(reader, line, symbol);
    } catch (const InputError& e) {
      for (const int z : zs) {
        auto& entry = parsed.elements[z];
        if (entry.error.empty()) entry.error = e.what();
      }
      // Resume after this block: at its `****`, or at the next element line (which may be the line at fault,
      // when a block lacks its `****`).
      if (reader.returned() != element_index && is_element_line(split(reader.last()))) {
        reader.unread(reader.last());
        continue;
      }
      while (reader.next(line)) {
        if (is_separator(line)) break;
        if (is_element_line(split(line))) {
          reader.unread(line);
          break;
        }
      }
      continue;
    }
    for (const int z : zs) {
      auto& entry = parsed.elements[z];
      if (entry.has_basis && entry.error.empty()) {
        entry.error = fmt::format("{}:{}: second block for element {}", file, element_line, element_symbol(z));
      }
      entry.has_basis = true;
      entry.shells = shells;
    }
  }
  return parsed;
}

// Parsed files by path, for a process that loads the same basis many times (the Python module, a bench run). An
// entry is reused only while the file's bytes are the same: a size and modification time can stay the same through
// an edit (a copy that keeps times, a clock set back), and a stale basis gives a wrong energy without a word.
// Reading the file costs milliseconds; parsing it is what is saved.
struct CacheEntry {
  std::string text;
  std::shared_ptr<const ParsedFile> parsed;
};

std::shared_ptr<const ParsedFile> load_file(const fs::path& path) {
  static std::mutex mutex;
  static std::map<std::string, CacheEntry> cache;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the basis set file", path.string()));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw InputError(fmt::format("{}: cannot read the basis set file", path.string()));
  std::error_code ec;
  const std::string key = fs::absolute(path, ec).lexically_normal().string();
  {
    std::lock_guard lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end() && it->second.text == text) return it->second.parsed;
  }
  std::istringstream lines(text);
  auto parsed = std::make_shared<const ParsedFile>(parse_gbs(lines, path.string()));
  std::lock_guard lock(mutex);
  cache[key] = CacheEntry{std::move(text), parsed};
  return parsed;
}

}  // namespace

bool is_basis_file_path(const std::string& name) {
  const std::string l = lower(name);
  return name.find('/') != std::string::npos || (l.size() >= 4 && l.compare(l.size() - 4, 4, ".gbs") == 0);
}

std::string basis_file_name(const std::string& name) {
  std::string file = lower(name);
  for (auto& c : file) {
    if (c == '(' || c == ')' || c == ',')
      c = '_';
    else if (c == '*')
      c = 's';
    else if (c == '+')
      c = 'p';
  }
  return file + ".gbs";
}

namespace {
// The file of a basis name: a path as given, or the first library folder that has the name's file.
fs::path find_basis_file(const std::string& name, const std::string& library_dir, const std::string& key) {
  if (name.empty()) throw InputError("", key, "{key}: empty basis set name");
  fs::path path;
  if (is_basis_file_path(name)) {
    path = name;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      throw InputError("", key, fmt::format("{{key}}: no basis set file '{}'", name));
    }
  } else {
    // The library's folders in order (a ':'-separated list, as PATH); the first that has the file wins.
    const std::string file = basis_file_name(name);
    std::vector<std::string> folders;
    for (std::size_t start = 0;;) {
      const std::size_t colon = library_dir.find(':', start);
      const std::string folder = library_dir.substr(start, colon == std::string::npos ? colon : colon - start);
      folders.push_back(folder.empty() ? std::string(".") : folder);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    bool found = false;
    for (const auto& folder : folders) {
      path = fs::path(folder) / file;
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) {
        found = true;
        break;
      }
    }
    if (!found) {
      throw InputError("", key, fmt::format("{{key}}: no basis set '{}' (no file {} in {})", name, file, fmt::join(folders, ", ")));
    }
  }
  return path;
}
}  // namespace

BasisSet load_basis(const std::string& name, const Molecule& molecule, const std::string& library_dir,
                    const std::string& key, int max_l, const std::string& fallback) {
  const fs::path path = find_basis_file(name, library_dir, key);
  const auto primary = load_file(path);

  BasisSet basis;
  basis.name = name;
  basis.source = path.string();
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    const Atom& atom = molecule.atoms[a];
    const int z = atom.atomic_number != 0 ? atom.atomic_number : atomic_number(atom.symbol);
    if (z == 0) {
      throw InputError("", key, fmt::format("{{key}}: atom {} ('{}') is not an element", a + 1, atom.symbol));
    }
    auto parsed = primary;
    fs::path element_file = path;
    auto it = parsed->elements.find(z);
    if (it != parsed->elements.end() && !it->second.error.empty()) throw InputError(it->second.error);
    if ((it == parsed->elements.end() || !it->second.has_basis) && !fallback.empty()) {
      // Psi4's blend: an element the fitting set lacks takes the universal set's functions.
      const fs::path other = find_basis_file(fallback, library_dir, key);
      parsed = load_file(other);
      element_file = other;
      it = parsed->elements.find(z);
      if (it != parsed->elements.end() && !it->second.error.empty()) throw InputError(it->second.error);
      if (basis.name == name) {
        basis.name = name + " + " + fallback;
        basis.source += ", " + other.string();
      }
    }
    if (it == parsed->elements.end() || !it->second.has_basis) {
      throw InputError("", key, fmt::format("{{key}}: basis set '{}' has no functions for element {}",
                                            fallback.empty() ? name : name + "' (or '" + fallback, element_symbol(z)));
    }
    const std::array<double, 3> center{atom.x * kBohrPerAngstrom, atom.y * kBohrPerAngstrom, atom.z * kBohrPerAngstrom};
    // A ghost has no core to replace: its functions only (as Psi4 counts no core electrons on Gh(Xe)).
    if (const auto& potential = it->second.potential; potential && !atom.ghost) {
      if (potential->core_electrons != atom.core_electrons) {
        throw InputError(fmt::format("{}:{}", element_file.string(), potential->line), key,
                         fmt::format("{{key}}: '{}' replaces {} core electrons of atom {} ({}) by a potential, and the "
                                     "orbital basis {}; a fitting set cannot carry a core potential of its own",
                                     name, potential->core_electrons, a + 1, element_symbol(z),
                                     atom.core_electrons == 0 ? std::string("none")
                                                              : fmt::format("{}", atom.core_electrons)));
      }
      basis.core_potentials.push_back(CorePotential{static_cast<int>(a), potential->core_electrons, potential->lmax,
                                                    center, potential->terms});
    }
    for (const RawShell& raw : it->second.shells) {
      if (raw.l > max_l) {
        throw InputError(fmt::format("{}:{}", element_file.string(), raw.line), key,
                         fmt::format("{} shell of {}: angular momentum {} is beyond what the integral library of this "
                                     "build supports for {{key}} (at most {})",
                                     l_letter(raw.l), element_symbol(z), raw.l, max_l));
      }
      Shell s;
      s.l = raw.l;
      s.pure = raw.l <= 1 ? true : parsed->pure;
      s.exponents = raw.exponents;
      s.coefficients = raw.coefficients;
      s.center = center;
      s.atom = static_cast<int>(a);
      basis.shells.push_back(std::move(s));
    }
  }
  return basis;
}

void assign_core_electrons(Molecule& molecule, const std::string& name, const std::string& library_dir,
                           const std::string& key) {
  const fs::path path = find_basis_file(name, library_dir, key);
  const auto parsed = load_file(path);
  for (Atom& atom : molecule.atoms) {
    const int z = atom.atomic_number != 0 ? atom.atomic_number : atomic_number(atom.symbol);
    const auto it = parsed->elements.find(z);
    if (it != parsed->elements.end() && !it->second.error.empty()) throw InputError(it->second.error);
    atom.core_electrons = 0;
    if (it == parsed->elements.end() || !it->second.potential) continue;
    if (it->second.potential->core_electrons >= z) {
      throw InputError(fmt::format("{}:{}", path.string(), it->second.potential->line), key,
                       fmt::format("{{key}}: the potential of {} replaces {} electrons, and the element has {}",
                                   element_symbol(z), it->second.potential->core_electrons, z));
    }
    atom.core_electrons = it->second.potential->core_electrons;
  }
}

}  // namespace dfmp2::chem
