#include "app/yaml_file.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxYamlBytes = 64 << 20;
constexpr int kMaxYamlDepth = 64;

// Whether the tree, walked as a program walks it (aliases expanded), has at most `left` nodes and nests at most
// kMaxYamlDepth levels; stops counting as soon as the budget is spent, so a "billion laughs" costs nothing.
bool within_budget(const YAML::Node& node, std::size_t& left, int depth = 0) {
  if (depth > kMaxYamlDepth || left == 0) return false;
  --left;
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (left == 0) return false;
      --left;  // the key
      if (!within_budget(kv.second, left, depth + 1)) return false;
    }
  } else if (node.IsSequence()) {
    for (const auto& v : node) {
      if (!within_budget(v, left, depth + 1)) return false;
    }
  }
  return true;
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path, const std::string& label, std::size_t max_nodes) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw InputError(fmt::format("{}: no such file", label));
  if (fs::is_directory(status)) throw InputError(fmt::format("{}: is a directory, expected a YAML file", label));
  if (!fs::is_regular_file(status)) {
    throw InputError(fmt::format("{}: not a regular file (a FIFO, socket or device?), expected a YAML file", label));
  }
  if (const auto size = fs::file_size(path, ec); !ec && size > kMaxYamlBytes) {
    throw InputError(fmt::format("{}: {} bytes; a dfmp2 YAML file is at most {} (put large molecules in molecule.file)",
                                 label, size, linalg::format_bytes(double(kMaxYamlBytes))));
  }
  YAML::Node root;
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAllFromFile(path);
    if (documents.size() > 1) {
      throw InputError(fmt::format("{}: holds {} YAML documents (separated by '---'); it must hold one", label,
                                   documents.size()));
    }
    if (!documents.empty()) root = documents.front();
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", label, e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const YAML::Exception& e) {  // BadFile, and yaml-cpp's other refusals (e.g. nesting too deep)
    throw InputError(fmt::format("{}: cannot be read as YAML: {}", label, e.msg));
  }
  if (std::size_t left = max_nodes; !within_budget(root, left)) {
    throw InputError(fmt::format("{}: expands to more than {} YAML nodes (anchors and aliases), or nests deeper than {} "
                                 "levels",
                                 label, max_nodes, kMaxYamlDepth));
  }
  return root;
}

}  // namespace dfmp2::app
