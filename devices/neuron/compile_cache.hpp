#pragma once
// Which kernels a model instance has ready. A backend instance stands for one process's Neuron runtime session:
// a shape signature it has launched before is resident; one found in the persistent on-disk cache is loaded; any
// other is compiled and then written to the disk cache. The disk cache is a folder with one small file per
// signature (named by a hash of the signature, holding the signature itself so a hash collision is a miss), read and
// written as kept files (linalg/kept_files.hpp).
#include <set>
#include <string>

#include "devices/neuron/timing_model.hpp"

namespace dfmp2::devices::neuron {

class CompileCache {
 public:
  // folder empty: no disk cache (every instance starts cold). Creates the folder (0700); failure, or a folder that
  // other users can write to or that belongs to another user, is an OutputError.
  explicit CompileCache(std::string folder);
  // Looks `signature` up and records it as resident (and, when compiled, writes it to the disk cache; a write
  // failure is an OutputError naming the file).
  CompileOutcome acquire(const std::string& signature);
  const std::string& folder() const { return folder_; }

 private:
  static std::string name_for(const std::string& signature);  // the kernel file's name in the folder
  std::string folder_;
  std::set<std::string> resident_;
};

}  // namespace dfmp2::devices::neuron
