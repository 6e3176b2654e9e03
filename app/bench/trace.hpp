#pragma once
// Kernel traces: a YAML list of kernel calls that `dfmp2 bench --trace FILE` runs (and, on device models, models)
// in order. Format: bench/README.md, "Trace files".
#include <optional>
#include <string>
#include <vector>

#include "app/bench/bench.hpp"

namespace dfmp2::app::bench {

struct TraceEntry {
  CallSpec call;
  int repeat = 1;         // consecutive calls of this entry in one pass of the trace
  std::string label;      // for the table (default: the op)
  std::string precision;  // empty: the trace's precision
};

struct Trace {
  std::string path;
  std::string description;
  std::string precision;                     // empty: the command line's (default fp32)
  std::optional<double> published_seconds;   // a published time for the whole trace, to print next to the model's
  std::string published_device;              // the device it was measured on (default trn1)
  std::vector<TraceEntry> entries;
};

// InputError with file:line:column for a bad key or value.
Trace read_trace(const std::string& path);

}  // namespace dfmp2::app::bench
