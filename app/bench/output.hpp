#pragma once
// What `dfmp2 bench` writes: one wide table per run (every column, for CSV and JSON), aligned text views of it,
// and a log-log SVG chart of time against size.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dfmp2::app::bench {

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // "" is an empty cell (CSV: empty; JSON: null)

  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
  const std::string& at(std::size_t row, const std::string& column) const;
  std::string csv() const;
  // Rows as objects; cells that read as numbers become numbers, true/false booleans.
  nlohmann::json json_rows() const;
};

// Aligned text: a header line, a rule, the rows; text columns left-aligned, numeric ones right-aligned.
std::string format_text_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), x > 0, y > 0
};

// A standalone SVG document: log-log axes with decade ticks, one polyline (with point markers) per series, a
// legend. Series with no positive points are left out.
std::string svg_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                      const std::vector<Series>& series);

}  // namespace dfmp2::app::bench
