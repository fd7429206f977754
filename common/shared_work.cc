#include "common/shared_work.h"

#include <algorithm>

namespace grist {

namespace {

constexpr uint64_t kLow = 0xffffffffull;

uint64_t Front(uint64_t r) { return r >> 32; }
uint64_t Back(uint64_t r) { return r & kLow; }

}  // namespace

size_t SharedWork::Run(size_t n, absl::FunctionRef<void(size_t, bool)> item) {
  if (n == 0) return 0;
  if (n >= kLow) {
    for (size_t k = 0; k < n; ++k) item(k, true);
    return n;
  }
  Unit unit(item);
  unit.range.store(n, std::memory_order_relaxed);  // front 0, back n
  {
    absl::MutexLock l(&mu_);
    units_.push_back(&unit);
  }
  uint64_t r = unit.range.load(std::memory_order_acquire);
  while (true) {
    if (Front(r) >= Back(r)) break;
    // Take the front item; a failed exchange reloads r (a helper lowered back).
    if (unit.range.compare_exchange_weak(r, r + (uint64_t{1} << 32), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      item(static_cast<size_t>(Front(r)), true);
      r = unit.range.load(std::memory_order_acquire);
    }
  }
  // No item is left to take; wait for the helpers still inside one before the unit goes away.
  absl::MutexLock l(&mu_);
  units_.erase(std::find(units_.begin(), units_.end(), &unit));
  mu_.Await(absl::Condition(+[](Unit* u) { return u->helpers == 0; }, &unit));
  return static_cast<size_t>(Back(unit.range.load(std::memory_order_acquire)));
}

bool SharedWork::Help(absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    Unit* unit = nullptr;
    {
      absl::MutexLock l(&mu_);
      auto choose = [&] {
        uint64_t most = 0;
        unit = nullptr;
        for (Unit* u : units_) {
          const uint64_t r = u->range.load(std::memory_order_relaxed);
          const uint64_t left = Front(r) < Back(r) ? Back(r) - Front(r) : 0;
          if (left > most) {
            most = left;
            unit = u;
          }
        }
        return unit != nullptr;
      };
      // Re-evaluated whenever mu_ is released (a Run registering its unit), until the deadline.
      if (!choose() && wait > absl::ZeroDuration()) {
        mu_.AwaitWithDeadline(absl::Condition(&choose), deadline);
        choose();  // again on this thread, holding mu_: the choice is this thread's own
      }
      if (unit == nullptr) return false;
      ++unit->helpers;  // the owner's Run does not return before this helper leaves
    }
    uint64_t r = unit->range.load(std::memory_order_acquire);
    bool took = false;
    while (Front(r) < Back(r)) {
      if (unit->range.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
        unit->item(static_cast<size_t>(Back(r) - 1), false);
        took = true;
        break;
      }
    }
    absl::MutexLock l(&mu_);
    --unit->helpers;
    if (took) return true;
    // The unit ran out between the choice and the exchange: choose again.
  }
}

}  // namespace grist
