// Process and machine facts for reports: peak memory, wall clock, CPU model.
#ifndef GRIST_COMMON_SYSINFO_H_
#define GRIST_COMMON_SYSINFO_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace grist {

// Peak resident set size of this process (getrusage ru_maxrss), in bytes.
uint64_t PeakRssBytes();
// Current resident set size (/proc/self/statm), in bytes; 0 when unknown.
uint64_t CurrentRssBytes();
std::string CpuModel();
std::string KernelRelease();
std::string HostName();
uint64_t TotalMemoryBytes();

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void Reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace grist

#endif  // GRIST_COMMON_SYSINFO_H_
