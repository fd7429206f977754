#include "bench/corpus_sample.h"

#include <cstdlib>

#include "common/env.h"
#include "common/json_writer.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "tokenize/tokenizer.h"

namespace grist::bench {

std::string FirstExistingPath(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates) {
    if (Env::Default()->FileExists(c) || Env::Default()->IsDirectory(c)) return c;
  }
  return "";
}

absl::StatusOr<std::string> DefaultCorpus() {
  std::string in = FirstExistingPath({"../shared/corpus/wikinews-en", ".demo/corpus"});
  if (in.empty()) {
    return absl::NotFoundError(
        "no corpus: pass --input, or run scripts/make_demo_corpus.sh .demo/corpus");
  }
  return in;
}

absl::StatusOr<CorpusSample> WriteCorpusSample(const std::vector<std::string>& inputs,
                                               const std::string& path, uint64_t max_bytes) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(auto files, ListInputs(env, inputs));
  CorpusSample s;
  s.path = path;
  std::string out;
  for (size_t i = 0; i < files.size() && s.text_bytes < max_bytes; ++i) {
    InputSplit split;
    split.file_index = i;
    ASSIGN_OR_RETURN(auto r, OpenRecordReader(env, files[i], split, InputOptions{}));
    Document d;
    while (s.text_bytes < max_bytes) {
      ASSIGN_OR_RETURN(bool more, r->Next(&d));
      if (!more) break;
      if (!d.error.empty() || d.text.empty()) continue;
      out += "{\"text\":";
      AppendJsonString(&out, d.text);
      out += "}\n";
      s.text_bytes += d.text.size();
      ++s.documents;
    }
  }
  if (s.documents == 0) return absl::NotFoundError("bench: the corpus has no readable documents");
  s.file_bytes = out.size();
  RETURN_IF_ERROR(WriteFileAtomic(env, path, out));
  return s;
}

absl::Status TrainBenchTokenizer(const std::string& jsonl, const std::string& model_path,
                                 int vocab_size) {
  tokenize::TrainOptions t;
  t.vocab_size = vocab_size;
  t.input_sentence_size = 200000;
  t.seed = 1;
  t.pad_id = 3;
  return tokenize::TrainTokenizer(Env::Default(), {jsonl}, model_path, t).status();
}

absl::StatusOr<std::string> ScratchDir(const std::string& given, const std::string& name) {
  std::string dir = given;
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    dir = JoinPath(t && *t ? t : "/tmp", "grist-bench-" + name);
  }
  RETURN_IF_ERROR(Env::Default()->CreateDirs(dir));
  return dir;
}

}  // namespace grist::bench
