// The submit/complete loop that ckptio's plain io_uring transfers share (reader.cc's whole-file and
// scattered reads, plain_writer.cc): keep up to `depth` requests in flight, resubmit a request
// that completed with -EAGAIN or -EINTR, let the caller account each completion (and resubmit the
// rest of a short transfer), and never return while the kernel still holds a request (after an
// error the loop reaps what is in flight first). ckptio/writer.cc has its own loop (fsync chains,
// registered buffers). BlockSlots is the request source's part the whole-file transfers share:
// the file cut into blocks, one slot per block in flight. Header-only so that the callbacks
// inline: the same system calls as a loop written out by hand.
//
// A request source `src` provides:
//   bool Next(uint64_t* tag)           a new request, named `tag` (false: none is left);
//   void Prep(io_uring_sqe* sqe, uint64_t tag)
//                                      the request's remaining bytes into `sqe` (set its user data
//                                      to `tag` with io_uring_sqe_set_data64);
//   int Filter(int res)                the result to act on for a completion reporting `res`
//                                      (internal::FilterCompletion for the fault-injection seam,
//                                      or `res` itself);
//   absl::StatusOr<bool> Complete(uint64_t tag, int res)
//                                      a completion's (filtered, not -EAGAIN/-EINTR) result: an
//                                      error stops the loop; true submits the request again (the
//                                      rest of a short transfer), false retires it.
//   absl::Status Retired(uint64_t tag) (optional) a retired request's bytes may be used: called
//                                      after the queue is refilled, so the device works while the
//                                      caller uses them (e.g. verifies a block); an error stops
//                                      the loop.
//
// Thread safety: one thread drives a ring.
#ifndef GRIST_CKPTIO_INTERNAL_RING_LOOP_H_
#define GRIST_CKPTIO_INTERNAL_RING_LOOP_H_

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status_macros.h"

namespace grist::ckptio::internal {

// The blocks of [0, end), `block_size` bytes each, as requests with a slot each while in flight:
// the Next() of the whole-file transfers. op(slot) is the block's range not yet transferred.
class BlockSlots {
 public:
  struct Op {
    uint64_t off, end;
  };
  BlockSlots(uint64_t end, uint64_t block_size, unsigned slots)
      : end_(end), block_size_(block_size), ops_(slots) {
    for (unsigned i = 0; i < slots; ++i) free_.push_back(slots - 1 - i);
  }
  // The next block in a free slot (RunRing calls it only while fewer than `slots` are in flight,
  // so one is free); false once every block has been handed out.
  bool Next(uint64_t* slot) {
    if (next_ >= end_) return false;
    *slot = free_.back();
    free_.pop_back();
    ops_[*slot] = {next_, std::min(end_, next_ + block_size_)};
    next_ = ops_[*slot].end;
    return true;
  }
  Op& op(uint64_t slot) { return ops_[slot]; }
  // The slot's block is done.
  void Free(uint64_t slot) { free_.push_back(static_cast<size_t>(slot)); }

 private:
  const uint64_t end_, block_size_;
  uint64_t next_ = 0;
  std::vector<Op> ops_;
  std::vector<size_t> free_;
};

// Runs `src`'s requests through `ring` (at least `depth` entries) until none is left and every one
// has completed, or until the first error, which is returned once nothing is in flight.
template <class Source>
absl::Status RunRing(struct io_uring* ring, unsigned depth, Source& src) {
  unsigned inflight = 0;
  bool more = true;
  absl::Status error;
  auto prep = [&](uint64_t tag) { src.Prep(io_uring_get_sqe(ring), tag); };
  auto fill = [&] {  // new requests up to `depth` in flight
    bool submitted = false;
    while (more && inflight < depth) {
      uint64_t tag = 0;
      if (!src.Next(&tag)) {
        more = false;
        break;
      }
      prep(tag);
      ++inflight;
      submitted = true;
    }
    if (submitted) io_uring_submit(ring);
  };
  while (error.ok() && (more || inflight > 0)) {
    fill();
    if (inflight == 0) break;
    struct io_uring_cqe* cqe = nullptr;
    const int r = io_uring_wait_cqe(ring, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) {
      error = ErrnoError(-r, "io_uring_wait_cqe");
      break;
    }
    const uint64_t tag = io_uring_cqe_get_data64(cqe);
    const int res = src.Filter(cqe->res);
    io_uring_cqe_seen(ring, cqe);
    if (res == -EAGAIN || res == -EINTR) {
      prep(tag);
      io_uring_submit(ring);
      continue;
    }
    --inflight;
    absl::StatusOr<bool> again = src.Complete(tag, res);
    if (!again.ok()) {
      error = again.status();
      break;
    }
    if (*again) {
      prep(tag);
      ++inflight;
      io_uring_submit(ring);
    } else if constexpr (requires { src.Retired(tag); }) {
      fill();
      error = src.Retired(tag);
    }
  }
  while (inflight > 0) {  // never leave the kernel reading into or writing from our buffers
    struct io_uring_cqe* cqe = nullptr;
    const int r = io_uring_wait_cqe(ring, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) break;
    io_uring_cqe_seen(ring, cqe);
    --inflight;
  }
  return error;
}

}  // namespace grist::ckptio::internal

#endif  // GRIST_CKPTIO_INTERNAL_RING_LOOP_H_
