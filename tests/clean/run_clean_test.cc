// RunClean end to end: bad input of every kind, file-error policies, determinism across thread
// counts, task slices, document conservation, and the shared corpus when present.
#include <gtest/gtest.h>
#include <zlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clean/run_clean.h"
#include "common/env.h"
#include "common/records.h"
#include "tests/compress_util.h"
#include "tests/test_util.h"

namespace grist::clean {
namespace {

using ::grist::testing::Gzip;
using ::grist::testing::Zstd;

using testing::TempDir;

void Write(const std::string& path, const std::string& data) {
  ASSERT_TRUE(Env::Default()->CreateDirs(DirName(path)).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, data).ok());
}

// Reads back every record of the parts in `dir` (sorted), as raw JSON lines.
std::vector<std::string> ReadParts(const std::string& dir) {
  std::vector<std::string> lines;
  auto names = Env::Default()->ListDir(dir);
  if (!names.ok()) return lines;
  for (const auto& n : *names) {
    if (n.size() < 10 || n.substr(n.size() - 10) != ".jsonl.zst") continue;
    auto data = ReadFileToString(Env::Default(), JoinPath(dir, n));
    EXPECT_TRUE(data.ok());
    std::string raw;
    ZSTD_DCtx* d = ZSTD_createDCtx();
    ZSTD_inBuffer in{data->data(), data->size(), 0};
    std::string buf(1 << 16, '\0');
    while (in.pos < in.size) {
      ZSTD_outBuffer out{buf.data(), buf.size(), 0};
      size_t r = ZSTD_decompressStream(d, &out, &in);
      EXPECT_FALSE(ZSTD_isError(r));
      if (ZSTD_isError(r)) break;
      raw.append(buf.data(), out.pos);
    }
    ZSTD_freeDCtx(d);
    size_t pos = 0;
    while (pos < raw.size()) {
      size_t e = raw.find('\n', pos);
      lines.push_back(raw.substr(pos, e - pos));
      pos = e + 1;
    }
  }
  return lines;
}

// n distinct words of 5 letters, different for each tag.
std::string Words(int n, char tag) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += 'w';
    s += tag;
    s += static_cast<char>('a' + (i / 676) % 26);
    s += static_cast<char>('a' + (i / 26) % 26);
    s += static_cast<char>('a' + i % 26);
  }
  return s;
}

// A document every default filter keeps: 6 varied sentences, one per line.
std::string GoodText(int i) {
  std::string s;
  for (int k = 0; k < 6; ++k) {
    s += "The " + Words(12, static_cast<char>('c' + k)) + " of the town " + std::to_string(i) +
         ".\n";
  }
  return s;
}

std::string JsonLine(const std::string& text) {
  std::string s = "{\"id\":1,\"text\":\"";
  for (char c : text) {
    if (c == '\n') s += "\\n"; else if (c == '"') s += "\\\""; else s += c;
  }
  return s + "\"}\n";
}

RunOptions Quiet(int threads = 1) {
  RunOptions r;
  r.threads = threads;
  r.progress = false;
  return r;
}

TEST(RunCleanTest, BadRecordsAreRejectedWithFileAndLine) {
  TempDir t;
  std::string in = t.Join("in.jsonl");
  Write(in, JsonLine(GoodText(1)) + "{\"text\": \"unterminated\n" + "{\"id\": 7}\n" +
                "{\"text\": 5}\n" + "{\"text\": \"caf\xFF\"}\n" + "\n" + JsonLine("short"));
  auto r = RunClean(Env::Default(), {in}, t.Join("out"), CleanOptions(), Quiet());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counts.docs_in, 6u);
  EXPECT_EQ(r->counts.docs_out, 1u);
  EXPECT_EQ(r->counts.docs_rejected, 5u);
  EXPECT_EQ(r->bad_records, 3u);
  EXPECT_EQ(r->normalize.invalid_utf8_sequences, 1u);
  EXPECT_EQ(r->reasons.at("bad_record"), 3u);
  std::vector<std::string> rejects = ReadParts(t.Join("out/rejects"));
  ASSERT_EQ(rejects.size(), 5u);
  EXPECT_NE(rejects[0].find("\"error\":\"" + in + ":2: malformed JSON"), std::string::npos)
      << rejects[0];
  EXPECT_NE(rejects[1].find("\"error\":\"" + in + ":3: missing text field 'text'\""),
            std::string::npos)
      << rejects[1];
  EXPECT_NE(rejects[2].find("\"error\":\"" + in + ":4: text field 'text' is not a string\""),
            std::string::npos)
      << rejects[2];
  EXPECT_NE(rejects[3].find("\"line\":5"), std::string::npos) << rejects[3];
  EXPECT_NE(rejects[4].find("\"line\":7"), std::string::npos) << rejects[4];
  std::vector<std::string> kept = ReadParts(t.Join("out"));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_NE(kept[0].find("\"line\":1"), std::string::npos);
}

TEST(RunCleanTest, InvalidUtf8RejectPolicy) {
  TempDir t;
  std::string in = t.Join("in.jsonl");
  Write(in, JsonLine(GoodText(1) + "caf\xFF"));
  CleanOptions o;
  o.utf8 = Utf8Policy::kReject;
  auto r = RunClean(Env::Default(), {in}, t.Join("out"), o, Quiet());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counts.docs_rejected, 1u);
  EXPECT_EQ(r->reasons.at("invalid_utf8"), 1u);
  EXPECT_EQ(r->filter_rejected[0], 1u);
}

TEST(RunCleanTest, TruncatedCompressedFilesStopOrSkip) {
  for (const char* ext : {"gz", "zst"}) {
    TempDir t;
    std::string body;
    for (int i = 0; i < 200; ++i) body += JsonLine(GoodText(i));
    std::string data = std::string(ext) == "gz" ? Gzip(body) : Zstd(body);
    std::string bad = t.Join(std::string("bad.jsonl.") + ext);
    Write(bad, data.substr(0, data.size() / 2));
    std::string good = t.Join("good.jsonl");
    Write(good, JsonLine(GoodText(1000)));

    auto stop = RunClean(Env::Default(), {bad, good}, t.Join("out"), CleanOptions(), Quiet());
    ASSERT_FALSE(stop.ok()) << ext;
    std::string msg(stop.status().message());
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("after line"), std::string::npos) << msg;

    CleanOptions skip;
    skip.on_file_error = FileErrorPolicy::kSkip;
    auto r = RunClean(Env::Default(), {bad, good}, t.Join("out2"), skip, Quiet());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->file_errors.size(), 1u);
    EXPECT_EQ(r->file_errors[0].file, bad);
    EXPECT_LT(r->file_errors[0].last_good_line, 200u);
    // Every record read before the damage, and the good file, are accounted for.
    EXPECT_EQ(r->counts.docs_in, r->file_errors[0].last_good_line + 1);
    EXPECT_TRUE(r->counts.Balanced());
    EXPECT_EQ(ReadParts(t.Join("out2")).size(), r->counts.docs_out);
  }
}

TEST(RunCleanTest, EmptyGarbageAndMissingInputs) {
  TempDir t;
  Write(t.Join("empty.txt"), "");
  Write(t.Join("empty.jsonl"), "");
  std::string garbage;
  for (int i = 0x80; i <= 0xFF; ++i) garbage.push_back(static_cast<char>(i));
  Write(t.Join("garbage.txt"), garbage);
  Write(t.Join("garbage.jsonl"), garbage + "\n" + garbage + "\n");
  auto r = RunClean(Env::Default(),
                    {t.Join("empty.txt"), t.Join("empty.jsonl"), t.Join("garbage.txt"),
                     t.Join("garbage.jsonl")},
                    t.Join("out"), CleanOptions(), Quiet());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counts.docs_in, 4u);  // empty.txt, garbage.txt, 2 garbage lines
  EXPECT_EQ(r->counts.docs_rejected, 4u);
  EXPECT_EQ(r->bad_records, 3u);   // empty file + 2 malformed lines
  EXPECT_EQ(r->normalize.invalid_utf8_sequences, 128u + 256u);  // 128 in garbage.txt, 128 per line
  std::vector<std::string> rejects = ReadParts(t.Join("out/rejects"));
  ASSERT_EQ(rejects.size(), 4u);
  EXPECT_NE(rejects[0].find(t.Join("empty.txt") + ":1: empty file"), std::string::npos);

  auto missing = RunClean(Env::Default(), {t.Join("nope.jsonl")}, t.Join("out2"), CleanOptions(),
                          Quiet());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find(t.Join("nope.jsonl")), std::string::npos);
}

// The POSIX Env, except that opening `denied` for reading fails as an unreadable file does (this
// works when the tests run as root, for whom permission bits do not apply).
class DenyEnv : public grist::testing::ForwardingEnv {
 public:
  explicit DenyEnv(std::string denied) : denied_(std::move(denied)) {}
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& p) override {
    if (p == denied_) return absl::PermissionDeniedError(p + ": Permission denied");
    return ForwardingEnv::NewSequentialFile(p);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& p) override {
    if (p == denied_) return absl::PermissionDeniedError(p + ": Permission denied");
    return ForwardingEnv::NewRandomAccessFile(p);
  }

 private:
  std::string denied_;
};

TEST(RunCleanTest, UnreadableFileFollowsPolicy) {
  TempDir t;
  std::string f = t.Join("secret.jsonl");
  std::string ok = t.Join("ok.jsonl");
  Write(f, JsonLine(GoodText(1)));
  Write(ok, JsonLine(GoodText(2)));
  DenyEnv env(f);
  auto stop = RunClean(&env, {f, ok}, t.Join("out"), CleanOptions(), Quiet());
  ASSERT_FALSE(stop.ok());
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(std::string(stop.status().message()), "clean: " + f + ": Permission denied");
  CleanOptions skip;
  skip.on_file_error = FileErrorPolicy::kSkip;
  auto r = RunClean(&env, {f, ok}, t.Join("out2"), skip, Quiet());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->file_errors.size(), 1u);
  EXPECT_EQ(r->file_errors[0].file, f);
  EXPECT_EQ(r->file_errors[0].last_good_line, 0u);
  EXPECT_EQ(r->file_errors[0].error, f + ": Permission denied");
  EXPECT_EQ(r->counts.docs_in, 1u);
  EXPECT_EQ(r->counts.docs_out, 1u);
}

TEST(RunCleanTest, HundredMegabyteSingleLineDocument) {
  TempDir t;
  {  // written without fsync: syncing 100 MB dominates the test's time on slow disks
    std::FILE* f = std::fopen(t.Join("big.jsonl").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::string chunk(1u << 20, 'a');
    std::fputs("{\"text\":\"", f);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(std::fwrite(chunk.data(), 1, chunk.size(), f), chunk.size());
    std::fputs("\"}\n", f);
    ASSERT_EQ(std::fclose(f), 0);
  }
  auto r = RunClean(Env::Default(), {t.Join("big.jsonl")}, t.Join("out"), CleanOptions(), Quiet());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counts.docs_in, 1u);
  EXPECT_EQ(r->counts.docs_rejected, 1u);
  EXPECT_EQ(r->reasons.at("too_long"), 1u);
  EXPECT_EQ(r->counts.bytes_in, 100u << 20);
}

std::string MakeCorpus(const TempDir& t) {
  std::string dir = t.Join("corpus");
  std::string a, b;
  for (int i = 0; i < 300; ++i) {
    std::string text = (i % 7 == 0) ? "too short" : GoodText(i);
    if (i % 11 == 0) text += "\nthis line is repeated\nthis line is repeated\nthis line is repeated";
    (i % 2 ? a : b) += JsonLine(text);
  }
  Write(dir + "/a.jsonl", a);
  Write(dir + "/b.jsonl.zst", Zstd(b));
  Write(dir + "/c.jsonl.gz", Gzip(a));
  Write(dir + "/sub/d.txt", GoodText(5000));
  return dir;
}

TEST(RunCleanTest, ByteIdenticalForAnyThreadCountAndSplitSize) {
  TempDir t;
  std::string corpus = MakeCorpus(t);
  CleanOptions o;
  o.split_bytes = 4096;  // many splits of the uncompressed JSONL
  o.output.part_bytes = 64 << 10;
  auto one = RunClean(Env::Default(), {corpus}, t.Join("one"), o, Quiet(1));
  auto four = RunClean(Env::Default(), {corpus}, t.Join("four"), o, Quiet(4));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(one->counts.docs_in, 451u);
  EXPECT_GT(one->kept_parts.size(), 1u);
  ASSERT_EQ(one->kept_parts.size(), four->kept_parts.size());
  for (size_t i = 0; i < one->kept_parts.size(); ++i) {
    EXPECT_EQ(*ReadFileToString(Env::Default(), one->kept_parts[i].path),
              *ReadFileToString(Env::Default(), four->kept_parts[i].path));
  }
  EXPECT_EQ(ReadParts(t.Join("one/rejects")), ReadParts(t.Join("four/rejects")));
  EXPECT_EQ(one->reasons, four->reasons);
}

// One split, so every thread but its owner finds nothing to start and cleans the split's last
// documents (common/shared_work.h): kept and rejected records (bad records among them), reasons
// and counts as one thread's.
TEST(RunCleanTest, IdleThreadsHelpingWithTheLastSplitChangeNoByte) {
  TempDir t;
  std::string lines;
  for (int i = 0; i < 451; ++i) {
    if (i % 13 == 5) {
      lines += "{\"text\": \"not closed\n";
    } else {
      std::string text = (i % 7 == 0) ? "too short" : GoodText(i);
      if (i % 17 == 3) text += " caf\xe9";  // invalid UTF-8, replaced by the reader
      lines += JsonLine(text);
    }
  }
  const std::string corpus = t.Join("one.jsonl");
  Write(corpus, lines);
  CleanOptions o;
  o.split_bytes = 64 << 20;
  auto one = RunClean(Env::Default(), {corpus}, t.Join("one"), o, Quiet(1));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->counts.docs_in, 451u);
  EXPECT_GT(one->counts.docs_rejected, 0u);
  EXPECT_EQ(one->bad_records, 35u);
  EXPECT_GT(one->normalize.invalid_utf8_sequences, 0u);
  for (int threads : {4, 8}) {
    const std::string dir = t.Join(absl::StrCat("t", threads));
    auto many = RunClean(Env::Default(), {corpus}, dir, o, Quiet(threads));
    ASSERT_TRUE(many.ok()) << many.status();
    ASSERT_EQ(one->kept_parts.size(), many->kept_parts.size());
    for (size_t i = 0; i < one->kept_parts.size(); ++i) {
      EXPECT_EQ(*ReadFileToString(Env::Default(), one->kept_parts[i].path),
                *ReadFileToString(Env::Default(), many->kept_parts[i].path));
    }
    EXPECT_EQ(ReadParts(t.Join("one/rejects")), ReadParts(dir + "/rejects"));
    EXPECT_EQ(one->reasons, many->reasons);
    EXPECT_EQ(one->counts.docs_out, many->counts.docs_out);
    EXPECT_EQ(one->bad_records, many->bad_records);
    EXPECT_EQ(one->normalize.invalid_utf8_sequences, many->normalize.invalid_utf8_sequences);
  }
}

TEST(RunCleanTest, ConservationAndTaskSlices) {
  TempDir t;
  std::string corpus = MakeCorpus(t);
  CleanOptions o;
  o.split_bytes = 4096;
  auto all = RunClean(Env::Default(), {corpus}, t.Join("all"), o, Quiet(2));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->counts.Balanced());
  EXPECT_EQ(ReadParts(t.Join("all")).size(), all->counts.docs_out);
  EXPECT_EQ(ReadParts(t.Join("all/rejects")).size(), all->counts.docs_rejected);
  EXPECT_GT(all->counts.docs_out, 0u);
  EXPECT_GT(all->counts.docs_rejected, 0u);
  uint64_t in = 0, out = 0;
  for (int task = 0; task < 3; ++task) {
    RunOptions run = Quiet(2);
    run.task = task;
    run.tasks = 3;
    auto r = RunClean(Env::Default(), {corpus}, t.Join("tasks"), o, run);
    ASSERT_TRUE(r.ok()) << r.status();
    in += r->counts.docs_in;
    out += r->counts.docs_out;
    EXPECT_TRUE(Env::Default()->FileExists(
        t.Join("tasks/clean-report-0000" + std::to_string(task) + "-of-00003.json")));
  }
  EXPECT_EQ(in, all->counts.docs_in);
  EXPECT_EQ(out, all->counts.docs_out);
  EXPECT_EQ(ReadParts(t.Join("tasks")), ReadParts(t.Join("all")));  // same records, same order
  RunOptions bad = Quiet();
  bad.task = 3;
  bad.tasks = 3;
  EXPECT_FALSE(RunClean(Env::Default(), {corpus}, t.Join("x"), o, bad).ok());
}

void ExpectSane(const CleanReport& r) {
  EXPECT_TRUE(r.counts.Balanced());
  EXPECT_EQ(r.counts.docs_in, r.counts.docs_out + r.counts.docs_rejected);
  EXPECT_TRUE(r.file_errors.empty());
}

TEST(RunCleanCorpusTest, WikinewsEn) {
  GRIST_REQUIRE_CORPUS(dir, "wikinews-en");
  TempDir t;
  auto r = RunClean(Env::Default(), {dir}, t.Join("out"), CleanOptions(), Quiet(2));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r);
  EXPECT_EQ(r->counts.docs_in, 39409u);
  EXPECT_EQ(r->reasons.at("too_short"), 19941u);  // the redirects have empty text
  EXPECT_GT(r->counts.docs_out, 15000u);
  EXPECT_EQ(r->bad_records, 0u);
}

TEST(RunCleanCorpusTest, WebSamples) {
  GRIST_REQUIRE_CORPUS(dir, "web-samples");
  TempDir t;
  auto r = RunClean(Env::Default(), {dir}, t.Join("out"), CleanOptions(), Quiet(2));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r);
  EXPECT_GT(r->counts.docs_in, 1500u);
  EXPECT_GT(r->counts.docs_rejected, 0u);
  EXPECT_GT(r->counts.docs_out, 0u);
}

TEST(RunCleanCorpusTest, TwentyNewsgroupsPosts) {
  GRIST_REQUIRE_CORPUS(tar, "20newsgroups.tar.zst");
  TempDir t;
  std::string cmd = "tar --zstd -xf '" + tar + "' -C '" + t.path() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto r = RunClean(Env::Default(), {t.Join("20newsgroups")}, t.Join("out"), CleanOptions(),
                    Quiet(2));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r);
  EXPECT_EQ(r->counts.docs_in, 18846u);
  EXPECT_GT(r->normalize.invalid_utf8_sequences, 0u);  // 73 posts are Latin-1
  EXPECT_GT(r->counts.docs_out, 0u);
}

}  // namespace
}  // namespace grist::clean
