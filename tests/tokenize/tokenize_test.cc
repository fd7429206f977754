#include <simdjson.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/records.h"
#include "tests/synthetic_corpus.h"
#include "tests/test_util.h"
#include "tokenize/encode.h"
#include "tokenize/indexed_dataset.h"
#include "tokenize/tokenizer.h"

namespace grist::tokenize {
namespace {

using grist::testing::TempDir;

std::string Mistral(const std::string& corpus) {
  return corpus + "/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1";
}
std::string Unigram(const std::string& corpus) {
  return corpus + "/tokenizers/sentencepiece-test-unigram-1k/test_model.model";
}

// The Python of the project's environment (scripts/test.sh sets GRIST_PYTHON), else python3.
std::string Python() {
  const char* env = std::getenv("GRIST_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

bool HavePythonSentencePiece() {
  return std::system((Python() + " -c 'import sentencepiece' >/dev/null 2>&1").c_str()) == 0;
}

// A generated corpus file in `tmp` (tests/synthetic_corpus.h): the determinism and exactness
// guarantees below are checked on it everywhere, and on the shared corpus where present.
std::string SyntheticFile(const TempDir& tmp, uint64_t seed, int documents = 1000,
                          int max_paragraphs = 6) {
  grist::testing::SyntheticCorpusOptions o;
  o.seed = seed;
  o.documents = documents;
  o.max_paragraphs = max_paragraphs;
  return grist::testing::WriteSyntheticCorpus(tmp.Join(absl::StrCat("synthetic-", seed, ".jsonl")), o);
}

// A model of `type` trained here on generated text.
std::string TrainedModel(const TempDir& tmp, const std::string& type) {
  const std::string model = tmp.Join(type + ".model");
  if (Env::Default()->FileExists(model)) return model;
  TrainOptions o;
  o.model_type = type;
  o.vocab_size = 800;
  o.input_sentence_size = 20000;
  auto r = TrainTokenizer(Env::Default(), {SyntheticFile(tmp, 99)}, model, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return model;
}

// Up to `n` non-empty documents of a real corpus file.
std::vector<std::string> RealDocs(const std::string& path, size_t n) {
  std::vector<std::string> out;
  auto files = ListInputs(Env::Default(), {path});
  EXPECT_TRUE(files.ok());
  InputSplit split;
  split.file_index = 0;
  auto r = OpenRecordReader(Env::Default(), (*files)[0], split, InputOptions{});
  EXPECT_TRUE(r.ok());
  Document d;
  while (out.size() < n) {
    auto more = (*r)->Next(&d);
    if (!more.ok() || !*more) break;
    if (d.error.empty() && !d.text.empty()) out.push_back(d.text);
  }
  return out;
}

// SentencePiece's Python module's ids for each document (one JSON array per line).
std::vector<std::vector<int>> PythonIds(const TempDir& tmp, const std::string& model,
                                        const std::vector<std::string>& docs) {
  std::string in = tmp.Join("docs.jsonl"), out = tmp.Join("ids.txt"), py = tmp.Join("enc.py");
  {
    std::ofstream f(in);
    for (const auto& d : docs) {
      std::string line;
      AppendJsonString(&line, d);
      f << line << "\n";
    }
    std::ofstream p(py);
    p << "import json, sys, sentencepiece as spm\n"
         "sp = spm.SentencePieceProcessor(model_file=sys.argv[1])\n"
         "with open(sys.argv[2], encoding='utf-8') as f, open(sys.argv[3], 'w') as o:\n"
         "    for line in f:\n"
         "        o.write(' '.join(map(str, sp.encode(json.loads(line)))) + '\\n')\n";
  }
  std::string cmd = absl::StrCat(Python(), " ", py, " ", model, " ", in, " ", out);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::vector<int>> ids;
  std::ifstream f(out);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ss(line);
    std::vector<int> v;
    int x;
    while (ss >> x) v.push_back(x);
    ids.push_back(std::move(v));
  }
  return ids;
}

TEST(TokenizeTest, PublishedExpectedIds) {
  GRIST_REQUIRE_CORPUS(corpus, "tokenizers/expected_ids.json");
  simdjson::dom::parser p;
  simdjson::dom::element root = p.load(corpus);
  std::string dir = DirName(corpus);
  int checked = 0;
  for (simdjson::dom::element c : root["cases"].get_array()) {
    std::string model = JoinPath(dir, std::string(std::string_view(c["model"].get_string())));
    auto tok = Tokenizer::Load(Env::Default(), model);
    ASSERT_TRUE(tok.ok()) << tok.status();
    EncodeOptions o;
    o.add_eos = false;
    o.add_bos = bool(c["add_bos"]);
    std::vector<int> want;
    for (int64_t id : c["ids"].get_array()) want.push_back(static_cast<int>(id));
    std::vector<int> got;
    std::string_view text = c["text"].get_string();
    ASSERT_TRUE((*tok)->Encode(text, o, &got).ok());
    EXPECT_EQ(got, want) << text;
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

// Every document of `input`, through the full encode stage (parallel, MMIDIDX out), gives the ids
// SentencePiece's Python module gives, for each model.
void ExpectBitExactWithPython(const TempDir& tmp, const std::string& input,
                              const std::vector<std::string>& models, size_t min_docs) {
  std::vector<std::string> docs = RealDocs(input, 100000);
  ASSERT_GT(docs.size(), min_docs);
  for (const std::string& model : models) {
    std::vector<std::vector<int>> want = PythonIds(tmp, model, docs);
    ASSERT_EQ(want.size(), docs.size());
    EncodeStageOptions o;
    o.model_path = model;
    o.encode.add_eos = false;
    o.split_bytes = 64 << 10;
    RunOptions run;
    run.threads = 2;
    run.progress = false;
    std::string out = tmp.Join("enc" + std::to_string(std::hash<std::string>()(model + input)));
    auto rep = RunEncode(Env::Default(), {input}, out, o, run);
    ASSERT_TRUE(rep.ok()) << rep.status();
    auto ds = IndexedDatasetReader::Open(Env::Default(), out + "/tokens-00000-of-00001");
    ASSERT_TRUE(ds.ok()) << ds.status();
    ASSERT_EQ(ds->get()->sequences(), docs.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      std::vector<int32_t> got;
      (*ds)->Read(i, &got);
      if (std::vector<int>(got.begin(), got.end()) != want[i]) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u) << model;
  }
}

TEST(TokenizeTest, BitExactWithSentencePiecePythonOnGeneratedText) {
  if (!HavePythonSentencePiece()) GTEST_SKIP() << Python() << " has no sentencepiece module";
  TempDir tmp;
  ExpectBitExactWithPython(tmp, SyntheticFile(tmp, 3),
                           {TrainedModel(tmp, "bpe"), TrainedModel(tmp, "unigram")}, 500);
}

TEST(TokenizeTest, BitExactWithSentencePiecePythonOnRealText) {
  GRIST_REQUIRE_CORPUS(corpus, "wikinews-en/wiki_00.jsonl.zst");
  if (!HavePythonSentencePiece()) GTEST_SKIP() << Python() << " has no sentencepiece module";
  std::string root = grist::testing::CorpusDir();
  TempDir tmp;
  ExpectBitExactWithPython(tmp, corpus, {Mistral(root), Unigram(root)}, 500);
}

// Long documents encoded in pieces cut at FindCut give the ids of the whole document.
void ExpectPiecesEqualWhole(const std::string& input, const std::vector<std::string>& models) {
  std::vector<std::string> docs = RealDocs(input, 40);
  ASSERT_FALSE(docs.empty());
  for (const std::string& model : models) {
    auto tok = Tokenizer::Load(Env::Default(), model);
    ASSERT_TRUE(tok.ok());
    ASSERT_TRUE((*tok)->can_cut()) << model;
    EncodeOptions whole, pieces;
    whole.piece_bytes = 0;
    pieces.piece_bytes = 2048;
    size_t cut_docs = 0;
    for (const std::string& d : docs) {
      std::vector<int> a, b;
      ASSERT_TRUE((*tok)->Encode(d, whole, &a).ok());
      ASSERT_TRUE((*tok)->Encode(d, pieces, &b).ok());
      EXPECT_EQ(a, b) << model << ": " << d.substr(0, 80);
      if (d.size() > 4096) ++cut_docs;
    }
    EXPECT_GT(cut_docs, 10u);
  }
}

TEST(TokenizeTest, LongGeneratedDocumentsInPiecesEqualWholeDocuments) {
  TempDir tmp;
  ExpectPiecesEqualWhole(SyntheticFile(tmp, 5, 60, 40),
                         {TrainedModel(tmp, "bpe"), TrainedModel(tmp, "unigram")});
}

TEST(TokenizeTest, LongDocumentsInPiecesEqualWholeDocuments) {
  GRIST_REQUIRE_CORPUS(corpus, "wikipedia-en-2015");
  std::string root = grist::testing::CorpusDir();
  auto files = ListInputs(Env::Default(), {corpus});
  ASSERT_TRUE(files.ok());
  ExpectPiecesEqualWhole((*files)[0].path, {Mistral(root), Unigram(root)});
}

TEST(TokenizeTest, FindCutRules) {
  EXPECT_EQ(FindCut("aaaa bbbb", 5), 4u);
  EXPECT_EQ(FindCut("aaaa  bbbb cc", 6), 10u);  // double space skipped, found forwards
  EXPECT_EQ(FindCut("aaaaaaaaaaaaaaaa", 4), std::string_view::npos);
  EXPECT_EQ(FindCut("short", 10), std::string_view::npos);
}

TEST(TokenizeTest, TrainingIsDeterministicAndSeeded) {
  TempDir tmp;
  const std::string corpus = SyntheticFile(tmp, 11, 3000);
  TrainOptions o;
  o.vocab_size = 500;
  o.seed = 7;
  o.input_sentence_size = 5000;
  auto a = TrainTokenizer(Env::Default(), {corpus}, tmp.Join("a.model"), o);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = TrainTokenizer(Env::Default(), {corpus}, tmp.Join("b.model"), o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->sentences_used, 5000u);
  EXPECT_GT(a->sentences_seen, 5000u);
  EXPECT_EQ(*ReadFileToString(Env::Default(), tmp.Join("a.model")),
            *ReadFileToString(Env::Default(), tmp.Join("b.model")));
  o.seed = 8;
  ASSERT_TRUE(TrainTokenizer(Env::Default(), {corpus}, tmp.Join("c.model"), o).ok());
  EXPECT_NE(*ReadFileToString(Env::Default(), tmp.Join("a.model")),
            *ReadFileToString(Env::Default(), tmp.Join("c.model")));
  auto tok = Tokenizer::Load(Env::Default(), tmp.Join("a.model"));
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->vocab_size(), 500);
  EXPECT_EQ((*tok)->model_type(), "bpe");
  EXPECT_EQ((*tok)->eos_id(), 2);
}

TEST(TokenizeTest, BadModelIsAClearError) {
  MemEnv env;
  ASSERT_TRUE(WriteFileAtomic(&env, "/bad.model", "this is not a model").ok());
  auto t = Tokenizer::Load(&env, "/bad.model");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(t.status().message()).find("/bad.model"), std::string::npos);
  EXPECT_EQ(Tokenizer::Load(&env, "/missing.model").status().code(), absl::StatusCode::kNotFound);
  // The same with grist's encoder built beside the parse (its thread joined, nothing left).
  auto built = Tokenizer::Load(&env, "/bad.model", /*build_native=*/true);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(built.status().message(), t.status().message());
}

// A model loaded with its encoder built beside SentencePiece's parse is the model loaded without:
// the same engine, the same reason when not native, the same ids.
TEST(TokenizeTest, TheEncoderBuiltAtLoadIsTheOneBuiltLater) {
  TempDir tmp;
  const std::vector<std::string> docs = RealDocs(SyntheticFile(tmp, 61, 200), 200);
  ASSERT_GT(docs.size(), 100u);
  for (const std::string type : {"bpe", "unigram"}) {
    const std::string model = TrainedModel(tmp, type);
    auto later = Tokenizer::Load(Env::Default(), model);
    auto now = Tokenizer::Load(Env::Default(), model, /*build_native=*/true);
    ASSERT_TRUE(later.ok() && now.ok()) << type;
    EXPECT_EQ((*now)->native(), (*later)->native()) << type;
    EXPECT_EQ((*now)->native(), type == "bpe");
    EXPECT_EQ((*now)->native_why_not(), (*later)->native_why_not()) << type;
    EXPECT_EQ((*now)->can_cut(), (*later)->can_cut()) << type;
    EXPECT_EQ((*now)->vocab_size(), (*later)->vocab_size()) << type;
    EncodeOptions o;
    std::vector<int> a, b;
    for (const std::string& d : docs) {
      ASSERT_TRUE((*now)->Encode(d, o, &a).ok());
      ASSERT_TRUE((*later)->Encode(d, o, &b).ok());
      ASSERT_EQ(a, b) << type << ": " << d;
    }
  }
}

// The model loads on its own thread while the inputs are planned: with both bad, the model's
// error is the one reported, as when they ran one after the other; with both good, the phases add
// up and the task's .json file records them.
TEST(TokenizeTest, EncodeReportsTheModelErrorFirstAndItsPhases) {
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("bad.model"), "not a model").ok());
  EncodeStageOptions o;
  o.model_path = tmp.Join("bad.model");
  RunOptions run;
  run.progress = false;
  run.threads = 2;
  auto bad = RunEncode(Env::Default(), {tmp.Join("missing.jsonl")}, tmp.Join("out"), o, run);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(std::string(bad.status().message()).find("bad.model"), std::string::npos);
  o.model_path = TrainedModel(tmp, "bpe");
  auto missing = RunEncode(Env::Default(), {tmp.Join("missing.jsonl")}, tmp.Join("out"), o, run);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();

  auto rep = RunEncode(Env::Default(), {SyntheticFile(tmp, 31, 200)}, tmp.Join("out"), o, run);
  ASSERT_TRUE(rep.ok()) << rep.status();
  const EncodeReport::Phases& p = rep->phase_seconds;
  EXPECT_GT(p.model, 0);
  EXPECT_GT(p.plan, 0);
  EXPECT_GE(p.start, std::max(p.model, p.plan) * 0.999);
  EXPECT_GT(p.encode, 0);
  EXPECT_NEAR(p.start + p.encode + p.finish, rep->seconds, 1e-6);
  std::ifstream in(tmp.Join("out") + "/tokens-00000-of-00001.json");
  std::stringstream text;
  text << in.rdbuf();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(text.str()).get(doc), simdjson::SUCCESS) << text.str();
  for (const char* k : {"start", "model", "plan", "encode", "finish"}) {
    double v = -1;
    EXPECT_EQ(doc["phase_seconds"][k].get(v), simdjson::SUCCESS) << k << ": " << text.str();
    EXPECT_GE(v, 0) << k;
  }
}

TEST(TokenizeTest, ThreeTasksConcatenateToOneTask) {
  TempDir tmp;
  std::vector<std::string> in = {SyntheticFile(tmp, 21, 200), SyntheticFile(tmp, 22, 200),
                                 SyntheticFile(tmp, 23, 200), SyntheticFile(tmp, 24, 200)};
  EncodeStageOptions o;
  o.model_path = TrainedModel(tmp, "unigram");
  o.split_bytes = 64 << 10;
  RunOptions run;
  run.progress = false;
  run.threads = 2;
  ASSERT_TRUE(RunEncode(Env::Default(), in, tmp.Join("one"), o, run).ok());
  run.tasks = 3;
  for (int t = 0; t < 3; ++t) {
    run.task = t;
    run.threads = 1 + t % 2;
    auto r = RunEncode(Env::Default(), in, tmp.Join("three"), o, run);
    ASSERT_TRUE(r.ok()) << r.status();
    if (t < 2) {
      EXPECT_EQ(ListTokenParts(Env::Default(), tmp.Join("three")).status().code(),
                absl::StatusCode::kFailedPrecondition);
    }
  }
  auto one = ListTokenParts(Env::Default(), tmp.Join("one"));
  auto three = ListTokenParts(Env::Default(), tmp.Join("three"));
  ASSERT_TRUE(one.ok() && three.ok());
  ASSERT_EQ(three->size(), 3u);
  auto flat = [](const std::vector<std::string>& parts) {
    std::vector<std::vector<int32_t>> docs;
    for (const auto& p : parts) {
      auto r = IndexedDatasetReader::Open(Env::Default(), p);
      EXPECT_TRUE(r.ok());
      for (uint64_t i = 0; i < (*r)->sequences(); ++i) {
        docs.emplace_back();
        (*r)->Read(i, &docs.back());
      }
    }
    return docs;
  };
  auto a = flat(*one), b = flat(*three);
  EXPECT_GT(a.size(), 100u);
  EXPECT_EQ(a, b);
}

// A model handed to RunEncode already loaded (as `grist build` does) gives the bytes that loading
// it from model_path gives, which is then not read; its encoder's tables may be built by another
// thread at the same time.
TEST(TokenizeTest, ALoadedModelGivesTheBytesOfItsFile) {
  TempDir tmp;
  Env* env = Env::Default();
  const std::vector<std::string> in = {SyntheticFile(tmp, 41, 300), SyntheticFile(tmp, 42, 300)};
  for (const std::string type : {"bpe", "unigram"}) {
    EncodeStageOptions o;
    o.model_path = TrainedModel(tmp, type);
    o.split_bytes = 32 << 10;
    RunOptions run;
    run.progress = false;
    run.threads = 3;
    auto from_file = RunEncode(env, in, tmp.Join(type + "-file"), o, run);
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    auto model = Tokenizer::Load(env, o.model_path);
    ASSERT_TRUE(model.ok()) << model.status();
    std::thread tables([&] { (void)(*model)->native(); });
    o.model_path = tmp.Join("no-such.model");
    auto given = RunEncode(env, in, tmp.Join(type + "-given"), o, run, model->get());
    tables.join();
    ASSERT_TRUE(given.ok()) << given.status();
    EXPECT_EQ(given->engine, from_file->engine) << type;
    EXPECT_EQ(given->ToJson(), from_file->ToJson()) << type;
    EXPECT_GE(given->phase_seconds.model, 0) << type;
    EXPECT_EQ(type == "bpe", (*model)->native()) << type;
    for (const char* ext : {".bin", ".idx"}) {
      auto a = ReadFileToString(env, tmp.Join(type + "-file/tokens-00000-of-00001") + ext);
      auto b = ReadFileToString(env, tmp.Join(type + "-given/tokens-00000-of-00001") + ext);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_GT(a->size(), 1000u);
      EXPECT_EQ(*a, *b) << type << ext;
    }
  }
}

// One split, so every thread but its owner finds nothing to start and encodes the split's last
// documents (common/shared_work.h): the tokens, the index and the report are those of one thread.
TEST(TokenizeTest, IdleThreadsHelpingWithTheLastSplitChangeNoByte) {
  TempDir tmp;
  Env* env = Env::Default();
  const std::vector<std::string> in = {SyntheticFile(tmp, 51, 1500)};
  for (const std::string type : {"bpe", "unigram"}) {
    EncodeStageOptions o;
    o.model_path = TrainedModel(tmp, type);
    o.split_bytes = 64 << 20;
    RunOptions run;
    run.progress = false;
    std::string want_bin, want_idx, want_report;
    for (int threads : {1, 4, 8}) {
      run.threads = threads;
      const std::string out = tmp.Join(absl::StrCat(type, "-", threads));
      auto rep = RunEncode(env, in, out, o, run);
      ASSERT_TRUE(rep.ok()) << rep.status();
      auto bin = ReadFileToString(env, out + "/tokens-00000-of-00001.bin");
      auto idx = ReadFileToString(env, out + "/tokens-00000-of-00001.idx");
      ASSERT_TRUE(bin.ok() && idx.ok());
      if (threads == 1) {
        EXPECT_EQ(rep->counts.docs_out, 1500u) << type;
        want_bin = *bin;
        want_idx = *idx;
        want_report = rep->ToJson();
        continue;
      }
      EXPECT_EQ(*bin, want_bin) << type << " threads " << threads;
      EXPECT_EQ(*idx, want_idx) << type << " threads " << threads;
      EXPECT_EQ(rep->ToJson(), want_report) << type << " threads " << threads;
    }
  }
}

TEST(TokenizeTest, CorruptOrTruncatedDatasetIsDataLoss) {
  TempDir tmp;
  Env* env = Env::Default();
  auto w = IndexedDatasetWriter::Open(env, tmp.Join("d"), 2);
  ASSERT_TRUE(w.ok());
  std::vector<int> a = {1, 2, 3}, b = {4, 5};
  ASSERT_TRUE((*w)->Add(a).ok());
  ASSERT_TRUE((*w)->Add(b).ok());
  std::vector<int> big = {70000};
  EXPECT_EQ((*w)->Add(big).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = IndexedDatasetReader::Open(env, tmp.Join("d"));
  ASSERT_TRUE(r.ok());
  std::vector<int32_t> got;
  (*r)->Read(1, &got);
  EXPECT_EQ(got, (std::vector<int32_t>{4, 5}));
  std::string bin = *ReadFileToString(env, tmp.Join("d.bin"));
  ASSERT_TRUE(WriteFileAtomic(env, tmp.Join("d.bin"), bin.substr(0, 7)).ok());
  EXPECT_EQ(IndexedDatasetReader::Open(env, tmp.Join("d")).status().code(),
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(WriteFileAtomic(env, tmp.Join("d.bin"), bin).ok());
  std::string idx = *ReadFileToString(env, tmp.Join("d.idx"));
  ASSERT_TRUE(WriteFileAtomic(env, tmp.Join("d.idx"), idx.substr(0, idx.size() - 1)).ok());
  EXPECT_EQ(IndexedDatasetReader::Open(env, tmp.Join("d")).status().code(),
            absl::StatusCode::kDataLoss);
  idx[0] = 'X';
  ASSERT_TRUE(WriteFileAtomic(env, tmp.Join("d.idx"), idx).ok());
  EXPECT_EQ(IndexedDatasetReader::Open(env, tmp.Join("d")).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace grist::tokenize
