#include <gtest/gtest.h>

#include "../support/test_support.hpp"
#include "app/input.hpp"
#include "devices/eigen/eigen_backend.hpp"
#include "devices/openblas/openblas_backend.hpp"
#include "devices/avx512/avx512_backend.hpp"
#include "devices/registry.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::app::parse_memory_size;

TEST(MemorySize, UnitsAndPlainBytes) {
  EXPECT_DOUBLE_EQ(*parse_memory_size("2 GiB"), 2.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(*parse_memory_size("500 MB"), 500e6);
  // Out of double's range is not a size (it was an internal error from std::stod).
  EXPECT_FALSE(parse_memory_size("1e400"));
  EXPECT_FALSE(parse_memory_size("1e-400"));
  EXPECT_DOUBLE_EQ(*parse_memory_size("1.5gb"), 1.5e9);
  EXPECT_DOUBLE_EQ(*parse_memory_size("1048576"), 1048576.0);
  EXPECT_DOUBLE_EQ(*parse_memory_size("64 KiB"), 65536.0);
  EXPECT_FALSE(parse_memory_size("lots"));
  EXPECT_FALSE(parse_memory_size("2 parsecs"));
  EXPECT_FALSE(parse_memory_size("0 GB"));
  EXPECT_FALSE(parse_memory_size("-1 GB"));
  EXPECT_FALSE(parse_memory_size(""));
}

TEST(Suggestions, NearestKey) {
  EXPECT_EQ(dfmp2::app::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(dfmp2::app::edit_distance("", "abc"), 3u);
  const std::vector<std::string> keys = {"integrals", "frozen_core", "backends"};
  EXPECT_EQ(dfmp2::app::nearest("froze_core", keys), "frozen_core");
  EXPECT_EQ(dfmp2::app::nearest("backend", keys), "backends");
  EXPECT_FALSE(dfmp2::app::nearest("zzzzzz", keys));
}

// The one YAML reading layer: an enum by its name table (with the nearest name suggested), the one boolean rule,
// whole integers only, and file:line:column in every message.
TEST(YamlReader, ChoicesBooleansIntegers) {
  const dfmp2::app::YamlReader r("cfg.yaml");
  const YAML::Node doc = YAML::Load("a: mixed\nb: mixd\nc: Yes\nd: maybe\ne: 3x\nf: 7\n");
  EXPECT_EQ(r.choice(doc["a"], "a", dfmp2::chem::precision_names(), "precision"), dfmp2::chem::Precision::mixed);
  try {
    r.choice(doc["b"], "b", dfmp2::chem::precision_names(), "precision");
    FAIL() << "a misspelt name accepted";
  } catch (const dfmp2::InputError& e) {
    EXPECT_STREQ(e.what(), "cfg.yaml:2:4: key 'b': unknown precision 'mixd' (did you mean 'mixed'?) (expected one of "
                           "fp64, fp32, mixed, bf16, bf16x3)");
  }
  EXPECT_TRUE(r.boolean(doc["c"], "c"));
  EXPECT_THROW(r.boolean(doc["d"], "d"), dfmp2::InputError);
  EXPECT_THROW(r.integer(doc["e"], "e", 0), dfmp2::InputError);
  EXPECT_EQ(r.integer(doc["f"], "f", 0), 7);
  EXPECT_THROW(r.integer(doc["f"], "f", 8), dfmp2::InputError);
  // Names and enums come from one table each way.
  for (const auto& [p, name] : dfmp2::chem::precision_names()) EXPECT_EQ(dfmp2::chem::precision_name(p), name);
  for (const auto& [m, name] : dfmp2::chem::metric_names()) EXPECT_EQ(dfmp2::chem::metric_name(m), name);
}

TEST(ReadInput, DefaultsAndResolvedPaths) {
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto path = dir.file("in.yaml", "integrals: ints.h5\n");
  const auto in = dfmp2::app::read_input(path);
  EXPECT_EQ(in.integrals, (dir.path() / "ints.h5").string());
  // The faster CPU backend on this machine, chosen at run time (devices::default_backend_choice).
  EXPECT_EQ(in.backends, std::vector<std::string>{dfmp2::devices::default_backend()});
  EXPECT_EQ(in.precisions, std::vector<dfmp2::chem::Precision>{dfmp2::chem::Precision::fp64});
  EXPECT_EQ(in.metric, dfmp2::chem::MetricMethod::cholesky);
  EXPECT_EQ(in.frozen_core.kind, dfmp2::app::FrozenCore::Kind::none);
  EXPECT_GT(in.memory_bytes, 0);  // half the memory available when the input is read
  EXPECT_EQ(in.jk_storage, dfmp2::chem::JkStorage::automatic);
  EXPECT_EQ(in.mp2_storage, dfmp2::chem::Mp2Storage::automatic);
  EXPECT_FALSE(in.save_integrals);
  EXPECT_GE(in.threads, 1);
  EXPECT_FALSE(in.output);
}

TEST(ReadInput, EveryKey) {
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto path = dir.file("in.yaml",
                             "integrals: ints.h5\nfrozen_core: 3\nbackends: [eigen, openblas]\nprecision: fp64\n"
                             "memory: 500 MB\nthreads: 1\noutput: out.json\n");
  const auto in = dfmp2::app::read_input(path);
  EXPECT_EQ(in.frozen_core.kind, dfmp2::app::FrozenCore::Kind::count);
  EXPECT_EQ(in.frozen_core.count, 3);
  EXPECT_EQ(in.backends, (std::vector<std::string>{"eigen", "openblas"}));
  EXPECT_DOUBLE_EQ(in.memory_bytes, 500e6);
  EXPECT_EQ(in.threads, 1);
  EXPECT_EQ(*in.output, (dir.path() / "out.json").string());
  EXPECT_EQ(in.as_read["frozen_core"], 3);
  EXPECT_EQ(in.as_read["memory"], "500 MB");
}

TEST(ReadInput, PrecisionListAndMetricMapping) {
  using dfmp2::chem::Precision;
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto in = dfmp2::app::read_input(dir.file(
      "in.yaml", "integrals: ints.h5\nprecision: [mixed, fp64]\nmetric: {method: newton-schulz, tolerance: 1e-9, "
                 "max_iterations: 40}\n"));
  EXPECT_EQ(in.precisions, (std::vector<Precision>{Precision::mixed, Precision::fp64}));
  EXPECT_EQ(in.metric, dfmp2::chem::MetricMethod::newton_schulz);
  EXPECT_DOUBLE_EQ(in.newton_schulz.tolerance, 1e-9);
  EXPECT_EQ(in.newton_schulz.max_iterations, 40);
  const auto eigh = dfmp2::app::read_input(dir.file("e.yaml", "integrals: ints.h5\nmetric: {method: eigh, threshold: 1e-8}\nprecision: fp32\n"));
  EXPECT_EQ(eigh.metric, dfmp2::chem::MetricMethod::eigh);
  EXPECT_DOUBLE_EQ(eigh.eigh_threshold, 1e-8);
  EXPECT_EQ(eigh.precisions, std::vector<Precision>{Precision::fp32});
  EXPECT_EQ(dfmp2::app::read_input(dir.file("s.yaml", "integrals: ints.h5\nmetric: eigh\n")).metric,
            dfmp2::chem::MetricMethod::eigh);
}

TEST(ReadInput, FrozenCoreTrueIsPsi4Rule) {
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto in = dfmp2::app::read_input(dir.file("in.yaml", "integrals: ints.h5\nfrozen_core: true\n"));
  EXPECT_EQ(in.frozen_core.kind, dfmp2::app::FrozenCore::Kind::psi4_rule);
}

TEST(Bytes, FormattedWithAUnitThatShowsThem) {
  using dfmp2::linalg::format_bytes;
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1000), "1000 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(15.0 * 1048576), "15.0 MiB");
  EXPECT_EQ(format_bytes(150.0 * 1073741824), "150 GiB");
  EXPECT_EQ(format_bytes(2.0 * 1099511627776.0), "2.00 TiB");
}

}  // namespace

// The default backend is chosen at run time from the CPU's and the two libraries' vector widths
// (devices/registry.hpp): the widest wins, a tie goes to avx512, then openblas.
TEST(DefaultBackend, TheWidestWinsAndTiesGoToAvx512ThenOpenblas) {
  using dfmp2::devices::vector_width_of_kernel_set;
  EXPECT_EQ(vector_width_of_kernel_set("SkylakeX").flops_per_cycle(), 16);
  EXPECT_EQ(vector_width_of_kernel_set("Haswell").flops_per_cycle(), 8);
  EXPECT_EQ(vector_width_of_kernel_set("ZEN").flops_per_cycle(), 8);
  EXPECT_EQ(vector_width_of_kernel_set("Sandybridge").flops_per_cycle(), 4);
  EXPECT_EQ(vector_width_of_kernel_set("Prescott").flops_per_cycle(), 2);
  EXPECT_EQ(vector_width_of_kernel_set("a kernel set from the future").flops_per_cycle(), 2);
  const int eigen = dfmp2::devices::eigen_vector_width().flops_per_cycle();
  const int blas = dfmp2::devices::openblas_vector_width().flops_per_cycle();
  const int own = dfmp2::devices::avx512_vector_width().flops_per_cycle();
  EXPECT_EQ(own, dfmp2::devices::avx512_available() ? 16 : 0);
  const auto& choice = dfmp2::devices::default_backend_choice();
  const char* expected = own >= blas && own >= eigen ? "avx512" : blas >= eigen ? "openblas" : "eigen";
  EXPECT_EQ(choice.name, expected) << choice.reason;
  EXPECT_NE(choice.reason.find(dfmp2::devices::openblas_kernel_set()), std::string::npos) << choice.reason;
}
