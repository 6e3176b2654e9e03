#include "devices/neuron/compile_cache.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "linalg/errors.hpp"
#include "linalg/kept_files.hpp"

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
  // The cache's files are kept files (linalg/kept_files.hpp): a folder others could write to is refused, as is one
  // that cannot be made.
  if (const std::string why = linalg::prepare_kept_folder(folder_); !why.empty()) {
    throw OutputError(fmt::format("compile cache folder: {} (device.compile_cache names another, or false for none)",
                                  why));
  }
}

std::string CompileCache::name_for(const std::string& signature) {
  return fmt::format("{:016x}.kernel", fnv1a(signature));
}

CompileOutcome CompileCache::acquire(const std::string& signature) {
  if (resident_.count(signature)) return CompileOutcome::resident;
  resident_.insert(signature);
  if (folder_.empty()) return CompileOutcome::compiled;
  const std::string name = name_for(signature);
  // A kernel file holds its signature and a newline: anything longer, or not a regular file of the user's (a link, a
  // FIFO), is a miss, and is replaced by the file the compile writes.
  const linalg::KeptText kept = linalg::read_kept_file(folder_, name, signature.size() + 1);
  if (kept.text && *kept.text == signature + "\n") return CompileOutcome::loaded;
  try {
    linalg::write_kept_file(folder_, name, signature + "\n");
  } catch (const std::exception& e) {
    resident_.erase(signature);
    throw OutputError(fmt::format("cannot write the compile cache's kernel file: {}", e.what()));
  }
  return CompileOutcome::compiled;
}

}  // namespace dfmp2::devices::neuron
