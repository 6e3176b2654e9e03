#pragma once
// An enum's names as one table of (value, name) pairs, which both its parser and its printers read, so that an
// enum is never cast from a list position nor named in two places.
#include <string>
#include <utility>
#include <vector>

namespace dfmp2::linalg {

template <class E>
using NameTable = std::vector<std::pair<E, std::string>>;

// The name of `value`, or "?" for a value the table lacks.
template <class E>
std::string name_in(const NameTable<E>& table, E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

// The names, in table order.
template <class E>
std::vector<std::string> names_of(const NameTable<E>& table) {
  std::vector<std::string> names;
  for (const auto& [v, name] : table) names.push_back(name);
  return names;
}

}  // namespace dfmp2::linalg
