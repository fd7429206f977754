// The seam between ckptio's io_uring loops (writer.cc, reader.cc) and the results the kernel
// reports: every completion's result passes through FilterCompletion() before the loop acts on
// it, so a test can make the N-th write, read or fsync completion fail with an errno or report a
// short transfer, exactly as a full disk, a failing device or a signal would, on the production
// path rather than through an Env. Without an active plan FilterCompletion() returns `res` (one
// relaxed atomic load).
//
// The plan is process-wide (tests set it around one save or load) and fires once: the counters
// start at SetRingFaults() and later completions pass through unchanged, so the same writer can
// be used again after the injected failure.
//
// Thread safety: all functions may be called from any thread.
#ifndef GRIST_CKPTIO_INTERNAL_RING_H_
#define GRIST_CKPTIO_INTERNAL_RING_H_

#include <cerrno>
#include <cstdint>

namespace grist::ckptio::internal {

enum class RingOp { kWrite, kRead, kFsync };

struct RingFaultPlan {
  RingOp op = RingOp::kWrite;
  int nth = 0;           // 1-based index, among completions of `op` since SetRingFaults(); 0: none
  int error = EIO;       // the result becomes -error ...
  bool short_io = false; // ... or, with short_io, a successful transfer of about half the bytes
};

void SetRingFaults(const RingFaultPlan& plan);
void ClearRingFaults();
// How many completions of `op` were filtered since SetRingFaults().
uint64_t RingCompletions(RingOp op);

// The result the loop should act on for a completion of `op` that reported `res` for a request
// of `len` bytes. A short transfer is rounded down to 4096 bytes (as O_DIRECT's would be) and is
// at least 4096 when `len` allows it; completions of 4096 bytes or less are
// not shortened (the plan then fires at the next longer one).
int FilterCompletion(RingOp op, int res, uint64_t len);

}  // namespace grist::ckptio::internal

#endif  // GRIST_CKPTIO_INTERNAL_RING_H_
