#include "ckptio/internal/ring.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace grist::ckptio::internal {
namespace {

std::atomic<bool> g_active{false};
std::mutex g_mu;
RingFaultPlan g_plan;      // guarded by g_mu
uint64_t g_count[3] = {};  // completions, guarded by g_mu
uint64_t g_requests[3] = {};  // requests, guarded by g_mu
bool g_fired = false;      // guarded by g_mu

}  // namespace

void SetRingFaults(const RingFaultPlan& plan) {
  std::lock_guard<std::mutex> l(g_mu);
  g_plan = plan;
  for (uint64_t& c : g_count) c = 0;
  for (uint64_t& c : g_requests) c = 0;
  g_fired = false;
  g_active.store(true, std::memory_order_release);
}

void ClearRingFaults() {
  std::lock_guard<std::mutex> l(g_mu);
  g_active.store(false, std::memory_order_release);
  g_plan = RingFaultPlan();
}

uint64_t RingCompletions(RingOp op) {
  std::lock_guard<std::mutex> l(g_mu);
  return g_count[static_cast<int>(op)];
}

uint64_t ShapeRequest(RingOp op, uint64_t len) {
  if (!g_active.load(std::memory_order_acquire)) return len;
  std::lock_guard<std::mutex> l(g_mu);
  const uint64_t n = ++g_requests[static_cast<int>(op)];
  if (g_fired || !g_plan.short_io || g_plan.op != op || g_plan.nth <= 0 ||
      n < static_cast<uint64_t>(g_plan.nth) || len <= 8192) {
    return len;
  }
  g_fired = true;
  return std::max<uint64_t>(4096, len / 2 / 4096 * 4096);
}

int FilterCompletion(RingOp op, int res) {
  if (!g_active.load(std::memory_order_acquire)) return res;
  std::lock_guard<std::mutex> l(g_mu);
  const uint64_t n = ++g_count[static_cast<int>(op)];
  if (g_fired || g_plan.short_io || g_plan.op != op || g_plan.nth <= 0 ||
      n < static_cast<uint64_t>(g_plan.nth)) {
    return res;
  }
  g_fired = true;
  return -g_plan.error;
}

}  // namespace grist::ckptio::internal
