#pragma once
// Reader of dfmp2 integral files (HDF5), format versions 1 and 2 (open shells), as docs/integral-file-format.md
// defines them.
// Opening a file checks every required dataset's presence, rank, shape, type and (except for the large
// three-index tensor, which is checked block by block as it is streamed) finiteness, and throws
// IntegralFileError naming the file and the dataset at fault.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chem/system/molecule.hpp"
#include "chem/scf/scf.hpp"
#include "chem/integrals/three_index_source.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// Version 1: a closed-shell reference. Version 2: also open shells (root attribute `reference`, beta orbitals). A
// writer writes the lowest version that holds its reference.
inline constexpr int kIntegralFormatVersion = 1;
inline constexpr int kOpenShellFormatVersion = 2;

// Energies another program computed on the same orbitals, stored for cross-checks.
struct ReferenceEnergies {
  double opposite_spin = 0;
  double same_spin = 0;
  double correlation = 0;
  double singles = 0;  // ROHF-MBPT(2)
  std::optional<double> total;
  std::string program;
};

struct IntegralFileMetadata {
  std::optional<Molecule> molecule;
  std::string basis, aux_basis, scf_type, generator;
};

// What write_integral_file() stores (AO form).
struct IntegralFileContents {
  const linalg::Matrix* mo_coefficients = nullptr;  // nbf x nmo; open shells: alpha
  const linalg::Vector* orbital_energies = nullptr;
  linalg::Index nocc = 0;
  // Open shells (UHF, ROHF): the reference with its beta orbitals and (ROHF) singles terms (ScfResult); written as
  // format version 2.
  const ScfResult* open_shell = nullptr;
  const ThreeIndexSource* ao_3index = nullptr;     // AO form, read block by block as it is written
  double block_bytes = 256.0 * (1 << 20);          // at most this much of (P|mn) is held at once
  const linalg::Matrix* metric = nullptr;          // naux x naux
  std::optional<double> scf_energy, nuclear_repulsion_energy;
  std::optional<Molecule> molecule;
  std::string basis, aux_basis, scf_type, generator;
};

// Writes an AO-form file of format version 1 (version 2 for an open shell), atomically (a temporary file in the same folder, then renamed),
// streaming (P|mn) from its source a block of auxiliary functions at a time. Throws OutputError when it cannot.
// The bytes of (P|mn) as stored, before compression, for the size printed before writing.
double integral_file_bytes(linalg::Index nbf, linalg::Index nmo, linalg::Index naux);
void write_integral_file(const std::string& path, const IntegralFileContents& contents);

class IntegralFile final : public ThreeIndexSource {
 public:
  static std::unique_ptr<IntegralFile> open(const std::string& path);
  ~IntegralFile() override;
  IntegralFile(const IntegralFile&) = delete;
  IntegralFile& operator=(const IntegralFile&) = delete;

  const std::string& path() const { return path_; }
  ThreeIndexForm form() const override { return form_; }
  linalg::Index naux() const override { return naux_; }
  linalg::Index block_stride() const override;
  void read_block(linalg::Index p0, linalg::Index count, double* out) const override;

  linalg::Index nbf() const { return nbf_; }  // 0 in MO form
  linalg::Index nmo() const { return orbital_energies_.size(); }
  linalg::Index nocc() const { return nocc_; }  // open shells: alpha
  linalg::Index nvir() const { return nmo() - nocc_; }
  // The reference the orbitals come from (rhf for version 1); open shells have beta orbitals too.
  ScfReference reference() const { return reference_; }
  linalg::Index nocc_beta() const { return nocc_beta_; }

  const linalg::Matrix& metric() const { return metric_; }
  const linalg::Vector& orbital_energies() const { return orbital_energies_; }
  const linalg::Matrix& mo_coefficients() const { return mo_coefficients_; }  // nbf x nmo; empty in MO form
  // The file as DF-MP2's input: its orbitals, metric and itself as the three-index source.
  DfMp2Input dfmp2_input() const {
    DfMp2Input in;
    in.orbital_energies = &orbital_energies_;
    in.nocc = nocc();
    in.mo_coefficients = form_ == ThreeIndexForm::ao ? &mo_coefficients_ : nullptr;
    in.metric = &metric_;
    in.three_index = this;
    if (reference_ != ScfReference::rhf) {
      in.orbital_energies_beta = &orbital_energies_beta_;
      in.nocc_beta = nocc_beta_;
      in.mo_coefficients_beta = &mo_coefficients_beta_;
    }
    if (reference_ == ScfReference::rohf) {
      in.singles_alpha = &singles_alpha_;
      in.singles_beta = &singles_beta_;
    }
    return in;
  }
  std::optional<double> scf_energy() const { return scf_energy_; }
  std::optional<double> nuclear_repulsion_energy() const { return nuclear_repulsion_; }
  const IntegralFileMetadata& metadata() const { return metadata_; }
  // Keyed by the number of frozen core orbitals.
  const std::map<int, ReferenceEnergies>& references() const { return references_; }
  // Integrity (docs/integral-file-format.md): whether the file's metadata is checksummed (HDF5 1.8+ format), and
  // the datasets whose data carries no checksum (contiguous layout, or chunked without Fletcher32). Files from
  // older writers are accepted; the report says what could not be verified.
  bool metadata_checksummed() const { return metadata_checksummed_; }
  const std::vector<std::string>& unchecked_datasets() const { return unchecked_; }

  // sqrt((mn|mn)) of normalised functions (and sqrt((ia|ia)) of normalised orbitals) stays below this for any
  // basis set: a primitive with exponent a has (ss|ss) = sqrt(4a/pi), so 1e3 allows a up to about 7e11.
  static constexpr double kMaxPairNorm = 1e3;

 private:
  IntegralFile() = default;
  std::string path_;
  long long file_ = -1;  // hid_t, kept opaque so this header does not include hdf5.h
  ThreeIndexForm form_ = ThreeIndexForm::ao;
  linalg::Index nbf_ = 0, nocc_ = 0, naux_ = 0, nvir_file_ = 0;
  linalg::Matrix metric_, mo_coefficients_;
  linalg::Vector orbital_energies_;
  ScfReference reference_ = ScfReference::rhf;
  linalg::Index nocc_beta_ = 0;
  linalg::Matrix mo_coefficients_beta_;
  linalg::Vector orbital_energies_beta_, singles_alpha_, singles_beta_;
  std::optional<double> scf_energy_, nuclear_repulsion_;
  IntegralFileMetadata metadata_;
  std::map<int, ReferenceEnergies> references_;
  bool metadata_checksummed_ = false;
  std::vector<std::string> unchecked_;
  std::vector<double> pair_bound_;  // per auxiliary function: kMaxPairNorm * sqrt((P|P))
};

}  // namespace dfmp2::chem
