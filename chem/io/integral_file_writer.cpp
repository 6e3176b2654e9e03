// Writing an integral file (docs/integral-file-format.md): the SCF's orbitals, the metric and the three-index
// integrals, into a temporary file that is renamed into place only when everything was written.
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <vector>

#include "chem/io/hdf5_support.hpp"
#include "chem/io/integral_file.hpp"
#include "chem/io/temporary_files.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using hdf5::Handle;
using hdf5::SilenceHdf5;
using linalg::Index;

namespace {

// Fixed-length strings: they live in the attribute's object header, under the HDF5 metadata checksum. (HDF5
// keeps variable-length strings in a global heap that carries no checksum, and a damaged heap entry makes the
// library read out of bounds.)
void write_attribute(hid_t object, const char* name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<std::size_t>(1, value.size()));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  H5Awrite(a.get(), type.get(), padded.data());
}

void write_attribute(hid_t object, const char* name, long long value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(object, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5Awrite(a.get(), H5T_NATIVE_LLONG, &value);
}

// Every dataset is protected by a checksum that the reader verifies (docs/integral-file-format.md, "Integrity"):
// small ones (scalars, short vectors) are stored compact, inside their object header, which the HDF5 1.10 file
// format checksums with the rest of the file's metadata; larger ones are chunked with the Fletcher32 filter,
// which HDF5 checks on every read of a chunk, so a block read alone is verified too.
constexpr std::size_t kCompactBytes = 16 * 1024;  // HDF5 allows compact data up to 64 KiB per object header

Handle dataset_properties(const std::vector<hsize_t>& dims, std::size_t element_bytes) {
  Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  std::size_t count = 1;
  for (auto d : dims) count *= d;
  if (count * element_bytes <= kCompactBytes) {
    H5Pset_layout(props.get(), H5D_COMPACT);
    return props;
  }
  // Chunks of about 1 MiB of whole leading-index slices, as the exporter writes them; (P|mn) is read by blocks of P.
  std::vector<hsize_t> chunk = dims;
  const hsize_t row = count / dims[0];
  chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (1 << 17) / std::max<hsize_t>(row, 1)));
  H5Pset_chunk(props.get(), int(chunk.size()), chunk.data());
  H5Pset_shuffle(props.get());
  H5Pset_deflate(props.get(), 4);
  H5Pset_fletcher32(props.get());
  return props;
}

bool write_dataset(hid_t file, const char* name, const std::vector<hsize_t>& dims, hid_t file_type, hid_t mem_type,
                   std::size_t element_bytes, const void* data) {
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle props = dataset_properties(dims, element_bytes);
  Handle ds(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT), H5Dclose);
  return ds.valid() && H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
}

// (P|mn) as "ao_3index" [naux, nbf, nbf], chunked one auxiliary function per chunk (Fletcher32, gzip), written a
// block of whole functions at a time so that at most `block_bytes` of it is in memory.
bool write_three_index(hid_t file, const ThreeIndexSource& source, double block_bytes) {
  const hsize_t naux = static_cast<hsize_t>(source.naux());
  const hsize_t nbf = static_cast<hsize_t>(std::llround(std::sqrt(double(source.block_stride()))));
  const hsize_t dims[3] = {naux, nbf, nbf};
  Handle space(H5Screate_simple(3, dims, nullptr), H5Sclose);
  Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const hsize_t chunk[3] = {1, nbf, nbf};
  H5Pset_chunk(props.get(), 3, chunk);
  H5Pset_shuffle(props.get());
  H5Pset_deflate(props.get(), 4);
  H5Pset_fletcher32(props.get());
  Handle ds(H5Dcreate2(file, "ao_3index", H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT),
            H5Dclose);
  if (!ds.valid()) return false;
  const auto per_function = static_cast<Index>(nbf * nbf);
  const Index max_functions = std::max<Index>(1, static_cast<Index>(block_bytes / (8.0 * double(per_function))));
  std::vector<double> block;
  for (const auto& [p0, p1] : source.blocks(max_functions)) {
    block.resize(static_cast<std::size_t>((p1 - p0) * per_function));
    source.read_block(p0, p1 - p0, block.data());
    const hsize_t start[3] = {static_cast<hsize_t>(p0), 0, 0};
    const hsize_t count[3] = {static_cast<hsize_t>(p1 - p0), nbf, nbf};
    Handle file_space(H5Dget_space(ds.get()), H5Sclose);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    Handle memory(H5Screate_simple(3, count, nullptr), H5Sclose);
    if (H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, memory.get(), file_space.get(), H5P_DEFAULT, block.data()) < 0) {
      return false;
    }
  }
  return true;
}

// A row-major float64 dataset of the given shape (a scalar when `dims` is empty).
bool write_doubles(hid_t file, const char* name, const std::vector<hsize_t>& dims, const double* data) {
  return write_dataset(file, name, dims, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 8, data);
}

}  // namespace

double integral_file_bytes(Index nbf, Index nmo, Index naux) {
  return 8.0 * (double(naux) * double(nbf) * double(nbf) + double(naux) * double(naux) + double(nbf) * double(nmo) +
                double(nmo));
}

namespace {
// The beta orbitals of an open shell, and ROHF's singles terms (format version 2).
bool write_open_shell(hid_t file, const ScfResult& scf) {
  const Index nbf = scf.mo_coefficients_beta.rows(), nmo = scf.mo_coefficients_beta.cols();
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> c_rows = scf.mo_coefficients_beta;
  bool ok = write_doubles(file, "mo_coefficients_beta", {hsize_t(nbf), hsize_t(nmo)}, c_rows.data());
  ok &= write_doubles(file, "orbital_energies_beta", {hsize_t(nmo)}, scf.orbital_energies_beta.data());
  const long long nbeta = scf.nocc_beta;
  ok &= write_dataset(file, "nocc_beta", {}, H5T_STD_I64LE, H5T_NATIVE_LLONG, 8, &nbeta);
  if (scf.reference == ScfReference::rohf) {
    ok &= write_doubles(file, "singles_alpha", {hsize_t(scf.singles_alpha.size())}, scf.singles_alpha.data());
    ok &= write_doubles(file, "singles_beta", {hsize_t(scf.singles_beta.size())}, scf.singles_beta.data());
  }
  return ok;
}
}  // namespace

void write_integral_file(const std::string& path, const IntegralFileContents& c) {
  static SilenceHdf5 silence;
  TemporaryFile tmp(path);  // removed on failure and on SIGINT/SIGTERM
  const Index nbf = c.mo_coefficients->rows(), nmo = c.mo_coefficients->cols(), naux = c.metric->rows();
  bool ok = true;
  {
    // The HDF5 1.10 file format checksums all metadata: superblock, object headers (compact data and attributes
    // included) and the chunk indexes (a fixed array; the 1.8 format's version-1 B-tree has no checksum, and a
    // damaged chunk address there would hand the reader another chunk's data, whose own checksum is valid).
    Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_libver_bounds(access.get(), H5F_LIBVER_V110, H5F_LIBVER_V110);
    Handle file(H5Fcreate(tmp.path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose);
    if (!file.valid()) throw OutputError(fmt::format("save_integrals: cannot create '{}'", path));
    write_attribute(file.get(), "dfmp2_format", std::string("dfmp2-integrals"));
    const ScfResult* open = c.open_shell;
    write_attribute(file.get(), "dfmp2_format_version",
                    static_cast<long long>(open ? kOpenShellFormatVersion : kIntegralFormatVersion));
    write_attribute(file.get(), "form", std::string("ao"));
    if (open) {
      write_attribute(file.get(), "reference", linalg::name_in(scf_reference_names(), open->reference));
      ok &= write_open_shell(file.get(), *open);
    }
    // Eigen is column-major; the file is row-major [nbf, nmo].
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> c_rows = *c.mo_coefficients;
    ok &= write_doubles(file.get(), "mo_coefficients", {hsize_t(nbf), hsize_t(nmo)}, c_rows.data());
    ok &= write_doubles(file.get(), "orbital_energies", {hsize_t(nmo)}, c.orbital_energies->data());
    const long long nocc = c.nocc;
    ok &= write_dataset(file.get(), "nocc", {}, H5T_STD_I64LE, H5T_NATIVE_LLONG, 8, &nocc);
    ok &= write_three_index(file.get(), *c.ao_3index, c.block_bytes);
    ok &= write_doubles(file.get(), "metric", {hsize_t(naux), hsize_t(naux)}, c.metric->data());  // symmetric
    if (c.scf_energy) ok &= write_doubles(file.get(), "scf_energy", {}, &*c.scf_energy);
    if (c.nuclear_repulsion_energy) {
      ok &= write_doubles(file.get(), "nuclear_repulsion_energy", {}, &*c.nuclear_repulsion_energy);
    }
    Handle md(H5Gcreate2(file.get(), "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (c.molecule) {
      std::string xyz;
      for (const auto& a : c.molecule->atoms) {
        xyz += fmt::format("{}{} {:.12f} {:.12f} {:.12f}", xyz.empty() ? "" : "\n", atom_symbol(a),
                           a.x, a.y, a.z);
      }
      write_attribute(md.get(), "molecule", xyz);
      write_attribute(md.get(), "charge", static_cast<long long>(c.molecule->charge));
      if (open) write_attribute(md.get(), "multiplicity", static_cast<long long>(c.molecule->multiplicity));
    }
    write_attribute(md.get(), "basis", c.basis);
    write_attribute(md.get(), "aux_basis", c.aux_basis);
    write_attribute(md.get(), "scf_type", c.scf_type);
    write_attribute(md.get(), "generator", c.generator);
    ok &= H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0;
  }
  if (!ok) throw OutputError(fmt::format("save_integrals: writing '{}' failed (disk full?)", path));
  if (const std::string why = tmp.commit(); !why.empty()) {
    throw OutputError(fmt::format("save_integrals: cannot write '{}': {}", path, why));
  }
}

}  // namespace dfmp2::chem
