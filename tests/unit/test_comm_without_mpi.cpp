// linalg/comm.cpp as a build with DFMP2_MPI=OFF compiles it (this program is built from that file alone, without
// DFMP2_HAVE_MPI): one rank that says why, and a refusal to run as several ranks of an MPI launcher.
#include <gtest/gtest.h>

#include <cstdlib>

#include "linalg/comm.hpp"

namespace {

TEST(CommWithoutMpi, OneRankThatSaysItWasBuiltWithoutMpi) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  int argc = 0;
  char** argv = nullptr;
  dfmp2::linalg::init_world(&argc, &argv);
  EXPECT_EQ(dfmp2::linalg::world().size(), 1);
  EXPECT_NE(dfmp2::linalg::world().description().find("built without MPI"), std::string::npos);
  EXPECT_EQ(dfmp2::linalg::mpi_library(), "");
  dfmp2::linalg::finalize_world();
}

TEST(CommWithoutMpi, RefusesToRunAsSeveralRanks) {
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  int argc = 0;
  char** argv = nullptr;
  try {
    dfmp2::linalg::init_world(&argc, &argv);
    FAIL() << "expected a refusal";
  } catch (const dfmp2::linalg::RankFailure& e) {
    EXPECT_EQ(e.exit_code(), 4);
    EXPECT_FALSE(e.reports()) << "only the launcher's rank 0 prints";
    EXPECT_NE(e.report().message.find("built without MPI"), std::string::npos);
    EXPECT_NE(e.report().message.find("3 ranks"), std::string::npos);
  }
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_RANK");
}

}  // namespace
