#include "bench/tokenize_peers.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/python_peer.h"

namespace grist::bench {

absl::Status AddTokenizePeerFigures(Report* report, const Options& options, const std::string& model,
                                    const std::string& text_file, int threads,
                                    const Stats& ours_per_core, const Stats& ours_wall) {
  auto run = RunPythonPeer("bench_tokenize_peers.py", "sentencepiece,tokenizers,megatron.core",
                           {model, text_file, "--threads", std::to_string(threads),
                            "--repetitions", std::to_string(std::max(1, options.repetitions))});
  const std::string json = run.ok() ? run->json : "";
  auto stats = [&](const std::string& key) -> std::optional<Stats> {
    std::vector<double> v = PeerJsonNumbers(json, key);
    if (v.empty()) return std::nullopt;
    return Stats::Of(v);
  };
  auto why = [&](const std::string& prefix) {
    if (!run.ok()) return std::string(run.status().message());
    std::string e = PeerJsonString(json, prefix + "_error");
    return e.empty() ? std::string("peer gave no figure") : e;
  };
  const std::string hf = absl::StrCat("HF tokenizers ", PeerJsonString(json, "hf_version"),
                                      " (same model converted, ids identical)");
  Figure a{"encode MB per CPU-second", "MB/CPU-s", ours_per_core, absl::StrCat(hf, ", per core"),
           stats("hf_per_core_mb_per_s")};
  if (!a.peer) a.peer_note = why("hf");
  report->AddFigure(a);
  Figure b{absl::StrCat("encode throughput, ", threads, " threads"), "MB/s", ours_wall,
           absl::StrCat(hf, ", encode_batch on ", threads, " threads"), stats("hf_batch_mb_per_s")};
  if (!b.peer) b.peer_note = why("hf");
  report->AddFigure(b);
  Figure c{"text to .bin/.idx, MB per CPU-second", "MB/CPU-s", ours_per_core,
           absl::StrCat("Megatron (megatron-core ", PeerJsonString(json, "megatron_version"),
                        " IndexedDatasetBuilder + SentencePiece), per core"),
           stats("megatron_per_core_mb_per_s")};
  if (!c.peer) c.peer_note = why("megatron");
  report->AddFigure(c);
  if (run.ok()) {
    report->AddNote(absl::StrCat(
        "HF tokenizers ids identical to SentencePiece on ",
        static_cast<long long>(PeerJsonNumber(json, "hf_identical_docs")), " of ",
        static_cast<long long>(PeerJsonNumber(json, "docs")),
        " lines; Megatron's preprocess_data.py is in the Megatron-LM repository, not megatron-core: "
        "its documented equivalent (tokenize, IndexedDatasetBuilder.add_item, end_document, "
        "finalize) is measured"));
  }
  return absl::OkStatus();
}

}  // namespace grist::bench
