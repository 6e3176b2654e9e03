#pragma once
// The stages of a calculation (README "How to add ..."): one per capability the input can ask for (the SCF with its
// J/K, DF-MP2 on every backend, the fragments of an interaction energy in their own basis, the gradient, the
// Hessian), each in a file of its own. run_calculation (app/run.cpp) makes the stages the input asks for from the
// table in app/stages.cpp, plans them in order (each adds its rows to the memory plan), checks the scratch folder
// once, then runs each, measuring the peak resident memory of the rows it planned.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/resident.hpp"
#include "app/run.hpp"

namespace dfmp2::app {

using Progress = std::function<void(const std::string&)>;
using PhaseProgress = std::function<void(const std::string&, long long, long long)>;

// The backends of a run, made before any of them runs: each named one, the host fallback (device.host_fallback), and
// the one the SCF (and the gradient) runs on.
struct Backends {
  std::vector<std::unique_ptr<linalg::Backend>> named;
  std::unique_ptr<linalg::Backend> fallback, scf_own;
  linalg::Backend* scf = nullptr;
  std::vector<linalg::Backend*> named_list() const;
};
// Every backend made, and checked against what the input asks of it (app/backends.cpp).
Backends make_backends(const Input& input);

// What every stage works with.
struct StageContext {
  const Input& input;
  linalg::Comm& comm;
  Backends& backends;
  Calculation& calc;
  ResidentSampler& sampler;
  Progress progress;             // may be empty
  PhaseProgress phase_progress;  // may be empty
  double resident_at_start = 0;  // the largest of any rank's
  void say(const std::string& line) const {
    if (progress) progress(line);
  }
};

class Stage {
 public:
  virtual ~Stage() = default;
  // Adds the stage's rows to calc.memory, before any three-index integral of the run; a phase that cannot fit ends
  // the run here with the one line of within_memory.
  virtual void plan(StageContext& c) = 0;
  virtual void run(StageContext& c) = 0;
  // Whether run() measures its rows' peaks itself (DF-MP2, one per step); otherwise each row the stage planned gets
  // the stage's peak.
  virtual bool measures_its_rows() const { return false; }
  // A part of the run measured as a whole beside the rows (MemoryPlan::measured), or "".
  virtual std::string measured_part() const { return ""; }
};

// The stages `input` asks for, in the order they run (app/stages.cpp).
std::vector<std::unique_ptr<Stage>> stages_for(const Input& input, const Reference& reference);

// Each stage's maker, in its own file.
std::unique_ptr<Stage> make_scf_stage();
std::unique_ptr<Stage> make_mp2_stage();
std::unique_ptr<Stage> make_own_basis_stage();
std::unique_ptr<Stage> make_gradient_stage();
std::unique_ptr<Stage> make_counterpoise_gradient_stage();
std::unique_ptr<Stage> make_hessian_stage();
std::unique_ptr<Stage> make_properties_stage();

// A fragment's reference: RHF for a singlet (what UHF and ROHF give it too), else the complex's (app/reference.cpp).
chem::ScfReference fragment_reference(const Input& input, const chem::Molecule& fragment);

// Planning pieces shared between stages and make_memory_plan.
// Bytes the SCF holds besides its J/K (app/scf_stage.cpp).
double scf_matrix_bytes(linalg::Index nbf, int diis_vectors, bool open_shell);
// The SCF's matrices' row (molecule input) and the check that the integral file to save fits on its disk.
void plan_scf_matrices(const Input& input, const Reference& r, MemoryPlan& plan);
// DF-MP2's rows and the blocking of every run (app/mp2_stage.cpp) but the gradient's (energy_from_gradient), which
// the gradient's row holds; `gradient_backend` is "" without a gradient.
void plan_dfmp2(const Input& input, const Reference& r, const std::vector<linalg::Backend*>& backends,
                MemoryPlan& plan, int ranks, const std::string& gradient_backend = "");
// driver: gradient (and hessian): whether the DF-MP2 energy on `backend` in `precision` is the one the gradient's
// amplitude pass computes anyway: on the gradient's backend in fp64, with the Cholesky metric it uses and without
// screening. That energy is computed once, by the gradient, and DF-MP2 neither plans nor runs it.
bool energy_from_gradient(const Input& input, const Reference& r, const std::string& backend,
                          chem::Precision precision, const std::string& gradient_backend);
// driver: gradient (app/gradient_stage.cpp): whether the SCF's J/K (its bytes in memory and on scratch) stays
// through DF-MP2 for the orbital response, beside every DF-MP2 run's blocks as planned; if so, DF-MP2's rows of
// `plan` hold it too.
bool keep_scf_jk_through_dfmp2(MemoryPlan& plan, double jk_bytes, double jk_scratch_bytes);
// The DF-SCF's J/K options within `memory_bytes` (app/scf_stage.cpp); the gradient sets the J/K up again with them.
chem::DfJkOptions df_jk_options(const Input& input, double memory_bytes, linalg::Index naux, linalg::Comm& comm);

}  // namespace dfmp2::app
