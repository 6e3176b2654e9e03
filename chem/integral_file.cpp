#include "chem/integral_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "linalg/errors.hpp"

namespace dfmp2::chem {
namespace {

using linalg::Index;

// HDF5 prints its own error stack to stderr by default; this program reports one line instead.
struct SilenceHdf5 {
  SilenceHdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};

// Owns one HDF5 identifier and closes it with the matching function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

class Reader {
 public:
  Reader(std::string path, hid_t file) : path_(std::move(path)), file_(file) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw IntegralFileError(fmt::format("{}: {}", path_, what));
  }

  bool has(const char* name) const { return H5Lexists(file_, name, H5P_DEFAULT) > 0; }

  // Opens a dataset and checks that its elements are of the given class (and 8 bytes when floating point).
  std::vector<Index> shape(const char* name, H5T_class_t want) const {
    if (!has(name)) fail(fmt::format("dataset '{}' is missing", name));
    Handle ds(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
    if (!ds.valid()) fail(fmt::format("'{}' is not a dataset", name));
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    if (want == H5T_FLOAT && (cls != H5T_FLOAT || H5Tget_size(type.get()) != 8)) {
      fail(fmt::format("dataset '{}' must hold float64 values", name));
    }
    if (want == H5T_INTEGER && cls != H5T_INTEGER) fail(fmt::format("dataset '{}' must hold an integer", name));
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) fail(fmt::format("dataset '{}' has an unreadable shape", name));
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return {dims.begin(), dims.end()};
  }

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
      fail(fmt::format("dataset '{}' could not be read", name));
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
      fail(fmt::format("dataset '{}' could not be read", name));
    }
    return value;
  }

  // String attribute of an object (fixed or variable length); nullopt when absent.
  std::optional<std::string> string_attribute(const char* object, const char* attr) const {
    if (H5Aexists_by_name(file_, object, attr, H5P_DEFAULT) <= 0) return std::nullopt;
    Handle a(H5Aopen_by_name(file_, object, attr, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
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
    std::string out(size, '\0');
    Handle mem(H5Tcopy(type.get()), H5Tclose);
    if (H5Aread(a.get(), mem.get(), out.data()) < 0) fail(fmt::format("attribute '{}' of '{}' is unreadable", attr, object));
    out.resize(out.find('\0') == std::string::npos ? out.size() : out.find('\0'));
    while (!out.empty() && out.back() == ' ') out.pop_back();  // space-padded fixed strings
    return out;
  }

  std::optional<long long> integer_attribute(const char* object, const char* attr) const {
    if (H5Aexists_by_name(file_, object, attr, H5P_DEFAULT) <= 0) return std::nullopt;
    Handle a(H5Aopen_by_name(file_, object, attr, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
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
    H5Gget_info(g.get(), &info);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
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
};

linalg::Matrix row_major_to_matrix(const std::vector<double>& data, Index rows, Index cols) {
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(data.data(), rows,
                                                                                                   cols);
}

}  // namespace

std::unique_ptr<IntegralFile> IntegralFile::open(const std::string& path) {
  static SilenceHdf5 silence;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IntegralFileError(fmt::format("{}: no such file", path));
  if (fs::is_directory(path, ec)) throw IntegralFileError(fmt::format("{}: is a directory, expected an HDF5 file", path));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw IntegralFileError(fmt::format("{}: not an HDF5 file", path));
  const hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fid < 0) throw IntegralFileError(fmt::format("{}: cannot open the HDF5 file", path));

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
  if (*version != kIntegralFormatVersion) {
    r.fail(fmt::format("format version {} is not supported (this dfmp2 reads version {})", *version,
                       kIntegralFormatVersion));
  }
  const auto form = r.string_attribute("/", "form");
  if (!form || (*form != "ao" && *form != "mo")) r.fail("root attribute 'form' must be 'ao' or 'mo'");
  f->form_ = *form == "ao" ? ThreeIndexForm::ao : ThreeIndexForm::mo;

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

  if (r.has("scf_energy")) f->scf_energy_ = r.scalar_double("scf_energy");
  if (r.has("nuclear_repulsion_energy")) f->nuclear_repulsion_ = r.scalar_double("nuclear_repulsion_energy");

  if (r.has("metadata")) {
    auto& md = f->metadata_;
    if (auto xyz = r.string_attribute("metadata", "molecule")) {
      try {
        md.molecule = parse_xyz_lines(*xyz, "metadata attribute 'molecule'");
      } catch (const InputError& e) {
        r.fail(e.what());
      }
      if (auto charge = r.integer_attribute("metadata", "charge")) md.molecule->charge = static_cast<int>(*charge);
    }
    md.basis = r.string_attribute("metadata", "basis").value_or("");
    md.aux_basis = r.string_attribute("metadata", "aux_basis").value_or("");
    md.scf_type = r.string_attribute("metadata", "scf_type").value_or("");
    md.generator = r.string_attribute("metadata", "generator").value_or("");
  }

  if (r.has("reference")) {
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
      ref.program = r.string_attribute(g.c_str(), "program").value_or("");
      f->references_[n] = ref;
    }
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
    r.fail(fmt::format("dataset '{}' could not be read (functions {}..{})", name, p0, p0 + count - 1));
  }
  r.check_finite(name, out, static_cast<std::size_t>(count * block_stride()),
                 static_cast<std::size_t>(p0 * block_stride()));
}

namespace {

void write_attribute(hid_t object, const char* name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* data = value.c_str();
  H5Awrite(a.get(), type.get(), &data);
}

void write_attribute(hid_t object, const char* name, long long value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(object, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5Awrite(a.get(), H5T_NATIVE_LLONG, &value);
}

// A row-major float64 dataset of the given shape; large ones are chunked and compressed like the exporter's.
bool write_doubles(hid_t file, const char* name, const std::vector<hsize_t>& dims, const double* data) {
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  std::size_t count = 1;
  for (auto d : dims) count *= d;
  if (dims.size() >= 2 && count > 4096 && dims[0] > 0) {
    std::vector<hsize_t> chunk = dims;
    const hsize_t row = count / dims[0];
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (1 << 17) / std::max<hsize_t>(row, 1)));
    H5Pset_chunk(props.get(), int(chunk.size()), chunk.data());
    H5Pset_shuffle(props.get());
    H5Pset_deflate(props.get(), 4);
  }
  Handle ds(H5Dcreate2(file, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT), H5Dclose);
  return ds.valid() && H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
}

}  // namespace

void write_integral_file(const std::string& path, const IntegralFileContents& c) {
  static SilenceHdf5 silence;
  const std::string tmp = path + ".tmp";
  const Index nbf = c.mo_coefficients->rows(), nmo = c.mo_coefficients->cols(), naux = c.metric->rows();
  bool ok = true;
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) throw OutputError(fmt::format("save_integrals: cannot create '{}'", path));
    write_attribute(file.get(), "dfmp2_format", std::string("dfmp2-integrals"));
    write_attribute(file.get(), "dfmp2_format_version", static_cast<long long>(kIntegralFormatVersion));
    write_attribute(file.get(), "form", std::string("ao"));
    // Eigen is column-major; the file is row-major [nbf, nmo].
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> c_rows = *c.mo_coefficients;
    ok &= write_doubles(file.get(), "mo_coefficients", {hsize_t(nbf), hsize_t(nmo)}, c_rows.data());
    ok &= write_doubles(file.get(), "orbital_energies", {hsize_t(nmo)}, c.orbital_energies->data());
    {
      Handle space(H5Screate(H5S_SCALAR), H5Sclose);
      Handle ds(H5Dcreate2(file.get(), "nocc", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                H5Dclose);
      const long long nocc = c.nocc;
      ok &= H5Dwrite(ds.get(), H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &nocc) >= 0;
    }
    ok &= write_doubles(file.get(), "ao_3index", {hsize_t(naux), hsize_t(nbf), hsize_t(nbf)}, c.ao_3index->data());
    ok &= write_doubles(file.get(), "metric", {hsize_t(naux), hsize_t(naux)}, c.metric->data());  // symmetric
    if (c.scf_energy) ok &= write_doubles(file.get(), "scf_energy", {}, &*c.scf_energy);
    if (c.nuclear_repulsion_energy) {
      ok &= write_doubles(file.get(), "nuclear_repulsion_energy", {}, &*c.nuclear_repulsion_energy);
    }
    Handle md(H5Gcreate2(file.get(), "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (c.molecule) {
      std::string xyz;
      for (const auto& a : c.molecule->atoms) {
        xyz += fmt::format("{}{} {:.12f} {:.12f} {:.12f}", xyz.empty() ? "" : "\n", element_symbol(a.atomic_number),
                           a.x, a.y, a.z);
      }
      write_attribute(md.get(), "molecule", xyz);
      write_attribute(md.get(), "charge", static_cast<long long>(c.molecule->charge));
    }
    write_attribute(md.get(), "basis", c.basis);
    write_attribute(md.get(), "aux_basis", c.aux_basis);
    write_attribute(md.get(), "scf_type", c.scf_type);
    write_attribute(md.get(), "generator", c.generator);
  }
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    throw OutputError(fmt::format("save_integrals: writing '{}' failed", path));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw OutputError(fmt::format("save_integrals: cannot write '{}': {}", path, ec.message()));
  }
}

}  // namespace dfmp2::chem
