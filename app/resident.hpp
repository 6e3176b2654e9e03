#pragma once
// The process's resident memory, as the memory plan measures it against `memory`.
#include <memory>

namespace dfmp2::app {

// Resident memory of this process now, and its peak so far (bytes).
double resident_bytes();
double peak_resident_bytes();

// Samples this process's resident memory every 2 ms on a thread of its own, so that each phase's peak can be told
// apart without touching the kernel's own peak counter (which getrusage and /usr/bin/time -v read: resetting it per
// phase would make them report less than the run's true peak). Spikes shorter than the interval can be missed; the
// run's peak in the report comes from getrusage.
class ResidentSampler {
 public:
  ResidentSampler();
  ~ResidentSampler();
  ResidentSampler(const ResidentSampler&) = delete;
  ResidentSampler& operator=(const ResidentSampler&) = delete;
  // The largest resident size sampled since the previous call (or since the start), and a new interval begins.
  double take_peak();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dfmp2::app
