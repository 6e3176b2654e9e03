#include "chem/io/integral_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <vector>

#include "chem/io/hdf5_support.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {
namespace {

using hdf5::Handle;
using hdf5::SilenceHdf5;
using hdf5::with_reason;
using linalg::Index;

// Elements no integral file can declare: 2^40 float64 values are 8 TiB. A larger shape is a corrupt header, and
// refusing it here keeps the reader from trying to allocate it.
constexpr double kMaxElements = 1099511627776.0;
constexpr std::size_t kMaxAttributeBytes = 16 << 20;  // string attributes: a molecule's xyz lines at most

class Reader {
 public:
  Reader(std::string path, hid_t file) : path_(std::move(path)), file_(file) {
    H5F_info2_t info;
    metadata_checksummed_ = H5Fget_info2(file, &info) >= 0 && info.super.version >= 2;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw IntegralFileError(fmt::format("{}: {}", path_, what));
  }

  bool has(const char* name) const { return H5Lexists(file_, name, H5P_DEFAULT) > 0; }

  // The HDF5 1.8+ format checksums the superblock and object headers; compact data lives in the (checksummed)
  // object header, chunked data may carry the Fletcher32 filter, which HDF5 verifies on every read, and its chunk
  // index is checksummed in the 1.10 format. Contiguous data has no checksum.
  bool metadata_checksummed() const { return metadata_checksummed_; }
  bool checksummed(hid_t ds) const {
    if (!metadata_checksummed_) return false;
    Handle props(H5Dget_create_plist(ds), H5Pclose);
    switch (H5Pget_layout(props.get())) {
      case H5D_COMPACT: return true;
      case H5D_CHUNKED: {
        // The chunk index must be checksummed too (not the 1.8 format's version-1 B-tree): a damaged address there
        // would hand the reader another chunk, whose Fletcher32 checksum is valid.
        H5D_chunk_index_t index = H5D_CHUNK_IDX_BTREE;
        if (H5Dget_chunk_index_type(ds, &index) < 0 || index == H5D_CHUNK_IDX_BTREE) return false;
        unsigned flags = 0;
        std::size_t count = 0;
        return H5Pget_filter_by_id2(props.get(), H5Z_FILTER_FLETCHER32, &flags, &count, nullptr, 0, nullptr,
                                    nullptr) >= 0;
      }
      default: return false;
    }
  }

  // Opens a dataset and checks that its elements are of the given class (and 8 bytes when floating point), that
  // its declared shape is one a file can hold, and that data was written for all of it: a dataset whose storage
  // was never (or only partly) written reads back as zeros, which would give a wrong energy without a word.
  std::vector<Index> shape(const char* name, H5T_class_t want) const {
    if (!has(name)) fail(fmt::format("dataset '{}' is missing", name));
    require_stored_here(name);
    Handle ds(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
    if (!ds.valid()) fail(with_reason(fmt::format("'{}' is not a readable dataset", name)));
    {
      Handle props(H5Dget_create_plist(ds.get()), H5Pclose);
      const H5D_layout_t layout = H5Pget_layout(props.get());
      if (H5Pget_external_count(props.get()) != 0 ||
          (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED)) {
        fail(fmt::format("dataset '{}' keeps its data outside the file (external storage or a virtual dataset); "
                         "dfmp2 reads only data stored in the integral file",
                         name));
      }
    }
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    if (want == H5T_FLOAT && (cls != H5T_FLOAT || H5Tget_size(type.get()) != 8)) {
      fail(fmt::format("dataset '{}' must hold float64 values", name));
    }
    if (want == H5T_INTEGER && cls != H5T_INTEGER) fail(fmt::format("dataset '{}' must hold an integer", name));
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0 || rank > 8) fail(fmt::format("dataset '{}' has an unreadable shape", name));
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    double elements = 1;
    for (const auto d : dims) elements *= double(d);
    if (elements > kMaxElements) {
      fail(fmt::format("dataset '{}' declares shape [{}] ({:.3g} elements), more than any integral file holds",
                       name, fmt::join(dims, ", "), elements));
    }
    check_written(name, ds.get(), dims, H5Tget_size(type.get()), elements);
    if (!checksummed(ds.get())) unchecked_.insert(name);
    return {dims.begin(), dims.end()};
  }

  // Every step of the path must be a hard link: a soft or external link can lead anywhere, a FIFO or a device
  // included, where reading would block or never end.
  void require_stored_here(const std::string& name) const {
    for (std::size_t end = name.find('/'); ; end = name.find('/', end + 1)) {
      const std::string step = name.substr(0, end);
      H5L_info_t info;
      if (H5Lget_info(file_, step.c_str(), &info, H5P_DEFAULT) < 0) {
        fail(with_reason(fmt::format("'{}' is unreadable", step)));
      }
      if (info.type != H5L_TYPE_HARD) {
        fail(fmt::format("'{}' is a link to another object or file; expected a dataset stored in the integral file",
                         step));
      }
      if (end == std::string::npos) break;
    }
  }

  void check_written(const char* name, hid_t ds, const std::vector<hsize_t>& dims, std::size_t element_bytes,
                     double elements) const {
    if (elements == 0) return;
    Handle props(H5Dget_create_plist(ds), H5Pclose);
    const H5D_layout_t layout = H5Pget_layout(props.get());
    if (layout == H5D_CONTIGUOUS) {
      const double stored = double(H5Dget_storage_size(ds));
      if (stored < elements * double(element_bytes)) {
        fail(fmt::format("dataset '{}' holds {:.0f} bytes of data for {:.0f} elements; the file is incomplete", name,
                         stored, elements));
      }
    } else if (layout == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(dims.size());
      H5Pget_chunk(props.get(), int(chunk.size()), chunk.data());
      double expected = 1;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        expected *= std::ceil(double(dims[i]) / double(std::max<hsize_t>(chunk[i], 1)));
      }
      hsize_t allocated = 0;
      Handle space(H5Dget_space(ds), H5Sclose);  // HDF5 1.10.8 refuses H5S_ALL here
      if (H5Dget_num_chunks(ds, space.get(), &allocated) < 0 || double(allocated) < expected) {
        fail(fmt::format("dataset '{}' has data for {} of its {:.0f} chunks; the file is incomplete", name, allocated,
                         expected));
      }
    }
  }

  // Datasets read so far that carry no checksum (see checksummed()).
  const std::set<std::string>& unchecked() const { return unchecked_; }

  std::vector<Index> expect_rank(const char* name, H5T_class_t cls, int rank, const char* meaning) const {
    auto dims = shape(name, cls);
    if (static_cast<int>(dims.size()) != rank) {
      fail(fmt::format("dataset '{}' has rank {} (shape [{}]), expected rank {} ({})", name, dims.size(),
                       fmt::join(dims, ", "), rank, meaning));
    }
    return dims;
  }

  void expect_shape(const char* name, const std::vector<Index>& want, const char* meaning) const {
    const auto dims = expect_rank(name, H5T_FLOAT, static_cast<int>(want.size()), meaning);
    if (dims != want) {
      fail(fmt::format("dataset '{}' has shape [{}], expected [{}] ({})", name, fmt::join(dims, ", "),
                       fmt::join(want, ", "), meaning));
    }
  }

  // `offset`: index in the whole dataset (row-major) of data[0], so the message points at the element.
  void check_finite(const char* name, const double* data, std::size_t count, std::size_t offset = 0) const {
    for (std::size_t i = 0; i < count; ++i) {
      if (!std::isfinite(data[i])) {
        fail(fmt::format("dataset '{}' holds a non-finite value (element {})", name, offset + i));
      }
    }
  }

  // Reads a whole float64 dataset in its row-major order.
  std::vector<double> doubles(const char* name) const {
    const auto dims = shape(name, H5T_FLOAT);
    std::size_t count = 1;
    for (auto d : dims) count *= static_cast<std::size_t>(d);
    std::vector<double> out(count);
    Handle ds(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
    if (count > 0 && H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
      fail(with_reason(fmt::format("dataset '{}' could not be read", name)));
    }
    check_finite(name, out.data(), out.size());
    return out;
  }

  double scalar_double(const char* name) const {
    const auto dims = shape(name, H5T_FLOAT);
    if (!(dims.empty() || (dims.size() == 1 && dims[0] == 1))) fail(fmt::format("dataset '{}' must be a scalar", name));
    return doubles(name).at(0);
  }

  long long scalar_integer(const char* name) const {
    const auto dims = shape(name, H5T_INTEGER);
    if (!(dims.empty() || (dims.size() == 1 && dims[0] == 1))) fail(fmt::format("dataset '{}' must be a scalar", name));
    Handle ds(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
    long long value = 0;
    if (H5Dread(ds.get(), H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) {
      fail(with_reason(fmt::format("dataset '{}' could not be read", name)));
    }
    return value;
  }

  // Opens an attribute that must hold exactly one value (an attribute with more would overrun the one-value
  // buffer it is read into).
  Handle single_attribute(const char* object, const char* attr) const {
    Handle a(H5Aopen_by_name(file_, object, attr, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!a.valid()) fail(with_reason(fmt::format("attribute '{}' of '{}' is unreadable", attr, object)));
    Handle space(H5Aget_space(a.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(space.get()) != 1) {
      fail(fmt::format("attribute '{}' of '{}' must hold one value", attr, object));
    }
    return a;
  }

  // String attribute of an object (fixed or variable length); nullopt when absent.
  std::optional<std::string> string_attribute(const char* object, const char* attr) const {
    if (H5Aexists_by_name(file_, object, attr, H5P_DEFAULT) <= 0) return std::nullopt;
    Handle a = single_attribute(object, attr);
    Handle type(H5Aget_type(a.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING) fail(fmt::format("attribute '{}' of '{}' must be a string", attr, object));
    if (H5Tis_variable_str(type.get()) > 0) {
      Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(mem.get(), H5T_VARIABLE);
      H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
      char* value = nullptr;
      if (H5Aread(a.get(), mem.get(), &value) < 0) fail(fmt::format("attribute '{}' of '{}' is unreadable", attr, object));
      std::string out = value ? value : "";
      H5free_memory(value);
      return out;
    }
    const std::size_t size = H5Tget_size(type.get());
    if (size == 0 || size > kMaxAttributeBytes) {
      fail(fmt::format("attribute '{}' of '{}' declares a string of {} bytes", attr, object, size));
    }
    std::string out(size, '\0');
    Handle mem(H5Tcopy(type.get()), H5Tclose);
    if (H5Aread(a.get(), mem.get(), out.data()) < 0) fail(fmt::format("attribute '{}' of '{}' is unreadable", attr, object));
    out.resize(out.find('\0') == std::string::npos ? out.size() : out.find('\0'));
    while (!out.empty() && out.back() == ' ') out.pop_back();  // space-padded fixed strings
    return out;
  }

  std::optional<long long> integer_attribute(const char* object, const char* attr) const {
    if (H5Aexists_by_name(file_, object, attr, H5P_DEFAULT) <= 0) return std::nullopt;
    Handle a = single_attribute(object, attr);
    Handle type(H5Aget_type(a.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_INTEGER) fail(fmt::format("attribute '{}' of '{}' must be an integer", attr, object));
    long long value = 0;
    if (H5Aread(a.get(), H5T_NATIVE_LLONG, &value) < 0) fail(fmt::format("attribute '{}' of '{}' is unreadable", attr, object));
    return value;
  }

  // Names of the members of a group.
  std::vector<std::string> members(const char* group) const {
    std::vector<std::string> names;
    Handle g(H5Gopen2(file_, group, H5P_DEFAULT), H5Gclose);
    if (!g.valid()) fail(fmt::format("'{}' is not a group", group));
    H5G_info_t info;
    if (H5Gget_info(g.get(), &info) < 0) fail(with_reason(fmt::format("group '{}' is unreadable", group)));
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (len < 0 || len > 4096) fail(with_reason(fmt::format("group '{}' has an unreadable member name", group)));
      std::string name(static_cast<std::size_t>(len) + 1, '\0');
      H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
      name.resize(static_cast<std::size_t>(len));
      names.push_back(name);
    }
    return names;
  }

 private:
  std::string path_;
  hid_t file_;
  bool metadata_checksummed_ = false;
  mutable std::set<std::string> unchecked_;
};

linalg::Matrix row_major_to_matrix(const std::vector<double>& data, Index rows, Index cols) {
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(data.data(), rows,
                                                                                                   cols);
}

}  // namespace

namespace {

// Bounds that physics puts on the stored numbers, so that a file damaged where no checksum reaches (an older
// writer's), or written in the wrong units, is refused instead of giving a wrong energy. Each bound is far above
// what any basis set gives (docs/integral-file-format.md, "Integrity"), so only gross damage trips it.
namespace bounds {
// Orbital energies, Eh: a 1s orbital of element 118 lies near -7000 Eh; virtuals of the tightest basis functions
// rise to a few thousand.
constexpr double kOrbitalEnergy = 1e6;
// (P|P) of a normalised fitting function with exponent a is 4 pi / a for an s function: 1e8 allows a down to 1e-7.
constexpr double kMetricDiagonal = 1e8;
// MO coefficients over a normalised basis grow as 1/sqrt of the overlap's smallest eigenvalue.
constexpr double kMoCoefficient = 1e8;
}  // namespace bounds

// Returns, per auxiliary function, the largest |(P|mn)| a normalised basis allows (read_block checks it).
// `spin`: the datasets' suffix ("" or "_beta").
std::vector<double> check_magnitudes(const Reader& r, const linalg::Vector& eps, const linalg::Matrix& c,
                                     const linalg::Matrix& j, const char* spin = "") {
  for (Index p = 0; p < eps.size(); ++p) {
    if (std::abs(eps[p]) > bounds::kOrbitalEnergy) {
      r.fail(fmt::format("dataset 'orbital_energies{}': element {} is {:.6g} Eh, beyond any orbital energy (|e| <= {:.0e})",
                         spin, p, eps[p], bounds::kOrbitalEnergy));
    }
  }
  if (c.size() > 0) {
    Index row = 0, col = 0;
    const double largest = c.cwiseAbs().maxCoeff(&row, &col);
    if (largest > bounds::kMoCoefficient) {
      r.fail(fmt::format("dataset 'mo_coefficients{}': element [{}, {}] is {:.6g}, beyond any coefficient over a "
                         "normalised basis (|C| <= {:.0e})", spin, row, col, c(row, col), bounds::kMoCoefficient));
    }
  }
  // The metric (P|Q) is a Gram matrix of the Coulomb inner product: symmetric, a positive diagonal, and
  // |(P|Q)| <= sqrt((P|P) (Q|Q)) (Cauchy-Schwarz). Positive definiteness itself is the Cholesky's to find.
  const Index naux = j.rows();
  std::vector<double> pair_bound(static_cast<std::size_t>(naux));
  for (Index p = 0; p < naux; ++p) {
    const double d = j(p, p);
    if (!(d > 0) || d > bounds::kMetricDiagonal) {
      r.fail(fmt::format("dataset 'metric': diagonal element ({}, {}) is {:.6g}; (P|P) of a fitting function lies in "
                         "(0, {:.0e}]", p, p, d, bounds::kMetricDiagonal));
    }
    pair_bound[static_cast<std::size_t>(p)] = IntegralFile::kMaxPairNorm * std::sqrt(d);
  }
  for (Index q = 0; q < naux; ++q) {
    for (Index p = q + 1; p < naux; ++p) {
      const double scale = std::sqrt(j(p, p)) * std::sqrt(j(q, q));  // no underflow for tiny diagonals
      if (std::abs(j(p, q) - j(q, p)) > 1e-8 * scale) {
        r.fail(fmt::format("dataset 'metric' is not symmetric: ({}, {}) = {:.17g} but ({}, {}) = {:.17g}", p, q,
                           j(p, q), q, p, j(q, p)));
      }
      if (std::abs(j(p, q)) > (1 + 1e-8) * scale) {
        r.fail(fmt::format("dataset 'metric': |({}, {})| = {:.6g} exceeds sqrt((P|P)(Q|Q)) = {:.6g} (Cauchy-Schwarz); "
                           "the metric is corrupt", p, q, std::abs(j(p, q)), scale));
      }
    }
  }
  return pair_bound;
}

// The occupied energies ascend (frozen core freezes the first ones, meant to be the lowest) and lie below every
// virtual one (the MP2 denominators e_i + e_j - e_a - e_b must be negative). An SCF program writes them so; a file
// that does not would give a wrong energy, not an error.
void check_orbital_order(const Reader& r, const char* name, const linalg::Vector& e, Index nocc) {
  for (Index i = 1; i < nocc; ++i) {
    if (e[i] < e[i - 1]) {
      r.fail(fmt::format("dataset '{}': the occupied energies must ascend (frozen core freezes the lowest), and "
                         "element {} ({:.10g} Eh) is below element {} ({:.10g} Eh)",
                         name, i, e[i], i - 1, e[i - 1]));
    }
  }
  if (nocc == 0) return;
  const Index homo = nocc - 1;
  Index lumo = nocc;
  for (Index a = nocc; a < e.size(); ++a)
    if (e[a] < e[lumo]) lumo = a;
  if (e[lumo] <= e[homo]) {
    r.fail(fmt::format("dataset '{}': virtual element {} ({:.10g} Eh) is not above occupied element {} ({:.10g} Eh); "
                       "MP2 needs every occupied orbital below every virtual one",
                       name, lumo, e[lumo], homo, e[homo]));
  }
}

// The root attribute `reference` (version 2; version 1 is RHF): open shells need the AO form's orbitals.
ScfReference read_reference(const Reader& r, long long version, ThreeIndexForm form) {
  const auto name = r.string_attribute("/", "reference");
  if (!name) return ScfReference::rhf;
  if (version < kOpenShellFormatVersion) {
    r.fail(fmt::format("root attribute 'reference' is a format version {} attribute, and the file is version {}",
                       kOpenShellFormatVersion, version));
  }
  const auto& names = scf_reference_names();
  const auto it = std::find_if(names.begin(), names.end(), [&](const auto& entry) { return entry.second == *name; });
  if (it == names.end()) r.fail(fmt::format("root attribute 'reference' is '{}', expected rhf, uhf or rohf", *name));
  const ScfReference reference = it->first;
  if (reference != ScfReference::rhf && form != ThreeIndexForm::ao) {
    r.fail(fmt::format("root attribute 'reference' is '{}', and form 'mo' holds one set of orbitals; an open shell "
                       "needs form 'ao'", *name));
  }
  return reference;
}

}  // namespace

namespace {

// An open shell's datasets in a closed-shell file: a writer that forgot the reference attribute. Read as RHF, its
// alpha orbitals would be taken for doubly occupied ones, one electron too many for a doublet.
void refuse_open_shell_datasets(const Reader& r) {
  for (const char* name : {"nocc_beta", "mo_coefficients_beta", "orbital_energies_beta", "singles_alpha", "singles_beta"}) {
    if (r.has(name)) {
      r.fail(fmt::format("dataset '{}' belongs to an open shell, and the file's reference is rhf (root attribute "
                         "'reference' {}); an open-shell file says reference uhf or rohf (format version {})",
                         name, r.string_attribute("/", "reference") ? "rhf" : "missing", kOpenShellFormatVersion));
    }
  }
}

// The beta orbitals of an open-shell file (version 2), checked as the alpha ones are, and ROHF's singles terms.
struct BetaOrbitals {
  Index nocc = 0;
  linalg::Vector eps, singles_alpha, singles_beta;
  linalg::Matrix c;
};

BetaOrbitals read_beta_orbitals(const Reader& r, ScfReference reference, Index nbf, Index nocc_alpha, Index nmo) {
  BetaOrbitals b;
  const long long nbeta = r.scalar_integer("nocc_beta");
  if (nbeta < 0 || nbeta > nocc_alpha) {
    r.fail(fmt::format("dataset 'nocc_beta' is {}, expected 0 <= nocc_beta <= nocc = {}", nbeta, nocc_alpha));
  }
  b.nocc = static_cast<Index>(nbeta);
  r.expect_shape("orbital_energies_beta", {nmo}, "nmo, from 'orbital_energies'");
  r.expect_shape("mo_coefficients_beta", {nbf, nmo}, "nbf x nmo, as 'mo_coefficients'");
  const auto eps = r.doubles("orbital_energies_beta");
  b.eps = Eigen::Map<const linalg::Vector>(eps.data(), nmo);
  b.c = row_major_to_matrix(r.doubles("mo_coefficients_beta"), nbf, nmo);
  check_magnitudes(r, b.eps, b.c, linalg::Matrix(), "_beta");
  check_orbital_order(r, "orbital_energies_beta", b.eps, b.nocc);
  if (reference != ScfReference::rohf) return b;
  auto singles = [&](const char* name, Index n) {
    r.expect_shape(name, {n}, n == nocc_alpha ? "nocc" : "nocc_beta");
    const auto v = r.doubles(name);
    const linalg::Vector out = Eigen::Map<const linalg::Vector>(v.data(), n);
    // Each term is -f_ia^2 / (e_a - e_i) summed over a: never positive.
    for (Index i = 0; i < n; ++i) {
      if (out[i] > 0) {
        r.fail(fmt::format("dataset '{}': element {} is {:.6g} Eh; a singles term is never positive", name, i, out[i]));
      }
    }
    return out;
  };
  b.singles_alpha = singles("singles_alpha", nocc_alpha);
  b.singles_beta = singles("singles_beta", b.nocc);
  return b;
}

}  // namespace

namespace {

// The optional group 'metadata': the molecule (with its charge and multiplicity, checked against the orbitals'
// electrons), the basis sets and what wrote the file.
IntegralFileMetadata read_metadata(Reader& r, ScfReference reference, Index nocc, Index nocc_beta) {
  IntegralFileMetadata md;
  if (auto xyz = r.string_attribute("metadata", "molecule")) {
    try {
      md.molecule = parse_xyz_lines(*xyz, "metadata attribute 'molecule'");
    } catch (const InputError& e) {
      r.fail(e.what());
    }
    if (auto charge = r.integer_attribute("metadata", "charge")) {
      if (std::abs(*charge) > 1000) r.fail(fmt::format("metadata attribute 'charge' is {}", *charge));
      md.molecule->charge = static_cast<int>(*charge);
    }
    if (auto multiplicity = r.integer_attribute("metadata", "multiplicity")) {
      if (reference == ScfReference::rhf && *multiplicity != 1) {
        r.fail(fmt::format("metadata attribute 'multiplicity' is {}, and the file holds a closed-shell (rhf) "
                           "reference, a singlet", *multiplicity));
      }
      if (*multiplicity != 1 + nocc - nocc_beta && reference != ScfReference::rhf) {
        r.fail(fmt::format("metadata attribute 'multiplicity' is {}, and the file's orbitals have {} alpha and {} "
                           "beta electrons (multiplicity {})", *multiplicity, nocc, nocc_beta,
                           1 + nocc - nocc_beta));
      }
      md.molecule->multiplicity = static_cast<int>(*multiplicity);
    }
    try {
      check_geometry(*md.molecule, "metadata attribute 'molecule'");
    } catch (const InputError& e) {
      r.fail(e.what());
    }
  }
  md.basis = r.string_attribute("metadata", "basis").value_or("");
  md.aux_basis = r.string_attribute("metadata", "aux_basis").value_or("");
  md.scf_type = r.string_attribute("metadata", "scf_type").value_or("");
  md.generator = r.string_attribute("metadata", "generator").value_or("");
  return md;
}

// The optional group 'reference': the reference energies of each frozen-core count, as frozen_core_<count>.
std::map<int, ReferenceEnergies> read_reference_energies(Reader& r) {
  std::map<int, ReferenceEnergies> out;
  for (const auto& name : r.members("reference")) {
    constexpr std::string_view prefix = "frozen_core_";
    if (name.rfind(prefix, 0) != 0) continue;
    int n = 0;
    try {
      n = std::stoi(name.substr(prefix.size()));
    } catch (const std::exception&) {
      r.fail(fmt::format("group 'reference/{}': expected frozen_core_<count>", name));
    }
    const std::string g = "reference/" + name;
    auto ds = [&](const char* leaf) { return g + "/" + leaf; };
    ReferenceEnergies ref;
    ref.opposite_spin = r.scalar_double(ds("mp2_opposite_spin_correlation_energy").c_str());
    ref.same_spin = r.scalar_double(ds("mp2_same_spin_correlation_energy").c_str());
    ref.correlation = r.scalar_double(ds("mp2_correlation_energy").c_str());
    if (r.has(ds("mp2_total_energy").c_str())) ref.total = r.scalar_double(ds("mp2_total_energy").c_str());
    if (r.has(ds("mp2_singles_energy").c_str())) ref.singles = r.scalar_double(ds("mp2_singles_energy").c_str());
    ref.program = r.string_attribute(g.c_str(), "program").value_or("");
    out[n] = ref;
  }
  return out;
}

}  // namespace

std::unique_ptr<IntegralFile> IntegralFile::open(const std::string& path) {
  static SilenceHdf5 silence;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IntegralFileError(fmt::format("{}: no such file", path));
  if (fs::is_directory(path, ec)) throw IntegralFileError(fmt::format("{}: is a directory, expected an HDF5 file", path));
  // A FIFO or a device would block (or never end) on the first read: only regular files are opened.
  if (!fs::is_regular_file(path, ec)) {
    throw IntegralFileError(fmt::format("{}: not a regular file (a FIFO, socket or device?), expected an HDF5 file", path));
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) throw IntegralFileError(with_reason(fmt::format("{}: not an HDF5 file", path)));
  const hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fid < 0) throw IntegralFileError(with_reason(fmt::format("{}: cannot open the HDF5 file", path)));

  std::unique_ptr<IntegralFile> f(new IntegralFile());
  f->path_ = path;
  f->file_ = fid;
  Reader r(path, fid);

  const auto format = r.string_attribute("/", "dfmp2_format");
  if (!format || *format != "dfmp2-integrals") {
    r.fail("root attribute 'dfmp2_format' is missing or not 'dfmp2-integrals' (see docs/integral-file-format.md)");
  }
  const auto version = r.integer_attribute("/", "dfmp2_format_version");
  if (!version) r.fail("root attribute 'dfmp2_format_version' is missing");
  if (*version != kIntegralFormatVersion && *version != kOpenShellFormatVersion) {
    r.fail(fmt::format("format version {} is not supported (this dfmp2 reads versions {} and {})", *version,
                       kIntegralFormatVersion, kOpenShellFormatVersion));
  }
  const auto form = r.string_attribute("/", "form");
  if (!form || (*form != "ao" && *form != "mo")) r.fail("root attribute 'form' must be 'ao' or 'mo'");
  f->form_ = *form == "ao" ? ThreeIndexForm::ao : ThreeIndexForm::mo;
  f->reference_ = read_reference(r, *version, f->form_);

  const auto eps_dims = r.expect_rank("orbital_energies", H5T_FLOAT, 1, "nmo");
  const Index nmo = eps_dims[0];
  const long long nocc = r.scalar_integer("nocc");
  if (nocc < 1 || nocc >= nmo) {
    r.fail(fmt::format("dataset 'nocc' is {}, expected 1 <= nocc < nmo = {}", nocc, nmo));
  }
  f->nocc_ = static_cast<Index>(nocc);
  const Index nvir = nmo - f->nocc_;

  const auto metric_dims = r.expect_rank("metric", H5T_FLOAT, 2, "naux x naux");
  f->naux_ = metric_dims[0];
  if (f->naux_ < 1) r.fail("dataset 'metric' is empty, expected naux x naux with naux >= 1");
  r.expect_shape("metric", {f->naux_, f->naux_}, "naux x naux");

  if (f->form_ == ThreeIndexForm::ao) {
    const auto c_dims = r.expect_rank("mo_coefficients", H5T_FLOAT, 2, "nbf x nmo");
    f->nbf_ = c_dims[0];
    r.expect_shape("mo_coefficients", {f->nbf_, nmo}, "nbf x nmo, nmo from 'orbital_energies'");
    if (nmo > f->nbf_) r.fail(fmt::format("dataset 'mo_coefficients' has more MOs ({}) than AOs ({})", nmo, f->nbf_));
    r.expect_shape("ao_3index", {f->naux_, f->nbf_, f->nbf_}, "naux x nbf x nbf");
    f->mo_coefficients_ = row_major_to_matrix(r.doubles("mo_coefficients"), f->nbf_, nmo);
  } else {
    r.expect_shape("mo_3index", {f->naux_, f->nocc_, nvir}, "naux x nocc x nvir");
  }
  f->nvir_file_ = nvir;

  const auto eps = r.doubles("orbital_energies");
  f->orbital_energies_ = Eigen::Map<const linalg::Vector>(eps.data(), nmo);
  f->metric_ = row_major_to_matrix(r.doubles("metric"), f->naux_, f->naux_);
  f->pair_bound_ = check_magnitudes(r, f->orbital_energies_, f->mo_coefficients_, f->metric_);
  // The occupied orbitals in ascending energy (frozen core freezes the first ones, meant to be the lowest), all below
  // the virtual ones (the MP2 denominators e_i + e_j - e_a - e_b must be negative). An SCF program writes them so;
  // a file that does not would give a wrong energy, not an error.
  check_orbital_order(r, "orbital_energies", f->orbital_energies_, f->nocc_);
  if (f->reference_ == ScfReference::rhf) {
    refuse_open_shell_datasets(r);
  } else {
    BetaOrbitals b = read_beta_orbitals(r, f->reference_, f->nbf_, f->nocc_, nmo);
    f->nocc_beta_ = b.nocc;
    f->orbital_energies_beta_ = std::move(b.eps);
    f->mo_coefficients_beta_ = std::move(b.c);
    f->singles_alpha_ = std::move(b.singles_alpha);
    f->singles_beta_ = std::move(b.singles_beta);
  }

  if (r.has("scf_energy")) f->scf_energy_ = r.scalar_double("scf_energy");
  if (r.has("nuclear_repulsion_energy")) f->nuclear_repulsion_ = r.scalar_double("nuclear_repulsion_energy");

  if (r.has("metadata")) f->metadata_ = read_metadata(r, f->reference_, f->nocc_, f->nocc_beta_);
  if (r.has("reference")) f->references_ = read_reference_energies(r);
  f->metadata_checksummed_ = r.metadata_checksummed();
  f->unchecked_ = {r.unchecked().begin(), r.unchecked().end()};
  // (P|mn) is read block by block later: whether its blocks are verified is known from its layout now.
  {
    Handle ds(H5Dopen2(fid, f->form_ == ThreeIndexForm::ao ? "ao_3index" : "mo_3index", H5P_DEFAULT), H5Dclose);
    if (!r.checksummed(ds.get())) f->unchecked_.push_back(f->form_ == ThreeIndexForm::ao ? "ao_3index" : "mo_3index");
  }
  return f;
}

IntegralFile::~IntegralFile() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

Index IntegralFile::block_stride() const {
  return form_ == ThreeIndexForm::ao ? nbf_ * nbf_ : nocc_ * nvir_file_;
}

void IntegralFile::read_block(Index p0, Index count, double* out) const {
  const char* name = form_ == ThreeIndexForm::ao ? "ao_3index" : "mo_3index";
  if (p0 < 0 || count < 0 || p0 + count > naux_) {
    throw std::logic_error(fmt::format("read_block: functions {}..{} outside 0..{}", p0, p0 + count, naux_));
  }
  if (count == 0) return;
  const Reader r(path_, static_cast<hid_t>(file_));
  Handle ds(H5Dopen2(static_cast<hid_t>(file_), name, H5P_DEFAULT), H5Dclose);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  hsize_t dims[3];
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  const hsize_t start[3] = {static_cast<hsize_t>(p0), 0, 0};
  const hsize_t block[3] = {static_cast<hsize_t>(count), dims[1], dims[2]};
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, block, nullptr);
  Handle mem(H5Screate_simple(3, block, nullptr), H5Sclose);
  if (H5Dread(ds.get(), H5T_NATIVE_DOUBLE, mem.get(), space.get(), H5P_DEFAULT, out) < 0) {
    r.fail(with_reason(fmt::format("dataset '{}' could not be read (functions {}..{})", name, p0, p0 + count - 1)));
  }
  const Index stride = block_stride();
  r.check_finite(name, out, static_cast<std::size_t>(count * stride), static_cast<std::size_t>(p0 * stride));
  // |(P|mn)| <= sqrt((P|P)) sqrt((mn|mn)), and sqrt((mn|mn)) of normalised functions stays below kMaxPairNorm.
  for (Index p = 0; p < count; ++p) {
    const double bound = pair_bound_[static_cast<std::size_t>(p0 + p)];
    const double* row = out + p * stride;
    for (Index k = 0; k < stride; ++k) {
      if (std::abs(row[k]) > bound) {
        r.fail(fmt::format("dataset '{}': element {} (auxiliary function {}) is {:.6g}, beyond the Cauchy-Schwarz bound "
                           "sqrt((P|P)) x {:.0e} = {:.6g} of a normalised basis; the file is corrupt or not in atomic "
                           "units", name, (p0 + p) * stride + k, p0 + p, row[k], kMaxPairNorm, bound));
      }
    }
  }
}

}  // namespace dfmp2::chem
