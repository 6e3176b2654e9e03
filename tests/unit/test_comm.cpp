// The one-rank communicator and what every communicator shares (linalg/comm.hpp); the MPI one is exercised by the
// mpi tier (tests/mpi/run_mpi.py), under mpirun.
#include <gtest/gtest.h>

#include <new>

#include "linalg/comm.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::linalg::FailureReport;
using dfmp2::linalg::SerialComm;
using dfmp2::linalg::StridedBlock;

TEST(SerialComm, ExchangeCopiesStridedBlocksInOrder) {
  SerialComm comm;
  // Rows 1..2 of a 4 x 3 column-major matrix into a contiguous 2 x 3 block, and a second pair after it.
  std::vector<double> a(12), b(6, 0.0), c(4, 1.0), d(4, 0.0);
  for (int i = 0; i < 12; ++i) a[static_cast<std::size_t>(i)] = i;
  comm.exchange({StridedBlock{0, a.data() + 1, 2, 3, 4, sizeof(double)}, StridedBlock{0, c.data(), 4, 1, 4, 8}},
                {StridedBlock{0, b.data(), 2, 3, 2, sizeof(double)}, StridedBlock{0, d.data(), 4, 1, 4, 8}});
  EXPECT_EQ(b, (std::vector<double>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(d, c);
  EXPECT_THROW(comm.exchange({StridedBlock{0, a.data(), 2, 2, 4, 8}}, {}), std::logic_error);
}

TEST(SerialComm, OneRankReductionsAndGathersAreTheValuesThemselves) {
  SerialComm comm;
  double x[2] = {1.5, -2.0};
  comm.sum(x, 2);
  EXPECT_EQ(x[0], 1.5);
  EXPECT_EQ(comm.min(3.0), 3.0);
  EXPECT_EQ(comm.max(3.0), 3.0);
  const auto g = comm.gather({dfmp2::linalg::PhaseStats{2.0, 3.0, 0, 0, 0, 0}});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0][0].seconds, 2.0);
  EXPECT_TRUE(comm.all_arrive_within(0.0));
  EXPECT_NE(comm.description().find("one rank"), std::string::npos);
}

TEST(SerialComm, CheckedKeepsTheErrorsOwnTypeOnOneRank) {
  SerialComm comm;
  EXPECT_THROW(comm.checked([] { throw dfmp2::NumericalError("x"); }), dfmp2::NumericalError);
  int ran = 0;
  comm.checked([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_THROW(comm.lend({})->fetch(0, 1, nullptr, 0), std::logic_error);
}

// Every error becomes the exit code and line that main() prints (README "Errors and exit codes").
TEST(FailureReport, MapsEachErrorClassToItsExitCode) {
  auto report = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      return dfmp2::linalg::failure_report(std::current_exception());
    }
    return FailureReport{};
  };
  const FailureReport input = report([] { throw dfmp2::InputError("in.yaml: bad"); });
  EXPECT_EQ(input.exit_code, 2);
  EXPECT_EQ(input.prefix, "error: ");
  EXPECT_EQ(input.message, "in.yaml: bad");
  EXPECT_EQ(report([] { throw dfmp2::ResourceError("r"); }).exit_code, 6);
  EXPECT_EQ(report([] { throw dfmp2::linalg::PeerError(3, "rank 1 could not send block 2: x"); }).exit_code, 3);
  const FailureReport memory = report([] { throw std::bad_alloc(); });
  EXPECT_EQ(memory.exit_code, 6);
  EXPECT_NE(memory.message.find("out of memory"), std::string::npos);
  const FailureReport bug = report([] { throw std::runtime_error("oops"); });
  EXPECT_EQ(bug.exit_code, 70);
  EXPECT_EQ(bug.prefix, "internal error: ");
  EXPECT_NE(bug.suffix.find("bug"), std::string::npos);
  const dfmp2::linalg::RankFailure agreed(input, 2, 4, false);
  EXPECT_EQ(agreed.exit_code(), 2);
  EXPECT_EQ(report([&] { throw agreed; }).message, "in.yaml: bad");
}

}  // namespace
