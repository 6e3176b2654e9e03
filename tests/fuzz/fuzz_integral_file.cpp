// libFuzzer target: the integral file reader (chem/io/integral_file.cpp IntegralFile::open and the first read). The
// fuzzer's bytes become the file's contents through HDF5's own API, so that every attribute and dataset the reader
// takes is reached with fuzzed values: the root attributes, small datasets of any values (NaN and Inf included) and
// sizes, and the metadata strings (the molecule's xyz lines, charge, basis names). The HDF5 container itself is not
// fuzzed here: the byte-flip corpus (tests/bad_inputs/integral_files.py) covers damaged files.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "chem/io/integral_file.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

// Picks a valid word most of the time, so the reader gets past each check to the next.
std::string word(FuzzedDataProvider& fdp, const char* valid) {
  return fdp.ConsumeProbability<double>() < 0.8 ? std::string(valid) : fdp.ConsumeRandomLengthString(32);
}

std::vector<double> doubles(FuzzedDataProvider& fdp, std::size_t n) {
  std::vector<double> v(n);
  for (auto& x : v) {
    if (fdp.ConsumeBool()) {  // raw bits: NaN, Inf, denormals, anything
      std::uint64_t bits = fdp.ConsumeIntegral<std::uint64_t>();
      std::memcpy(&x, &bits, sizeof x);
    } else {
      x = fdp.ConsumeFloatingPointInRange<double>(-2.0, 2.0);
    }
  }
  return v;
}

void string_attribute(hid_t object, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.empty() ? 1 : value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, type, value.empty() ? "" : value.data());
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

void integer_attribute(hid_t object, const char* name, long long value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(object, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, H5T_NATIVE_LLONG, &value);
  H5Aclose(attr);
  H5Sclose(space);
}

void dataset(hid_t file, const char* name, const std::vector<hsize_t>& dims, const std::vector<double>& values) {
  const hid_t space = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  const hid_t d = H5Dcreate2(file, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d);
  H5Sclose(space);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  FuzzedDataProvider fdp(data, size);
  const auto path = (dfmp2::fuzz::work_folder() / "f.h5").string();
  const hsize_t nbf = fdp.ConsumeIntegralInRange<hsize_t>(1, 6), naux = fdp.ConsumeIntegralInRange<hsize_t>(1, 8);
  const hsize_t nmo = fdp.ConsumeBool() ? nbf : fdp.ConsumeIntegralInRange<hsize_t>(1, 7);
  const bool ao = fdp.ConsumeProbability<double>() < 0.7;
  const long long nocc = fdp.ConsumeBool() ? 1 + fdp.ConsumeIntegralInRange<long long>(0, 4)
                                           : fdp.ConsumeIntegral<long long>();
  {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return 0;
    string_attribute(file, "dfmp2_format", word(fdp, "dfmp2-integrals"));
    // Format 1 (closed shell) or 2 (open shells: a reference attribute, beta orbitals, ROHF's singles terms).
    const int version = fdp.ConsumeProbability<double>() < 0.5 ? 1 : 2;
    integer_attribute(file, "dfmp2_format_version",
                      fdp.ConsumeProbability<double>() < 0.9 ? version : fdp.ConsumeIntegral<long long>());
    string_attribute(file, "form", word(fdp, ao ? "ao" : "mo"));
    const char* references[] = {"uhf", "rohf", "rhf"};
    const std::string reference = references[fdp.ConsumeIntegralInRange<int>(0, 2)];
    if (version == 2 && fdp.ConsumeProbability<double>() < 0.9) string_attribute(file, "reference", word(fdp, reference.c_str()));
    if (version == 2 || fdp.ConsumeProbability<double>() < 0.1) {  // the beta spin (also where it does not belong)
      const long long nbeta = fdp.ConsumeBool() ? std::max(0LL, std::clamp<long long>(nocc, 0, 6) - fdp.ConsumeIntegralInRange<long long>(0, 2))
                                                : fdp.ConsumeIntegral<long long>();
      if (fdp.ConsumeProbability<double>() < 0.95) {
        const hid_t space = H5Screate(H5S_SCALAR);
        const hid_t d = H5Dcreate2(file, "nocc_beta", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &nbeta);
        H5Dclose(d);
        H5Sclose(space);
      }
      const hsize_t beta_mo = fdp.ConsumeBool() ? nmo : fdp.ConsumeIntegralInRange<hsize_t>(1, 7);
      if (fdp.ConsumeProbability<double>() < 0.95) dataset(file, "orbital_energies_beta", {beta_mo}, doubles(fdp, beta_mo));
      if (fdp.ConsumeProbability<double>() < 0.95) dataset(file, "mo_coefficients_beta", {nbf, beta_mo}, doubles(fdp, nbf * beta_mo));
      if (reference == "rohf" || fdp.ConsumeProbability<double>() < 0.1) {
        const hsize_t na = hsize_t(std::clamp<long long>(nocc, 1, 6)), nb = hsize_t(std::clamp<long long>(nbeta, 0, 6));
        dataset(file, "singles_alpha", {fdp.ConsumeBool() ? na : na + 1}, doubles(fdp, na + 1));
        if (nb > 0) dataset(file, "singles_beta", {nb}, doubles(fdp, nb));
      }
    }
    {
      const hid_t space = H5Screate(H5S_SCALAR);
      const hid_t d = H5Dcreate2(file, "nocc", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &nocc);
      H5Dclose(d);
      H5Sclose(space);
    }
    dataset(file, "orbital_energies", {nmo}, doubles(fdp, nmo));
    dataset(file, "metric", {naux, naux}, doubles(fdp, naux * naux));
    if (ao) {
      dataset(file, "mo_coefficients", {nbf, nmo}, doubles(fdp, nbf * nmo));
      dataset(file, "ao_3index", {naux, nbf, nbf}, doubles(fdp, naux * nbf * nbf));
    } else {
      const hsize_t occ = hsize_t(std::max(1LL, std::min<long long>(nocc, 6)));
      const hsize_t vir = nmo > occ ? nmo - occ : 1;
      dataset(file, "mo_3index", {naux, occ, vir}, doubles(fdp, naux * occ * vir));
    }
    if (fdp.ConsumeBool()) dataset(file, "scf_energy", {}, doubles(fdp, 1));
    if (fdp.ConsumeBool()) {
      const hid_t md = H5Gcreate2(file, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      string_attribute(md, "molecule", fdp.ConsumeRandomLengthString(256));
      if (fdp.ConsumeBool()) integer_attribute(md, "charge", fdp.ConsumeIntegral<long long>());
      if (fdp.ConsumeBool()) {
        integer_attribute(md, "multiplicity", fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<long long>(1, 4)
                                                                : fdp.ConsumeIntegral<long long>());
      }
      string_attribute(md, "basis", fdp.ConsumeRandomLengthString(32));
      string_attribute(md, "aux_basis", fdp.ConsumeRandomLengthString(32));
      string_attribute(md, "scf_type", fdp.ConsumeRandomLengthString(16));
      string_attribute(md, "generator", fdp.ConsumeRandomLengthString(64));
      H5Gclose(md);
    }
    H5Fclose(file);
  }
  dfmp2::fuzz::expect_only_input_errors([&] {
    const auto f = dfmp2::chem::IntegralFile::open(path);
    std::vector<double> block(static_cast<std::size_t>(f->block_stride()));
    f->read_block(0, 1, block.data());
    (void)f->metadata();
  });
  return 0;
}
