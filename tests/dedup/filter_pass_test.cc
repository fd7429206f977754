// The dedup filter's pass-through of the frames of input parts whose documents it keeps as read
// (docs/dedup.md, "The filter copies the frames it keeps"), and what it does when a frame read
// again is not what it read the first time.
#include <gtest/gtest.h>
#include <zstd.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/documents_format.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "common/records.h"
#include "dedup/dedup.h"
#include "tests/dedup/dedup_test_util.h"
#include "tests/test_util.h"

namespace grist::dedup {
namespace {

using ::grist::dedup::testing::Budget64;
using ::grist::dedup::testing::FamilyCorpus;
using ::grist::dedup::testing::OutDoc;
using ::grist::dedup::testing::OutputBytes;
using ::grist::dedup::testing::Quiet;
using ::grist::dedup::testing::ReadOutput;
using ::grist::testing::TempDir;

// Writes the documents of `jsonl` as a grist part (prefix "in") in `dir`, in frames of about
// `frame_bytes` compressed at `zstd_level`; returns the part's path.
std::string WritePart(const std::string& jsonl, const std::string& dir, uint64_t frame_bytes,
                      int zstd_level = 1) {
  auto files = ListInputs(Env::Default(), {jsonl});
  EXPECT_TRUE(files.ok());
  auto reader = OpenRecordReader(Env::Default(), (*files)[0], InputSplit{}, InputOptions{});
  EXPECT_TRUE(reader.ok());
  OutputOptions o;
  o.frame_bytes = frame_bytes;
  o.zstd_level = zstd_level;
  auto w = RecordWriter::Open(Env::Default(), dir, "in", o);
  EXPECT_TRUE(w.ok());
  Document d;
  while (*(*reader)->Next(&d)) EXPECT_TRUE((*w)->Append(d).ok());
  auto parts = (*w)->Finish();
  EXPECT_TRUE(parts.ok() && parts->size() == 1u);
  return (*parts)[0].path;
}

// The frames of a part, from its index, each with its compressed bytes and its content.
struct PartFrame {
  std::string compressed, content;
  uint64_t records = 0;
};
std::vector<PartFrame> FramesOf(const std::string& path) {
  std::vector<PartFrame> out;
  auto f = Env::Default()->NewRandomAccessFile(path);
  EXPECT_TRUE(f.ok());
  auto index = ReadZstdFrameIndex(**f);
  EXPECT_TRUE(index.ok() && index->has_value());
  const std::string data = *ReadFileToString(Env::Default(), path);
  for (const ZstdFrame& z : **index) {
    PartFrame p;
    p.compressed = data.substr(z.offset, z.bytes);
    p.content = testing::Unzstd(p.compressed);
    p.records = z.records;
    out.push_back(std::move(p));
  }
  return out;
}

// The filter copies each frame of an input part whose documents it keeps as they were read, byte
// for byte, instead of compressing them again; a frame holding a removed document is written
// record by record. What is written is what the same documents as plain JSON Lines give, and the
// bytes do not depend on the thread count.
TEST(Dedup, FramesOfKeptDocumentsPassThroughTheFilter) {
  TempDir tmp;
  const std::string jsonl = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), jsonl, FamilyCorpus(40, 10)).ok());
  const std::string part = WritePart(jsonl, tmp.Join("part"), 2 << 10);  // one to two documents a frame
  const std::vector<PartFrame> frames = FramesOf(part);
  ASSERT_GT(frames.size(), 50u);
  DedupOptions o = Budget64();
  o.split_bytes = 16 << 10;
  auto plain = RunDedup(Env::Default(), {jsonl}, tmp.Join("plain"), o, Quiet(1));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_GT(plain->counts.docs_removed, 50u);
  std::string bytes[2];
  for (int k = 0; k < 2; ++k) {
    const std::string out = tmp.Join(absl::StrCat("p", k));
    auto r = RunDedup(Env::Default(), {part}, out, o, Quiet(k == 0 ? 1 : 3));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->counts.docs_removed, plain->counts.docs_removed);
    EXPECT_EQ(r->counts.bytes_out, plain->counts.bytes_out);
    EXPECT_EQ(OutputBytes(out), OutputBytes(tmp.Join("plain")));
    EXPECT_EQ(OutputBytes(JoinPath(out, "removed")), OutputBytes(tmp.Join("plain/removed")));
    bytes[k] = *ReadFileToString(Env::Default(), JoinPath(out, "dedup-00000.jsonl.zst"));
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  // A frame is in the output as it is exactly when none of its documents was removed.
  std::set<std::string> removed;  // "line" of each removed document of the input
  for (const OutDoc& d : ReadOutput(tmp.Join("p0/removed"))) removed.insert(std::to_string(d.doc.line));
  uint64_t line = 0;
  int passed = 0, rewritten = 0;
  for (const PartFrame& f : frames) {
    bool any_removed = false;
    for (uint64_t i = 0; i < f.records; ++i) any_removed |= removed.count(std::to_string(++line)) > 0;
    const bool copied = bytes[0].find(f.compressed) != std::string::npos;
    EXPECT_EQ(copied, !any_removed) << "frame ending at line " << line;
    (copied ? passed : rewritten)++;
  }
  EXPECT_GT(passed, 20) << rewritten;
  EXPECT_GT(rewritten, 20) << passed;

  // A part whose records are not as grist writes them (a space after each '{': the same
  // documents) passes no frame through: the records are written as grist serializes them.
  std::string odd, entries;
  auto le = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) entries.push_back(static_cast<char>(v >> (8 * i)));
  };
  for (const PartFrame& f : frames) {
    std::string c;
    for (char ch : f.content) {
      c.push_back(ch);
      if (ch == '{' && (c.size() == 1 || c[c.size() - 2] == '\n')) c.push_back(' ');
    }
    std::string z(ZSTD_compressBound(c.size()), '\0');
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    z.resize(ZSTD_compress2(cctx, z.data(), z.size(), c.data(), c.size()));
    ZSTD_freeCCtx(cctx);
    odd += z;
    le(z.size());
    le(f.records);
  }
  odd += documents_format::IndexFrame(entries);
  const std::string odd_path = tmp.Join("odd/in-00000.jsonl.zst");
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp.Join("odd")).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), odd_path, odd).ok());
  auto f = Env::Default()->NewRandomAccessFile(odd_path);
  ASSERT_TRUE(f.ok());
  auto index = ReadZstdFrameIndex(**f);
  ASSERT_TRUE(index.ok() && index->has_value());  // a valid index: only the records differ
  auto r = RunDedup(Env::Default(), {odd_path}, tmp.Join("odd_out"), o, Quiet(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(OutputBytes(tmp.Join("odd_out")), OutputBytes(tmp.Join("plain")));
}

// A frame read again that comes back short (the part cut or changed since its documents were
// read) is not copied: its documents are written record by record, and the output is what the
// plain JSON Lines give. An I/O error reading it again fails the stage, naming the file.
TEST(Dedup, AFrameThatCannotBeReadAgainIsWrittenRecordByRecordOrFailsTheStage) {
  TempDir tmp;
  const std::string jsonl = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), jsonl, FamilyCorpus(40, 10)).ok());
  // Level 3: a frame written record by record again (at level 1) differs from the one copied.
  const std::string part = WritePart(jsonl, tmp.Join("part"), 2 << 10, 3);
  DedupOptions o = Budget64();
  o.split_bytes = 16 << 10;  // several frames a split: only the filter reads a later one alone
  auto plain = RunDedup(Env::Default(), {jsonl}, tmp.Join("plain"), o, Quiet(1));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto clean_run = RunDedup(Env::Default(), {part}, tmp.Join("ok"), o, Quiet(1));
  ASSERT_TRUE(clean_run.ok()) << clean_run.status();
  const std::string passed = *ReadFileToString(Env::Default(), tmp.Join("ok/dedup-00000.jsonl.zst"));
  // The first frame copied whole that does not begin a split.
  auto f = Env::Default()->NewRandomAccessFile(part);
  ASSERT_TRUE(f.ok());
  auto index = ReadZstdFrameIndex(**f);
  ASSERT_TRUE(index.ok() && index->has_value());
  auto files = ListInputs(Env::Default(), {part});
  ASSERT_TRUE(files.ok());
  auto splits = PlanSplits(Env::Default(), *files, BalancedSplitBytes(*files, o.split_bytes, 1));
  ASSERT_TRUE(splits.ok());
  ASSERT_GT(splits->size(), 4u);
  std::set<uint64_t> split_begins;
  for (const InputSplit& sp : *splits) split_begins.insert(sp.begin);
  const std::string data = *ReadFileToString(Env::Default(), part);
  const ZstdFrame* target = nullptr;
  for (const ZstdFrame& z : **index) {
    if (target == nullptr && split_begins.count(z.offset) == 0 &&
        passed.find(data.substr(z.offset, z.bytes)) != std::string::npos) {
      target = &z;
    }
  }
  ASSERT_NE(target, nullptr);
  const std::string frame = data.substr(target->offset, target->bytes);

  FaultInjectionEnv short_env(Env::Default());
  short_env.FailReadAt(part, target->offset, target->bytes, /*short_read=*/true);
  auto r = RunDedup(&short_env, {part}, tmp.Join("short"), o, Quiet(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(OutputBytes(tmp.Join("short")), OutputBytes(tmp.Join("plain")));
  const std::string written =
      *ReadFileToString(Env::Default(), tmp.Join("short/dedup-00000.jsonl.zst"));
  EXPECT_EQ(written.find(frame), std::string::npos);
  // Every other frame still passes.
  for (const ZstdFrame& z : **index) {
    if (&z == target) continue;
    const std::string other = data.substr(z.offset, z.bytes);
    EXPECT_EQ(written.find(other) != std::string::npos, passed.find(other) != std::string::npos);
  }

  FaultInjectionEnv error_env(Env::Default());
  error_env.FailReadAt(part, target->offset, target->bytes);
  auto e = RunDedup(&error_env, {part}, tmp.Join("error"), o, Quiet(2));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(part), std::string::npos) << e.status();
  EXPECT_NE(e.status().message().find("Input/output error"), std::string::npos) << e.status();
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("error/dedup-00000.jsonl.zst")));
}

}  // namespace
}  // namespace grist::dedup
