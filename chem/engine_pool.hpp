#pragma once
// libint2 engines for OpenMP threads (chem/integrals.cpp, the one file that includes libint2).
#include <omp.h>

#include <algorithm>
#include <vector>

#include <libint2.hpp>  // included first by chem/integrals.cpp, inside its warning pragmas

namespace dfmp2::chem {

// The threads a parallel region of the integral code runs on (at least one).
inline int thread_count() { return std::max(1, omp_get_max_threads()); }

// One copy of an engine per OpenMP thread: a libint2 engine keeps its scratch and results inside, so threads cannot
// share one. Inside a parallel region each thread takes its own with mine().
class EnginePool {
 public:
  EnginePool() = default;
  explicit EnginePool(const libint2::Engine& proto, int threads = thread_count())
      : engines_(static_cast<std::size_t>(threads), proto) {}
  libint2::Engine& mine() { return engines_[static_cast<std::size_t>(omp_get_thread_num())]; }
  int size() const { return static_cast<int>(engines_.size()); }

 private:
  std::vector<libint2::Engine> engines_;
};

}  // namespace dfmp2::chem
