#pragma once
// The cost of a calculation (README "Cost of a calculation"): each run's DF-MP2 energy priced on the cloud instances
// of the input's instance table: seconds (measured here for CPU backends, the model's prediction for device models),
// dollars and kWh, for the run alone on the instance and for its share when the instance is full of such runs.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "app/instances.hpp"
#include "app/run.hpp"

namespace dfmp2::app {

struct RunCost {
  const BackendRun* run = nullptr;
  const CloudInstance* instance = nullptr;
  bool modelled = false;       // seconds predicted by a device model; else measured on this machine
  double seconds = 0;          // the run's DF-MP2 step
  double compile_seconds = 0;  // of them, compiling kernels (device models without them in the compile cache)
  // The part of one instance the calculation takes: the NeuronCores it ran on (one per rank) or the cores (threads
  // x ranks), over the instance's; above 1 when it needs more than one instance.
  double share = 1;
  double instances() const { return std::max(1.0, std::ceil(share - 1e-9)); }  // whole instances, alone
  double hours() const { return seconds / 3600; }
  // Dollars and kWh (the instance's power times the data centre's overhead) for `n` instances over the run's time.
  double usd(double n) const { return instance->usd_per_hour.value * hours() * n; }
  double kwh(double pue, double n) const { return instance->watts.value / 1000 * pue * hours() * n; }
  double usd_alone() const { return usd(instances()); }
  double usd_shared() const { return usd(share); }
  double kwh_alone(double pue) const { return kwh(pue, instances()); }
  double kwh_shared(double pue) const { return kwh(pue, share); }
};

// Every run priced on every instance that prices it: device-model runs on each instance of that model, CPU runs on
// the input's CPU instance. Empty when the input does not price its runs (Input::cost).
std::vector<RunCost> price_runs(const Calculation& calc);
// Runs that cannot be priced, each with why: a device model no instance of the table runs, or a device run none of
// whose kernels was modelled (everything fell back to the host).
std::vector<std::pair<const BackendRun*, std::string>> unpriced_runs(const Calculation& calc);

// The report's "Cost of a calculation" block ("" when nothing is priced), and extras.dfmp2.cost (null then).
std::string format_cost_table(const Calculation& calc);
nlohmann::json cost_json(const Calculation& calc);

// This machine's CPU as /proc/cpuinfo names it ("AMD EPYC 9R14 96-Core Processor"), or "unknown CPU".
std::string this_cpu();

}  // namespace dfmp2::app
