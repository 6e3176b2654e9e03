#pragma once
// Reading a YAML file that a user gave (the input, a `dfmp2 bench` config or trace), with the limits that keep a
// damaged or hostile file from tying the program up: regular files only (a FIFO would block forever), at most
// 64 MiB, UTF-8 without control characters (but tab, line feed, carriage return), exactly one YAML document (a second one after '---' would be silently ignored), and at most `max_nodes`
// nodes with aliases expanded and 64 levels of nesting (450 bytes of anchors and aliases can stand for 10^7 nodes).
// A key given twice in one mapping is refused too. Every refusal is an InputError naming `label` (the path, or
// "--trace: <path>").
#include <cstddef>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace dfmp2::app {

inline constexpr std::size_t kMaxYamlNodes = 100000;

// `key_noun` names a key in the message about one given twice: "key 'scf.type'" in a YAML input, "field
// 'model.basis'" in a QCSchema AtomicInput.
YAML::Node load_yaml_file(const std::string& path, const std::string& label, std::size_t max_nodes = kMaxYamlNodes,
                          const char* key_noun = "key");

// The checks every input file gets before it is parsed: it exists, is a regular file and is at most 64 MiB.
// `expected` completes "expected ..." ("a YAML file").
void check_input_file(const std::string& path, const std::string& label, const char* expected);

// The text of a JSON file (a QCSchema AtomicInput), refused unless it is UTF-8 and nests at most 64 levels of
// arrays and objects: checked on the bytes, before any parser that recurses sees them.
std::string read_json_text(const std::string& path, const std::string& label);

// The offset of the first byte of `text` that does not start a well-formed UTF-8 sequence; npos when all do.
std::size_t first_invalid_utf8(std::string_view text);

}  // namespace dfmp2::app
