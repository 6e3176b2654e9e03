#pragma once
// Per-kernel accounting: calls, seconds and flops for each (step, kernel, dtype, backend), in first-seen order so
// the report reads in the order the method runs.
#include <chrono>
#include <string>
#include <vector>

#include "linalg/backend.hpp"
#include "linalg/op_call.hpp"

namespace dfmp2::linalg {

struct KernelRecord {
  std::string step;     // what the method was doing, e.g. "fitting"
  std::string kernel;   // the op, e.g. "trsm", or a host phase, e.g. "read_3index"
  std::string backend;  // who ran it: a backend name, or "host" for work outside the backend
  std::string dtype;    // element type of the operands: "fp64", "fp32", or "" where it does not apply
  long calls = 0;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
  // Device models only: the modelled cost summed over the calls (see linalg/backend.hpp).
  bool modelled = false;
  ModelledTime model;
  bool fallback = false;  // ran on the host fallback instead of the backend that was asked for
};

class KernelLog {
 public:
  void add(const std::string& step, const std::string& kernel, const std::string& backend, double seconds,
           const Cost& cost, const std::string& dtype = "", const ModelledTime* model = nullptr,
           bool fallback = false);
  // Sum of the modelled totals of the records that have one (0 when none do).
  double modelled_seconds() const;
  // The modelled times of the records that have one, summed: all of them, or those of one step.
  ModelledTime modelled_sum(const std::string& step = {}) const;
  // A run's time on the modelled device: its measured wall time with each modelled kernel's measured time replaced
  // by its modelled time (host work outside the kernels stays as measured). The one rule the report and
  // `dfmp2 bench` both use.
  double wall_with_modelled_kernels(double wall_seconds) const;
  bool any_modelled() const;
  long fallback_calls() const;
  const std::vector<KernelRecord>& records() const { return records_; }
  double total_seconds() const;
  void clear() { records_.clear(); }

 private:
  std::vector<KernelRecord> records_;
};

// Wall-clock stopwatch on the steady clock.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dfmp2::linalg
