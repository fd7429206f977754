// Stream splits of compressed inputs without a frame index (common/internal/stream_cutter.h,
// common/split_decoders.h): every way of reading them gives exactly the records, line numbers and
// errors of one reader of the whole file.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/internal/byte_sources.h"
#include "common/internal/line_reader.h"
#include "common/internal/stream_cutter.h"
#include "common/ordered.h"
#include "common/records.h"
#include "common/thread_pool.h"
#include "tests/synthetic_corpus.h"
#include "tests/compress_util.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::grist::testing::Gzip;
using ::grist::testing::Zstd;

using ::grist::testing::TempDir;

void Write(const std::string& path, const std::string& data) {
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, data).ok());
}

// Everything a reader hands out, as one comparable string per record, then the error if any.
struct Outcome {
  std::vector<std::string> records;
  std::string error;  // empty: read to the end
  bool operator==(const Outcome& o) const { return records == o.records && error == o.error; }
};
std::string Describe(const Document& d) {
  return absl::StrCat(d.source, ":", d.line, " bytes=", d.input_bytes, " bad=", d.invalid_utf8,
                      " err=", d.error, " meta=", d.metadata, " text=", d.text);
}

// Reads the splits of one file in order; the first error ends the read (as stop-on-error does).
Outcome ReadSplits(const InputFile& f, const std::vector<InputSplit>& splits, const InputOptions& o,
                   SplitDecoders* decoders, ThreadPool* pool = nullptr) {
  std::vector<InputFile> files{f};
  Outcome out;
  struct Part {
    std::vector<std::string> records;
    std::string error;
  };
  absl::Status st = OrderedParallel<Part>(
      pool, splits.size(), 2 * static_cast<size_t>(pool ? pool->size() : 1),
      [&](size_t i) -> absl::StatusOr<Part> {
        Part p;
        auto r = OpenRecordReader(Env::Default(), f, splits[i], o, decoders);
        if (!r.ok()) {
          p.error = std::string(r.status().message());
          return p;
        }
        Document d;
        while (true) {
          auto more = (*r)->Next(&d);
          if (!more.ok()) {
            p.error = std::string(more.status().message());
            break;
          }
          if (!*more) break;
          p.records.push_back(Describe(d));
        }
        return p;
      },
      [&](size_t, Part&& p) -> absl::Status {
        if (!out.error.empty()) return absl::OkStatus();
        out.records.insert(out.records.end(), p.records.begin(), p.records.end());
        out.error = p.error;
        return absl::OkStatus();
      });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

struct Case {
  InputFile file;
  std::vector<InputSplit> splits;
};
Case Plan(const std::string& path, uint64_t target, const InputOptions& o) {
  auto files = ListInputs(Env::Default(), {path});
  EXPECT_TRUE(files.ok());
  auto splits = PlanSplits(Env::Default(), *files, target, nullptr, o);
  EXPECT_TRUE(splits.ok());
  return {(*files)[0], *splits};
}

// Reads `path` whole, then split every way, and checks they agree. Returns the whole read.
Outcome CheckEveryWay(const std::string& path, uint64_t target, const InputOptions& o = {},
                      size_t min_splits = 8) {
  Case c = Plan(path, target, o);
  Outcome whole = ReadSplits(c.file, {InputSplit{}}, o, nullptr);
  EXPECT_GE(c.splits.size(), min_splits);
  for (const InputSplit& s : c.splits) EXPECT_GT(s.stream_stride, 0u);
  {
    Outcome p = ReadSplits(c.file, c.splits, o, nullptr);
    EXPECT_EQ(p, whole) << "private decoding: " << p.records.size() << " records, " << p.error
                        << "; whole: " << whole.records.size() << ", " << whole.error;
  }
  {
    SplitDecoders d(Env::Default(), {c.file}, c.splits, o, 4);
    EXPECT_EQ(ReadSplits(c.file, c.splits, o, &d), whole) << "shared, one thread";
  }
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    SplitDecoders d(Env::Default(), {c.file}, c.splits, o,
                    SplitDecoders::DefaultChunksInFlight(threads));
    EXPECT_EQ(ReadSplits(c.file, c.splits, o, &d, &pool), whole) << threads << " threads";
  }
  if (whole.error.empty()) {
    // Tasks: each task reads its own splits (decoding the prefix before them); the union in task
    // order is the whole file.
    for (int tasks : {2, 3}) {
      Outcome all;
      for (int t = 0; t < tasks; ++t) {
        std::vector<InputSplit> mine = SelectTaskSplits(c.splits, t, tasks);
        ThreadPool pool(2);
        SplitDecoders d(Env::Default(), {c.file}, mine, o, 16);
        Outcome part = ReadSplits(c.file, mine, o, &d, &pool);
        all.records.insert(all.records.end(), part.records.begin(), part.records.end());
      }
      EXPECT_EQ(all, whole) << tasks << " tasks";
    }
  }
  return whole;
}

std::string Corpus(int documents) {
  ::grist::testing::SyntheticCorpusOptions o;
  o.documents = documents;
  return ::grist::testing::SyntheticJsonl(o);
}

// CountNewlines gives std::count's answer at every length and offset around its 16-byte blocks
// and its 255-block rounds, for no, some and only newlines.
TEST(CountNewlinesTest, SameAsStdCountAtEveryLengthAndOffset) {
  std::string text;
  uint32_t x = 7;
  for (size_t i = 0; i < 16 * 255 * 2 + 100; ++i) {
    x = x * 1103515245u + 12345u;
    text.push_back((x >> 24) % 5 == 0 ? '\n' : static_cast<char>('a' + (x >> 16) % 26));
  }
  for (const std::string& t : {text, std::string(9000, '\n'), std::string(9000, 'n')}) {
    for (size_t off : {0, 1, 7, 15, 16, 17}) {
      for (size_t n = 0; off + n <= t.size(); n += (n < 300 ? 1 : 97)) {
        ASSERT_EQ(internal::CountNewlines(t.data() + off, n),
                  static_cast<uint64_t>(std::count(t.data() + off, t.data() + off + n, '\n')))
            << "offset " << off << " length " << n;
      }
      const size_t n = t.size() - off;
      ASSERT_EQ(internal::CountNewlines(t.data() + off, n),
                static_cast<uint64_t>(std::count(t.data() + off, t.data() + off + n, '\n')));
    }
  }
}

TEST(StreamSplitsTest, ZstdAndGzipReadAlikeEveryWay) {
  TempDir t;
  const std::string jsonl = Corpus(3000);  // ~3 MB
  ASSERT_GT(jsonl.size(), 2u << 20);
  Write(t.Join("c.jsonl.zst"), Zstd(jsonl));
  Write(t.Join("c.jsonl.gz"), Gzip(jsonl));
  Outcome z = CheckEveryWay(t.Join("c.jsonl.zst"), 64 << 10);
  Outcome g = CheckEveryWay(t.Join("c.jsonl.gz"), 64 << 10);
  EXPECT_EQ(z.records.size(), 3000u);
  EXPECT_TRUE(z.error.empty()) << z.error;
  EXPECT_EQ(g.records.size(), 3000u);
}

TEST(StreamSplitsTest, TinyStridesAndBlocksMode) {
  TempDir t;
  // Blank-line-separated blocks with runs of blank lines (spaces, CR) and a long block.
  std::string text;
  for (int i = 0; i < 400; ++i) {
    absl::StrAppend(&text, "Block ", i, " first line.\nsecond line of ", i, "\n");
    if (i % 7 == 0) text += "  \r\n\t\n";
    if (i == 200) text += std::string(300000, 'x') + "\n";
    text += (i % 3 == 0) ? "\n\n" : "\n";
  }
  Write(t.Join("b.txt.zst"), Zstd(text));
  Write(t.Join("b.txt.gz"), Gzip(text));
  InputOptions blocks;
  blocks.txt_mode = "blocks";
  for (const char* name : {"b.txt.zst", "b.txt.gz"}) {
    Outcome w = CheckEveryWay(t.Join(name), 64, blocks, 10);  // 64-byte strides
    EXPECT_EQ(w.records.size(), 400u) << name;
  }
  // In file mode a compressed text file stays one split.
  Case c = Plan(t.Join("b.txt.zst"), 64, InputOptions());
  EXPECT_EQ(c.splits.size(), 1u);
  EXPECT_EQ(c.splits[0].stream_stride, 0u);
}

TEST(StreamSplitsTest, RecordLargerThanChunksAndStrides) {
  TempDir t;
  std::string jsonl = Corpus(200);
  // A 3 MiB record (three decode chunks), an oversized one, blank lines, bad JSON and bad UTF-8.
  std::string big = "{\"text\":\"" + std::string(3 << 20, 'a') + "\"}\n";
  std::string bad = "{\"text\": nope}\n\n   \n{\"text\":\"caf\xC3\"}\n";
  jsonl = jsonl.substr(0, jsonl.size() / 2) + big + bad + std::string(5 << 20, 'b') + "\n" +
          jsonl.substr(jsonl.size() / 2);
  Write(t.Join("big.jsonl.zst"), Zstd(jsonl));
  InputOptions o;
  o.max_record_bytes = 4 << 20;
  Outcome w = CheckEveryWay(t.Join("big.jsonl.zst"), 4096, o);
  ASSERT_EQ(w.records.size(), 204u);  // 200 + big + bad JSON + bad UTF-8 + oversized
}

TEST(StreamSplitsTest, TruncatedAndCorruptStreamsFailAsAWholeReadDoes) {
  TempDir t;
  const std::string jsonl = Corpus(2000);
  const std::string z = Zstd(jsonl), g = Gzip(jsonl);
  Write(t.Join("trunc.jsonl.zst"), z.substr(0, z.size() * 2 / 3));
  Write(t.Join("trunc.jsonl.gz"), g.substr(0, g.size() * 2 / 3));
  std::string zc = z, gc = g;
  for (size_t i = zc.size() / 2; i < zc.size() / 2 + 64; ++i) zc[i] = static_cast<char>(zc[i] ^ 0x5A);
  for (size_t i = gc.size() / 2; i < gc.size() / 2 + 64; ++i) gc[i] = static_cast<char>(gc[i] ^ 0x5A);
  Write(t.Join("corrupt.jsonl.zst"), zc);
  Write(t.Join("corrupt.jsonl.gz"), gc);
  for (const char* name : {"trunc.jsonl.zst", "trunc.jsonl.gz", "corrupt.jsonl.zst", "corrupt.jsonl.gz"}) {
    Outcome w = CheckEveryWay(t.Join(name), 32 << 10);
    EXPECT_FALSE(w.error.empty()) << name;
    EXPECT_NE(w.error.find(t.Join(name)), std::string::npos) << w.error;
    EXPECT_NE(w.error.find("after line "), std::string::npos) << w.error;
    EXPECT_GT(w.records.size(), 100u) << name;
  }
  // A task whose splits all lie after the damage reads nothing and reports nothing: the error
  // belongs to the task holding the split where it happens.
  Case c = Plan(t.Join("corrupt.jsonl.zst"), 32 << 10, InputOptions());
  std::vector<InputSplit> last = SelectTaskSplits(c.splits, 9, 10);
  ASSERT_FALSE(last.empty());
  SplitDecoders d(Env::Default(), {c.file}, last, InputOptions(), 16);
  Outcome tail = ReadSplits(c.file, last, InputOptions(), &d);
  EXPECT_TRUE(tail.records.empty());
  EXPECT_TRUE(tail.error.empty()) << tail.error;
}

// A read buffer freed on a thread is handed out again on that thread (readers are opened per
// split), never on another; and a reader after a corrupt or truncated stream, on the same thread
// (its buffers reused), reads exactly what a reader on a fresh thread reads.
TEST(StreamSplitsTest, ReadersReuseTheirThreadsBuffers) {
  const char* first = nullptr;
  {
    internal::Buffer a(internal::kReadChunk);
    first = a.data();
  }
  {
    internal::Buffer b(internal::kReadChunk);
    EXPECT_EQ(b.data(), first);
    std::thread([first] {
      internal::Buffer c(internal::kReadChunk);  // first is in the other thread's cache
      EXPECT_NE(c.data(), first);
    }).join();
  }
  TempDir t;
  const std::string jsonl = Corpus(600);
  const std::string z = Zstd(jsonl), g = Gzip(jsonl);
  std::string zc = z, gc = g;
  for (size_t i = zc.size() / 2; i < zc.size() / 2 + 64; ++i) zc[i] = static_cast<char>(zc[i] ^ 0x5A);
  for (size_t i = gc.size() / 2; i < gc.size() / 2 + 64; ++i) gc[i] = static_cast<char>(gc[i] ^ 0x5A);
  Write(t.Join("good.jsonl.zst"), z);
  Write(t.Join("good.jsonl.gz"), g);
  Write(t.Join("corrupt.jsonl.zst"), zc);
  Write(t.Join("corrupt.jsonl.gz"), gc);
  Write(t.Join("trunc.jsonl.zst"), z.substr(0, z.size() / 3));
  // A stream whose window (2 MiB at zstd's level 3) is larger than the small one's: its decoder's
  // memory, kept by the thread, then serves the small stream's smaller requests (and the other way
  // round), damaged or not.
  const std::string big = Zstd(Corpus(6000));
  std::string big_corrupt = big;
  for (size_t i = big.size() / 2; i < big.size() / 2 + 64; ++i) {
    big_corrupt[i] = static_cast<char>(big_corrupt[i] ^ 0x5A);
  }
  Write(t.Join("big.jsonl.zst"), big);
  Write(t.Join("bigcorrupt.jsonl.zst"), big_corrupt);
  auto whole = [&](const std::string& name) {
    Case c = Plan(t.Join(name), uint64_t{1} << 40, InputOptions());
    return ReadSplits(c.file, c.splits, InputOptions(), nullptr);
  };
  const std::vector<std::string> names = {"good.jsonl.zst", "good.jsonl.gz", "big.jsonl.zst",
                                          "bigcorrupt.jsonl.zst", "corrupt.jsonl.zst"};
  std::vector<Outcome> fresh(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    std::thread([&, i] { fresh[i] = whole(names[i]); }).join();  // a thread that read nothing
  }
  ASSERT_TRUE(fresh[0].error.empty()) << fresh[0].error;
  ASSERT_EQ(fresh[0].records.size(), 600u);
  ASSERT_TRUE(fresh[2].error.empty()) << fresh[2].error;
  ASSERT_EQ(fresh[2].records.size(), 6000u);
  ASSERT_FALSE(fresh[3].error.empty());
  for (int round = 0; round < 3; ++round) {
    for (const char* bad : {"corrupt.jsonl.zst", "trunc.jsonl.zst", "corrupt.jsonl.gz",
                            "bigcorrupt.jsonl.zst", "big.jsonl.zst"}) {
      const Outcome after = whole(bad);
      if (std::string(bad) != "big.jsonl.zst") {
        EXPECT_FALSE(after.error.empty()) << bad;
      }
      for (size_t i = 0; i < names.size(); ++i) {
        EXPECT_EQ(whole(names[i]), fresh[i]) << names[i] << " after " << bad;
      }
    }
  }
}

TEST(StreamSplitsTest, ABadFrameChecksumComesAfterEveryRecord) {
  // The checksum is checked after the frame's last block: all records come out, then the error,
  // whatever the input chunking (a fuzzer once found a whole-file read that lost them at random).
  TempDir t;
  const std::string jsonl = Corpus(300);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string z(ZSTD_compressBound(jsonl.size()), '\0');
  z.resize(ZSTD_compress2(cctx, z.data(), z.size(), jsonl.data(), jsonl.size()));
  ZSTD_freeCCtx(cctx);
  z[z.size() - 1] = static_cast<char>(z[z.size() - 1] ^ 0x01);
  Write(t.Join("sum.jsonl.zst"), z);
  Outcome w = CheckEveryWay(t.Join("sum.jsonl.zst"), 8 << 10);
  EXPECT_EQ(w.records.size(), 300u);
  EXPECT_NE(w.error.find("checksum"), std::string::npos) << w.error;
}

TEST(StreamSplitsTest, ConcatenatedFramesAndMembers) {
  TempDir t;
  const std::string a = Corpus(500), b = Corpus(700);
  Write(t.Join("cat.jsonl.zst"), Zstd(a) + Zstd(b));
  Write(t.Join("cat.jsonl.gz"), Gzip(a) + Gzip(b));
  EXPECT_EQ(CheckEveryWay(t.Join("cat.jsonl.zst"), 16 << 10).records.size(), 1200u);
  EXPECT_EQ(CheckEveryWay(t.Join("cat.jsonl.gz"), 16 << 10).records.size(), 1200u);
}

// A cutter decodes its pieces one after another into shared buffers: released buffers are used
// again (a long file decodes in two while its pieces are released as read), and pieces kept alive
// fill each buffer rather than holding one each. The bytes are the file's either way.
TEST(StreamSplitsTest, PiecesFillRecycledBuffers) {
  TempDir t;
  const std::string text = Corpus(6000);
  ASSERT_GT(text.size(), 6 * internal::kReadChunk);
  Write(t.Join("c.jsonl.zst"), Zstd(text));
  auto cut = [&](bool keep, std::shared_ptr<internal::PieceBuffers> pool, size_t* pieces) {
    auto f = Env::Default()->NewSequentialFile(t.Join("c.jsonl.zst"));
    EXPECT_TRUE(f.ok());
    internal::StreamCutter cutter(internal::NewZstdSource(std::move(*f)), 16 << 10, false, pool);
    std::string out;
    std::vector<internal::StreamPiece> kept;
    internal::StreamPiece p;
    *pieces = 0;
    while (true) {
      auto more = cutter.Next(&p);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      out.append(p.data(), p.size);
      ++*pieces;
      if (keep) kept.push_back(std::move(p));
      p = internal::StreamPiece{};
    }
    return out;
  };
  size_t pieces = 0;
  auto released = internal::PieceBuffers::Create();
  EXPECT_EQ(cut(false, released, &pieces), text);
  EXPECT_GT(pieces, 6u);
  EXPECT_LE(released->allocated(), 2u);
  auto kept = internal::PieceBuffers::Create();
  EXPECT_EQ(cut(true, kept, &pieces), text);
  const size_t fill = internal::kReadChunk - internal::StreamCutter::kMinPieceRoom;
  EXPECT_LE(kept->allocated(), (text.size() + fill - 1) / fill);
  EXPECT_LT(kept->allocated(), pieces);
  // Free buffers beyond kKeptFree are freed; the pool stays usable after its cutters are gone.
  EXPECT_EQ(kept->Get() != nullptr, true);
}

// Reads split `s` of `files` through `d`, appending each record's Describe to got[file].
void ReadSplitInto(const std::vector<InputFile>& files, const InputSplit& s, SplitDecoders* d,
                   std::vector<std::vector<std::string>>* got) {
  auto r = OpenRecordReader(Env::Default(), files[s.file_index], s, InputOptions(), d);
  ASSERT_TRUE(r.ok()) << r.status();
  Document doc;
  while (true) {
    auto more = (*r)->Next(&doc);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    (*got)[s.file_index].push_back(Describe(doc));
  }
}

// Claiming a split of one file starts the decoders of the next kAheadFiles files (in the order the
// splits are listed), each holding at most the pieces a decoder may hold; the files after those
// wait for their own turn. Every file still reads exactly as a whole read gives. (17 files of
// about the same size: none holds a kLargeFileShare-th of the bytes, so none starts before.)
TEST(StreamSplitsTest, ClaimingASplitStartsTheNextFilesDecoders) {
  static_assert(SplitDecoders::kLargeFileShare == 16);
  constexpr size_t kFiles = 17;
  TempDir t;
  std::vector<std::string> paths;
  for (size_t i = 0; i < kFiles; ++i) {
    paths.push_back(t.Join(absl::StrCat("f", i < 10 ? "0" : "", i, ".jsonl.zst")));
    Write(paths.back(), Zstd(Corpus(1500 + 10 * static_cast<int>(i % 4))));
  }
  auto files = ListInputs(Env::Default(), paths);
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), kFiles);
  auto splits = PlanSplits(Env::Default(), *files, 16 << 10, nullptr, InputOptions());
  ASSERT_TRUE(splits.ok());
  ASSERT_GT(splits->size(), 10 * kFiles);
  constexpr size_t kLimit = 6;
  SplitDecoders d(Env::Default(), *files, *splits, InputOptions(), kLimit);
  for (size_t f = 0; f < kFiles; ++f) EXPECT_FALSE(d.Started(f)) << f;
  std::vector<std::vector<std::string>> got(kFiles);
  {
    auto first = OpenRecordReader(Env::Default(), (*files)[0], (*splits)[0], InputOptions(), &d);
    ASSERT_TRUE(first.ok());
    EXPECT_TRUE(d.Started(0));
    EXPECT_TRUE(d.Started(1));
    EXPECT_TRUE(d.Started(2));
    EXPECT_FALSE(d.Started(3));
    // Files 1 and 2 decode up to the limit while file 0 is read (each has more pieces than that),
    // and no further.
    for (int i = 0; i < 500 && (d.HeldPieces(1) < kLimit || d.HeldPieces(2) < kLimit); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(d.HeldPieces(1), kLimit);
    EXPECT_EQ(d.HeldPieces(2), kLimit);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(d.HeldPieces(1), kLimit);
    EXPECT_EQ(d.HeldPieces(2), kLimit);
    EXPECT_FALSE(d.Started(3));
    EXPECT_LE(d.HeldPieces(0), kLimit);
  }
  // The first split again is decoded privately (it was claimed); then the rest, in order.
  for (const InputSplit& s : *splits) ReadSplitInto(*files, s, &d, &got);
  for (size_t f = 0; f < kFiles; ++f) EXPECT_TRUE(d.Started(f)) << f;
  for (size_t f = 0; f < kFiles; ++f) {
    Outcome whole = ReadSplits((*files)[f], {InputSplit{}}, InputOptions(), nullptr);
    EXPECT_TRUE(whole.error.empty());
    EXPECT_EQ(got[f], whole.records) << "file " << f;
  }
}

// The decoders of the kAheadFiles largest files that hold at least a kLargeFileShare-th of the
// listed bytes start with the SplitDecoders, wherever those files are listed (here after eight
// small ones, and a third large one that is smaller than those two waits for its turn), and decode
// up to the limit before any split is claimed. Every file reads exactly as a whole read gives.
TEST(StreamSplitsTest, TheLargestFilesDecodeFromTheStart) {
  TempDir t;
  std::vector<std::string> paths;
  // f0..f7 small; f8 and f10 the largest, f9 large but smaller than both.
  const int records[] = {150, 150, 150, 150, 150, 150, 150, 150, 3000, 2000, 3200};
  for (int i = 0; i < 11; ++i) {
    paths.push_back(t.Join(absl::StrCat("f", i < 10 ? "0" : "", i, ".jsonl.zst")));
    Write(paths.back(), Zstd(Corpus(records[i])));
  }
  auto files = ListInputs(Env::Default(), paths);
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 11u);
  uint64_t total = 0;
  for (const InputFile& f : *files) total += f.size;
  ASSERT_GE((*files)[9].size * SplitDecoders::kLargeFileShare, total);
  ASSERT_LT((*files)[7].size * SplitDecoders::kLargeFileShare, total);
  auto splits = PlanSplits(Env::Default(), *files, 16 << 10, nullptr, InputOptions());
  ASSERT_TRUE(splits.ok());
  constexpr size_t kLimit = 6;
  SplitDecoders d(Env::Default(), *files, *splits, InputOptions(), kLimit);
  for (size_t f = 0; f < 11; ++f) EXPECT_EQ(d.Started(f), f == 8 || f == 10) << f;
  for (int i = 0; i < 500 && (d.HeldPieces(8) < kLimit || d.HeldPieces(10) < kLimit); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(d.HeldPieces(8), kLimit);
  EXPECT_EQ(d.HeldPieces(10), kLimit);
  std::vector<std::vector<std::string>> got(11);
  for (const InputSplit& s : *splits) ReadSplitInto(*files, s, &d, &got);
  for (size_t f = 0; f < 11; ++f) {
    EXPECT_TRUE(d.Started(f)) << f;
    Outcome whole = ReadSplits((*files)[f], {InputSplit{}}, InputOptions(), nullptr);
    EXPECT_TRUE(whole.error.empty());
    EXPECT_EQ(got[f], whole.records) << "file " << f;
  }
}

TEST(StreamSplitsTest, ReadersMayStopEarlyAndSplitsMayBeReopened) {
  TempDir t;
  Write(t.Join("c.jsonl.zst"), Zstd(Corpus(1500)));
  Case c = Plan(t.Join("c.jsonl.zst"), 16 << 10, InputOptions());
  ASSERT_GT(c.splits.size(), 4u);
  Outcome whole = ReadSplits(c.file, {InputSplit{}}, InputOptions(), nullptr);
  SplitDecoders d(Env::Default(), {c.file}, c.splits, InputOptions(), 2);
  {
    // The first split with a record: one record read, then the reader dropped; its remaining
    // pieces are released and nothing blocks.
    bool got = false;
    for (size_t i = 0; i < c.splits.size() && !got; ++i) {
      auto r = OpenRecordReader(Env::Default(), c.file, c.splits[i], InputOptions(), &d);
      ASSERT_TRUE(r.ok());
      Document doc;
      got = *(*r)->Next(&doc);
    }
    ASSERT_TRUE(got);
  }
  // Those splits again (not shared a second time: decoded privately), then the rest, shared.
  Outcome again = ReadSplits(c.file, c.splits, InputOptions(), &d);
  EXPECT_EQ(again, whole);
}

}  // namespace
}  // namespace grist
