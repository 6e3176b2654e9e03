#include "app/cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "app/report.hpp"
#include "devices/registry.hpp"

namespace dfmp2::app {

std::string this_cpu() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::vector<std::pair<const BackendRun*, std::string>> unpriced_runs(const Calculation& calc) {
  std::vector<std::pair<const BackendRun*, std::string>> out;
  if (!calc.input.cost) return out;
  const InstanceTable& table = calc.input.cost->table;
  for (const BackendRun& run : calc.runs) {
    if (!devices::is_device_model(run.backend)) continue;
    if (table.names(run.backend).empty()) {
      out.emplace_back(&run, fmt::format("no instance in {} runs {}", table.file, run.backend));
    } else if (!run.modelled()) {
      out.emplace_back(&run, "no kernel ran on the device model (all fell back to the host)");
    }
  }
  return out;
}

std::vector<RunCost> price_runs(const Calculation& calc) {
  std::vector<RunCost> out;
  if (!calc.input.cost || calc.runs.empty()) return out;
  const CostSettings& cost = *calc.input.cost;
  const auto unpriced = unpriced_runs(calc);
  for (const BackendRun& run : calc.runs) {
    if (std::any_of(unpriced.begin(), unpriced.end(), [&](const auto& u) { return u.first == &run; })) continue;
    const bool device = devices::is_device_model(run.backend);
    const std::vector<std::string> names =
        device ? cost.table.names(run.backend) : std::vector<std::string>{cost.cpu_instance};
    for (const std::string& name : names) {
      RunCost c;
      c.run = &run;
      c.instance = cost.table.find(name);
      c.modelled = run.modelled();
      c.seconds = c.modelled ? run.modelled_seconds() : run.wall_seconds;
      c.compile_seconds = run.log.modelled_sum().compile;
      // A device model is one NeuronCore per rank; a CPU run took `threads` cores of this machine per rank.
      const double used = device ? double(calc.ranks) : double(calc.input.threads) * double(calc.ranks);
      c.share = used / c.instance->slots;
      out.push_back(c);
    }
  }
  return out;
}

std::string format_cost_table(const Calculation& calc) {
  if (!calc.input.cost || calc.runs.empty()) return {};
  const std::vector<RunCost> costs = price_runs(calc);
  const CostSettings& cost = *calc.input.cost;
  const double pue = cost.table.pue.value;
  std::string out = "\n  ==> Cost of a calculation <==\n\n";
  out += fmt::format("  {:<16} {:<15} {:>12} {:<8} {:>11} {:>12} {:>12} {:>12} {:>12}\n", "run", "instance",
                     "time [s]", "", "compile [s]", "$ alone", "$ per calc", "kWh alone", "kWh per calc");
  std::vector<const CloudInstance*> used;
  bool any_cpu = false, any_trn2 = false;
  // A run that cannot be priced is named rather than left out without a word.
  for (const auto& [run, why] : unpriced_runs(calc)) out += fmt::format("  {:<16} not priced: {}\n", run_label(*run), why);
  bool any_beyond = false;
  for (const RunCost& c : costs) {
    out += fmt::format("  {:<16} {:<15} {:>12.4f} {:<8} {:>11} {:>12.4g} {:>12.4g} {:>12.3e} {:>12.3e}\n",
                       run_label(*c.run), c.instance->name, c.seconds, c.modelled ? "modelled" : "measured",
                       c.modelled ? fmt::format("{:.4f}", c.compile_seconds) : std::string("-"), c.usd_alone(),
                       c.usd_shared(), c.kwh_alone(pue), c.kwh_shared(pue));
    if (std::find(used.begin(), used.end(), c.instance) == used.end()) used.push_back(c.instance);
    any_cpu = any_cpu || !c.modelled;
    any_trn2 = any_trn2 || c.run->backend == "trn2";
    any_beyond = any_beyond || c.share > 1;
  }
  out += "  One DF-MP2 energy: this run's DF-MP2 step (the SCF and integrals before it are not priced). '$ alone': the\n"
         "  instance's price for that time; '$ per calc': its share when every NeuronCore (or every set of cores of\n"
         "  the size the run used) runs such a calculation. kWh: the instance's power at full load times the data\n"
         "  centre's overhead (PUE " + fmt::format("{}", pue) + ") times the time; the same two ways.\n";
  if (any_cpu) {
    out += fmt::format("  measured: on this machine ({}, {} thread{}{}), priced as {} on the assumption that it runs\n"
                       "  the same time there (name another with cost.cpu_instance).\n",
                       this_cpu(), calc.input.threads, calc.input.threads == 1 ? "" : "s",
                       calc.ranks > 1 ? fmt::format(" x {} ranks", calc.ranks) : std::string(), cost.cpu_instance);
  }
  if (any_beyond) {
    out += "  a run on more cores (or NeuronCores) than an instance has is priced alone as the whole instances it\n"
           "  needs and per calculation as its share of them, for the same time.\n";
  }
  out += "  modelled: the device model's prediction (README \"Device models\"), compiles included: a rerun with the\n"
         "  compile cache warm takes the time less 'compile'.\n";
  if (any_trn2) {
    out += "  trn2: no trn2 measurement is published, so no trn2 prediction has been checked against a device run;\n"
           "  its host side is trn1's (bench/README \"Device model: calibration and check rows\").\n";
  }
  out += fmt::format("  prices and power from {}; sources and dates in the results file:\n", cost.table.file);
  for (const CloudInstance* i : used) {
    out += fmt::format("    {:<15} ${}/h {} {} ({}); {} W ({}{}); {} {}: {}\n", i->name, i->usd_per_hour.value, i->pricing,
                       i->region, i->usd_per_hour.date, i->watts.value,
                       i->watts.source.rfind("estimate", 0) == 0 ? "estimate, " : "", i->watts.date, i->slots,
                       i->runs == "cpu" ? (i->slots == 1 ? "core" : "cores")
                                        : (i->slots == 1 ? "NeuronCore" : "NeuronCores"),
                       i->hardware);
  }
  return out;
}

nlohmann::json cost_json(const Calculation& calc) {
  if (!calc.input.cost || calc.runs.empty()) return nullptr;
  const std::vector<RunCost> costs = price_runs(calc);
  const CostSettings& cost = *calc.input.cost;
  const double pue = cost.table.pue.value;
  nlohmann::json rows = nlohmann::json::array();
  for (const RunCost& c : costs) {
    const CloudInstance& i = *c.instance;
    rows.push_back({{"backend", c.run->backend},
                    {"precision", chem::precision_name(c.run->precision)},
                    {"instance", i.name},
                    {"time", c.modelled ? "modelled" : "measured"},
                    {"seconds", c.seconds},
                    {"compile_seconds", c.modelled ? nlohmann::json(c.compile_seconds) : nlohmann::json(nullptr)},
                    {"share_of_instance", c.share},
                    {"instances_alone", c.instances()},
                    {"usd_alone", c.usd_alone()},
                    {"usd_per_calculation", c.usd_shared()},
                    {"kwh_alone", c.kwh_alone(pue)},
                    {"kwh_per_calculation", c.kwh_shared(pue)}});
  }
  nlohmann::json unpriced = nlohmann::json::array();
  for (const auto& [run, why] : unpriced_runs(calc)) unpriced.push_back({{"run", run_label(*run)}, {"reason", why}});
  nlohmann::json instances = nlohmann::json::object();
  for (const RunCost& c : costs) {
    const CloudInstance& i = *c.instance;
    instances[i.name] = {{"runs", i.runs},
                         {"slots", i.slots},
                         {"hardware", i.hardware},
                         {"usd_per_hour", i.usd_per_hour.value},
                         {"pricing", i.pricing},
                         {"region", i.region},
                         {"price_source", i.usd_per_hour.source},
                         {"price_date", i.usd_per_hour.date},
                         {"watts", i.watts.value},
                         {"power_source", i.watts.source},
                         {"power_date", i.watts.date}};
  }
  return {{"instances_file", cost.table.file},
          {"pue", pue},
          {"pue_source", cost.table.pue.source},
          {"cpu_instance", cost.cpu_instance},
          {"this_cpu", this_cpu()},
          {"threads", calc.input.threads},
          {"rows", rows},
          {"unpriced", unpriced},
          {"instances", instances}};
}

}  // namespace dfmp2::app
