// Progress display for long work, on stderr.
//
// On a terminal: a live bar redrawn at most 10 times a second ("clean  [=====>    ] 52% 41.2 MB
// 38.5 MB/s ETA 0:12"). Not a terminal: one plain line every `interval` seconds (default 30),
// or nothing when GRIST_PROGRESS=0 or quiet is set. Finish() prints the final line.
//
// Thread safety: Add() may be called from any thread (atomic counters; drawing is serialized).
#ifndef GRIST_COMMON_PROGRESS_H_
#define GRIST_COMMON_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace grist {

class Progress {
 public:
  enum class Unit { kBytes, kCount };
  // total 0 = unknown (no percentage or ETA). Add() must count what `total` counts (e.g. bytes of
  // the input files as stored, compressed or not); once done passes total the line shows no
  // percentage or ETA rather than a false "100%".
  Progress(std::string label, uint64_t total, Unit unit = Unit::kBytes, bool quiet = false);
  ~Progress();
  void Add(uint64_t n);
  void SetTotal(uint64_t total);
  void Finish();
  uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  double ElapsedSeconds() const;

 private:
  void MaybeDraw(bool force);
  std::string Line(bool final_line) const;
  std::string label_;
  std::atomic<uint64_t> total_;
  std::atomic<uint64_t> done_{0};
  Unit unit_;
  bool enabled_;
  bool tty_;
  double interval_s_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> last_draw_ns_{0};
  std::mutex draw_mu_;
  bool finished_ = false;
};

// Formats bytes as "41.2 MB" (decimal units), counts as "1.23 M".
std::string HumanBytes(double bytes);
std::string HumanCount(double n);

}  // namespace grist

#endif  // GRIST_COMMON_PROGRESS_H_
