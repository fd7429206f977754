// Parquet and dataset inputs (common/internal/python_records.h) as the record readers see them: the
// input kinds, the child process's rows as records (row N = line N), its failure as a Status after
// the rows it wrote, and a reader dropped early. The child here is a shell script standing in for
// Python (GRIST_PYTHON), so these run without pyarrow; tests/python/test_hf.py runs the real reader.
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/config.h"
#include "common/env.h"
#include "common/records.h"
#include "tests/common/records_test_util.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::grist::testing::ReadAll;
using ::grist::testing::ReadResult;
using ::grist::testing::TempDir;

// Sets GRIST_PYTHON to a script with `body` for the life of the object.
class FakePython {
 public:
  FakePython(const TempDir& t, const std::string& body) : path_(t.Join("python")) {
    EXPECT_TRUE(WriteFileAtomic(Env::Default(), path_, "#!/bin/sh\n" + body + "\n").ok());
    ::chmod(path_.c_str(), 0755);
    ::setenv("GRIST_PYTHON", path_.c_str(), 1);
  }
  ~FakePython() { ::unsetenv("GRIST_PYTHON"); }

 private:
  std::string path_;
};

TEST(PythonRecordsTest, InputKinds) {
  EXPECT_EQ(FormatOf("/d/part-0.parquet"), InputFormat::kParquet);
  EXPECT_EQ(FormatOf("hf-dataset:allenai/c4:validation"), InputFormat::kHfDataset);
  EXPECT_EQ(FormatOf("/d/parquet.jsonl"), InputFormat::kJsonl);
  EXPECT_EQ(*HfDatasetInput("allenai/c4:train"), "hf-dataset:allenai/c4:train");
  EXPECT_EQ(HfDatasetInput("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HfDatasetInput(":train").status().code(), absl::StatusCode::kInvalidArgument);
  // A dataset is listed as given, without touching the disk; it is one split.
  auto files = ListInputs(Env::Default(), {"hf-dataset:/no/such/folder:test"});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].path, "hf-dataset:/no/such/folder:test");
  EXPECT_EQ((*files)[0].format, InputFormat::kHfDataset);
  EXPECT_EQ((*files)[0].size, 0u);

  TempDir t;
  const std::string toml = t.Join("c.toml");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), toml,
                              "[inputs]\npaths = [\"a.jsonl\"]\nhf_datasets = [\"x/y:test\", \"z\"]\n")
                  .ok());
  auto c = Config::FromFile(Env::Default(), toml);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*ConfigInputs(*c),
            (std::vector<std::string>{"a.jsonl", "hf-dataset:x/y:test", "hf-dataset:z"}));
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), toml, "[inputs]\nhf_datasets = [\"\"]\n").ok());
  auto bad = ConfigInputs(*Config::FromFile(Env::Default(), toml));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("key 'inputs.hf_datasets'"), std::string::npos) << bad.status();
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), toml, "seed = 1\n").ok());
  bad = ConfigInputs(*Config::FromFile(Env::Default(), toml));
  EXPECT_NE(bad.status().message().find("must name at least one input"), std::string::npos)
      << bad.status();
}

TEST(PythonRecordsTest, RowsAreRecordsNumberedByRow) {
  TempDir t;
  const std::string pq = t.Join("rows.parquet");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), pq, "PAR1").ok());
  // The arguments the reader passes end the first record's text; then a row without text.
  FakePython py(t, R"(for a in "$@"; do last="$last $a"; done
printf '{"text": "%s", "id": 7}\n' "$last"
printf '{"text": null, "id": 8}\n{"id": 9, "text": "third"}\n')");
  ReadResult r = ReadAll(pq);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 3u);
  EXPECT_NE(r.docs[0].text.find(" --records parquet " + pq + " --text-field text"), std::string::npos)
      << r.docs[0].text;
  EXPECT_EQ(r.docs[0].metadata, "{\"id\":7}");
  EXPECT_EQ(r.docs[0].source, pq);
  EXPECT_EQ(r.docs[0].line, 1u);
  EXPECT_EQ(r.docs[1].error, pq + ":2: text field 'text' is not a string");
  EXPECT_EQ(r.docs[2].text, "third");
  EXPECT_EQ(r.docs[2].line, 3u);

  // A dataset: the spec without its prefix is the source the child gets.
  ReadResult d = ReadAll("hf-dataset:org/name:validation");
  ASSERT_TRUE(d.status.ok()) << d.status;
  ASSERT_EQ(d.docs.size(), 3u);
  EXPECT_NE(d.docs[0].text.find(" --records hf-dataset org/name:validation "), std::string::npos)
      << d.docs[0].text;
  EXPECT_EQ(d.docs[0].id(), "hf-dataset:org/name:validation:1");
}

TEST(PythonRecordsTest, ChildFailureComesAfterItsRowsAndNamesTheSource) {
  TempDir t;
  const std::string pq = t.Join("bad.parquet");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), pq, "PAR1").ok());
  {
    FakePython py(t, "while [ \"$1\" != --records ]; do shift; done\n"
                     "echo '{\"text\": \"first\"}'\nfor i in 1 2 3; do echo progress >&2; done\n"
                     "echo \"grist.hf: $3: no column 'text' (columns: body)\" >&2\nexit 1");
    ReadResult r = ReadAll(pq);
    ASSERT_EQ(r.docs.size(), 1u);
    EXPECT_EQ(r.docs[0].text, "first");
    EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status.message().find(pq + ": no column 'text' (columns: body)"), std::string::npos)
        << r.status;
  }
  {
    FakePython py(t, "echo 'Traceback: something else' >&2\nkill -9 $$");
    ReadResult r = ReadAll(pq);
    EXPECT_TRUE(r.docs.empty());
    EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status.message().find(pq + ": the Python reader ("), std::string::npos) << r.status;
    EXPECT_NE(r.status.message().find("was killed by signal 9: Traceback: something else"),
              std::string::npos)
        << r.status;
  }
  ::setenv("GRIST_PYTHON", t.Join("no-such-python").c_str(), 1);
  ReadResult r = ReadAll(pq);
  ::unsetenv("GRIST_PYTHON");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status.message().find(pq + ": reading Parquet needs Python 3 with pyarrow: cannot run '"),
            std::string::npos)
      << r.status;
}

TEST(PythonRecordsTest, ReaderDroppedEarlyStopsTheChild) {
  TempDir t;
  const std::string pq = t.Join("endless.parquet");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), pq, "PAR1").ok());
  FakePython py(t, "while :; do echo '{\"text\": \"again\"}'; done");
  auto files = ListInputs(Env::Default(), {pq});
  ASSERT_TRUE(files.ok());
  auto splits = PlanSplits(Env::Default(), *files, 1 << 20);
  ASSERT_TRUE(splits.ok());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    auto reader = OpenRecordReader(Env::Default(), (*files)[0], (*splits)[0], InputOptions());
    ASSERT_TRUE(reader.ok()) << reader.status();
    Document d;
    for (int k = 0; k < 100; ++k) {
      auto more = (*reader)->Next(&d);
      ASSERT_TRUE(more.ok() && *more);
      ASSERT_EQ(d.text, "again");
    }
  }  // each reader's child is killed and reaped here
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(PythonRecordsTest, DatasetHashIsOfTheRows) {
  TempDir t;
  FakePython py(t, "printf '{\"text\": \"a\"}\\n'");
  InputFile f{"hf-dataset:x", 0, InputFormat::kHfDataset};
  auto h = HashInput(Env::Default(), f);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, Hash128Of("{\"text\": \"a\"}\n"));
}

}  // namespace
}  // namespace grist
