// CHECK for programmer bugs only (this Abseil predates absl/log). Aborts with file:line and the
// condition. Never use it for bad input: return a Status instead.
#ifndef GRIST_COMMON_CHECK_H_
#define GRIST_COMMON_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define GRIST_CHECK(cond, msg)                                                          \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   (msg));                                                              \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

#endif  // GRIST_COMMON_CHECK_H_
