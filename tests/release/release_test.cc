#include "release/release.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <sys/wait.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/input_plan.h"
#include "release/internal/publish.h"
#include "release/internal/stage_record.h"
#include "shard/indexed_dataset.h"
#include "shard/manifest.h"
#include "tests/synthetic_corpus.h"
#include "tests/test_util.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist::release {
namespace {

using grist::testing::TempDir;

// A generated corpus (tests/synthetic_corpus.h) of 1,000 documents, with short ones that clean
// rejects and exact and near duplicates that dedup removes, written into `tmp`: the guarantees
// below hold on a fresh clone, without ../shared.
std::string Corpus(const TempDir& tmp, uint64_t seed = 1) {
  grist::testing::SyntheticCorpusOptions o;
  o.seed = seed;
  return grist::testing::WriteSyntheticCorpus(tmp.Join(absl::StrCat("corpus-", seed, ".jsonl")), o);
}

std::string Config(const std::string& input, const std::string& extra = "",
                   const std::string& seq_len = "256") {
  return absl::StrCat(R"(seed = 42
[release]
version = "1.0"
[inputs]
paths = [")", input, R"("]
[tokenizer]
vocab_size = 600
input_sentence_size = 20000
[pack]
seq_len = )", seq_len, R"(
strategy = "bestfit"
[split]
validation_fraction = 0.05
[shard]
max_bytes = 60000
[dedup]
memory_limit_mb = 64
)", extra);
}

absl::StatusOr<BuildReport> Build(const TempDir& tmp, const std::string& toml,
                                  const std::string& out, int threads) {
  std::string cfg = tmp.Join("c-" + std::to_string(std::hash<std::string>()(toml)) + ".toml");
  if (!WriteFileAtomic(Env::Default(), cfg, toml).ok()) return absl::InternalError("write");
  BuildOptions o;
  o.config_path = cfg;
  o.output_dir = out;
  o.run.threads = threads;
  o.run.progress = false;
  return BuildRelease(Env::Default(), o);
}

std::vector<std::string> ReleaseFiles(const std::string& dir) {
  std::vector<std::string> out = {"manifest.json", "tokenizer.model"};
  auto names = Env::Default()->ListDir(dir + "/shards");
  for (const auto& n : *names) out.push_back("shards/" + n);
  auto docs = Env::Default()->ListDir(dir + "/documents");
  EXPECT_TRUE(docs.ok()) << dir << ": no documents/";
  if (docs.ok()) {
    for (const auto& n : *docs) out.push_back("documents/" + n);
  }
  return out;
}

TEST(ReleaseTest, TwoBuildsWithDifferentThreadCountsAreByteIdentical) {
  TempDir tmp;
  const std::string corpus = Corpus(tmp);
  std::string toml = Config(corpus);
  auto a = Build(tmp, toml, tmp.Join("a"), 1);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Build(tmp, toml, tmp.Join("b"), 3);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->release_id, b->release_id);
  auto files = ReleaseFiles(tmp.Join("a"));
  EXPECT_GE(files.size(), 2u + 6u + 4u);  // several train shards, validation, documents/
  EXPECT_EQ(files, ReleaseFiles(tmp.Join("b")));
  for (const auto& f : files) {
    EXPECT_EQ(*ReadFileToString(Env::Default(), tmp.Join("a/" + f)),
              *ReadFileToString(Env::Default(), tmp.Join("b/" + f)))
        << f;
  }
  // Nothing lost: documents in = in shards + rejected.
  auto rel = shard::Release::Open(Env::Default(), tmp.Join("a"));
  ASSERT_TRUE(rel.ok());
  const auto& m = (*rel)->manifest();
  EXPECT_GT(m.split("validation")->samples, 0u);
  const StageSummary& tok = a->stages[3];
  EXPECT_EQ(tok.name, "tokenize");
  EXPECT_EQ(tok.docs_in, tok.docs_out + tok.docs_rejected);
  EXPECT_EQ(m.split("train")->documents + m.split("validation")->documents, tok.docs_out);
  EXPECT_NE(m.counts_json.find(absl::StrCat("\"docs_in\":", tok.docs_in)), std::string::npos);
  // Across clean (rejects) and dedup (removals) too.
  const StageSummary& cl = a->stages[0];
  const StageSummary& dd = a->stages[1];
  EXPECT_EQ(cl.name, "clean");
  EXPECT_EQ(dd.name, "dedup");
  EXPECT_GT(cl.docs_rejected, 0u);
  EXPECT_EQ(cl.docs_out, dd.docs_in);
  EXPECT_EQ(dd.docs_out, tok.docs_in);
  EXPECT_EQ(cl.docs_in, tok.docs_out + cl.docs_rejected + dd.docs_rejected + dd.docs_removed +
                            tok.docs_rejected);
  EXPECT_NE(m.counts_json.find(absl::StrCat("\"total\":{\"documents_in\":", cl.docs_in,
                                            ",\"documents_in_shards\":", tok.docs_out)),
            std::string::npos)
      << m.counts_json;
  // A verified release.
  auto v = VerifyRelease(Env::Default(), tmp.Join("a"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << v->problems.front();
  // Timings live in reports/, not in the manifest.
  EXPECT_TRUE(Env::Default()->FileExists(tmp.Join("a/reports/build.json")));
  EXPECT_EQ(m.counts_json.find("seconds"), std::string::npos);
}

TEST(ReleaseTest, OneTaskAndThreeTasksMergedGiveTheSameRelease) {
  TempDir tmp;
  std::vector<std::string> in = {Corpus(tmp, 7), Corpus(tmp, 8), Corpus(tmp, 9)};
  std::string cfg = tmp.Join("c.toml");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), cfg, Config(in[0])).ok());
  // A unigram model trained here on the same kind of text.
  const std::string model = tmp.Join("unigram.model");
  tokenize::TrainOptions to;
  to.model_type = "unigram";
  to.vocab_size = 600;
  to.input_sentence_size = 20000;
  ASSERT_TRUE(tokenize::TrainTokenizer(Env::Default(), {in[0]}, model, to, false).ok());
  tokenize::EncodeStageOptions eo;
  eo.model_path = model;
  eo.split_bytes = 256 << 10;
  RunOptions run;
  run.progress = false;
  ASSERT_TRUE(tokenize::RunEncode(Env::Default(), in, tmp.Join("t1"), eo, run).ok());
  run.tasks = 3;
  for (run.task = 0; run.task < 3; ++run.task) {
    ASSERT_TRUE(tokenize::RunEncode(Env::Default(), in, tmp.Join("t3"), eo, run).ok());
  }
  for (const char* t : {"t1", "t3"}) {
    PackReleaseOptions po;
    po.config_path = cfg;
    po.tokens_dir = tmp.Join(t);
    po.model_path = model;
    po.output_dir = tmp.Join(std::string("r") + t);
    po.run.progress = false;
    po.run.threads = t[1] == '1' ? 1 : 2;
    auto r = PackRelease(Env::Default(), po);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // The option flags of `grist pack` override the config's [pack], [split] and [shard]: a config
  // saying otherwise, overridden back to the first one's values, gives the same bytes.
  {
    std::string other = absl::StrReplaceAll(
        Config(in[0], "", "128"), {{"strategy = \"bestfit\"", "strategy = \"concat\""},
                                   {"validation_fraction = 0.05", "validation_fraction = 0.5"},
                                   {"max_bytes = 60000", "max_bytes = 4096"}});
    std::string other_cfg = tmp.Join("other.toml");
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), other_cfg, other).ok());
    PackReleaseOptions po;
    po.config_path = other_cfg;
    po.config_overrides = [](grist::Config* c) {
      c->SetInt("pack.seq_len", 256);
      c->SetString("pack.strategy", "bestfit");
      c->SetDouble("split.validation_fraction", 0.05);
      c->SetInt("shard.max_bytes", 60000);
    };
    po.tokens_dir = tmp.Join("t1");
    po.model_path = model;
    po.output_dir = tmp.Join("rflags");
    po.run.progress = false;
    auto r = PackRelease(Env::Default(), po);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  auto files = ReleaseFiles(tmp.Join("rt1"));
  EXPECT_GE(files.size(), 2u + 6u);
  for (const char* other : {"rt3", "rflags"}) {
    EXPECT_EQ(files, ReleaseFiles(tmp.Join(other))) << other;
    for (const auto& f : files) {
      EXPECT_EQ(*ReadFileToString(Env::Default(), tmp.Join("rt1/" + f)),
                *ReadFileToString(Env::Default(), tmp.Join(std::string(other) + "/" + f)))
          << other << ": " << f;
    }
  }
  auto v = VerifyRelease(Env::Default(), tmp.Join("rt3"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
}

// pack reads the tokenized documents in items of about 2^18 tokens on the pool's threads and hands
// them on in order, and bestfit keeps the items' buffers (not copies) in its window: with more
// than a few items, windows much smaller than the tokens, both strategies and any thread count
// (0: every CPU), every byte of the release is the same.
TEST(ReleaseTest, PackOfManyItemsAndWindowsIsTheSameAtAnyThreadCount) {
  TempDir tmp;
  grist::testing::SyntheticCorpusOptions co;
  co.documents = 12000;
  co.seed = 5;
  co.short_per_mille = co.exact_per_mille = co.near_per_mille = 0;
  const std::string in =
      grist::testing::WriteSyntheticCorpus(tmp.Join("many.jsonl"), co);
  const std::string model = tmp.Join("bpe.model");
  tokenize::TrainOptions to;
  to.model_type = "bpe";
  to.vocab_size = 600;
  to.input_sentence_size = 20000;
  ASSERT_TRUE(tokenize::TrainTokenizer(Env::Default(), {in}, model, to, false).ok());
  tokenize::EncodeStageOptions eo;
  eo.model_path = model;
  RunOptions run;
  run.progress = false;
  ASSERT_TRUE(tokenize::RunEncode(Env::Default(), {in}, tmp.Join("t"), eo, run).ok());
  for (const char* strategy : {"bestfit", "concat"}) {
    const std::string cfg = tmp.Join(absl::StrCat(strategy, ".toml"));
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), cfg,
                                absl::StrReplaceAll(Config(in, "", "127"),
                                                    {{"strategy = \"bestfit\"",
                                                      absl::StrCat("strategy = \"", strategy,
                                                                   "\"\nbestfit_window_tokens = "
                                                                   "40000")},
                                                     {"max_bytes = 60000", "max_bytes = 400000"}}))
                    .ok());
    std::vector<std::string> outs;
    for (int threads : {1, 3, 0}) {
      PackReleaseOptions po;
      po.config_path = cfg;
      po.tokens_dir = tmp.Join("t");
      po.model_path = model;
      po.output_dir = tmp.Join(absl::StrCat("r-", strategy, "-", threads));
      po.run.progress = false;
      po.run.threads = threads;
      auto r = PackRelease(Env::Default(), po);
      ASSERT_TRUE(r.ok()) << strategy << " " << threads << ": " << r.status();
      EXPECT_GT(r->stages.back().tokens, uint64_t{3} << 18) << "fewer than four read items";
      EXPECT_GT(r->stages.back().samples, 4u * 40000 / 128) << "fewer than four windows";
      outs.push_back(po.output_dir);
    }
    const std::vector<std::string> files = ReleaseFiles(outs[0]);
    for (size_t k = 1; k < outs.size(); ++k) {
      ASSERT_EQ(files, ReleaseFiles(outs[k])) << strategy << " " << outs[k];
      for (const std::string& f : files) {
        EXPECT_EQ(*ReadFileToString(Env::Default(), outs[0] + "/" + f),
                  *ReadFileToString(Env::Default(), outs[k] + "/" + f))
            << strategy << " " << outs[k] << ": " << f;
      }
    }
    auto v = VerifyRelease(Env::Default(), outs.back());
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok()) << v->problems.front();
  }
}

TEST(ReleaseTest, ResumesFromCompletedStages) {
  TempDir tmp;
  const std::string corpus = Corpus(tmp);
  std::string toml = Config(corpus);
  auto a = Build(tmp, toml, tmp.Join("r"), 2);
  ASSERT_TRUE(a.ok()) << a.status();
  // Interrupted during pack: the release is gone, the stage records stay.
  ASSERT_TRUE(Env::Default()->RemoveAll(tmp.Join("r")).ok());
  auto b = Build(tmp, toml, tmp.Join("r"), 2);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->stages[2].resumed);  // tokenizer
  EXPECT_TRUE(b->stages[3].resumed);  // tokenize
  EXPECT_EQ(a->release_id, b->release_id);
  // A different config starts over.
  auto c = Build(tmp, Config(corpus, "", "128"), tmp.Join("r"), 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->stages[3].resumed);
  EXPECT_NE(c->release_id, a->release_id);
}

TEST(ReleaseTest, FlippedByteIsNamedByVerify) {
  TempDir tmp;
  const std::string corpus = Corpus(tmp);
  ASSERT_TRUE(Build(tmp, Config(corpus), tmp.Join("v"), 2).ok());
  Env* env = Env::Default();
  std::string path = tmp.Join("v/shards/train-00001.bin");
  std::string bin = *ReadFileToString(env, path);
  bin[bin.size() / 2] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic(env, path, bin).ok());
  auto v = VerifyRelease(env, tmp.Join("v"));
  ASSERT_TRUE(v.ok());
  // The checksum mismatch, and possibly ids pushed outside the vocabulary: all about that file.
  ASSERT_GE(v->problems.size(), 1u);
  const size_t bin_problems = v->problems.size();
  for (const auto& p : v->problems) EXPECT_NE(p.find("train-00001.bin"), std::string::npos) << p;
  // The command line names it too and exits non-zero.
  std::string grist = std::string(GRIST_BINARY_DIR) + "/grist";
  if (env->FileExists(grist)) {
    std::string cmd = absl::StrCat(grist, " verify ", tmp.Join("v"), " > ", tmp.Join("o.txt"),
                                   " 2>&1");
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 3);  // bad data (README "Exit codes")
    EXPECT_NE(ReadFileToString(env, tmp.Join("o.txt"))->find("train-00001.bin"),
              std::string::npos);
  }
  // Truncating a shard is reported, not a crash.
  std::string idx = tmp.Join("v/shards/validation-00000.idx");
  std::string s = *ReadFileToString(env, idx);
  ASSERT_TRUE(WriteFileAtomic(env, idx, s.substr(0, s.size() - 8)).ok());
  v = VerifyRelease(env, tmp.Join("v"));
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), bin_problems + 1);
  EXPECT_NE(v->problems.back().find("validation-00000.idx"), std::string::npos)
      << v->problems.back();
  // A damaged Megatron document file too: the files are checked on any number of threads (0:
  // every CPU) and the report is the same, its problems in the release's order.
  std::string docs = tmp.Join("v/documents/train.bin");
  std::string d = *ReadFileToString(env, docs);
  d[d.size() / 3] ^= 0x11;
  ASSERT_TRUE(WriteFileAtomic(env, docs, d).ok());
  v = VerifyRelease(env, tmp.Join("v"), 1);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), bin_problems + 2);
  EXPECT_NE(v->problems.back().find("documents/train.bin"), std::string::npos)
      << v->problems.back();
  for (int threads : {2, 5, 0}) {
    auto t = VerifyRelease(env, tmp.Join("v"), threads);
    ASSERT_TRUE(t.ok()) << threads;
    EXPECT_EQ(t->problems, v->problems) << threads;
    EXPECT_EQ(t->files_checked, v->files_checked) << threads;
    EXPECT_EQ(t->bytes_checked, v->bytes_checked) << threads;
  }
  // A manifest whose shard escapes the folder is refused.
  std::string mpath = tmp.Join("v/manifest.json");
  std::string m = *ReadFileToString(env, mpath);
  ASSERT_TRUE(WriteFileAtomic(env, mpath,
                              absl::StrReplaceAll(m, {{"\"shards/train-00000", "\"../x/train-00000"}}))
                  .ok());
  auto bad = VerifyRelease(env, tmp.Join("v"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  // A folder without manifest is not a release.
  ASSERT_TRUE(env->RemoveFile(mpath).ok());
  EXPECT_EQ(VerifyRelease(env, tmp.Join("v")).status().code(), absl::StatusCode::kNotFound);
}

TEST(ReleaseTest, MegatronDocumentFilesHoldEveryDocumentOnce) {
  TempDir tmp;
  const std::string corpus = Corpus(tmp);
  Env* env = Env::Default();
  ASSERT_TRUE(Build(tmp, Config(corpus), tmp.Join("m"), 2).ok());
  auto rel = shard::Release::Open(env, tmp.Join("m"));
  ASSERT_TRUE(rel.ok()) << rel.status();
  const shard::Manifest& m = (*rel)->manifest();
  // Every tokenized document is one sequence of one split's file, in the order pack received it.
  auto parts = tokenize::ListTokenParts(env, tmp.Join("m.work/tokens"));
  ASSERT_TRUE(parts.ok());
  std::multiset<std::vector<int32_t>> encoded, released;
  for (const std::string& part : *parts) {
    auto r = shard::IndexedDatasetReader::Open(env, part);
    ASSERT_TRUE(r.ok());
    for (uint64_t i = 0; i < (*r)->sequences(); ++i) {
      std::vector<int32_t> d;
      (*r)->Read(i, &d);
      encoded.insert(d);
    }
  }
  ASSERT_FALSE(encoded.empty());
  for (const char* split : {"train", "validation"}) {
    const shard::SplitInfo* s = m.split(split);
    ASSERT_TRUE(s->documents_file.has_value()) << split;
    const shard::DocumentsFileInfo& d = *s->documents_file;
    EXPECT_GT(s->documents, 0u) << split;  // both splits hold documents: the property is not vacuous
    EXPECT_EQ(d.name, absl::StrCat("documents/", split));
    EXPECT_EQ(d.sequences, s->documents);
    EXPECT_EQ(d.eod_appended, 0u);  // add_eos: every document already ends in EOS
    EXPECT_EQ(d.tokens, s->tokens - s->padding_tokens);
    auto r = shard::IndexedDatasetReader::Open(env, tmp.Join("m/" + d.name));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->sequences(), d.sequences);
    EXPECT_EQ((*r)->tokens(), d.tokens);
    for (uint64_t i = 0; i < (*r)->sequences(); ++i) {
      std::vector<int32_t> doc;
      (*r)->Read(i, &doc);
      ASSERT_FALSE(doc.empty());
      EXPECT_EQ(doc.back(), m.tokenizer.eos_id);
      released.insert(doc);
    }
  }
  EXPECT_EQ(encoded, released);
  // The Megatron arguments name the files with absolute paths.
  auto args = MegatronArguments(env, tmp.Join("m"));
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_NE(args->find(absl::StrCat("--data-path ", tmp.Join("m/documents/train"), " --split 100,0,0\n")),
            std::string::npos) << *args;
  EXPECT_NE(args->find(absl::StrCat("--valid-data-path ", tmp.Join("m/documents/validation"))),
            std::string::npos) << *args;
  EXPECT_NE(args->find("--seq-length 256 --tokenizer-type GPTSentencePieceTokenizer"),
            std::string::npos) << *args;
  // verify: a flipped byte of a document file, a truncated index, a missing file are named.
  auto v = VerifyRelease(env, tmp.Join("m"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << v->problems.front();
  const std::string bin = tmp.Join("m/documents/train.bin");
  std::string b = *ReadFileToString(env, bin);
  b[b.size() / 3] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomic(env, bin, b).ok());
  v = VerifyRelease(env, tmp.Join("m"));
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), 1u);
  EXPECT_NE(v->problems[0].find("documents/train.bin: XXH3-128"), std::string::npos)
      << v->problems[0];
  const std::string idx = tmp.Join("m/documents/validation.idx");
  std::string x = *ReadFileToString(env, idx);
  ASSERT_TRUE(WriteFileAtomic(env, idx, x.substr(0, x.size() - 8)).ok());
  v = VerifyRelease(env, tmp.Join("m"));
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), 2u);
  EXPECT_NE(v->problems[1].find("documents/validation.idx"), std::string::npos) << v->problems[1];
  ASSERT_TRUE(env->RemoveFile(bin).ok());
  v = VerifyRelease(env, tmp.Join("m"));
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), 2u);
  EXPECT_NE(v->problems[0].find("documents/train.bin"), std::string::npos) << v->problems[0];
}

TEST(ReleaseTest, InspectSummarizesAndDecodes) {
  TempDir tmp;
  const std::string corpus = Corpus(tmp);
  ASSERT_TRUE(Build(tmp, Config(corpus), tmp.Join("i"), 2).ok());
  InspectOptions o;
  o.sample = 0;
  auto text = InspectRelease(Env::Default(), tmp.Join("i"), o);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("release 1.0"), std::string::npos);
  EXPECT_NE(text->find("document-segment lengths"), std::string::npos);
  EXPECT_NE(text->find("--- segment of"), std::string::npos);
  o.sample = 1 << 30;
  EXPECT_EQ(InspectRelease(Env::Default(), tmp.Join("i"), o).status().code(),
            absl::StatusCode::kOutOfRange);
}

// A build given a model (tokenizer.model: its encoder's tables built while clean and dedup run, the
// model loaded once for tokenize and pack) writes the shards and documents that training that
// model in the build wrote, with grist's encoder or SentencePiece's, at any thread count.
TEST(ReleaseTest, AGivenModelBuildsWhatTrainingItBuilt) {
  TempDir tmp;
  const std::string corpus = Corpus(tmp, 11);
  auto trained = Build(tmp, Config(corpus), tmp.Join("trained"), 2);
  ASSERT_TRUE(trained.ok()) << trained.status();
  const std::string model = tmp.Join("given.model");
  auto bytes = ReadFileToString(Env::Default(), tmp.Join("trained/tokenizer.model"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), model, *bytes).ok());
  const std::string given = absl::StrReplaceAll(
      Config(corpus), {{"vocab_size = 600\ninput_sentence_size = 20000",
                        absl::StrCat("model = \"", model, "\"")}});
  ASSERT_NE(given, Config(corpus));
  struct Run {
    std::string name, toml;
    int threads;
  };
  for (const Run& r : {Run{"given1", given, 1}, Run{"given3", given, 3},
                       Run{"given-spm", given + "[tokenize]\nengine = \"sentencepiece\"\n", 3}}) {
    auto b = Build(tmp, r.toml, tmp.Join(r.name), r.threads);
    ASSERT_TRUE(b.ok()) << r.name << ": " << b.status();
    ASSERT_EQ(b->stages.size(), 5u);
    EXPECT_EQ(b->stages[2].note, "pretrained") << r.name;
    // The given BPE model is encoded by grist's own encoder unless SentencePiece is asked for.
    EXPECT_EQ(b->stages[3].name, "tokenize");
    if (r.name == "given-spm") {
      EXPECT_EQ(b->stages[3].note, "SentencePiece: requested") << r.name;
    } else {
      EXPECT_EQ(b->stages[3].note.rfind("grist encoder", 0), 0u)
          << r.name << ": " << b->stages[3].note;
    }
    auto files = ReleaseFiles(tmp.Join("trained"));
    ASSERT_EQ(files, ReleaseFiles(tmp.Join(r.name))) << r.name;
    for (const auto& f : files) {
      if (f == "manifest.json") continue;  // names the config, which differs
      EXPECT_EQ(*ReadFileToString(Env::Default(), tmp.Join("trained/" + f)),
                *ReadFileToString(Env::Default(), tmp.Join(r.name + "/" + f)))
          << r.name << ": " << f;
    }
  }
}

// The stage records' output hashes and the manifest's input hashes, made on several threads, are
// those of one thread: each file's size and XXH3-128, in path (resp. input) order.
// The stage records' checksum (stage_record.h), computed here from its definition: XXH3-128 of
// the pieces' XXH3-128 digests in canonical (big-endian) bytes.
std::string PiecesChecksumOf(std::string_view bytes) {
  std::string digests;
  for (size_t off = 0; off < bytes.size(); off += internal::kChecksumPieceBytes) {
    const Hash128 d = Hash128Of(bytes.substr(off, internal::kChecksumPieceBytes));
    for (uint64_t half : {d.high, d.low}) {
      for (int b = 7; b >= 0; --b) digests.push_back(static_cast<char>(half >> (8 * b)));
    }
  }
  return Hash128Of(digests).ToHex();
}

// A file of several pieces (the last one short) and an empty one: the same checksums from the
// definition and for every thread count, which hash the pieces of one file at once.
TEST(ReleaseTest, StageOutputsHashLargeFilesInPieces) {
  TempDir tmp;
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDirs(tmp.Join("w/out")).ok());
  std::string big(2 * internal::kChecksumPieceBytes + 12345, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : big) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  ASSERT_TRUE(WriteFileAtomic(env, tmp.Join("w/out/big"), big).ok());
  ASSERT_TRUE(WriteFileAtomic(env, tmp.Join("w/out/empty"), "").ok());
  const std::string want_big = PiecesChecksumOf(big);
  EXPECT_NE(want_big, HashFile128(env, tmp.Join("w/out/big"))->ToHex());  // not the whole file's
  for (int threads : {1, 2, 3, 8}) {
    auto o = internal::StageOutputs(env, tmp.Join("w"), "out", threads);
    ASSERT_TRUE(o.ok()) << o.status();
    ASSERT_EQ(o->size(), 2u);
    EXPECT_EQ((*o)[0].path, "out/big");
    EXPECT_EQ((*o)[0].bytes, big.size());
    EXPECT_EQ((*o)[0].xxh3_128_pieces, want_big) << threads;
    EXPECT_EQ((*o)[1].bytes, 0u);
    EXPECT_EQ((*o)[1].xxh3_128_pieces, PiecesChecksumOf("")) << threads;
  }
}

TEST(ReleaseTest, OutputAndInputHashesDoNotDependOnTheThreads) {
  TempDir tmp;
  Env* env = Env::Default();
  std::vector<std::string> paths;
  for (int i = 0; i < 9; ++i) {
    const std::string p = tmp.Join(absl::StrCat("w/out/", i % 3 == 0 ? "sub/" : "", "f", i));
    ASSERT_TRUE(env->CreateDirs(p.substr(0, p.rfind('/'))).ok());
    const std::string bytes(1000 * i + 1, static_cast<char>('a' + i));
    ASSERT_TRUE(WriteFileAtomic(env, p, bytes).ok());
    paths.push_back(p);
  }
  auto one = internal::StageOutputs(env, tmp.Join("w"), "out", 1);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 9u);
  EXPECT_EQ((*one)[0].path, "out/f1");  // path order: f1, f2, f4, f5, f7, f8, sub/...
  EXPECT_EQ((*one)[8].path, "out/sub/f6");
  EXPECT_EQ((*one)[8].bytes, 6001u);
  EXPECT_EQ((*one)[8].xxh3_128_pieces, PiecesChecksumOf(std::string(6001, 'g')));
  for (int threads : {0, 2, 4, 16}) {
    auto many = internal::StageOutputs(env, tmp.Join("w"), "out", threads);
    ASSERT_TRUE(many.ok()) << many.status();
    EXPECT_EQ(*many, *one) << threads;
  }
  auto files = ListInputs(env, {paths[4], paths[1], tmp.Join("w/out/sub")});
  ASSERT_TRUE(files.ok()) << files.status();
  auto serial = internal::HashInputs(env, *files, 1);
  ASSERT_TRUE(serial.ok()) << serial.status();
  ASSERT_EQ(serial->size(), 5u);
  EXPECT_EQ((*serial)[0].path, paths[4]);
  EXPECT_EQ((*serial)[0].xxh3_128, *HashFile128(env, paths[4]));
  for (int threads : {0, 3}) {
    auto par = internal::HashInputs(env, *files, threads);
    ASSERT_TRUE(par.ok()) << par.status();
    ASSERT_EQ(par->size(), serial->size());
    for (size_t i = 0; i < par->size(); ++i) {
      EXPECT_EQ((*par)[i].path, (*serial)[i].path);
      EXPECT_EQ((*par)[i].bytes, (*serial)[i].bytes);
      EXPECT_EQ((*par)[i].xxh3_128, (*serial)[i].xxh3_128);
    }
  }
  // A file that goes away is an error naming it, whatever the threads.
  ASSERT_TRUE(env->RemoveFile(paths[3]).ok());
  for (int threads : {1, 4}) {
    auto gone = internal::HashInputs(env, *files, threads);
    ASSERT_FALSE(gone.ok()) << threads;
    EXPECT_NE(std::string(gone.status().message()).find("f3"), std::string::npos) << gone.status();
  }
}

TEST(ReleaseTest, AnOutputInsideAnInputFolderIsRefused) {
  // A later build would list the release and the work folder's parts among its inputs.
  TempDir tmp;
  const std::string corpus = tmp.Join("corpus");
  ASSERT_TRUE(Env::Default()->CreateDirs(corpus).ok());
  grist::testing::SyntheticCorpusOptions o;
  grist::testing::WriteSyntheticCorpus(JoinPath(corpus, "a.jsonl"), o);
  ASSERT_EQ(::symlink(corpus.c_str(), tmp.Join("link").c_str()), 0);
  for (const std::string& out : {JoinPath(corpus, "out"), JoinPath(corpus, "sub/../sub/out"),
                                 tmp.Join("link/out"), corpus}) {
    SCOPED_TRACE(out);
    for (const std::string& input : {corpus, corpus + "/"}) {
      auto r = Build(tmp, Config(input), out, 2);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      const std::string want = absl::StrCat("--output ", out, " lies inside the input folder ",
                                            input, " (inputs.paths): a later run would read");
      EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status();
    }
  }
  ASSERT_EQ(Env::Default()->ListDir(corpus)->size(), 1u) << "nothing written beside the input";
  // Beside the folder (a name it begins with, too) is fine.
  auto r = Build(tmp, Config(corpus), corpus + "-release", 2);
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(ReleaseTest, ABuildOfAnOutputAnotherHoldsIsRefusedBeforeWritingAnything) {
  TempDir tmp;
  const std::string toml = Config(Corpus(tmp));
  const std::string out = tmp.Join("rel");
  // Another build's lock (what a running `grist build` or `grist pack` of `out` holds).
  const int fd = ::open((out + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  auto r = Build(tmp, toml, out, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("another grist build or pack is writing ", out, " (it holds ", out,
                         ".lock); wait for it to end, or stop it"));
  EXPECT_FALSE(Env::Default()->FileExists(out));
  EXPECT_FALSE(Env::Default()->FileExists(out + ".work"));
  // Once it ends, the build runs (and leaves the lock file, free, for the next one).
  ::close(fd);
  r = Build(tmp, toml, out, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  const int again = ::open((out + ".lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(again, 0);
  EXPECT_EQ(::flock(again, LOCK_EX | LOCK_NB), 0);
  ::close(again);
}

TEST(ReleaseTest, BadConfigsNameTheKey) {
  TempDir tmp;
  std::string corpus = tmp.path();
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("d.jsonl"), "{\"text\":\"hello world\"}\n").ok());
  auto base = [&](const std::string& body) {
    return absl::StrCat("seed = 1\n[release]\nversion = \"1.0\"\n[inputs]\npaths = [\"",
                        tmp.Join("d.jsonl"), "\"]\n", body);
  };
  struct Case {
    std::string toml, key;
  };
  std::vector<Case> cases = {
      {base("[tokenizer]\nvocab_size = 100\n[pack]\nseq_len = 0\n"), "pack.seq_len"},
      {base("[tokenizer]\nvocab_size = 100\n[pack]\nseq_len = -3\n"), "pack.seq_len"},
      {base("[tokenizer]\nvocab_size = 100\n"), "pack.seq_len"},
      {base("[pack]\nseq_len = 8\n"), "tokenizer.vocab_size"},
      {base("[tokenizer]\nvocab_size = \"big\"\n[pack]\nseq_len = 8\n"), "tokenizer.vocab_size"},
      {base("[tokenizer]\nvocab_size = 100\n[pack]\nseq_len = 8\nstrategy = \"x\"\n"),
       "pack.strategy"},
      {base("[tokenizer]\nvocab_size = 100\nvocab_sise = 3\n[pack]\nseq_len = 8\n"),
       "tokenizer.vocab_sise"},
      {"[release]\nversion = \"1.0\"\n", "seed"},
  };
  for (const Case& c : cases) {
    auto r = Build(tmp, c.toml, tmp.Join("out"), 1);
    EXPECT_FALSE(r.ok()) << c.key;
    EXPECT_NE(std::string(r.status().message()).find(c.key), std::string::npos)
        << c.key << ": " << r.status();
  }
  // A tokenizer model that fails to load.
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("bad.model"), "garbage").ok());
  auto r = Build(tmp, base(absl::StrCat("[tokenizer]\nmodel = \"", tmp.Join("bad.model"),
                                        "\"\n[pack]\nseq_len = 8\n")),
                 tmp.Join("out2"), 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("bad.model"), std::string::npos);
  // Loaded while clean runs: clean's outputs may be there, but nothing is recorded or published.
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("out2.work/stages/clean.json")));
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("out2")));
}

}  // namespace
}  // namespace grist::release
