#pragma once
// Scratch files: the blocks of a tensor that does not fit in `memory` (the DF-J/K three-index tensor, the DF-MP2
// transformed and fitted tensors), in the folder of the input key `scratch`. Each file has no name in the folder
// (O_TMPFILE, or a name removed as soon as it is opened): it lives as long as its object's file descriptor, and
// nothing is left behind whatever ends the process, SIGKILL included. A write or read that fails (disk full, a
// file-size limit, an I/O error) is a ResourceError (exit 6) naming the file and the reason, never a silent short
// file.
#include <cstddef>
#include <string>


namespace dfmp2::chem {

// Free bytes for an unprivileged writer in `folder` (statvfs), or a negative number when it cannot be told.
double free_bytes(const std::string& folder);

// Throws OutputError (exit 7) unless `folder` exists, is a folder and is writable: called before any work.
void check_scratch_folder(const std::string& folder);

class ScratchFile {
 public:
  // Creates an empty unnamed file in `folder`; messages call it `<folder>/dfmp2-<what>`.
  ScratchFile(const std::string& folder, const std::string& what);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // `count` doubles at element offset `offset` (positioned I/O: no shared file position, so reads may run on
  // another thread while the owner computes).
  void write(const double* data, std::size_t count, std::size_t offset);
  void read(double* data, std::size_t count, std::size_t offset) const;
  // The same for float data (the fp32 DF-MP2 tensors); offsets count floats.
  void write(const float* data, std::size_t count, std::size_t offset);
  void read(float* data, std::size_t count, std::size_t offset) const;

  void sync();  // to the disk (fdatasync), e.g. to measure its write rate
  // How messages name the file: `<folder>/dfmp2-<what>`, a name it never has in the folder.
  const std::string& path() const { return label_; }

 private:
  void write_bytes(const void* data, std::size_t bytes, std::size_t offset);
  void read_bytes(void* data, std::size_t bytes, std::size_t offset) const;
  std::string label_;
  int fd_ = -1;
};

}  // namespace dfmp2::chem
