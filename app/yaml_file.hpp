#pragma once
// Reading a YAML file that a user gave (the input, a `dfmp2 bench` config or trace), with the limits that keep a
// damaged or hostile file from tying the program up: regular files only (a FIFO would block forever), at most
// 64 MiB, exactly one YAML document (a second one after '---' would be silently ignored), and at most `max_nodes`
// nodes with aliases expanded and 64 levels of nesting (450 bytes of anchors and aliases can stand for 10^7 nodes).
// Every refusal is an InputError naming `label` (the path, or "--trace: <path>").
#include <cstddef>
#include <string>

#include <yaml-cpp/yaml.h>

namespace dfmp2::app {

inline constexpr std::size_t kMaxYamlNodes = 100000;

YAML::Node load_yaml_file(const std::string& path, const std::string& label, std::size_t max_nodes = kMaxYamlNodes);

}  // namespace dfmp2::app
