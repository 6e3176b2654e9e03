// A basis-set extrapolation's entries of the results file (results.hpp): the limits under Psi4's cbs() variable names
// (CBS TOTAL ENERGY, CBS REFERENCE ENERGY, CBS CORRELATION ENERGY, CBS NUMBER and the CURRENT ones), return_result
// the limit (energy or gradient), and extras.dfmp2.cbs with each basis's energies.
#include <fmt/format.h>

#include "app/results.hpp"

namespace dfmp2::app {

namespace {

nlohmann::json rows_of(const linalg::Matrix& m) {
  nlohmann::json a = nlohmann::json::array();
  for (Eigen::Index r = 0; r < m.rows(); ++r) a.push_back({m(r, 0), m(r, 1), m(r, 2)});
  return a;
}

nlohmann::json flat_of(const linalg::Matrix& m) {
  nlohmann::json a = nlohmann::json::array();
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) a.push_back(m(r, c));
  return a;
}

nlohmann::json stage_json(const chem::BasisSeries& series, chem::CbsScheme scheme, std::optional<double> alpha,
                          double limit) {
  nlohmann::json j = {{"bases", series.names}, {"zetas", series.zetas}, {"scheme", chem::cbs_scheme_name(scheme)},
                      {"limit", limit}};
  if (chem::cbs_default_alpha(scheme) > 0) j["alpha"] = alpha.value_or(chem::cbs_default_alpha(scheme));
  return j;
}

}  // namespace

void add_cbs(const Calculation& calc, nlohmann::json& j) {
  const CbsRun& c = *calc.cbs;
  const CbsOptions& o = *calc.input.cbs;
  nlohmann::json& v = j["extras"]["qcvars"];
  v["CBS REFERENCE ENERGY"] = v["CURRENT REFERENCE ENERGY"] = c.scf;
  v["CBS CORRELATION ENERGY"] = v["CURRENT CORRELATION ENERGY"] = c.correlation;
  v["CBS TOTAL ENERGY"] = v["CURRENT ENERGY"] = c.total();
  v["CBS NUMBER"] = c.bases.size();
  j["properties"]["return_energy"] = c.total();
  j["return_result"] = c.total();
  if (c.gradient) {
    j["return_result"] = j["properties"]["return_gradient"] = flat_of(*c.gradient);
    v["CURRENT GRADIENT"] = v["CBS TOTAL GRADIENT"] = rows_of(*c.gradient);
  }
  const chem::SpinScales scales = calc.input.mp2_model.scales();
  nlohmann::json interaction = nlohmann::json::array();
  for (const InteractionEnergy& e : c.interaction) {
    const double total = e.total_with(scales);
    v[e.scheme + "-CORRECTED INTERACTION ENERGY"] = total;
    v[fmt::format("{}-CORRECTED {}-BODY INTERACTION ENERGY", e.scheme, calc.input.molecule->fragments.size())] = total;
    v[(e.scheme == "CP" ? "COUNTERPOISE CORRECTED" : "NON-COUNTERPOISE CORRECTED") + std::string(" INTERACTION ENERGY")] =
        total;
    interaction.push_back({{"scheme", e.scheme}, {"scf", e.scf}, {"correlation", e.correlation_with(scales)},
                           {"total", total}});
  }
  nlohmann::json bases = nlohmann::json::array();
  for (const CbsRun::Basis& b : c.bases) {
    bases.push_back({{"basis", b.name}, {"zeta", b.zeta}, {"scf_total_energy", b.scf}, {"correlation_energy", b.correlation},
                     {"total_energy", b.scf + b.correlation}, {"own", b.calc == nullptr}});
  }
  j["extras"]["dfmp2"]["cbs"] = {{"scf", stage_json(o.scf, o.scf_scheme, o.scf_alpha, c.scf)},
                                 {"correlation", stage_json(o.corl, o.corl_scheme, o.corl_alpha, c.correlation)},
                                 {"total_energy", c.total()},
                                 {"bases", bases},
                                 {"interaction", interaction},
                                 {"seconds", c.seconds}};
  if (c.gradient) {
    j["extras"]["dfmp2"]["cbs"]["gradient"] = rows_of(*c.gradient);
    j["extras"]["dfmp2"]["cbs"]["scf_gradient"] = rows_of(*c.scf_gradient);
  }
}

}  // namespace dfmp2::app
