// Writing a result file named on the command line (`--json FILE`), whatever FILE is.
//
//   "-"                      the file descriptor `stdout_fd` (the standard output by default),
//                            with a final newline added when `data` lacks one
//   a regular file, or none  written crash-safely: a temporary beside it, synced, renamed over it
//                            (WriteFileAtomic), so a reader never sees half a file
//   a symbolic link          the link is kept: the file it points to is written by these rules
//                            (atomically when that is a regular file or does not exist yet)
//   anything else            (a character device such as /dev/null or a terminal, a FIFO, a socket,
//                            /dev/stdout, /proc/self/fd/N) written through: opened for writing and
//                            appended to, never replaced, created or truncated
//
// Errors name the path: the Status of the open, write or rename that failed.
#ifndef GRIST_COMMON_OUTPUT_FILE_H_
#define GRIST_COMMON_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include <unistd.h>

#include "absl/status/status.h"

namespace grist {

absl::Status WriteOutputFile(const std::string& path, std::string_view data,
                             int stdout_fd = STDOUT_FILENO);

}  // namespace grist

#endif  // GRIST_COMMON_OUTPUT_FILE_H_
