#pragma once
// The cost of a calculation (README "Cost of a calculation"): each run's DF-MP2 energy priced on the cloud instances
// of the input's instance table: seconds (measured here for CPU backends, the model's prediction for device models),
// dollars and kWh, for the run alone on the instance and for its share when the instance is full of such runs.
#include <nlohmann/json.hpp>

#include <string>
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
  // The part of the instance one such calculation takes: one of its NeuronCores, or the cores the CPU run used.
  double share = 1;
  double hours() const { return seconds / 3600; }
  double usd_alone() const { return instance->usd_per_hour.value * hours(); }
  double usd_shared() const { return usd_alone() * share; }
  double kwh_alone(double pue) const { return instance->watts.value * pue * hours() / 1000; }
  double kwh_shared(double pue) const { return kwh_alone(pue) * share; }
};

// Every run priced on every instance that prices it: device-model runs on each instance of that model, CPU runs on
// the input's CPU instance. Empty when the input does not price its runs (Input::cost).
std::vector<RunCost> price_runs(const Calculation& calc);

// The report's "Cost of a calculation" block ("" when nothing is priced), and extras.dfmp2.cost (null then).
std::string format_cost_table(const Calculation& calc);
nlohmann::json cost_json(const Calculation& calc);

// This machine's CPU as /proc/cpuinfo names it ("AMD EPYC 9R14 96-Core Processor"), or "unknown CPU".
std::string this_cpu();

}  // namespace dfmp2::app
