#pragma once
// Progress of long phases (the transformation and the pair-energy loop of DF-MP2) on stdout. On a terminal: one
// line redrawn in place, a bar with the percentage and an estimate of the time left. Otherwise (a file, a pipe,
// CI): plain lines at each quarter. Phases that finish within a second print nothing, so small runs stay quiet.
#include <chrono>
#include <cstdio>
#include <string>

namespace dfmp2::app {

class Progress {
 public:
  explicit Progress(std::FILE* out);
  // Work `done` of `total` in `phase`; a new phase name starts a new line.
  void update(const std::string& phase, long long done, long long total);
  // Ends the current line, if one is drawn.
  void finish();

 private:
  std::FILE* out_;
  bool terminal_;
  std::string phase_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int last_quarter_ = 0;
  bool drawn_ = false;
};

}  // namespace dfmp2::app
