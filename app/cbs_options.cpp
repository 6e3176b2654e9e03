// Key `cbs` and a basis series in `basis` (cbs_options.hpp).
#include "app/cbs_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace dfmp2::app {

namespace {

const std::vector<std::string> kCbsKeys = {"scf_basis", "scf_scheme", "scf_alpha", "corl_scheme", "corl_alpha"};

linalg::NameTable<chem::CbsScheme> scheme_table() {
  linalg::NameTable<chem::CbsScheme> t;
  for (const auto& [scheme, name] : chem::cbs_scheme_names()) t.push_back({scheme, name});
  return t;
}

// Psi4's defaults by the number of basis sets: the largest basis's value for one, else the two-point (three-point
// for the SCF) Helgaker formulas.
chem::CbsScheme default_scheme(std::size_t bases, bool scf) {
  if (bases == 1) return chem::CbsScheme::xtpl_highest_1;
  if (scf) return bases == 3 ? chem::CbsScheme::scf_xtpl_helgaker_3 : chem::CbsScheme::scf_xtpl_helgaker_2;
  return chem::CbsScheme::corl_xtpl_helgaker_2;
}

chem::BasisSeries series(const YAML::Node& node, const std::string& text, const YamlReader& ctx, const std::string& key) {
  try {
    return chem::expand_basis_series(text);
  } catch (const std::invalid_argument& e) {
    ctx.fail_key(node, key, fmt::format("{{key}}: {}", e.what()));
  }
}

// The scheme of one stage (`stage` "scf" or "corl") over `bases`, given or by default, checked against their count.
chem::CbsScheme stage_scheme(const YAML::Node& cbs, const YamlReader& ctx, const std::string& stage,
                             const chem::BasisSeries& bases, const YAML::Node& bases_node) {
  const std::string key = "cbs." + stage + "_scheme";
  const bool given = cbs && cbs[stage + "_scheme"];
  const YAML::Node n = given ? cbs[stage + "_scheme"] : bases_node;
  const chem::CbsScheme scheme = given ? ctx.choice(n, key, scheme_table(), "extrapolation scheme")
                                       : default_scheme(bases.names.size(), stage == "scf");
  const int points = chem::cbs_scheme_points(scheme);
  if (points > 0 && static_cast<std::size_t>(points) != bases.names.size()) {
    ctx.fail_key(n, given ? key : (stage == "scf" ? "cbs.scf_basis" : "basis"),
                 fmt::format("{{key}}: {} takes {} basis sets, and {} {} given ({})", chem::cbs_scheme_name(scheme),
                             points, bases.names.size(), bases.names.size() == 1 ? "is" : "are",
                             fmt::join(bases.names, ", ")));
  }
  if (!given && bases.names.size() > 3) {
    ctx.fail_key(bases_node, stage == "scf" ? "cbs.scf_basis" : "basis",
                 fmt::format("{{key}}: no scheme takes {} basis sets by default; name one in cbs.{}_scheme",
                             bases.names.size(), stage));
  }
  return scheme;
}

std::optional<double> stage_alpha(const YAML::Node& cbs, const YamlReader& ctx, const std::string& stage,
                                  chem::CbsScheme scheme) {
  if (!cbs || !cbs[stage + "_alpha"]) return std::nullopt;
  const std::string key = "cbs." + stage + "_alpha";
  const YAML::Node n = cbs[stage + "_alpha"];
  if (chem::cbs_default_alpha(scheme) == 0.0) {
    ctx.fail_key(n, key, fmt::format("{{key}}: {} has no alpha to set", chem::cbs_scheme_name(scheme)));
  }
  const double alpha = ctx.number(n, key);
  if (!(alpha > 0 && alpha <= 20)) ctx.fail_key(n, key, fmt::format("{{key}}: expected a number from 0 to 20, got {}", alpha));
  return alpha;
}

// What an extrapolation cannot be combined with, each refused with the key that asks for it.
void check_combinations(const YAML::Node& root, const YamlReader& ctx, const CbsOptions& cbs) {
  if (root["aux_basis"]) {
    ctx.fail_key(root["aux_basis"], "aux_basis", "{key}: one fitting set cannot serve every basis of the extrapolation; "
                                                 "leave it out (each basis takes its own, <basis>-ri, as Psi4)");
  }
  if (root["scf"] && root["scf"].IsMap() && root["scf"]["jk_basis"]) {
    ctx.fail_key(root["scf"]["jk_basis"], "scf.jk_basis", "{key}: one fitting set cannot serve every basis of the "
                                                          "extrapolation; leave it out (each takes <basis>-jkfit)");
  }
  if (root["save_integrals"]) {
    ctx.fail_key(root["save_integrals"], "save_integrals",
                 "{key}: an integral file holds one basis's calculation; save them from single-basis inputs");
  }
  if (const YAML::Node d = root["driver"]; d && d.IsScalar() && (d.Scalar() == "hessian" || d.Scalar() == "properties")) {
    ctx.fail_key(d, "driver", fmt::format("{{key}}: '{}' is not extrapolated to the basis-set limit (energies and "
                                          "gradients are); give one basis", d.Scalar()));
  }
  const bool gradient = root["driver"] && root["driver"].IsScalar() && root["driver"].Scalar() == "gradient";
  if (gradient && root["interaction"]) {
    ctx.fail_key(root["interaction"], "interaction", "{key}: a counterpoise-corrected gradient is not extrapolated to "
                                                     "the basis-set limit yet; give one basis");
  }
  if (gradient && root["external_charges"]) {
    ctx.fail_key(root["external_charges"], "external_charges", "{key}: the gradient on point charges is not "
                                                               "extrapolated to the basis-set limit yet; give one basis");
  }
  if (root["interaction"] && !chem::cbs_scheme_is_linear(cbs.scf_scheme)) {
    ctx.fail_key(root["interaction"], "interaction",
                 "{key}: with scf_xtpl_helgaker_3 the limit of a difference is not the difference of the limits; use a "
                 "two-point or the largest basis's SCF");
  }
}

}  // namespace

void read_cbs_options(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node cbs = root["cbs"];
  if (!chem::is_basis_series(in.basis) && !cbs) return;
  if (cbs && !cbs.IsMap()) {
    ctx.fail_key(cbs, "cbs", fmt::format("{{key}}: expected a mapping {{scf_basis, scf_scheme, scf_alpha, corl_scheme, "
                                         "corl_alpha}}, got {}", YamlReader::kind(cbs)));
  }
  if (cbs) ctx.check_keys(cbs, "cbs", kCbsKeys);
  CbsOptions o;
  o.corl = series(root["basis"], in.basis, ctx, "basis");
  if (cbs && cbs["scf_basis"]) {
    o.scf = series(cbs["scf_basis"], ctx.scalar(cbs["scf_basis"], "cbs.scf_basis", "a basis series"), ctx, "cbs.scf_basis");
  } else {
    // Psi4's cbs() for "mp2/cc-pv[dt]z": the SCF of the largest basis.
    o.scf.names = {o.corl.names.back()};
    o.scf.zetas = {o.corl.zetas.back()};
  }
  if (!o.corl.extrapolated() && !o.scf.extrapolated() && o.scf.names == o.corl.names) {
    ctx.fail_key(cbs, "cbs", "{key}: needs a basis series to extrapolate, in 'basis' (cc-pv[dt]z) or cbs.scf_basis");
  }
  o.scf_scheme = stage_scheme(cbs, ctx, "scf", o.scf, cbs && cbs["scf_basis"] ? cbs["scf_basis"] : root["basis"]);
  o.corl_scheme = stage_scheme(cbs, ctx, "corl", o.corl, root["basis"]);
  o.scf_alpha = stage_alpha(cbs, ctx, "scf", o.scf_scheme);
  o.corl_alpha = stage_alpha(cbs, ctx, "corl", o.corl_scheme);
  check_combinations(root, ctx, o);
  // Every basis once, smallest first; the correlation's largest is the run's own calculation, so it goes last.
  for (const chem::BasisSeries* s : {&o.scf, &o.corl}) {
    for (std::size_t k = 0; k < s->names.size(); ++k) {
      if (std::find(o.all.names.begin(), o.all.names.end(), s->names[k]) != o.all.names.end()) continue;
      o.all.names.push_back(s->names[k]);
      o.all.zetas.push_back(s->zetas[k]);
    }
  }
  std::vector<std::size_t> order(o.all.names.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  const std::string main = o.corl.names.back();
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const bool a_main = o.all.names[a] == main, b_main = o.all.names[b] == main;
    if (a_main != b_main) return b_main;
    return o.all.zetas[a] < o.all.zetas[b];
  });
  chem::BasisSeries sorted;
  for (const std::size_t k : order) {
    sorted.names.push_back(o.all.names[k]);
    sorted.zetas.push_back(o.all.zetas[k]);
  }
  o.all = sorted;
  in.basis = main;
  in.cbs = o;
}

Input cbs_basis_input(const Input& in, const std::string& basis) {
  Input b = in;
  b.basis = basis;
  b.aux_basis = default_fitting(basis, "ri");
  b.jk_basis = default_fitting(basis, "jkfit");
  b.cbs.reset();
  b.output.reset();
  b.qcschema.reset();
  chem::assign_core_electrons(*b.molecule, basis, b.basis_dir, "basis");
  return b;
}

}  // namespace dfmp2::app
