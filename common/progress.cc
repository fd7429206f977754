#include "common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"

namespace grist {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f %s", b, units[u]) : absl::StrFormat("%.1f %s", b, units[u]);
}

std::string HumanCount(double n) {
  const char* units[] = {"", " k", " M", " G"};
  int u = 0;
  while (n >= 1000 && u < 3) {
    n /= 1000;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f", n) : absl::StrFormat("%.2f%s", n, units[u]);
}

Progress::Progress(std::string label, uint64_t total, Unit unit, bool quiet)
    : label_(std::move(label)), total_(total), unit_(unit) {
  const char* env = std::getenv("GRIST_PROGRESS");
  enabled_ = !quiet && !(env && std::strcmp(env, "0") == 0);
  tty_ = ::isatty(STDERR_FILENO) == 1;
  interval_s_ = tty_ ? 0.1 : 30.0;
  if (const char* iv = std::getenv("GRIST_PROGRESS_INTERVAL")) interval_s_ = std::atof(iv);
  start_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { Finish(); }

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Add(uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  MaybeDraw(false);
}

void Progress::SetTotal(uint64_t total) { total_ = total; }

std::string Progress::Line(bool final_line) const {
  double el = ElapsedSeconds();
  double done = static_cast<double>(done_.load());
  double total = static_cast<double>(total_.load());
  double rate = el > 0 ? done / el : 0;
  auto amount = [&](double v) { return unit_ == Unit::kBytes ? HumanBytes(v) : HumanCount(v); };
  std::string s = absl::StrFormat("%-10s ", label_);
  // A total that the work has passed was not a total of the same thing: no percentage then.
  const bool known = total > 0 && done <= total;
  if (known) {
    double frac = std::min(1.0, done / total);
    if (tty_) {
      int width = 24, filled = static_cast<int>(frac * width);
      // Appended piecewise: GCC 12 reports a false -Wrestrict for "[" + std::string(...).
      s.push_back('[');
      s.append(static_cast<size_t>(filled), '=');
      if (filled < width) s.push_back('>');
      s.append(static_cast<size_t>(std::max(0, width - filled - 1)), ' ');
      s.append("] ");
    }
    s += absl::StrFormat("%3.0f%% ", frac * 100);
  }
  s += amount(done) + " " + amount(rate) + "/s";
  if (final_line) {
    s += absl::StrFormat(" in %.1f s", el);
  } else if (known && rate > 0) {
    int eta = static_cast<int>((total - done) / rate);
    s += absl::StrFormat(" ETA %d:%02d", eta / 60, eta % 60);
  }
  return s;
}

void Progress::MaybeDraw(bool force) {
  if (!enabled_) return;
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - start_).count();
  int64_t last = last_draw_ns_.load(std::memory_order_relaxed);
  if (!force && now - last < static_cast<int64_t>(interval_s_ * 1e9)) return;
  if (!force && !last_draw_ns_.compare_exchange_strong(last, now)) return;
  std::unique_lock<std::mutex> l(draw_mu_, std::try_to_lock);
  if (!l.owns_lock() && !force) return;
  if (!l.owns_lock()) l.lock();
  if (finished_) return;
  std::string line = Line(force);
  if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), force ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::Finish() {
  if (finished_) return;
  if (tty_ || done_.load() > 0) MaybeDraw(true);
  std::lock_guard<std::mutex> l(draw_mu_);
  finished_ = true;
}

}  // namespace grist
