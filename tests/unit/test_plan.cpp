// The run's one plan (app/run.hpp make_memory_plan): every DF-MP2 run gets its blocking from it, the scratch folder is
// checked once for the largest phase on scratch, and run_dfmp2 refuses a plan made for another rank count.
#include <gtest/gtest.h>

#include <string>

#include "app/input.hpp"
#include "app/run.hpp"
#include "app/stage.hpp"
#include "devices/neuron/native_pipeline.hpp"
#include "chem/mp2/dfmp2.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"
#include "../support/test_support.hpp"

namespace {

namespace app = dfmp2::app;
namespace chem = dfmp2::chem;

app::MemoryPlan plan_with_scratch(const std::string& folder, double scratch_bytes) {
  app::MemoryPlan plan;
  plan.scratch_folder = folder;
  plan.phases.push_back({app::Phase::scf_jk, "scratch", "", 1e6, scratch_bytes, ""});
  plan.phases.push_back({app::Phase::mp2_transform, "scratch", "", 1e6, scratch_bytes / 2, ""});
  return plan;
}

TEST(Plan, ScratchIsCheckedOnlyWhenAPhaseIsOnScratch) {
  app::MemoryPlan plan = plan_with_scratch("/nonexistent/dfmp2", 0);
  for (auto& ph : plan.phases) ph.storage = "memory";
  EXPECT_NO_THROW(app::check_scratch(plan));
}

TEST(Plan, ScratchFolderMustExist) {
  EXPECT_THROW(app::check_scratch(plan_with_scratch("/nonexistent/dfmp2", 1e6)), dfmp2::OutputError);
}

TEST(Plan, ScratchSpaceNamesTheLargestPhase) {
  dfmp2::testing::TempDir dir;
  EXPECT_NO_THROW(app::check_scratch(plan_with_scratch(dir.path().string(), 1e3)));
  try {
    app::check_scratch(plan_with_scratch(dir.path().string(), 1e18));  // an exabyte: no disk has it free
    FAIL() << "expected ResourceError";
  } catch (const dfmp2::ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("scratch: the SCF J/K needs"), std::string::npos) << e.what();
  }
}

// driver: gradient: the SCF's J/K stays through DF-MP2 only when it fits beside every DF-MP2 run's blocks as planned
// (the largest run decides); then DF-MP2's rows hold it, and the other rows are left as they were.
TEST(Plan, ScfJkKeptThroughDfMp2OnlyBesideEveryRunsBlocks) {
  auto make = [] {
    app::MemoryPlan plan;
    plan.mp2_budget = 1000;
    plan.mp2_runs.push_back({"openblas", dfmp2::chem::Precision::fp64, {}});
    plan.mp2_runs.push_back({"trn1", dfmp2::chem::Precision::fp32, {}});
    plan.mp2_runs[0].blocks.peak_bytes = 300;
    plan.mp2_runs[1].blocks.peak_bytes = 600;
    plan.phases.push_back({app::Phase::scf_jk, "memory", "", 350, 0, ""});
    plan.phases.push_back({app::Phase::mp2_transform, "memory", "", 600, 0, "the fitted tensor fits in memory"});
    plan.phases.push_back({app::Phase::mp2_pair_energy, "memory", "", 200, 0, ""});
    return plan;
  };
  app::MemoryPlan fits = make();
  ASSERT_TRUE(app::keep_scf_jk_through_dfmp2(fits, 400, 0));  // 600 + 400 = the budget
  EXPECT_EQ(fits.phases[0].memory_bytes, 350);                 // the J/K's own row as it was
  EXPECT_EQ(fits.phases[1].memory_bytes, 1000);
  EXPECT_EQ(fits.phases[2].memory_bytes, 600);
  EXPECT_NE(fits.phases[1].reason.find("the fitted tensor fits in memory; beside the SCF's J/K kept for the gradient"),
            std::string::npos);
  app::MemoryPlan too_large = make();
  EXPECT_FALSE(app::keep_scf_jk_through_dfmp2(too_large, 401, 0));  // beside the trn1 run's blocks it does not fit
  EXPECT_EQ(too_large.phases[1].memory_bytes, 600);
  EXPECT_EQ(too_large.phases[1].reason, "the fitted tensor fits in memory");
}

TEST(Plan, EveryDfMp2RunHasItsBlockingForTheRankCount) {
  dfmp2::testing::TempDir dir;
  const app::Input in = app::read_input(dir.file(
      "s.yaml", "synthetic: {nbasis: 40, nocc: 8, naux: 120, seed: 3}\nbackends: [eigen, trn1]\n"
                "precision: {eigen: fp64, trn1: [fp32, bf16]}\nmemory: 1 GiB\n"));
  const app::Reference reference = app::make_reference(in);
  auto eigen = dfmp2::devices::make_backend("eigen");
  auto trn1 = dfmp2::devices::make_backend("trn1");
  const app::MemoryPlan plan = app::make_memory_plan(in, reference, {eigen.get(), trn1.get()}, 3, 0.0);
  ASSERT_EQ(plan.mp2_runs.size(), 3u);
  for (const auto& [backend, precision] : {std::pair{"eigen", chem::Precision::fp64},
                                           std::pair{"trn1", chem::Precision::fp32},
                                           std::pair{"trn1", chem::Precision::bf16}}) {
    const chem::BlockPlan& blocks = plan.mp2_blocks(backend, precision);
    EXPECT_EQ(blocks.ranks, 3);
    EXPECT_GE(blocks.occupied_block, 1);
    EXPECT_LE(blocks.peak_bytes, plan.mp2_budget);
  }
  EXPECT_THROW(plan.mp2_blocks("eigen", chem::Precision::fp32), std::logic_error);
}

// driver: gradient computes the energy it differentiates once, in its amplitude pass: DF-MP2 plans no run on the
// gradient's backend in fp64 (and no DF-MP2 rows when that was the only run), but every other backend and
// precision, and the gradient backend's own run when it asks for another metric or for screening.
TEST(Plan, TheGradientsEnergyIsNotPlannedAsADfMp2Run) {
  dfmp2::testing::TempDir dir;
  const std::string problem = "synthetic: {nbasis: 40, nocc: 8, naux: 120, seed: 3}\nmemory: 1 GiB\n";
  app::Input in = app::read_input(dir.file("g.yaml", problem + "backends: [eigen, trn1]\n"
                                                               "precision: {eigen: fp64, trn1: fp32}\n"));
  in.driver = app::Driver::gradient;  // (a synthetic problem has no geometry: the plan alone is tested here)
  const app::Reference reference = app::make_reference(in);
  auto eigen = dfmp2::devices::make_backend("eigen");
  auto trn1 = dfmp2::devices::make_backend("trn1");
  EXPECT_TRUE(app::energy_from_gradient(in, reference, "eigen", chem::Precision::fp64, "eigen"));
  EXPECT_FALSE(app::energy_from_gradient(in, reference, "trn1", chem::Precision::fp32, "eigen"));
  EXPECT_FALSE(app::energy_from_gradient(in, reference, "eigen", chem::Precision::fp64, ""));
  auto mp2_rows = [](const app::MemoryPlan& plan) {
    int rows = 0;
    for (const auto& row : plan.phases) rows += row.phase == app::Phase::mp2_pair_energy;
    return rows;
  };
  app::MemoryPlan both = app::start_plan(in.memory_bytes, 0.0, 1, in.scratch);
  app::plan_dfmp2(in, reference, {eigen.get(), trn1.get()}, both, 1, "eigen");
  ASSERT_EQ(both.mp2_runs.size(), 1u);
  EXPECT_EQ(both.mp2_runs[0].backend, "trn1");
  EXPECT_EQ(mp2_rows(both), 1);
  app::MemoryPlan alone = app::start_plan(in.memory_bytes, 0.0, 1, in.scratch);
  app::plan_dfmp2(in, reference, {eigen.get()}, alone, 1, "eigen");
  EXPECT_TRUE(alone.mp2_runs.empty());
  EXPECT_EQ(mp2_rows(alone), 0);
  EXPECT_TRUE(app::keep_scf_jk_through_dfmp2(alone, 1e6, 0));  // nothing between the SCF and the gradient
  for (const char* other : {"metric: eigh\n", "screening: true\n"}) {
    app::Input asks = app::read_input(dir.file("o.yaml", problem + other));
    asks.driver = app::Driver::gradient;
    SCOPED_TRACE(other);
    EXPECT_FALSE(app::energy_from_gradient(asks, app::make_reference(asks), "eigen", chem::Precision::fp64, "eigen"));
  }
  in.driver = app::Driver::energy;
  EXPECT_FALSE(app::energy_from_gradient(in, reference, "eigen", chem::Precision::fp64, "eigen"));
}

TEST(Plan, RunDfmp2RefusesAPlanForAnotherRankCount) {
  dfmp2::testing::TempDir dir;
  const app::Input in =
      app::read_input(dir.file("s.yaml", "synthetic: {nbasis: 30, nocc: 6, naux: 90, seed: 4}\nmemory: 1 GiB\n"));
  const app::Reference reference = app::make_reference(in);
  auto eigen = dfmp2::devices::make_backend("eigen");
  const app::MemoryPlan plan = app::make_memory_plan(in, reference, {eigen.get()}, 2, 0.0);
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*eigen, log);
  EXPECT_THROW(chem::run_dfmp2(reference.dfmp2_input(), plan.mp2_blocks("eigen", chem::Precision::fp64), {}, kernels),
               std::logic_error);
}

}  // namespace

namespace {

// The stages the input asks for, in run order (app/stages.cpp): the SCF only for molecule input, the gradient for
// driver gradient and hessian, the Hessian for hessian alone; an integral file or a synthetic problem has DF-MP2 only.
TEST(Stages, AreTheOnesTheInputAsksFor) {
  dfmp2::testing::TempDir dir;
  const app::Input synthetic = app::read_input(
      dir.file("s.yaml", "synthetic: {nbasis: 30, nocc: 6, naux: 90, seed: 4}\nmemory: 1 GiB\n"));
  EXPECT_EQ(app::stages_for(synthetic, app::make_reference(synthetic)).size(), 1u);
  const std::string water = "molecule: {xyz: \"O 0 0 0.1178\\nH 0 0.7555 -0.4712\\nH 0 -0.7555 -0.4712\"}\n"
                            "basis: cc-pvdz\n";
  const app::Input energy = app::read_input(dir.file("e.yaml", water));
  const app::Input hessian = app::read_input(dir.file("h.yaml", water + "driver: hessian\n"));
  EXPECT_EQ(app::stages_for(energy, app::make_reference(energy)).size(), 2u);   // SCF, DF-MP2
  EXPECT_EQ(app::stages_for(hessian, app::make_reference(hessian)).size(), 4u);  // SCF, DF-MP2, gradient, Hessian
}

// The device-native pipeline takes each step's operand format by the step's name: its names are DF-MP2's.
TEST(Stages, DeviceNativeStepsAreDfMp2Steps) {
  EXPECT_EQ(dfmp2::devices::neuron::native_steps(), chem::matmul_steps());
}

}  // namespace
