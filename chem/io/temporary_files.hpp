#pragma once
// Files that must never be left half-written: the results file, the saved integral file, and the scratch files
// of the phases that do not fit in memory (chem/io/scratch.hpp).
// Each is written under a temporary name beside its final path and renamed into place when complete. The
// temporary is removed when the writer fails (the destructor), and when the program is stopped by SIGINT, SIGTERM
// or SIGHUP (a signal handler that unlinks every live temporary, then lets the signal end the process). A
// SIGKILL cannot be caught: it may leave `<path>.tmp.<16 random hex digits>`, which no dfmp2 run ever reads, so a
// later run is not confused by it (README "Errors"). The name is unpredictable and the file is created exclusively,
// so nothing planted beside the output in advance (a link to a file of the user's) can receive the write.
#include <string>

namespace dfmp2::chem {

class TemporaryFile {
 public:
  // Creates the temporary `<final_path>.tmp.<random>`, empty (OutputError when it cannot be created).
  explicit TemporaryFile(std::string final_path);
  ~TemporaryFile();  // removes the temporary unless commit() succeeded
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  const std::string& path() const { return temporary_; }
  const std::string& final_path() const { return final_; }
  // Renames the temporary to the final path; on failure removes it and returns the reason ("" on success).
  std::string commit();

 private:
  std::string final_, temporary_;
  int slot_ = -1;  // in the signal handler's table; -1 when the table was full (then only the destructor cleans)
};

// Installs the SIGINT/SIGTERM/SIGHUP handlers that remove live temporaries; called once at the start of main().
void remove_temporary_files_on_signals();

}  // namespace dfmp2::chem
