// Tests of the record writer (common/record_writer.h): parts, frames, batches and FinishAll.
#include "common/record_writer.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/document.h"
#include "common/documents_format.h"
#include "common/env.h"
#include "tests/common/records_test_util.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::grist::testing::ReadAll;
using ::grist::testing::TempDir;

TEST(RecordsTest, WriterPartsRoundTrip) {
  TempDir t;
  OutputOptions o;
  o.part_bytes = 4000;
  auto w = RecordWriter::Open(Env::Default(), t.Join("out"), "part", o);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 300; ++i) {
    Document d;
    d.text = "text \"" + std::to_string(i) + "\"\n\x01";
    d.metadata = "{\"k\":" + std::to_string(i) + "}";
    d.source = "in/file.jsonl";
    d.line = static_cast<uint64_t>(i + 10);
    ASSERT_TRUE((*w)->Append(d, i % 2 ? "\"reasons\":[\"odd\"]" : "").ok());
  }
  auto parts = (*w)->Finish();
  ASSERT_TRUE(parts.ok());
  EXPECT_GT(parts->size(), 3u);
  uint64_t total = 0;
  for (const auto& p : *parts) total += p.records;
  EXPECT_EQ(total, 300u);
  auto names = Env::Default()->ListDir(t.Join("out"));
  for (const auto& n : *names) EXPECT_EQ(n.find(".tmp"), std::string::npos) << n;
  EXPECT_EQ((*names)[0], "part-00000.jsonl.zst");
  auto r = ReadAll(t.Join("out"));
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 300u);
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(r.docs[i].text, "text \"" + std::to_string(i) + "\"\n\x01");
    EXPECT_EQ(r.docs[i].metadata, "{\"k\":" + std::to_string(i) + "}");
    EXPECT_EQ(r.docs[i].id(), "in/file.jsonl:" + std::to_string(i + 10));
  }
  EXPECT_EQ(SerializeRecord(r.docs[0], "\"x\":1"),
            "{\"text\":\"text \\\"0\\\"\\n\\u0001\",\"meta\":{\"k\":0},"
            "\"grist\":{\"src\":\"in/file.jsonl\",\"line\":10},\"x\":1}");
}

// One zstd frame of `content`, with or without its content checksum.
std::string Frame(const std::string& content, bool checksum = true) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 5);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  std::string out(ZSTD_compressBound(content.size()), '\0');
  out.resize(ZSTD_compress2(c, out.data(), out.size(), content.data(), content.size()));
  ZSTD_freeCCtx(c);
  return out;
}

// A frame compressed elsewhere goes into the part byte for byte, after the frames the writer
// compressed before it, with its records in the frame index; a frame that does not decode to
// exactly the given lines (or lacks its checksum) is refused by CheckDataFrame, so nothing of it
// can be appended. The part's bytes do not depend on the compressing threads.
// Many frames appended whole behind a frame still compressing (the dedup filter's output: most
// frames passed through, a few re-serialized) wait in file order whatever the threads: the same
// bytes with 1, 2 and 8 compressing threads, every record read back in order.
TEST(RecordWriterTest, FramesAppendedWholeQueueBehindCompressingOnesInOrder) {
  TempDir t;
  std::vector<Document> docs;
  std::vector<std::string> frames, contents;
  for (int i = 0; i < 300; ++i) {
    Document d;
    d.text = absl::StrCat("doc ", i, " ", std::string(30 + (i * 37) % 500, 'a' + i % 26));
    d.source = "in.jsonl";
    d.line = static_cast<uint64_t>(i + 1);
    docs.push_back(d);
  }
  std::string bytes[3];
  const int threads[3] = {1, 2, 8};
  for (int k = 0; k < 3; ++k) {
    OutputOptions o;
    o.compress_threads = threads[k];
    o.frame_bytes = 700;  // several records per frame: frames compressed here end often
    const std::string dir = t.Join(absl::StrCat("t", k));
    auto w = RecordWriter::Open(Env::Default(), dir, "part", o);
    ASSERT_TRUE(w.ok());
    // Runs of 3 records appended one by one (compressed here), then 20 records as frames of 2
    // appended whole (10 frames: more than the threads and past threads x frame_bytes).
    size_t i = 0;
    while (i < docs.size()) {
      for (size_t j = 0; j < 3 && i < docs.size(); ++j) ASSERT_TRUE((*w)->Append(docs[i++]).ok());
      for (size_t f = 0; f < 10 && i + 1 < docs.size(); ++f, i += 2) {
        const std::string content =
            SerializeRecord(docs[i]) + "\n" + SerializeRecord(docs[i + 1]) + "\n";
        auto checked = CheckDataFrame(Frame(content), content);
        ASSERT_TRUE(checked.ok()) << checked.status();
        ASSERT_TRUE((*w)->AppendFrame(std::move(*checked)).ok());
      }
    }
    EXPECT_EQ((*w)->records(), docs.size());
    ASSERT_TRUE((*w)->Finish().ok());
    auto data = ReadFileToString(Env::Default(), JoinPath(dir, "part-00000.jsonl.zst"));
    ASSERT_TRUE(data.ok());
    bytes[k] = *data;
    auto r = ReadAll(dir);
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.docs.size(), docs.size());
    for (size_t j = 0; j < docs.size(); ++j) {
      ASSERT_EQ(SerializeRecord(r.docs[j]), SerializeRecord(docs[j])) << threads[k] << " " << j;
    }
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  EXPECT_EQ(bytes[0], bytes[2]);
}

// A write that fails on the writer's own thread (compressing pool) comes back to the caller, from a
// later Append or from Finish, as the failed write's error naming the part; the writer neither
// hangs nor publishes the part.
TEST(RecordWriterTest, AWriteFailingOnTheWritersThreadIsReturned) {
  TempDir t;
  for (int threads : {1, 3}) {
    FaultInjectionEnv env(Env::Default());
    OutputOptions o;
    o.compress_threads = threads;
    o.frame_bytes = 512;
    const std::string dir = t.Join(absl::StrCat("w", threads));
    auto w = RecordWriter::Open(&env, dir, "part", o);
    ASSERT_TRUE(w.ok());
    env.SetDiskSpace(3000);  // a few frames, then ENOSPC
    absl::Status first;
    for (int i = 0; i < 400 && first.ok(); ++i) {
      Document d;
      d.text = absl::StrCat("document ", i, " ", std::string(100 + i % 50, 'x'));
      first = (*w)->Append(d);
    }
    absl::Status finished = (*w)->Finish().status();
    const absl::Status& s = first.ok() ? finished : first;
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << threads << ": " << s;
    EXPECT_NE(std::string(s.message()).find("part-00000.jsonl.zst"), std::string::npos) << s;
    EXPECT_FALSE(finished.ok()) << threads;
    w->reset();
    EXPECT_FALSE(Env::Default()->FileExists(JoinPath(dir, "part-00000.jsonl.zst"))) << threads;
  }
}

TEST(RecordWriterTest, AppendFrameCopiesACheckedFrameBetweenRecords) {
  TempDir t;
  std::vector<Document> docs(12);
  for (int i = 0; i < 12; ++i) {
    docs[i].text = absl::StrCat("doc ", i, " ", std::string(40 + i * 7, 'a' + i));
    docs[i].source = "in.jsonl";
    docs[i].line = static_cast<uint64_t>(i + 1);
  }
  std::string content;
  for (int i = 4; i < 8; ++i) content += SerializeRecord(docs[i]) + "\n";
  const std::string frame = Frame(content);
  std::string changed = content;
  changed[20] ^= 1;  // same size, other bytes
  std::string bytes[2];
  for (int k = 0; k < 2; ++k) {
    OutputOptions o;
    o.compress_threads = k == 0 ? 1 : 3;
    o.frame_bytes = 200;  // a frame every two records or so
    const std::string dir = t.Join(absl::StrCat("t", k));
    auto w = RecordWriter::Open(Env::Default(), dir, "part", o);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE((*w)->Append(docs[i]).ok());
    const auto invalid = absl::StatusCode::kInvalidArgument;
    auto code = [](const std::string& f, const std::string& c) {
      return CheckDataFrame(f, c).status().code();
    };
    EXPECT_EQ(code(frame, content.substr(0, content.size() - 1)), invalid);
    EXPECT_EQ(code(Frame(changed), content), invalid);
    EXPECT_EQ(code(Frame(content, false), content), invalid);
    EXPECT_EQ(code(frame + frame, content + content), invalid);
    EXPECT_EQ(code(frame, content + content), invalid);
    EXPECT_EQ(code(frame.substr(0, frame.size() - 1), content), invalid);
    EXPECT_EQ(code("", ""), invalid);
    EXPECT_EQ((*w)->AppendFrame(CheckedFrame()).code(), invalid);
    auto checked = CheckDataFrame(frame, content);
    ASSERT_TRUE(checked.ok()) << checked.status();
    EXPECT_EQ(checked->records(), 4u);
    EXPECT_EQ(checked->content_bytes(), content.size());
    absl::Status s = (*w)->AppendFrame(std::move(*checked));
    ASSERT_TRUE(s.ok()) << s;
    for (int i = 8; i < 12; ++i) ASSERT_TRUE((*w)->Append(docs[i]).ok());
    EXPECT_EQ((*w)->records(), 12u);
    ASSERT_TRUE((*w)->Finish().ok());
    const std::string path = JoinPath(dir, "part-00000.jsonl.zst");
    auto data = ReadFileToString(Env::Default(), path);
    ASSERT_TRUE(data.ok());
    bytes[k] = *data;
    const size_t at = data->find(frame);
    ASSERT_NE(at, std::string::npos);
    auto r = ReadAll(dir);
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.docs.size(), 12u);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(SerializeRecord(r.docs[i]), SerializeRecord(docs[i])) << i;
    auto f = Env::Default()->NewRandomAccessFile(path);
    ASSERT_TRUE(f.ok());
    auto index = ReadZstdFrameIndex(**f);
    ASSERT_TRUE(index.ok() && index->has_value());
    uint64_t records = 0;
    bool found = false;
    for (const ZstdFrame& z : **index) {
      records += z.records;
      if (z.offset == at) {
        found = true;
        EXPECT_EQ(z.bytes, frame.size());
        EXPECT_EQ(z.records, 4u);
        EXPECT_EQ(records, 8u);  // after the four records before it
      }
    }
    EXPECT_TRUE(found);
    EXPECT_EQ(records, 12u);
    EXPECT_GT((*index)->size(), 3u);
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  // The frame's content counts toward the part's size: past part_bytes, the next record starts a
  // new part.
  OutputOptions o;
  o.part_bytes = content.size();
  auto w = RecordWriter::Open(Env::Default(), t.Join("parts"), "part", o);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->AppendFrame(*CheckDataFrame(frame, content)).ok());
  ASSERT_TRUE((*w)->Append(docs[8]).ok());
  auto parts = (*w)->Finish();
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].records, 4u);
  EXPECT_EQ((*parts)[1].records, 1u);
  EXPECT_EQ(ReadFileToString(Env::Default(), (*parts)[0].path)->substr(0, frame.size()), frame);
}

// FinishAll finishes several writers at once: each one's parts come back in the order given, as
// its own Finish would return them; a writer that fails (here: its rename) gives the error, and
// the others are still finished.
TEST(RecordWriterTest, FinishAllFinishesEveryWriterAndReportsTheFirstError) {
  TempDir t;
  FaultInjectionEnv env(Env::Default());
  auto write = [&](const std::string& dir, int n) {
    auto w = RecordWriter::Open(&env, t.Join(dir), "part");
    EXPECT_TRUE(w.ok());
    for (int i = 0; i < n; ++i) {
      Document d;
      d.text = dir + " " + std::to_string(i);
      EXPECT_TRUE((*w)->Append(d).ok());
    }
    return std::move(*w);
  };
  auto a = write("a", 30), b = write("b", 7), c = write("c", 1);
  auto parts = FinishAll({a.get(), b.get(), c.get()});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].at(0).records, 30u);
  EXPECT_EQ((*parts)[1].at(0).records, 7u);
  EXPECT_EQ((*parts)[2].at(0).records, 1u);
  EXPECT_EQ((*parts)[1][0].path, t.Join("b/part-00000.jsonl.zst"));
  EXPECT_EQ(ReadAll(t.Join("a")).docs.size(), 30u);
  EXPECT_EQ(ReadAll(t.Join("b")).docs.size(), 7u);

  auto d = write("d", 5), e = write("e", 5);
  env.SetFailRename(true);
  auto failed = FinishAll({d.get(), e.get()});
  env.SetFailRename(false);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(std::string(failed.status().message()).find(t.Join("d")), std::string::npos)
      << failed.status();
  // Both were finished (an Append after Finish is refused), and neither published a part.
  for (RecordWriter* w : {d.get(), e.get()}) {
    EXPECT_EQ(w->Append(Document()).code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_FALSE(Env::Default()->FileExists(t.Join("d/part-00000.jsonl.zst")));
  EXPECT_FALSE(Env::Default()->FileExists(t.Join("e/part-00000.jsonl.zst")));
}

// A RecordBatch appended whole writes the same parts, byte for byte, as Append of each of its
// records and as AppendSerialized of each: frame and part ends fall after the same records,
// whatever the batch boundaries, however the bytes reach the writer and however many threads
// compress the frames.
TEST(RecordsTest, AppendBatchWritesTheSameBytesAsAppend) {
  std::vector<Document> docs(500);
  for (int i = 0; i < 500; ++i) {
    docs[i].text = "doc \"" + std::to_string(i) + "\" " + std::string((i * 37) % 1500, 'a' + i % 26);
    docs[i].source = "in.jsonl";
    docs[i].line = static_cast<uint64_t>(i + 1);
    if (i % 5 == 0) docs[i].metadata = "{\"k\":" + std::to_string(i) + "}";
  }
  auto extra = [](int i) { return i % 3 ? std::string() : "\"reasons\":[\"r" + std::to_string(i) + "\"]"; };
  OutputOptions o;
  o.frame_bytes = 3000;   // records up to 1.5 KB: frames of one to dozens of records
  o.part_bytes = 100000;  // several parts
  TempDir t;
  auto ref = RecordWriter::Open(Env::Default(), t.Join("ref"), "p", o);
  ASSERT_TRUE(ref.ok());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE((*ref)->Append(docs[i], extra(i)).ok());
  auto ref_parts = (*ref)->Finish();
  ASSERT_TRUE(ref_parts.ok());
  ASSERT_GT(ref_parts->size(), 2u);
  // batch_docs 0: AppendSerialized record by record.
  for (auto [batch_docs, threads] : std::vector<std::pair<size_t, int>>{
           {0, 1}, {1, 1}, {7, 1}, {64, 1}, {500, 1}, {0, 2}, {1, 3}, {7, 2}, {64, 8}, {500, 4}}) {
    const std::string dir = t.Join("b" + std::to_string(batch_docs) + "t" + std::to_string(threads));
    OutputOptions ot = o;
    ot.compress_threads = threads;
    auto w = RecordWriter::Open(Env::Default(), dir, "p", ot);
    ASSERT_TRUE(w.ok());
    RecordBatch batch;
    ASSERT_TRUE((*w)->AppendBatch(batch).ok());  // an empty batch writes nothing
    for (int i = 0; i < 500; ++i) {
      if (batch_docs == 0) {
        ASSERT_TRUE((*w)->AppendSerialized(SerializeRecord(docs[i], extra(i))).ok());
        continue;
      }
      batch.Add(docs[i], extra(i));
      if (batch.size() == batch_docs || i == 499) {
        ASSERT_TRUE((*w)->AppendBatch(batch).ok());
        batch.Clear();
      }
    }
    EXPECT_EQ((*w)->records(), 500u);
    auto parts = (*w)->Finish();
    ASSERT_TRUE(parts.ok());
    ASSERT_EQ(parts->size(), ref_parts->size()) << batch_docs << " " << threads;
    for (size_t k = 0; k < parts->size(); ++k) {
      EXPECT_EQ((*parts)[k].records, (*ref_parts)[k].records) << batch_docs << " " << k;
      EXPECT_EQ(*ReadFileToString(Env::Default(), (*parts)[k].path),
                *ReadFileToString(Env::Default(), (*ref_parts)[k].path))
          << batch_docs << " " << threads << " " << k;
    }
  }
}

}  // namespace
}  // namespace grist
