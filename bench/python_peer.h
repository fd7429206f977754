// Python peers of `grist bench`: the scripts under bench/python/ that run the tools a user would pick
// instead of grist (datatrove, datasketch, rensa, HF tokenizers, Megatron's preprocessing), found
// and run the same way by every bench.
//
//   ASSIGN_OR_RETURN(PeerRun r, RunPythonPeer("bench_clean_peer.py", "datatrove,spacy",
//                                             {"docs.jsonl", "--repetitions", "3"}));
//   // r.json: the script's last stdout line (a JSON object)
//
// The interpreter is FindPython's (GRIST_PYTHON, then python3 on PATH) that can import `modules`;
// the script is looked for in $GRIST_BENCH_PYTHON_DIR, then the source tree this binary was built
// from, then bench/python under the working directory. A missing interpreter, module or script is
// FailedPrecondition naming what is missing (the bench then reports the peer as unavailable with
// that reason); a failing script is Internal with the end of its output.
#ifndef GRIST_BENCH_PYTHON_PEER_H_
#define GRIST_BENCH_PYTHON_PEER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grist::bench {

struct PeerRun {
  std::string python;  // the interpreter used
  std::string json;    // the script's last non-empty line of stdout
};

// Path of bench/python/<name>, or "" when not found.
std::string PeerScriptPath(const std::string& name);

absl::StatusOr<PeerRun> RunPythonPeer(const std::string& script, const std::string& modules,
                                      const std::vector<std::string>& args);

// The number after "KEY": in `json` (first occurrence), or `missing`.
double PeerJsonNumber(const std::string& json, const std::string& key, double missing = 0);
// The numbers of the array after "KEY": in `json` ([] when absent).
std::vector<double> PeerJsonNumbers(const std::string& json, const std::string& key);
// The string after "KEY": in `json` (simple strings, no escapes), or "".
std::string PeerJsonString(const std::string& json, const std::string& key);

}  // namespace grist::bench

#endif  // GRIST_BENCH_PYTHON_PEER_H_
