#include "app/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

namespace dfmp2::app {

namespace {
constexpr double kQuietSeconds = 1.0;  // phases shorter than this print nothing
constexpr double kRedrawSeconds = 0.2;
}  // namespace

Progress::Progress(std::FILE* out) : out_(out), terminal_(::isatty(::fileno(out)) == 1) {}

void Progress::update(const std::string& phase, long long done, long long total) {
  const auto now = std::chrono::steady_clock::now();
  if (phase != phase_) {
    finish();
    phase_ = phase;
    start_ = now;
    last_draw_ = now;
    last_quarter_ = 0;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < kQuietSeconds || total <= 0) return;
  const double fraction = double(done) / double(total);
  const double left = fraction > 0 ? elapsed * (1.0 - fraction) / fraction : 0.0;
  if (terminal_) {
    if (std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds && done < total) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    fmt::print(out_, "\r  {:<16} [{}{}] {:5.1f}%  {:.0f} s elapsed, about {:.0f} s left   ", phase,
               std::string(static_cast<std::size_t>(filled), '#'), std::string(static_cast<std::size_t>(kWidth - filled), '.'),
               100.0 * fraction, elapsed, left);
    drawn_ = true;
  } else {
    const int quarter = static_cast<int>(fraction * 4.0);
    if (quarter <= last_quarter_) return;
    last_quarter_ = quarter;
    fmt::print(out_, "  {}: {:.0f}% ({} of {}), {:.1f} s elapsed, about {:.0f} s left\n", phase, 100.0 * fraction, done,
               total, elapsed, left);
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (drawn_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  drawn_ = false;
  phase_.clear();
}

}  // namespace dfmp2::app
