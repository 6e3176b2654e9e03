#include "chem/cbs/cbs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <stdexcept>

namespace dfmp2::chem {
namespace {

constexpr const char* kZetaLetters = "dtq5678";  // zeta 2, 3, 4, ...

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool is_basis_series(const std::string& text) { return text.find('[') != std::string::npos; }

BasisSeries expand_basis_series(const std::string& text) {
  BasisSeries series;
  if (!is_basis_series(text)) {
    series.names = {text};
    series.zetas = {0};
    return series;
  }
  static const std::regex kCompound(R"(^(.*cc-.*|def2-)\[([dtq2345678,s]*)\](.*z.*|)$)", std::regex::icase);
  std::smatch m;
  if (!std::regex_match(text, m, kCompound)) {
    throw std::invalid_argument(fmt::format(
        "'{}' is not a basis series dfmp2 knows: give a Dunning set as cc-pv[dt]z or aug-cc-pv[tq]z, or def2-[st]zvp",
        text));
  }
  const std::string pre = m[1].str(), post = m[3].str();
  const bool def2 = lower(pre) == "def2-";
  std::string zetas = lower(m[2].str());
  if (def2) std::replace(zetas.begin(), zetas.end(), 's', 'd');
  // Every zeta named by letter or digit, in ascending order whatever the order written.
  for (int z = 2; z <= 8; ++z) {
    const char letter = kZetaLetters[z - 2];
    if (zetas.find(letter) == std::string::npos && zetas.find(static_cast<char>('0' + z)) == std::string::npos) continue;
    if (!series.zetas.empty() && z != series.zetas.back() + 1) {
      throw std::invalid_argument(
          fmt::format("basis series '{}' skips zeta {} (its basis sets must be consecutive)", text, series.zetas.back() + 1));
    }
    // def2's double zeta is def2-SVP: "def2-" + "s" + the rest after the letter's place ("zvp" -> "vp").
    series.names.push_back(def2 && z == 2 ? pre + "s" + post.substr(1) : pre + letter + post);
    series.zetas.push_back(z);
  }
  if (series.names.empty() || zetas.find_first_not_of("dtq2345678,") != std::string::npos) {
    throw std::invalid_argument(fmt::format("basis series '{}': no zeta levels (expected letters d t q 5 6 7 8 or "
                                            "digits 2 to 8 in the brackets)", text));
  }
  return series;
}

const std::vector<std::pair<CbsScheme, const char*>>& cbs_scheme_names() {
  static const std::vector<std::pair<CbsScheme, const char*>> names = {
      {CbsScheme::xtpl_highest_1, "xtpl_highest_1"},
      {CbsScheme::scf_xtpl_helgaker_2, "scf_xtpl_helgaker_2"},
      {CbsScheme::scf_xtpl_truhlar_2, "scf_xtpl_truhlar_2"},
      {CbsScheme::scf_xtpl_karton_2, "scf_xtpl_karton_2"},
      {CbsScheme::scf_xtpl_helgaker_3, "scf_xtpl_helgaker_3"},
      {CbsScheme::corl_xtpl_helgaker_2, "corl_xtpl_helgaker_2"}};
  return names;
}

const char* cbs_scheme_name(CbsScheme scheme) {
  for (const auto& [s, name] : cbs_scheme_names())
    if (s == scheme) return name;
  return "?";
}

int cbs_scheme_points(CbsScheme scheme) {
  switch (scheme) {
    case CbsScheme::xtpl_highest_1: return 0;
    case CbsScheme::scf_xtpl_helgaker_3: return 3;
    default: return 2;
  }
}

double cbs_default_alpha(CbsScheme scheme) {
  switch (scheme) {
    case CbsScheme::scf_xtpl_helgaker_2: return 1.63;
    case CbsScheme::scf_xtpl_truhlar_2: return 3.4;
    case CbsScheme::scf_xtpl_karton_2: return 6.3;
    case CbsScheme::corl_xtpl_helgaker_2: return 3.0;
    default: return 0.0;
  }
}

bool cbs_scheme_is_linear(CbsScheme scheme) { return scheme != CbsScheme::scf_xtpl_helgaker_3; }

double extrapolate(CbsScheme scheme, const std::vector<int>& zetas, const std::vector<double>& values,
                   std::optional<double> alpha_given) {
  const int points = cbs_scheme_points(scheme);
  if (values.empty() || values.size() != zetas.size() || (points > 0 && static_cast<int>(values.size()) != points)) {
    throw std::invalid_argument(fmt::format("{} takes {} basis sets, and {} were given", cbs_scheme_name(scheme),
                                            points > 0 ? std::to_string(points) : "one or more", values.size()));
  }
  const double alpha = alpha_given.value_or(cbs_default_alpha(scheme));
  const double hi = values.back();
  if (scheme == CbsScheme::xtpl_highest_1) return hi;
  const double lo = values.front();
  const double z_lo = zetas.front(), z_hi = zetas.back();
  switch (scheme) {
    case CbsScheme::scf_xtpl_helgaker_2: {
      const double beta = (hi - lo) / (std::exp(-alpha * z_lo) * (std::exp(-alpha) - 1.0));
      return hi - beta * std::exp(-alpha * z_hi);
    }
    case CbsScheme::scf_xtpl_truhlar_2: {
      const double beta = (hi - lo) / (std::pow(z_hi, -alpha) - std::pow(z_lo, -alpha));
      return hi - beta * std::pow(z_hi, -alpha);
    }
    case CbsScheme::scf_xtpl_karton_2: {
      const double beta = (hi - lo) / (std::exp(-alpha) * (std::exp(std::sqrt(z_hi)) - std::exp(std::sqrt(z_lo))));
      return hi - beta * std::exp(-alpha * std::sqrt(z_hi));
    }
    case CbsScheme::scf_xtpl_helgaker_3: {
      // alpha and beta from the three values themselves (a given alpha is not used, as in Psi4).
      const double md = values[1], z_md = zetas[1];
      const double ratio = (hi - md) / (md - lo);
      const double a = -std::log(std::abs(ratio));
      const double beta = (hi - md) / (std::exp(-a * z_md) * (ratio - 1.0));
      return hi - beta * std::exp(-a * z_hi);
    }
    case CbsScheme::corl_xtpl_helgaker_2:
      return (hi * std::pow(z_hi, alpha) - lo * std::pow(z_lo, alpha)) / (std::pow(z_hi, alpha) - std::pow(z_lo, alpha));
    default:
      return hi;
  }
}

linalg::Matrix extrapolate(CbsScheme scheme, const std::vector<int>& zetas, const std::vector<linalg::Matrix>& values,
                           std::optional<double> alpha) {
  if (values.empty()) throw std::invalid_argument("extrapolate: no values");
  linalg::Matrix out = values.back();
  std::vector<double> element(values.size());
  for (linalg::Index j = 0; j < out.cols(); ++j) {
    for (linalg::Index i = 0; i < out.rows(); ++i) {
      for (std::size_t k = 0; k < values.size(); ++k) element[k] = values[k](i, j);
      if (scheme == CbsScheme::scf_xtpl_helgaker_3 && std::abs(element.back()) <= 1e-14) {
        out(i, j) = 0.0;
        continue;
      }
      out(i, j) = extrapolate(scheme, zetas, element, alpha);
    }
  }
  return out;
}

}  // namespace dfmp2::chem
