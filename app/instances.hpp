#pragma once
// The cloud instances a DF-MP2 energy is priced on (README "Cost of a calculation"): each with the backend whose
// runs it prices, how many such calculations it runs at once, its price per hour and its power, every figure with
// its source and date. The table is devices/instances.yaml, built into the program; a user's updated copy, named
// by the input's `cost.instances`, replaces it for one run and is checked as strictly as the input.
#include <string>
#include <vector>

namespace dfmp2::app {

// A figure from a published page (or an estimate that says how it was made), with the date the page stated it.
struct CitedValue {
  double value = 0;
  std::string source, date;
};

struct CloudInstance {
  std::string name;      // "trn1.2xlarge", "c7a.large"
  std::string runs;      // the device model whose runs it prices (trn1, trn2), or "cpu" for every CPU backend
  int slots = 1;         // calculations it runs at once: NeuronCores of a device instance, cores of a CPU one
  std::string hardware;  // one line for the report
  CitedValue usd_per_hour;
  std::string pricing, region;  // "on-demand", "capacity block"; "us-east-1"
  CitedValue watts;             // the whole instance at full load, before the data centre's overhead
};

struct InstanceTable {
  std::string file;  // the copy read, or "devices/instances.yaml (built in)"
  CitedValue pue;    // the data centre's power usage effectiveness
  std::string default_cpu;  // defaults.cpu: the instance CPU runs are priced as
  std::vector<CloudInstance> instances;

  const CloudInstance* find(const std::string& name) const;
  std::vector<std::string> names(const std::string& runs) const;  // of the instances pricing `runs`
};

// The built-in table (`path` empty) or a user's copy; a copy that is missing, malformed, or has a field missing,
// unknown or out of range is an InputError naming the file, line:column and field.
InstanceTable load_instance_table(const std::string& path = {});

// The built-in devices/instances.yaml, as text (`dfmp2 --instances` prints it, to start a copy from).
const char* builtin_instances_yaml();

}  // namespace dfmp2::app
