// Tests of the record readers (common/records.h): input listing, split planning and reading.
#include "common/records.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/documents_format.h"
#include "common/env.h"
#include "common/internal/byte_sources.h"
#include "common/thread_pool.h"
#include "common/utf8.h"
#include "tests/common/records_test_util.h"
#include "tests/compress_util.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::grist::testing::Gzip;
using ::grist::testing::ReadAll;
using ::grist::testing::Zstd;

using ::grist::testing::TempDir;

void Write(const std::string& path, const std::string& data) {
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, data).ok());
}

TEST(RecordsTest, JsonlTextMetadataAndProvenance) {
  TempDir t;
  std::string p = t.Join("a.jsonl");
  Write(p, "{\"id\": 7, \"text\": \"hello\\nworld\", \"url\": \"http://x\", \"tags\": [1, 2]}\n"
           "\n"
           "{\"text\": \"second\"}\r\n"
           "{\"text\": \"no newline\"}");
  auto r = ReadAll(p);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 3u);
  EXPECT_EQ(r.docs[0].text, "hello\nworld");
  EXPECT_EQ(r.docs[0].metadata, "{\"id\":7,\"url\":\"http://x\",\"tags\":[1,2]}");
  EXPECT_EQ(r.docs[0].line, 1u);
  EXPECT_EQ(r.docs[0].id(), p + ":1");
  EXPECT_TRUE(r.docs[0].error.empty());
  EXPECT_EQ(r.docs[1].text, "second");
  EXPECT_EQ(r.docs[1].line, 3u);
  EXPECT_EQ(r.docs[1].metadata, "{}");
  EXPECT_EQ(r.docs[2].text, "no newline");
  EXPECT_EQ(r.docs[2].line, 4u);
}

TEST(RecordsTest, BadRecordsAreReportedNotDropped) {
  TempDir t;
  std::string p = t.Join("bad.jsonl");
  Write(p, "{\"text\": \"ok\"}\n"
           "{\"text\": \"unterminated}\n"
           "{\"body\": \"no text field\"}\n"
           "{\"text\": null}\n"
           "[1, 2]\n"
           "{\"text\": \"bad \xff\xfe utf8\"}\n");
  auto r = ReadAll(p);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 6u);
  EXPECT_TRUE(r.docs[0].error.empty());
  EXPECT_EQ(r.docs[1].error.rfind(p + ":2: malformed JSON", 0), 0u) << r.docs[1].error;
  EXPECT_EQ(r.docs[1].text, "{\"text\": \"unterminated}");
  EXPECT_EQ(r.docs[2].error, p + ":3: missing text field 'text'");
  EXPECT_EQ(r.docs[3].error, p + ":4: text field 'text' is not a string");
  EXPECT_EQ(r.docs[4].error, p + ":5: malformed JSON: the line is not a JSON object");
  EXPECT_TRUE(r.docs[5].error.empty());
  EXPECT_EQ(r.docs[5].invalid_utf8, 2u);
  EXPECT_EQ(r.docs[5].text, "bad \xEF\xBF\xBD\xEF\xBF\xBD utf8");
}

TEST(RecordsTest, CustomTextField) {
  TempDir t;
  std::string p = t.Join("c.jsonl");
  Write(p, "{\"content\": \"body\", \"text\": \"not this\"}\n");
  InputOptions o;
  o.text_field = "content";
  auto r = ReadAll(p, o);
  ASSERT_EQ(r.docs.size(), 1u);
  EXPECT_EQ(r.docs[0].text, "body");
  EXPECT_EQ(r.docs[0].metadata, "{\"text\":\"not this\"}");
}

TEST(RecordsTest, CompressedAndTruncated) {
  TempDir t;
  std::string body;
  for (int i = 0; i < 2000; ++i) body += "{\"text\": \"document number " + std::to_string(i) + "\"}\n";
  Write(t.Join("x.jsonl.zst"), Zstd(body.substr(0, 1000)) + Zstd(body.substr(1000)));  // 2 frames
  Write(t.Join("y.jsonl.gz"), Gzip(body.substr(0, 500)) + Gzip(body.substr(500)));      // 2 members
  for (const char* name : {"x.jsonl.zst", "y.jsonl.gz"}) {
    auto r = ReadAll(t.Join(name));
    ASSERT_TRUE(r.status.ok()) << name << ": " << r.status;
    ASSERT_EQ(r.docs.size(), 2000u) << name;
    EXPECT_EQ(r.docs[1999].text, "document number 1999");
    EXPECT_EQ(r.docs[1999].line, 2000u);
  }
  // Larger than zstd's 128 KiB block, so that whole blocks precede the cut.
  std::string big_body;
  for (int i = 0; i < 20000; ++i) big_body += "{\"text\": \"document number " + std::to_string(i) + "\"}\n";
  std::string z = Zstd(big_body), g = Gzip(big_body);
  Write(t.Join("tz.jsonl.zst"), z.substr(0, z.size() / 2));
  Write(t.Join("tg.jsonl.gz"), g.substr(0, g.size() / 2));
  auto rz = ReadAll(t.Join("tz.jsonl.zst"));
  EXPECT_EQ(rz.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(rz.status.message()).find("tz.jsonl.zst: truncated zstd stream"), std::string::npos)
      << rz.status;
  // Every line decoded before the damage is handed out first; the error names the last one.
  ASSERT_GT(rz.docs.size(), 100u);
  EXPECT_EQ(rz.docs.back().text, "document number " + std::to_string(rz.docs.size() - 1));
  EXPECT_NE(std::string(rz.status.message()).find("after line " + std::to_string(rz.docs.size())),
            std::string::npos) << rz.status;
  auto rg = ReadAll(t.Join("tg.jsonl.gz"));
  EXPECT_EQ(rg.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(rg.status.message()).find("tg.jsonl.gz: truncated gzip stream"), std::string::npos)
      << rg.status;
  ASSERT_GT(rg.docs.size(), 100u);
  EXPECT_NE(std::string(rg.status.message()).find("after line " + std::to_string(rg.docs.size())),
            std::string::npos) << rg.status;
  Write(t.Join("garbage.jsonl.zst"), std::string("\x28\xb5\x2f\xfd garbage garbage", 20));
  EXPECT_EQ(ReadAll(t.Join("garbage.jsonl.zst")).status.code(), absl::StatusCode::kDataLoss);
}

// A zstd decoder that cannot get its memory is an error of the read, naming the file, never a
// crash; the same file reads whole once memory is back (the failed source left nothing behind).
TEST(RecordsTest, ZstdDecoderWithoutMemoryIsResourceExhaustedNamingTheFile) {
  TempDir t;
  std::string body;
  for (int i = 0; i < 500; ++i) body += "{\"text\": \"document " + std::to_string(i) + "\"}\n";
  Write(t.Join("m.jsonl.zst"), Zstd(body));
  internal::SetZstdDecoderAllocationFailsForTesting(true);
  const auto failed = ReadAll(t.Join("m.jsonl.zst"));
  internal::SetZstdDecoderAllocationFailsForTesting(false);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kResourceExhausted) << failed.status;
  EXPECT_NE(std::string(failed.status.message()).find("m.jsonl.zst"), std::string::npos)
      << failed.status;
  EXPECT_NE(std::string(failed.status.message()).find("no memory for a zstd decoder"),
            std::string::npos) << failed.status;
  EXPECT_TRUE(failed.docs.empty());
  const auto again = ReadAll(t.Join("m.jsonl.zst"));
  ASSERT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(again.docs.size(), 500u);
}

// DecodeWholeFile decodes what the readers would, frames and members included, and reports a
// damaged stream as they do.
TEST(RecordsTest, DecodeWholeFileDecodesEveryFrameAndMember) {
  TempDir t;
  std::string body;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&body, "{\"text\": \"document number ", i, "\"}\n");
  const std::string z = Zstd(body.substr(0, 1000)) + Zstd(body.substr(1000));
  const std::string g = Gzip(body.substr(0, 500)) + Gzip(body.substr(500));
  Write(t.Join("x.jsonl.zst"), z);
  Write(t.Join("y.jsonl.gz"), g);
  Write(t.Join("tz.jsonl.zst"), z.substr(0, z.size() / 2));
  Write(t.Join("plain.jsonl"), body);
  auto files = ListInputs(Env::Default(), {t.Join("x.jsonl.zst"), t.Join("y.jsonl.gz"),
                                           t.Join("tz.jsonl.zst"), t.Join("plain.jsonl")});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 4u);
  for (const InputFile& f : *files) {
    auto n = DecodeWholeFile(Env::Default(), f);
    if (f.path == t.Join("tz.jsonl.zst")) {
      EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss) << n.status();
      EXPECT_NE(n.status().message().find("tz.jsonl.zst"), std::string::npos) << n.status();
    } else if (f.path == t.Join("plain.jsonl")) {
      EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << n.status();
    } else {
      ASSERT_TRUE(n.ok()) << f.path << ": " << n.status();
      EXPECT_EQ(*n, body.size()) << f.path;
    }
  }
}

TEST(RecordsTest, TextFilesAndBlocks) {
  TempDir t;
  ASSERT_TRUE(Env::Default()->CreateDirs(t.Join("d/sub")).ok());
  Write(t.Join("d/b.txt"), "");
  Write(t.Join("d/a.txt"), "first para\nline two\n\n\n  \nsecond para\n");
  Write(t.Join("d/sub/c"), "post body");
  Write(t.Join("d/.hidden"), "skip me");
  auto r = ReadAll(t.Join("d"));
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 3u);
  EXPECT_EQ(r.docs[0].text, "first para\nline two\n\n\n  \nsecond para\n");
  EXPECT_EQ(r.docs[1].error, t.Join("d/b.txt") + ":1: empty file");
  EXPECT_EQ(r.docs[2].text, "post body");
  EXPECT_EQ(r.docs[2].source, t.Join("d/sub/c"));

  InputOptions o;
  o.txt_mode = "blocks";
  auto b = ReadAll(t.Join("d/a.txt"), o);
  ASSERT_EQ(b.docs.size(), 2u);
  EXPECT_EQ(b.docs[0].text, "first para\nline two");
  EXPECT_EQ(b.docs[0].line, 1u);
  EXPECT_EQ(b.docs[1].text, "second para");
  EXPECT_EQ(b.docs[1].line, 6u);

  Write(t.Join("z.txt.zst"), Zstd("compressed text"));
  auto zr = ReadAll(t.Join("z.txt.zst"));
  ASSERT_EQ(zr.docs.size(), 1u);
  EXPECT_EQ(zr.docs[0].text, "compressed text");
}

TEST(RecordsTest, MissingInputsAndDirectoriesAsFiles) {
  auto r = ListInputs(Env::Default(), {"/nonexistent/corpus.jsonl"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "input /nonexistent/corpus.jsonl: no such file or directory");
  EXPECT_EQ(ListInputs(Env::Default(), {}).status().code(), absl::StatusCode::kInvalidArgument);
  InputOptions o;
  o.txt_mode = "paragraphs";
  InputFile f{"/dev/null", 0, InputFormat::kText};
  EXPECT_EQ(OpenRecordReader(Env::Default(), f, InputSplit{}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RecordsTest, OversizedRecordsAndBinaryGarbage) {
  TempDir t;
  std::string big(5000, 'x');
  Write(t.Join("big.jsonl"), "{\"text\": \"" + big + "\"}\n{\"text\": \"small\"}\n");
  InputOptions o;
  o.max_record_bytes = 1000;
  auto r = ReadAll(t.Join("big.jsonl"), o);
  ASSERT_EQ(r.docs.size(), 2u);
  EXPECT_EQ(r.docs[0].error, t.Join("big.jsonl") + ":1: record longer than 1000 bytes");
  EXPECT_EQ(r.docs[0].input_bytes, 5000u + 13u);
  EXPECT_EQ(r.docs[1].text, "small");
  EXPECT_EQ(r.docs[1].line, 2u);

  std::string garbage;
  uint32_t x = 12345;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1103515245 + 12345;
    garbage.push_back(static_cast<char>(x >> 24));
  }
  Write(t.Join("garbage.jsonl"), garbage);
  auto g = ReadAll(t.Join("garbage.jsonl"));
  ASSERT_TRUE(g.status.ok());
  ASSERT_FALSE(g.docs.empty());
  uint64_t lines = 0;
  for (const auto& d : g.docs) {
    EXPECT_FALSE(d.error.empty());
    lines = d.line;
  }
  EXPECT_EQ(lines, static_cast<uint64_t>(std::count(garbage.begin(), garbage.end(), '\n')) +
                       (garbage.back() == '\n' ? 0 : 1));
}

TEST(RecordsTest, ByteRangeSplitsMatchWholeFileRead) {
  TempDir t;
  std::string body;
  for (int i = 0; i < 3000; ++i) {
    body += "{\"text\": \"doc " + std::to_string(i) + std::string(i % 37, 'z') + "\"}\n";
    if (i % 100 == 0) body += "\n";
    // A long line: many splits start inside it and hold no line start.
    if (i == 1500) body += "{\"text\": \"" + std::string(100000, 'L') + "\"}\n";
  }
  Write(t.Join("s.jsonl"), body);
  auto whole = ReadAll(t.Join("s.jsonl"));
  ASSERT_EQ(whole.docs.size(), 3001u);
  for (uint64_t split : {7ull, 64ull, 1000ull, 4096ull}) {
    auto files = ListInputs(Env::Default(), {t.Join("s.jsonl")});
    ThreadPool pool(3);
    auto splits = PlanSplits(Env::Default(), *files, split, &pool);
    ASSERT_TRUE(splits.ok());
    EXPECT_GT(splits->size(), 1u);
    auto r = ReadAll(t.Join("s.jsonl"), {}, split);
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.docs.size(), whole.docs.size()) << "split " << split;
    for (size_t i = 0; i < r.docs.size(); ++i) {
      ASSERT_EQ(r.docs[i].text, whole.docs[i].text) << "split " << split << " doc " << i;
      ASSERT_EQ(r.docs[i].line, whole.docs[i].line) << "split " << split << " doc " << i;
    }
  }
}

// Skip passes over the same records Next returns (blank lines are none; bad records are), with
// the same input bytes, so that a reader mixing the two sees every record it reads as Next alone
// gives it: plain, gzip and zstd JSON Lines, byte-range splits, text blocks.
TEST(RecordsTest, SkipPassesOverTheRecordsNextReturns) {
  TempDir t;
  std::string body;
  for (int i = 0; i < 400; ++i) {
    if (i % 9 == 0) body += "\n   \n";                        // blank lines
    if (i % 13 == 0) body += "{\"text\": broken\n";          // malformed JSON: a record
    if (i % 31 == 0) body += "{\"text\": \"\xff\xfe bad utf8\"}\n";  // repaired
    if (i % 57 == 0) body += "{\"text\": \"" + std::string(3000, 'o') + "\"}\n";  // oversized
    body += "{\"text\": \"doc " + std::to_string(i) + std::string(i % 23, 'y') + "\"}\n";
  }
  body += "{\"text\": \"last, no newline\"}";
  Write(t.Join("p.jsonl"), body);
  Write(t.Join("g.jsonl.gz"), Gzip(body));
  Write(t.Join("z.jsonl.zst"), Zstd(body));
  std::string blocks;
  for (int i = 0; i < 50; ++i) blocks += "block " + std::to_string(i) + "\nline\n\n\n";
  Write(t.Join("b.txt"), blocks);
  InputOptions o;
  o.max_record_bytes = 2000;
  InputOptions ob;
  ob.txt_mode = "blocks";
  struct Case {
    std::string name;
    InputOptions opts;
    uint64_t split;
  };
  for (const Case& k : {Case{"p.jsonl", o, 1u << 30}, Case{"p.jsonl", o, 700},
                        Case{"g.jsonl.gz", o, 1u << 30}, Case{"z.jsonl.zst", o, 1u << 30},
                        Case{"b.txt", ob, 1u << 30}}) {
    SCOPED_TRACE(k.name + " " + std::to_string(k.split));
    const auto whole = ReadAll(t.Join(k.name), k.opts, k.split);
    ASSERT_TRUE(whole.status.ok()) << whole.status;
    ASSERT_GT(whole.docs.size(), 40u);
    auto files = ListInputs(Env::Default(), {t.Join(k.name)});
    ASSERT_TRUE(files.ok());
    auto splits = PlanSplits(Env::Default(), *files, k.split);
    ASSERT_TRUE(splits.ok());
    if (k.split < 1000) {
      EXPECT_GT(splits->size(), 5u);
    }
    for (int every : {2, 3, 7}) {
      size_t n = 0;
      for (const auto& s : *splits) {
        auto reader = OpenRecordReader(Env::Default(), (*files)[s.file_index], s, k.opts);
        ASSERT_TRUE(reader.ok()) << reader.status();
        Document d;
        for (int i = 0;; ++i) {
          if (i % every == 0) {
            uint64_t bytes = 0;
            auto more = (*reader)->Skip(&bytes);
            ASSERT_TRUE(more.ok()) << more.status();
            if (!*more) break;
            ASSERT_LT(n, whole.docs.size());
            EXPECT_EQ(bytes, whole.docs[n].input_bytes) << "record " << n;
          } else {
            auto more = (*reader)->Next(&d);
            ASSERT_TRUE(more.ok()) << more.status();
            if (!*more) break;
            ASSERT_LT(n, whole.docs.size());
            EXPECT_EQ(d.text, whole.docs[n].text) << "record " << n;
            EXPECT_EQ(d.line, whole.docs[n].line) << "record " << n;
            EXPECT_EQ(d.error, whole.docs[n].error) << "record " << n;
            EXPECT_EQ(d.input_bytes, whole.docs[n].input_bytes) << "record " << n;
          }
          ++n;
        }
      }
      EXPECT_EQ(n, whole.docs.size()) << "every " << every;
    }
  }
}

// NextLineOrDoc gives a record's line exactly when the line is SerializeRecord of the document Next
// gives (then with that document's text size and input bytes), and otherwise the document Next
// gives; records as grist writes them (texts with every escape, long and short, metadata, other
// provenance) come as lines, and every other spelling of a record comes parsed.
TEST(RecordsTest, NextLineOrDocGivesTheLinesAsGristWritesThem) {
  TempDir t;
  std::string body;
  size_t written = 0;
  uint64_t x = 99;
  auto next = [&x]() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  const std::string alphabet =
      std::string("\"\\\n\r\t\b\f\x01\x1f\x7f aZ/", 15) + "\xC3\xA9\xE2\x82\xAC";
  for (int i = 0; i < 600; ++i) {
    Document d;
    const size_t len = next() % (i % 3 == 0 ? 300 : 30);
    while (d.text.size() < len) {
      d.text.push_back(next() % 4 != 0 ? static_cast<char>('a' + next() % 26)
                                       : alphabet[next() % alphabet.size()]);
    }
    if (!IsValidUtf8(d.text)) continue;
    static const char* const kMeta[] = {"{}", "{\"id\":\"7\",\"n\":1.5,\"a\":[1,{\"b\":null}]}",
                                        "{\"url\":\"http://x/\\u00e9\"}",
                                        "{\"grist\":{\"src\":\"m\",\"line\":2}}"};
    d.metadata = kMeta[next() % 4];
    d.source = next() % 5 == 0 ? "dir/f\"q\".jsonl" : "corpus/wiki_00.jsonl.zst";
    d.line = next() % 7 == 0 ? 0 : next() % 100000;
    std::string line = SerializeRecord(d);
    switch (i % 10) {
      case 0: line = SerializeRecord(d, "\"reasons\":[\"x\"]"); break;       // another member
      case 1: line.insert(line.find(",\"meta\""), " "); break;                   // not minified
      case 2: line = "{\"text\":\"plain " + std::to_string(i) + "\",\"id\":1}"; break;
      case 3: line += "  "; break;                                              // trailing blanks
      case 4: {                                                                 // \u escape
        const size_t q = line.find("\",\"meta\"");
        line.insert(q, "\\u00e9");
        break;
      }
      case 5: line.replace(line.rfind(":") + 1, 0, "0"); break;                // "line":0N
      case 6: line = "{\"text\": broken " + std::to_string(i); break;          // malformed
      default: ++written; break;                                                // as written
    }
    body += line + "\n";
  }
  Write(t.Join("r.jsonl"), body);
  Write(t.Join("r.jsonl.zst"), Zstd(body));
  std::vector<std::string> raw = absl::StrSplit(body, '\n', absl::SkipEmpty());
  for (const std::string name : {"r.jsonl", "r.jsonl.zst"}) {
    SCOPED_TRACE(name);
    const auto whole = ReadAll(t.Join(name));
    ASSERT_TRUE(whole.status.ok()) << whole.status;
    auto files = ListInputs(Env::Default(), {t.Join(name)});
    ASSERT_TRUE(files.ok());
    auto splits = PlanSplits(Env::Default(), *files, 1 << 30);
    ASSERT_TRUE(splits.ok());
    ASSERT_EQ(splits->size(), 1u);
    auto reader = OpenRecordReader(Env::Default(), (*files)[0], (*splits)[0], InputOptions());
    ASSERT_TRUE(reader.ok()) << reader.status();
    size_t n = 0, lines = 0;
    while (true) {
      RecordReader::Line line;
      Document d;
      bool as_line = false;
      auto more = (*reader)->NextLineOrDoc(&line, &d, &as_line);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      ASSERT_LT(n, whole.docs.size());
      const Document& want = whole.docs[n];
      // A line exactly when the record as written is its line.
      EXPECT_EQ(as_line, want.error.empty() && SerializeRecord(want) == raw[n])
          << n << ": " << raw[n];
      if (as_line) {
        ++lines;
        EXPECT_TRUE(want.error.empty()) << n;
        EXPECT_EQ(std::string(line.bytes), SerializeRecord(want)) << n;
        EXPECT_EQ(line.text_bytes, want.text.size()) << n;
        EXPECT_EQ(line.input_bytes, want.input_bytes) << n;
      } else {
        EXPECT_EQ(d.text, want.text) << n;
        EXPECT_EQ(d.metadata, want.metadata) << n;
        EXPECT_EQ(d.source, want.source) << n;
        EXPECT_EQ(d.line, want.line) << n;
        EXPECT_EQ(d.error, want.error) << n;
        EXPECT_EQ(d.input_bytes, want.input_bytes) << n;
      }
      ++n;
    }
    EXPECT_EQ(n, whole.docs.size());
    EXPECT_GT(lines, written / 2);
  }
}

// Each split of an uncompressed file reads about its own bytes: the line crossing its end costs a
// small tail, not a whole read buffer (64 KiB splits once read 1 MiB each, 16 times the file).
TEST(RecordsTest, ByteRangeSplitsReadAboutTheFileOnce) {
  TempDir t;
  std::string body;
  for (int i = 0; body.size() < (4u << 20); ++i) {
    body += absl::StrCat("{\"text\": \"doc ", i, " ", std::string(1000 + (i * 7919) % 1000, 'w'),
                         "\"}\n");
    // A line of 1 MB: the splits inside it hold no line start, the one before it reads it whole.
    if (i == 1000) body += absl::StrCat("{\"text\": \"", std::string(1 << 20, 'L'), "\"}\n");
  }
  Write(t.Join("s.jsonl"), body);
  const size_t expected_docs = static_cast<size_t>(std::count(body.begin(), body.end(), '\n'));
  FaultInjectionEnv env(Env::Default());
  auto files = ListInputs(&env, {t.Join("s.jsonl")});
  ASSERT_TRUE(files.ok()) << files.status();
  auto splits = PlanSplits(&env, *files, 64 << 10);
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_GT(splits->size(), 60u);
  const int64_t planned = env.read_bytes();
  size_t docs = 0;
  for (const InputSplit& s : *splits) {
    auto reader = OpenRecordReader(&env, (*files)[s.file_index], s, {});
    ASSERT_TRUE(reader.ok()) << reader.status();
    Document d;
    while (true) {
      auto more = (*reader)->Next(&d);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      ASSERT_TRUE(d.error.empty()) << d.error;
      ++docs;
    }
  }
  EXPECT_EQ(docs, expected_docs);
  const int64_t read = env.read_bytes() - planned;
  EXPECT_GE(read, static_cast<int64_t>(body.size()));
  EXPECT_LE(read, static_cast<int64_t>(body.size()) * 3 / 2) << "splits: " << splits->size();
}

TEST(RecordsTest, TaskSlicesPartitionTheSplits) {
  std::vector<InputSplit> splits;
  for (size_t i = 0; i < 17; ++i) splits.push_back({i, 0, UINT64_MAX, (i * 7919) % 1000, 0});
  for (int tasks : {1, 2, 3, 5, 40}) {
    std::vector<size_t> seen;
    for (int t = 0; t < tasks; ++t) {
      for (const auto& s : SelectTaskSplits(splits, t, tasks)) seen.push_back(s.file_index);
    }
    ASSERT_EQ(seen.size(), splits.size()) << tasks;
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);  // contiguous, in order
  }
}

// Parts are sequences of independent zstd frames with a frame index at the end, so a large part
// splits at frame boundaries for parallel readers; any split gives the same documents and line
// numbers as a whole-file read, and a damaged index only costs the parallelism.
// Balanced split sizes: about kSplitsPerTask per task, never below the floor, never above the cap;
// a function of the inputs and the task count only.
TEST(RecordsTest, BalancedSplitBytes) {
  std::vector<InputFile> files = {{"a", 600ull << 20, InputFormat::kJsonl},
                                  {"b", 424ull << 20, InputFormat::kJsonlZstd}};  // 1 GiB in all
  EXPECT_EQ(BalancedSplitBytes(files, 8ull << 20, 1), 4ull << 20);     // 1 GiB / 256
  EXPECT_EQ(BalancedSplitBytes(files, 8ull << 20, 4), 1ull << 20);     // 1 GiB / (4 * 256)
  EXPECT_EQ(BalancedSplitBytes(files, 2ull << 20, 1), 2ull << 20);     // capped by the maximum
  EXPECT_EQ(BalancedSplitBytes(files, 8ull << 20, 1 << 20), kMinBalancedSplitBytes);  // floor
  EXPECT_EQ(BalancedSplitBytes(files, 4096, 1 << 20), 4096u);          // a smaller maximum wins
  EXPECT_EQ(BalancedSplitBytes({}, 8ull << 20, 1), kMinBalancedSplitBytes);
  EXPECT_EQ(BalancedSplitBytes(files, 8ull << 20, 0), BalancedSplitBytes(files, 8ull << 20, 1));
}

TEST(RecordsTest, IndexedPartsSplitAtFrames) {
  TempDir t;
  OutputOptions o;
  o.frame_bytes = 500;
  auto w = RecordWriter::Open(Env::Default(), t.Join("out"), "part", o);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 400; ++i) {
    // Records without grist provenance, so line numbers come from positions in the part.
    std::string rec = i == 123 ? "{\"text\": oops" : "{\"text\":\"doc " + std::to_string(i) + std::string(i % 29, 'q') + "\"}";
    ASSERT_TRUE((*w)->AppendSerialized(rec).ok());
  }
  auto parts = (*w)->Finish();
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 1u);
  const std::string path = (*parts)[0].path;
  auto rf = Env::Default()->NewRandomAccessFile(path);
  ASSERT_TRUE(rf.ok());
  auto index = ReadZstdFrameIndex(**rf);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_TRUE(index->has_value());
  const auto& frames = **index;
  EXPECT_GT(frames.size(), 10u);
  uint64_t records = 0;
  for (size_t k = 0; k < frames.size(); ++k) {
    records += frames[k].records;
    if (k > 0) {
      EXPECT_EQ(frames[k].offset, frames[k - 1].offset + frames[k - 1].bytes);
    }
  }
  EXPECT_EQ(records, 400u);

  auto whole = ReadAll(path);
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  ASSERT_EQ(whole.docs.size(), 400u);
  EXPECT_NE(whole.docs[123].error.find(":124"), std::string::npos) << whole.docs[123].error;
  for (uint64_t split : {1ull, 200ull, 700ull}) {
    auto files = ListInputs(Env::Default(), {path});
    auto splits = PlanSplits(Env::Default(), *files, split);
    ASSERT_TRUE(splits.ok());
    EXPECT_GT(splits->size(), 1u) << split;
    // The splits' bytes add up to the file's size, index frame included (a progress total).
    uint64_t split_bytes = 0;
    for (const InputSplit& s : *splits) split_bytes += s.bytes;
    EXPECT_EQ(split_bytes, (*files)[0].size) << split;
    auto r = ReadAll(path, {}, split);
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.docs.size(), 400u) << split;
    for (size_t i = 0; i < r.docs.size(); ++i) {
      ASSERT_EQ(r.docs[i].text, whole.docs[i].text) << split << " " << i;
      ASSERT_EQ(r.docs[i].line, i + 1) << split << " " << i;
      ASSERT_EQ(r.docs[i].error, whole.docs[i].error) << split << " " << i;
    }
  }
  // Any zstd reader decodes the part whole (the index is a skippable frame).
  auto data = ReadFileToString(Env::Default(), path);
  ASSERT_TRUE(data.ok());
  std::string plain(1 << 20, '\0');
  size_t n = ZSTD_decompress(plain.data(), plain.size(), data->data(), data->size());
  ASSERT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  EXPECT_EQ(std::count(plain.begin(), plain.begin() + n, '\n'), 400);

  // A damaged index: no index, so stream splits (as any zstd file), the same documents.
  std::string bad = *data;
  bad[bad.size() - 30] ^= 0x40;
  Write(t.Join("bad.jsonl.zst"), bad);
  auto bf = Env::Default()->NewRandomAccessFile(t.Join("bad.jsonl.zst"));
  auto bad_index = ReadZstdFrameIndex(**bf);
  ASSERT_TRUE(bad_index.ok());
  EXPECT_FALSE(bad_index->has_value());
  auto files = ListInputs(Env::Default(), {t.Join("bad.jsonl.zst")});
  auto bad_splits = PlanSplits(Env::Default(), *files, 700);
  ASSERT_TRUE(bad_splits.ok());
  EXPECT_GT(bad_splits->size(), 1u);
  for (const auto& s : *bad_splits) EXPECT_EQ(s.stream_stride, 700u);
  auto rb = ReadAll(t.Join("bad.jsonl.zst"), {}, 700);
  ASSERT_TRUE(rb.status.ok()) << rb.status;
  EXPECT_EQ(rb.docs.size(), 400u);
  // A truncated part: no index; every record is still handed out, then the truncation is an error.
  Write(t.Join("cut.jsonl.zst"), data->substr(0, data->size() - 10));
  auto rc = ReadAll(t.Join("cut.jsonl.zst"), {}, 700);
  EXPECT_EQ(rc.docs.size(), 400u);
  EXPECT_EQ(rc.status.code(), absl::StatusCode::kDataLoss) << rc.status;
}

TEST(RecordsTest, StageOutputFolderContributesItsKeptPartsOnly) {
  MemEnv env;
  auto put = [&](const std::string& p) { ASSERT_TRUE(WriteFileAtomic(&env, p, "{}\n").ok()); };
  ASSERT_TRUE(env.CreateDirs("/cl/rejects").ok());
  ASSERT_TRUE(env.CreateDirs("/dd/removed").ok());
  ASSERT_TRUE(env.CreateDirs("/plain/sub").ok());
  put("/cl/part-00000-of-00002-00000.jsonl.zst");
  put("/cl/part-00001-of-00002-00000.jsonl.zst");
  put("/cl/part-00001-of-00002-00001.jsonl.zst.tmp");
  put("/cl/rejects/part-00000-of-00002-00000.jsonl.zst");
  put("/cl/clean-report-00000-of-00002.json");
  put("/cl/notes.txt");
  put("/dd/dedup-00000.jsonl.zst");
  put("/dd/removed/dedup-00000.jsonl.zst");
  put("/dd/dedup_report.json");
  put("/plain/a.jsonl");
  put("/plain/sub/b.txt");
  auto paths = [&](const std::vector<std::string>& in) {
    std::vector<std::string> out;
    auto files = ListInputs(&env, in);
    EXPECT_TRUE(files.ok()) << files.status();
    if (files.ok()) {
      for (const auto& f : *files) out.push_back(f.path);
    }
    return out;
  };
  EXPECT_EQ(paths({"/cl"}), (std::vector<std::string>{"/cl/part-00000-of-00002-00000.jsonl.zst",
                                                      "/cl/part-00001-of-00002-00000.jsonl.zst"}));
  EXPECT_EQ(paths({"/dd"}), (std::vector<std::string>{"/dd/dedup-00000.jsonl.zst"}));
  // Met in a walk, the same; named explicitly, rejects/ and removed/ are plain folders.
  ASSERT_TRUE(env.RenameFile("/cl", "/plain/sub/cl").ok());
  EXPECT_EQ(paths({"/plain"}),
            (std::vector<std::string>{"/plain/a.jsonl", "/plain/sub/b.txt",
                                      "/plain/sub/cl/part-00000-of-00002-00000.jsonl.zst",
                                      "/plain/sub/cl/part-00001-of-00002-00000.jsonl.zst"}));
  EXPECT_EQ(paths({"/plain/sub/cl/rejects"}),
            (std::vector<std::string>{"/plain/sub/cl/rejects/part-00000-of-00002-00000.jsonl.zst"}));
  EXPECT_EQ(paths({"/dd/removed"}), (std::vector<std::string>{"/dd/removed/dedup-00000.jsonl.zst"}));
  EXPECT_TRUE(IsStageReportName("clean-report-00003-of-00004.json"));
  EXPECT_TRUE(IsStageReportName("dedup_report.json"));
  EXPECT_FALSE(IsStageReportName("clean-report.json.tmp"));
  EXPECT_FALSE(IsStageReportName("report.json"));
}

TEST(RecordsTest, RealCorpusWikinews) {
  GRIST_REQUIRE_CORPUS(dir, "wikinews-en");
  auto files = ListInputs(Env::Default(), {dir});
  ASSERT_TRUE(files.ok());
  auto r = ReadAll(dir);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.docs.size(), 39409u);  // SOURCES.md
  for (const auto& d : r.docs) ASSERT_TRUE(d.error.empty()) << d.error;
}

}  // namespace
}  // namespace grist
