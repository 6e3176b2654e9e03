#include "app/resident.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

namespace dfmp2::app {

double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * double(sysconf(_SC_PAGE_SIZE));
}

double peak_resident_bytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

struct ResidentSampler::State {
  std::atomic<bool> stop{false};
  std::atomic<double> peak{0};
  std::thread thread;
};

ResidentSampler::ResidentSampler() : state_(std::make_unique<State>()) {
  State* s = state_.get();
  s->peak = resident_bytes();
  s->thread = std::thread([s] {
    while (!s->stop.load()) {
      const double now = resident_bytes();
      double seen = s->peak.load();
      while (now > seen && !s->peak.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
}

ResidentSampler::~ResidentSampler() {
  state_->stop = true;
  state_->thread.join();
}

double ResidentSampler::take_peak() {
  const double now = resident_bytes();
  return std::max(state_->peak.exchange(now), now);
}

}  // namespace dfmp2::app
