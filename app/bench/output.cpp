#include "app/bench/output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "app/yaml_reader.hpp"

namespace dfmp2::app::bench {

namespace {

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

const std::string& Table::at(std::size_t row, const std::string& column) const {
  const auto it = std::find(columns.begin(), columns.end(), column);
  if (it == columns.end()) throw std::logic_error("bench table has no column '" + column + "'");
  return rows.at(row).at(static_cast<std::size_t>(it - columns.begin()));
}

std::string Table::csv() const {
  std::string out;
  for (std::size_t c = 0; c < columns.size(); ++c) out += (c ? "," : "") + csv_cell(columns[c]);
  out += "\n";
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out += (c ? "," : "") + csv_cell(row[c]);
    out += "\n";
  }
  return out;
}

nlohmann::json Table::json_rows() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : rows) {
    nlohmann::json obj = nlohmann::json::object();
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::string& cell = row[c];
      const auto number = as_number(cell);
      if (cell.empty()) {
        obj[columns[c]] = nullptr;
      } else if (cell == "true" || cell == "false") {
        obj[columns[c]] = cell == "true";
      } else if (number && std::isfinite(*number)) {
        obj[columns[c]] = *number;
      } else {
        obj[columns[c]] = cell;
      }
    }
    out.push_back(obj);
  }
  return out;
}

std::string format_text_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  std::vector<bool> numeric(header.size(), true);
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < header.size() && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
      if (!row[c].empty() && row[c] != "-" && !as_number(row[c]) && row[c].back() != '%') numeric[c] = false;
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = " ";
    for (std::size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out += " " + (numeric[c] ? fmt::format("{:>{}}", cell, width[c]) : fmt::format("{:<{}}", cell, width[c]));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  std::size_t total = 1;
  for (const auto w : width) total += w + 1;
  out += "  " + std::string(total - 2, '-') + "\n";
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string svg_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                      const std::vector<Series>& series) {
  // Plot area in pixels; the legend sits to the right of it.
  const double left = 80, top = 40, plot_w = 560, plot_h = 380, legend_w = 260;
  const double width = left + plot_w + 20 + legend_w, height = top + plot_h + 60;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  std::vector<const Series*> drawn;
  for (const auto& s : series) {
    bool any = false;
    for (const auto& [x, y] : s.points) {
      if (!(x > 0 && y > 0)) continue;
      any = true;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
    if (any) drawn.push_back(&s);
  }
  if (drawn.empty()) xmin = 1, xmax = 10, ymin = 1e-3, ymax = 1;
  // Whole decades around the data, at least one decade on each axis.
  const double lx0 = std::floor(std::log10(xmin)), lx1 = std::max(std::ceil(std::log10(xmax)), lx0 + 1);
  const double ly0 = std::floor(std::log10(ymin)), ly1 = std::max(std::ceil(std::log10(ymax)), ly0 + 1);
  auto px = [&](double x) { return left + (std::log10(x) - lx0) / (lx1 - lx0) * plot_w; };
  auto py = [&](double y) { return top + plot_h - (std::log10(y) - ly0) / (ly1 - ly0) * plot_h; };
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      width, height);
  out += fmt::format("<title>{}</title>\n", xml_escape(title));
  out += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", width, height);
  out += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n", left + plot_w / 2,
                     xml_escape(title));
  // Grid and ticks: every decade, with the 2 and 5 multiples as light lines.
  for (double d = lx0; d <= lx1 + 1e-9; ++d) {
    for (const double mult : {1.0, 2.0, 5.0}) {
      const double x = mult * std::pow(10.0, d);
      if (std::log10(x) > lx1 + 1e-9) continue;
      out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"{3}\"/>\n", px(x), top,
                         top + plot_h, mult == 1.0 ? "#bbbbbb" : "#eeeeee");
      if (mult == 1.0 || lx1 - lx0 <= 2) {
        out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", px(x), top + plot_h + 18, x);
      }
    }
  }
  for (double d = ly0; d <= ly1 + 1e-9; ++d) {
    for (const double mult : {1.0, 2.0, 5.0}) {
      const double y = mult * std::pow(10.0, d);
      if (std::log10(y) > ly1 + 1e-9) continue;
      out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"{3}\"/>\n", left, py(y),
                         left + plot_w, mult == 1.0 ? "#bbbbbb" : "#eeeeee");
      if (mult == 1.0) {
        out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, py(y) + 4, y);
      }
    }
  }
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", left, top,
                     plot_w, plot_h);
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2, top + plot_h + 40,
                     xml_escape(x_label));
  out += fmt::format("<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">{1}</text>\n",
                     top + plot_h / 2, xml_escape(y_label));
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const Series& s = *drawn[i];
    const char* colour = kColours[i % std::size(kColours)];
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : s.points)
      if (p.first > 0 && p.second > 0) pts.push_back(p);
    std::sort(pts.begin(), pts.end());
    std::string coords;
    for (const auto& [x, y] : pts) coords += fmt::format("{}{:.1f},{:.1f}", coords.empty() ? "" : " ", px(x), py(y));
    out += fmt::format("<g class=\"series\"><title>{}</title>\n", xml_escape(s.label));
    out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, coords);
    for (const auto& [x, y] : pts) {
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x), py(y), colour);
    }
    out += "</g>\n";
    const double ly = top + 10 + 18 * double(i);
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/>\n",
                       left + plot_w + 20, ly, left + plot_w + 44, colour);
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + plot_w + 50, ly + 4, xml_escape(s.label));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace dfmp2::app::bench
