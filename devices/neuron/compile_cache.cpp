#include "devices/neuron/compile_cache.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "linalg/errors.hpp"

namespace dfmp2::devices::neuron {
namespace {

// FNV-1a, 64 bit: stable across runs and compilers (std::hash is neither).
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

CompileCache::CompileCache(std::string folder) : folder_(std::move(folder)) {
  if (folder_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(folder_, ec);
  if (ec || !std::filesystem::is_directory(folder_))
    throw OutputError(fmt::format("compile cache folder '{}' cannot be created ({})", folder_,
                                  ec ? ec.message() : "exists and is not a folder"));
}

std::string CompileCache::file_for(const std::string& signature) const {
  return (std::filesystem::path(folder_) / fmt::format("{:016x}.kernel", fnv1a(signature))).string();
}

CompileOutcome CompileCache::acquire(const std::string& signature) {
  if (resident_.count(signature)) return CompileOutcome::resident;
  resident_.insert(signature);
  if (folder_.empty()) return CompileOutcome::compiled;
  const std::string file = file_for(signature);
  {
    std::ifstream in(file);
    if (in) {
      const std::string stored((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (stored == signature + "\n") return CompileOutcome::loaded;
    }
  }
  std::ofstream out(file, std::ios::trunc);
  out << signature << "\n";
  out.close();
  if (!out) {
    resident_.erase(signature);
    throw OutputError(fmt::format("cannot write compile cache file '{}'", file));
  }
  return CompileOutcome::compiled;
}

}  // namespace dfmp2::devices::neuron
