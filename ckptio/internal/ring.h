// The seam between ckptio's io_uring loops (writer.cc, reader.cc) and the kernel: every write and
// read request's length passes through ShapeRequest() before it is submitted, and every
// completion's result through FilterCompletion() before the loop acts on it, so a test can make
// the N-th write, read or fsync completion fail with an errno, or make the N-th request really
// transfer only part of its bytes (a short write or read, as a signal or a full disk can cause),
// on the production path rather than through an Env. Without an active plan FilterCompletion() returns `res` (one
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
  // 1-based index among completions (errors) or requests (short_io) of `op` since
  // SetRingFaults(); 0: none.
  int nth = 0;
  int error = EIO;       // the N-th completion's result becomes -error ...
  bool short_io = false; // ... or, with short_io, the N-th request asks for about half its bytes
};

void SetRingFaults(const RingFaultPlan& plan);
void ClearRingFaults();
// How many completions of `op` were filtered since SetRingFaults().
uint64_t RingCompletions(RingOp op);

// The length to submit for a request of `len` bytes: `len`, or for the planned short request
// half of it rounded down to 4096 (O_DIRECT's unit), at least 4096. Requests of 8192 bytes or
// less are not shortened (the plan then fires at the next longer one).
uint64_t ShapeRequest(RingOp op, uint64_t len);

// The result the loop should act on for a completion of `op` that reported `res`.
int FilterCompletion(RingOp op, int res);

}  // namespace grist::ckptio::internal

#endif  // GRIST_CKPTIO_INTERNAL_RING_H_
