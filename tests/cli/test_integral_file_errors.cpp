// Integral files with one thing wrong each: the reader names the file and the dataset and says what it expected.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <functional>
#include <limits>

#include "../support/test_support.hpp"
#include "chem/io/integral_file.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::testing::TempDir;

// Writes a small valid AO-form file (nbf 4, nmo 4, nocc 2, naux 6), letting a test change one thing.
struct FileSpec {
  std::string format = "dfmp2-integrals";
  long long version = 1;
  std::string form = "ao";
  std::vector<hsize_t> c_dims = {4, 4}, eps_dims = {4}, ao_dims = {6, 4, 4}, metric_dims = {6, 6};
  long long nocc = 2;
  bool nocc_as_float = false;
  bool skip_metric = false;
  double poison_metric = 0;     // when non-zero, written into metric[1][1]
  double poison_ao = 0;         // when non-zero, written into the last element of ao_3index
  bool with_molecule = true;
  bool with_mo_3index = false;  // (P|ia) of shape [6, 2, 2], for MO-form files
  std::string molecule = "O 0 0 0\nH 0 0.7 0.5\nH 0 -0.7 0.5";
};

void write_doubles(hid_t file, const char* name, const std::vector<hsize_t>& dims, double fill,
                   const std::function<void(std::vector<double>&)>& edit = {}) {
  std::size_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<double> v(n, fill);
  if (dims.size() == 2 && dims[0] == dims[1]) {
    for (hsize_t i = 0; i < dims[0]; ++i) v[i * dims[0] + i] = 2.0;  // positive definite
  }
  if (edit) edit(v);
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t ds = H5Dcreate2(file, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(ds);
  H5Sclose(space);
}

void write_string_attribute(hid_t object, const char* name, const std::string& value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size() + 1);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, value.c_str());
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
}

std::string write_file(const TempDir& dir, const FileSpec& s) {
  const std::string path = (dir.path() / "ints.h5").string();
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  write_string_attribute(f, "dfmp2_format", s.format);
  {
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "dfmp2_format_version", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_LLONG, &s.version);
    H5Aclose(a);
    H5Sclose(space);
  }
  write_string_attribute(f, "form", s.form);
  write_doubles(f, "mo_coefficients", s.c_dims, 0.1);
  write_doubles(f, "orbital_energies", s.eps_dims, 0.0, [](std::vector<double>& v) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = -1.0 + 0.5 * double(i);
  });
  write_doubles(f, "ao_3index", s.ao_dims, 0.01, [&](std::vector<double>& v) {
    if (s.poison_ao != 0) v.back() = s.poison_ao;
  });
  if (s.with_mo_3index) write_doubles(f, "mo_3index", {6, 2, 2}, 0.01);
  if (!s.skip_metric) {
    write_doubles(f, "metric", s.metric_dims, 0.0, [&](std::vector<double>& v) {
      if (s.poison_metric != 0 && v.size() > 7) v[7] = s.poison_metric;
    });
  }
  {
    hid_t space = H5Screate(H5S_SCALAR);
    if (s.nocc_as_float) {
      const double v = double(s.nocc);
      hid_t ds = H5Dcreate2(f, "nocc", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
      H5Dclose(ds);
    } else {
      hid_t ds = H5Dcreate2(f, "nocc", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(ds, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s.nocc);
      H5Dclose(ds);
    }
    H5Sclose(space);
  }
  if (s.with_molecule) {
    hid_t g = H5Gcreate2(f, "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_string_attribute(g, "molecule", s.molecule);
    H5Gclose(g);
  }
  H5Fclose(f);
  return path;
}

std::string open_error(const std::string& path) {
  try {
    auto f = dfmp2::chem::IntegralFile::open(path);
    std::vector<double> block(static_cast<std::size_t>(f->naux() * f->block_stride()));
    f->read_block(0, f->naux(), block.data());
  } catch (const dfmp2::IntegralFileError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(IntegralFile, ValidFileOpens) {
  TempDir dir;
  const auto path = write_file(dir, {});
  EXPECT_EQ(open_error(path), "(no error)");
  const auto f = dfmp2::chem::IntegralFile::open(path);
  EXPECT_EQ(f->nbf(), 4);
  EXPECT_EQ(f->nocc(), 2);
  EXPECT_EQ(f->naux(), 6);
  EXPECT_EQ(f->metadata().molecule->atoms.size(), 3u);
}

struct BadFile {
  std::string name;
  std::function<void(FileSpec&)> edit;
  std::string message;  // after "<path>: "
};
std::ostream& operator<<(std::ostream& os, const BadFile& b) { return os << b.name; }

class BadFiles : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadFiles, NameTheDataset) {
  TempDir dir;
  FileSpec spec;
  GetParam().edit(spec);
  const auto path = write_file(dir, spec);
  EXPECT_EQ(open_error(path), path + ": " + GetParam().message);
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

INSTANTIATE_TEST_SUITE_P(
    Reader, BadFiles,
    ::testing::Values(
        BadFile{"wrong_format", [](FileSpec& s) { s.format = "fcidump"; },
                "root attribute 'dfmp2_format' is missing or not 'dfmp2-integrals' (see docs/integral-file-format.md)"},
        BadFile{"future_version", [](FileSpec& s) { s.version = 3; },
                "format version 3 is not supported (this dfmp2 reads versions 1 and 2)"},
        BadFile{"bad_form", [](FileSpec& s) { s.form = "ri"; }, "root attribute 'form' must be 'ao' or 'mo'"},
        BadFile{"missing_metric", [](FileSpec& s) { s.skip_metric = true; }, "dataset 'metric' is missing"},
        BadFile{"metric_not_square", [](FileSpec& s) { s.metric_dims = {6, 5}; },
                "dataset 'metric' has shape [6, 5], expected [6, 6] (naux x naux)"},
        BadFile{"metric_rank", [](FileSpec& s) { s.metric_dims = {36}; },
                "dataset 'metric' has rank 1 (shape [36]), expected rank 2 (naux x naux)"},
        BadFile{"ao_shape", [](FileSpec& s) { s.ao_dims = {6, 4, 3}; },
                "dataset 'ao_3index' has shape [6, 4, 3], expected [6, 4, 4] (naux x nbf x nbf)"},
        BadFile{"coefficients_shape", [](FileSpec& s) { s.c_dims = {4, 3}; },
                "dataset 'mo_coefficients' has shape [4, 3], expected [4, 4] (nbf x nmo, nmo from 'orbital_energies')"},
        BadFile{"nocc_float", [](FileSpec& s) { s.nocc_as_float = true; }, "dataset 'nocc' must hold an integer"},
        BadFile{"nocc_range", [](FileSpec& s) { s.nocc = 4; }, "dataset 'nocc' is 4, expected 1 <= nocc < nmo = 4"},
        BadFile{"metric_nan", [](FileSpec& s) { s.poison_metric = kNaN; },
                "dataset 'metric' holds a non-finite value (element 7)"},
        BadFile{"ao_inf", [](FileSpec& s) { s.poison_ao = std::numeric_limits<double>::infinity(); },
                "dataset 'ao_3index' holds a non-finite value (element 95)"},
        BadFile{"bad_molecule", [](FileSpec& s) { s.molecule = "O 0 0 0\nZz 1 1 1"; },
                "metadata attribute 'molecule': line 2: 'Zz' is not an element symbol"},
        BadFile{"mo_form_without_mo_3index", [](FileSpec& s) { s.form = "mo"; }, "dataset 'mo_3index' is missing"}),
    [](const auto& info) { return info.param.name; });

TEST(IntegralFile, NotHdf5AndMissing) {
  TempDir dir;
  const auto text = dir.file("text.h5", "hello\n");
  EXPECT_EQ(open_error(text), text + ": not an HDF5 file");
  const auto none = (dir.path() / "none.h5").string();
  EXPECT_EQ(open_error(none), none + ": no such file");
}

TEST(IntegralFile, CommandLineExitCodeAndMessage) {
  TempDir dir;
  FileSpec spec;
  spec.metric_dims = {6, 5};
  const auto path = write_file(dir, spec);
  dir.file("in.yaml", "integrals: ints.h5\n");
  const auto r = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err, "dfmp2: error: " + path + ": dataset 'metric' has shape [6, 5], expected [6, 6] (naux x naux)\n");
  EXPECT_TRUE(r.out.empty());
}

TEST(IntegralFile, ScreeningAnMoFormFileIsAnInputError) {
  TempDir dir;
  FileSpec spec;
  spec.form = "mo";
  spec.with_mo_3index = true;
  write_file(dir, spec);
  dir.file("in.yaml", "integrals: ints.h5\nscreening: {threshold: 1e-10}\n");
  const auto r = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("key 'screening': screens AO integrals (P|mn)"), std::string::npos) << r.err;
  // Without screening the same MO-form file runs.
  dir.file("ok.yaml", "integrals: ints.h5\n");
  const auto ok = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "ok.yaml").string(), dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(IntegralFile, FrozenCoreTrueWithoutMoleculeIsAnInputError) {
  TempDir dir;
  FileSpec spec;
  spec.with_molecule = false;
  write_file(dir, spec);
  dir.file("in.yaml", "integrals: ints.h5\nfrozen_core: true\n");
  const auto r = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("key 'frozen_core': true needs the molecule"), std::string::npos) << r.err;
}

// Integrity (docs/integral-file-format.md): a file of an older writer (HDF5's earliest format, contiguous data) is
// read, and the report says it could not be verified; the committed fixture, written by the exporter, is verified.
TEST(IntegralFile, ChecksumsAreReportedAsVerifiedOrNot) {
  TempDir dir;
  write_file(dir, {});
  const auto old = dfmp2::chem::IntegralFile::open((dir.path() / "ints.h5").string());
  EXPECT_FALSE(old->metadata_checksummed());
  const auto fixture = dfmp2::chem::IntegralFile::open(std::string(DFMP2_SOURCE_DIR) + "/inputs/water-cc-pvdz.h5");
  EXPECT_TRUE(fixture->metadata_checksummed());
  EXPECT_TRUE(fixture->unchecked_datasets().empty());

  dir.file("old.yaml", "integrals: ints.h5\noutput: old.json\n");
  const auto r = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "old.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("integrity    no checksums (HDF5 file format older than 1.8"), std::string::npos) << r.out;
  std::ifstream json(dir.path() / "old.json");
  const auto results = nlohmann::json::parse(json);
  EXPECT_FALSE(results["extras"]["dfmp2"]["problem"]["integrity"]["metadata_checksummed"].get<bool>());

  dir.file("new.yaml", "integrals: " + std::string(DFMP2_SOURCE_DIR) + "/inputs/water-cc-pvdz.h5\n");
  const auto v = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "new.yaml").string(), dir);
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("integrity    checksums verified as read"), std::string::npos) << v.out;
}

// What dfmp2 itself saves after an SCF carries checksums on every dataset and reads back verified.
TEST(IntegralFile, SavedFileIsChecksummed) {
  TempDir dir;
  dir.file("w.yaml", "molecule: {xyz: \"O 0 0 0.1178\\nH 0 0.7555 -0.4712\\nH 0 -0.7555 -0.4712\"}\nbasis: sto-3g\n"
                     "save_integrals: w.h5\n");
  const auto r = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "w.yaml").string(), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto saved = dfmp2::chem::IntegralFile::open((dir.path() / "w.h5").string());
  EXPECT_TRUE(saved->metadata_checksummed());
  EXPECT_TRUE(saved->unchecked_datasets().empty());
}

}  // namespace
