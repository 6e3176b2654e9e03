#pragma once
// The one reading layer for the YAML files a user gives (the input, a `dfmp2 bench` config, a trace): where a node
// is (file:line:column) in every message, scalars, the one boolean rule, integers, numbers, names chosen from an
// enum's name table with the nearest one suggested, and paths relative to the file. Every refusal is an InputError
// of one line. Loading the file itself (size, document and node limits) is app/yaml_file.hpp.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "linalg/name_table.hpp"

namespace dfmp2::app {

// Levenshtein distance, for suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest to `word`, if it is near enough to be a likely typo.
std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates);
// The one boolean rule of every YAML file dfmp2 reads: true/yes/on and false/no/off, in any case.
std::optional<bool> as_bool(const std::string& s);
// A whole string that is an integer (surrounding blanks allowed) or a number (as strtod reads it, finite or not);
// nullopt otherwise, and for an integer out of range. Also for command-line values.
std::optional<long long> as_integer(const std::string& s);
std::optional<double> as_number(const std::string& s);

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  std::string where(const YAML::Node& node) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const;
  [[noreturn]] void fail(const std::string& what) const;
  // About one key: `text` with `{key}` where the key is named ("{key}: expected a number, got 'x'"); the InputError
  // carries the key as data (linalg/errors.hpp).
  [[noreturn]] void fail_key(const YAML::Node& node, const std::string& key, const std::string& text) const;
  // "a mapping", "a list", "nothing" or the scalar in quotes, for "expected X, got Y".
  static std::string kind(const YAML::Node& node);
  // Every key of the mapping `node` (named `parent` in messages) is one of `keys`; else "unknown key
  // 'parent.k' (did you mean 'parent.x'?)" or the list of valid keys.
  void check_keys(const YAML::Node& node, const std::string& parent, const std::vector<std::string>& keys) const;

  std::string scalar(const YAML::Node& node, const std::string& key, const char* expected = "a single value") const;
  bool boolean(const YAML::Node& node, const std::string& key) const;
  long long integer(const YAML::Node& node, const std::string& key, long long min) const;
  double number(const YAML::Node& node, const std::string& key) const;
  // A path in the file is relative to the file's folder.
  std::filesystem::path resolve(const std::string& path) const;

  // One of an enum's names (its table, as chem::precision_names()): "key 'K': unknown NOUN 'x' (did you mean
  // 'y'?) (expected one of a, b, c)".
  template <class E>
  E choice(const YAML::Node& node, const std::string& key, const linalg::NameTable<E>& table, const char* noun) const {
    return table[choice_index(node, key, linalg::names_of(table), noun)].first;
  }
  // The same for a plain list of names: the index of the one given.
  std::size_t choice_index(const YAML::Node& node, const std::string& key, const std::vector<std::string>& names,
                           const char* noun) const;

 private:
  std::string file_;
};

}  // namespace dfmp2::app
