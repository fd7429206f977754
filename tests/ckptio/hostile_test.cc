// Hostile and malformed input: every case is a clear DataLoss naming the problem, never a crash.
#include <gtest/gtest.h>

#include <string>

#include "ckptio/checkpoint.h"
#include "ckptio/reader.h"
#include "common/env.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

std::string Le64(uint64_t n) {
  std::string s(8, '\0');
  for (int b = 0; b < 8; ++b) s[b] = static_cast<char>(n >> (8 * b));
  return s;
}

std::string File(const std::string& json, size_t data_bytes) {
  return Le64(json.size()) + json + std::string(data_bytes, '\x01');
}

class Hostile : public ::testing::Test {
 protected:
  // Writes `bytes` and reads it back as a foreign safetensors file (no grist checksums needed).
  absl::Status Read(const std::string& bytes) {
    const std::string path = tmp_.Join("x.safetensors");
    auto f = Env::Default()->NewWritableFile(path);
    EXPECT_TRUE(f.ok());
    EXPECT_TRUE((*f)->Append(bytes).ok());
    EXPECT_TRUE((*f)->Close().ok());
    ReadOptions ro;
    ro.require_checksums = false;
    return ReadCheckpointFile(path, ro).status();
  }
  void ExpectRejected(const std::string& bytes, const std::string& fragment) {
    absl::Status s = Read(bytes);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos) << s;
    EXPECT_NE(std::string(s.message()).find("x.safetensors"), std::string::npos) << s;
  }
  grist::testing::TempDir tmp_;
};

TEST_F(Hostile, ForeignFileWithoutChecksumsLoadsWhenAllowed) {
  EXPECT_TRUE(Read(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8)).ok());
  const std::string path = tmp_.Join("x.safetensors");
  EXPECT_EQ(ReadCheckpointFile(path, {}).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(Hostile, HeaderLengths) {
  ExpectRejected(std::string(4, '\0'), "shorter than 8 bytes");
  ExpectRejected(Le64(1ull << 40) + std::string(100, ' '), "exceeds the 100 MB limit");
  ExpectRejected(Le64(1000) + std::string(100, ' '), "runs past the end");
  ExpectRejected(Le64(~0ull) + std::string(100, ' '), "exceeds the 100 MB limit");
}

TEST_F(Hostile, MalformedHeaders) {
  ExpectRejected(File("{\"a\": [", 0), "JSON");
  ExpectRejected(File("[]", 0), "not a JSON object");
  ExpectRejected(File(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16), "unknown dtype");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "bad dimension");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "data_offsets span");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "bad data_offsets");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})", 8),
                 "overflows");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlaps");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12), "hole");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 9), "tensor data ends at");
  ExpectRejected(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2), "tensor data ends at");
  ExpectRejected(File(R"({"__metadata__":{"k":1}})", 0), "is not a string");
  ExpectRejected(File(R"({"__metadata__":{"grist.block_size":"4"}})", 0), "incomplete grist checksum");
}

TEST_F(Hostile, ManifestNamesAndRanks) {
  auto manifest = [](const std::string& name, int rank, int world) {
    Manifest m;
    m.world_size = world;
    m.files = {{rank, name, 10, 0, 0, {}, 0}};
    return ManifestJson(m);
  };
  for (const std::string name : {"../x", "a/b", "..", ".", "", "manifest.json", "a\\b"}) {
    auto r = ParseManifest(manifest(name, 0, 1), "m");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << name;
  }
  EXPECT_FALSE(ParseManifest(manifest("r", 1, 1), "m").ok());   // rank out of range
  EXPECT_FALSE(ParseManifest(manifest("r", 0, 2), "m").ok());   // a rank missing
  EXPECT_TRUE(ParseManifest(manifest("r", 0, 1), "m").ok());
  EXPECT_FALSE(ParseManifest("{}", "m").ok());
  EXPECT_FALSE(ParseManifest("", "m").ok());
  // A manifest pointing outside the folder is refused before any file is opened.
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp_.Join("c")).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp_.Join("c/manifest.json"), manifest("../x", 0, 1)).ok());
  EXPECT_EQ(LoadCheckpoint(tmp_.Join("c"), {}).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace grist::ckptio
