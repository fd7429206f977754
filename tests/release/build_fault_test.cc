// `grist build` under kills and faults:
//  - a build reaches every named crash point of release/crash_points.h, in order;
//  - SIGKILLed at each point, it leaves no release that looks published unless the manifest is
//    whole, and the rerun resumes to exactly the bytes of an uninterrupted build;
//  - SIGKILLed during pack over an earlier release, it leaves that release published and valid
//    until the new one takes its place whole;
//  - a corrupt, truncated or missing stage record, and a deleted, truncated, changed or added
//    stage output, are detected on resume (the checksums in the record) and that stage is run
//    again, to the same release;
//  - injected ENOSPC, write, fsync and rename failures (FaultInjectionEnv) at every power-of-two
//    write fail the build with the injected error and publish nothing; the resume gives the same
//    release.
// The corpus is generated here (no ../shared needed).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "release/crash_points.h"
#include "release/release.h"
#include "shard/shard_format.h"
#include "tests/test_util.h"

namespace grist::release {
namespace {

using ::testing::HasSubstr;
using grist::testing::TempDir;


std::map<std::string, std::string> ReleaseBytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  grist::testing::CollectReleaseFiles(dir, "", &out);
  return out;
}

void ExpectSameRelease(const std::map<std::string, std::string>& want, const std::string& dir) {
  auto got = ReleaseBytes(dir);
  ASSERT_EQ(got.size(), want.size()) << dir;
  for (const auto& [path, bytes] : want) {
    ASSERT_TRUE(got.count(path)) << path;
    EXPECT_TRUE(got.at(path) == bytes) << path << " differs from the uninterrupted build";
  }
}

// Runs `grist build` in a child with `env_vars` set; returns the wait status.
int RunBuild(const std::string& config, const std::string& out,
             const std::vector<std::pair<std::string, std::string>>& env_vars,
             const std::string& log) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    for (const auto& [k, v] : env_vars) ::setenv(k.c_str(), v.c_str(), 1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const std::string bin = std::string(GRIST_BINARY_DIR) + "/grist";
    ::execl(bin.c_str(), bin.c_str(), "build", "--quiet", "--threads", "2", "--config",
            config.c_str(), "--output", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

class BuildFaultTest : public ::testing::Test {
 protected:
  // The suite's shared inputs are made by the first test's SetUp, not in SetUpTestSuite: a
  // failure there would have gtest skip every test (and ctest count them as passed).
  void SetUp() override {
    if (!prepared_) {
      prepared_ = true;
      Prepare();
    }
    ASSERT_NE(reference_, nullptr) << "the suite's reference build failed (see the first test)";
  }
  static void Prepare() {
    dir_ = new TempDir();
    // 300 documents of sentences over a small vocabulary (with the stop words the clean filters
    // look for), every tenth repeated verbatim further on (dedup removes those).
    static const char* kWords[] = {"the", "data", "pipeline", "token", "shard", "release", "loader",
                                   "train", "model", "batch", "seed", "merge", "task", "node",
                                   "cluster", "write", "read", "fast", "slow", "byte", "river",
                                   "stone", "green", "and", "to", "of", "with", "that",
                                   "have", "be"};
    Rng rng(11);
    std::string jsonl;
    std::vector<std::string> texts;
    for (int d = 0; d < 300; ++d) {
      std::string text;
      if (d % 10 == 9) {
        text = texts[d / 2];
      } else {
        int sentences = 3 + static_cast<int>(rng.Uniform(8));
        for (int s = 0; s < sentences; ++s) {
          int words = 6 + static_cast<int>(rng.Uniform(14));
          std::string sent;
          for (int w = 0; w < words; ++w) {
            std::string word = kWords[rng.Uniform(30)];
            if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
            sent += (w ? " " : "") + word;
          }
          text += (s ? " " : "") + sent + ".";
        }
      }
      texts.push_back(text);
      jsonl += "{\"text\": \"" + text + "\", \"n\": " + std::to_string(d) + "}\n";
    }
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), dir_->Join("corpus.jsonl"), jsonl).ok());
    std::string config =
        "seed = 5\n[release]\nversion = \"faults\"\n[inputs]\npaths = [\"" +
        dir_->Join("corpus.jsonl") +
        "\"]\n[dedup]\nmemory_limit_mb = 64\n"
        "[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = 300\ncharacter_coverage = 1.0\n"
        "byte_fallback = true\ninput_sentence_size = 100000\n"
        "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n"
        "[pack]\nseq_len = 64\nstrategy = \"bestfit\"\n"
        "[split]\nvalidation_fraction = 0.1\n[shard]\nmax_bytes = 16384\n";
    config_ = new std::string(dir_->Join("c.toml"));
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), *config_, config).ok());
    // The uninterrupted build, its work folder kept, with the points it reaches traced.
    const std::string trace = dir_->Join("trace.txt");
    int st = RunBuild(*config_, dir_->Join("ref"), {{"GRIST_CRASH_TRACE", trace}}, dir_->Join("ref.log"));
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << ReadFileToString(Env::Default(), dir_->Join("ref.log")).value_or("");
    reference_ = new std::map<std::string, std::string>(ReleaseBytes(dir_->Join("ref")));
    trace_ = new std::string(ReadFileToString(Env::Default(), trace).value_or(""));
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete trace_;
    delete config_;
    delete dir_;
  }
  static BuildOptions Options(const std::string& out) {
    BuildOptions o;
    o.config_path = *config_;
    o.output_dir = out;
    o.run.threads = 2;
    o.run.progress = false;
    return o;
  }
  // A copy of the reference build's release and work folder at `out`, to damage.
  static std::string CopyOfReference(const std::string& name) {
    const std::string out = dir_->Join(name);
    std::string cmd = "cp -a " + dir_->Join("ref") + " " + out + " && cp -a " + dir_->Join("ref.work") +
                      " " + out + ".work";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return out;
  }
  static bool prepared_;
  static TempDir* dir_;
  static std::string* config_;
  static std::map<std::string, std::string>* reference_;
  static std::string* trace_;
};

bool BuildFaultTest::prepared_ = false;
TempDir* BuildFaultTest::dir_ = nullptr;
std::string* BuildFaultTest::config_ = nullptr;
std::map<std::string, std::string>* BuildFaultTest::reference_ = nullptr;
std::string* BuildFaultTest::trace_ = nullptr;

TEST_F(BuildFaultTest, ABuildReachesEveryCrashPointInOrder) {
  GRIST_NEED_TEST_HOOKS(crash::Enabled());
  std::vector<std::string> lines = absl::StrSplit(*trace_, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines, BuildCrashPoints());
  ASSERT_TRUE(reference_->count(std::string(shard::kManifestName)));
  auto v = VerifyRelease(Env::Default(), dir_->Join("ref"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->ok());
}

TEST_F(BuildFaultTest, SigkillAtEveryPointThenResumeGivesTheSameRelease) {
  GRIST_NEED_TEST_HOOKS(crash::Enabled());
  int i = 0;
  for (const std::string& point : BuildCrashPoints()) {
    SCOPED_TRACE(point);
    const std::string out = dir_->Join(absl::StrCat("kill-", i++));
    int st = RunBuild(*config_, out, {{"GRIST_CRASH_POINT", point}}, out + ".log");
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        << "not killed at the point: " << ReadFileToString(Env::Default(), out + ".log").value_or("");
    // The stage records on disk: every stage before the killed one, and the killed one only
    // once its record was written (after_record); a stage killed before that runs again.
    const std::vector<std::string> parts = absl::StrSplit(point, '.');
    ASSERT_EQ(parts.size(), 3u);
    bool before = true;
    for (const char* stage : {"clean", "dedup", "tokenizer", "tokenize"}) {
      const bool recorded =
          Env::Default()->FileExists(absl::StrCat(out, ".work/stages/", stage, ".json"));
      if (parts[1] == stage) {
        EXPECT_EQ(recorded, parts[2] == "after_record") << stage;
        before = false;
      } else {
        EXPECT_EQ(recorded, before) << stage;
      }
    }
    // Not published, or published whole: a manifest only after it was renamed into place.
    const bool published = Env::Default()->FileExists(JoinPath(out, std::string(shard::kManifestName)));
    EXPECT_EQ(published, point == "build.pack.after_manifest");
    auto v = VerifyRelease(Env::Default(), out);
    if (published) {
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_TRUE(v->ok()) << v->problems.front();
    } else {
      EXPECT_FALSE(v.ok()) << "a killed build looks like a release";
    }
    st = RunBuild(*config_, out, {}, out + ".log");
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << ReadFileToString(Env::Default(), out + ".log").value_or("");
    ExpectSameRelease(*reference_, out);
  }
}

// A kill anywhere in pack+shard leaves the release already at --output published and valid: the
// new one is written beside it (WORK/release) and takes its name at once (release/publish.cc,
// Publish), so before the move the old release is there whole, after it the new one is.
TEST_F(BuildFaultTest, AKillDuringPackLeavesThePreviousReleasePublished) {
  GRIST_NEED_TEST_HOOKS(crash::Enabled());
  // The earlier release: the same inputs under another seed (another release id).
  auto text = ReadFileToString(Env::Default(), *config_);
  ASSERT_TRUE(text.ok());
  std::string other = *text;
  ASSERT_EQ(other.rfind("seed = 5\n", 0), 0u);
  other.replace(0, 8, "seed = 6");
  const std::string other_config = dir_->Join("other.toml");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), other_config, other).ok());
  int st = RunBuild(other_config, dir_->Join("old"), {}, dir_->Join("old.log"));
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << ReadFileToString(Env::Default(), dir_->Join("old.log")).value_or("");
  const auto old = ReleaseBytes(dir_->Join("old"));
  ASSERT_NE(old.at(std::string(shard::kManifestName)), reference_->at(std::string(shard::kManifestName)));
  int i = 0;
  for (const char* point : {"build.pack.after_shards", "build.pack.before_manifest",
                            "build.pack.after_manifest"}) {
    SCOPED_TRACE(point);
    // The earlier release at --output, and the work folder of this config's completed stages (so
    // only pack runs).
    const std::string out = dir_->Join(absl::StrCat("over-", i++));
    const std::string cmd = "cp -a " + dir_->Join("old") + " " + out + " && cp -a " +
                            dir_->Join("ref.work") + " " + out + ".work";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    st = RunBuild(*config_, out, {{"GRIST_CRASH_POINT", point}}, out + ".log");
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        << "not killed at the point: " << ReadFileToString(Env::Default(), out + ".log").value_or("");
    auto v = VerifyRelease(Env::Default(), out);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->ok()) << v->problems.front();
    if (std::string(point) == "build.pack.after_manifest") {
      ExpectSameRelease(*reference_, out);  // moved into place: the new release, whole
    } else {
      ExpectSameRelease(old, out);  // not yet moved: the earlier release, untouched
    }
    st = RunBuild(*config_, out, {}, out + ".log");
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << ReadFileToString(Env::Default(), out + ".log").value_or("");
    ExpectSameRelease(*reference_, out);
    // Nothing left beside it: the staging folder and the earlier release are gone.
    EXPECT_FALSE(Env::Default()->FileExists(out + ".work/release"));
    EXPECT_FALSE(Env::Default()->FileExists(out + ".work/release.previous"));
  }
}

struct Damage {
  const char* what;
  const char* stage;  // the stage that must run again
  std::string (*apply)(const std::string& work);  // returns the expected note's detail
};

std::string FirstFile(const std::string& dir, const std::string& ext) {
  auto names = Env::Default()->ListDir(dir);
  EXPECT_TRUE(names.ok());
  for (const std::string& n : *names) {
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) return n;
  }
  ADD_FAILURE() << "no *" << ext << " in " << dir;
  return "";
}

void Truncate(const std::string& path) {
  auto size = Env::Default()->GetFileSize(path);
  ASSERT_TRUE(size.ok());
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(*size / 2)), 0);
}

void FlipByte(const std::string& path, uint64_t at) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(at)), 1);
  c ^= 0x20;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(at)), 1);
  ::close(fd);
}

const Damage kDamages[] = {
    {"a deleted clean part", "clean",
     [](const std::string& w) {
       std::string n = FirstFile(JoinPath(w, "clean"), ".jsonl.zst");
       EXPECT_TRUE(Env::Default()->RemoveFile(JoinPath(w, "clean/" + n)).ok());
       return "clean/" + n + " is missing";
     }},
    {"a truncated dedup part", "dedup",
     [](const std::string& w) {
       std::string n = FirstFile(JoinPath(w, "dedup"), ".jsonl.zst");
       Truncate(JoinPath(w, "dedup/" + n));
       return "dedup/" + n + " has ";
     }},
    {"an added clean part", "clean",
     [](const std::string& w) {
       EXPECT_TRUE(WriteFileAtomic(Env::Default(), JoinPath(w, "clean/zz-stray.jsonl.zst"), "x").ok());
       return std::string("clean/zz-stray.jsonl.zst is not in the record");
     }},
    {"a changed tokenizer model", "tokenizer",
     [](const std::string& w) {
       FlipByte(JoinPath(w, "tokenizer.model"), 100);
       return std::string("tokenizer.model does not match its checksum");
     }},
    {"a flipped byte in the tokens", "tokenize",
     [](const std::string& w) {
       std::string n = FirstFile(JoinPath(w, "tokens"), ".bin");
       FlipByte(JoinPath(w, "tokens/" + n), 10);
       return "tokens/" + n + " does not match its checksum";
     }},
    {"a clean record of an earlier grist, with whole-file checksums", "clean",
     [](const std::string& w) {
       const std::string rec = JoinPath(w, "stages/clean.json");
       std::string text = *ReadFileToString(Env::Default(), rec);
       const std::string key = "\"xxh3_128_of_4mib_pieces\"";  // docs/formats/build.md
       for (size_t at; (at = text.find(key)) != std::string::npos;) {
         text.replace(at, key.size(), "\"xxh3_128\"");
       }
       EXPECT_TRUE(WriteFileAtomic(Env::Default(), rec, text).ok());
       return std::string("its outputs' checksums are an earlier grist's (whole-file xxh3_128)");
     }},
    {"a dedup record of an earlier grist, without the checksum of what the stage read", "dedup",
     [](const std::string& w) {
       const std::string rec = JoinPath(w, "stages/dedup.json");
       std::string text = *ReadFileToString(Env::Default(), rec);
       const size_t at = text.find("\"upstream_xxh3_128\"");  // docs/formats/build.md
       EXPECT_NE(at, std::string::npos);
       if (at != std::string::npos) text.erase(at, text.find('\n', at) + 1 - at);
       EXPECT_TRUE(WriteFileAtomic(Env::Default(), rec, text).ok());
       return std::string("an earlier grist's record, without a checksum of what the stage read");
     }},
    {"a corrupt dedup record", "dedup",
     [](const std::string& w) {
       EXPECT_TRUE(WriteFileAtomic(Env::Default(), JoinPath(w, "stages/dedup.json"), "{\"config_x").ok());
       return std::string("not a valid stage record");
     }},
    {"a truncated tokenize record", "tokenize",
     [](const std::string& w) {
       Truncate(JoinPath(w, "stages/tokenize.json"));
       return std::string("not a valid stage record");
     }},
    {"a deleted tokenizer record", "tokenizer",
     [](const std::string& w) {
       EXPECT_TRUE(Env::Default()->RemoveFile(JoinPath(w, "stages/tokenizer.json")).ok());
       return std::string();  // nothing to note: the stage simply has not completed
     }},
};

TEST_F(BuildFaultTest, DamagedRecordsAndOutputsAreDetectedAndTheStageRunsAgain) {
  int i = 0;
  for (const Damage& d : kDamages) {
    SCOPED_TRACE(d.what);
    const std::string out = CopyOfReference(absl::StrCat("damage-", i++));
    const std::string detail = d.apply(out + ".work");
    ::testing::internal::CaptureStderr();
    auto r = BuildRelease(Env::Default(), Options(out));
    const std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(r.ok()) << r.status();
    if (!detail.empty()) {
      EXPECT_THAT(err, HasSubstr(detail));
      EXPECT_THAT(err, HasSubstr("the stage runs again"));
    }
    // The damaged stage ran again; every other completed stage was resumed from its record.
    for (const StageSummary& s : r->stages) {
      if (s.name == "pack+shard") continue;
      EXPECT_EQ(s.resumed, s.name != d.stage) << s.name;
    }
    ExpectSameRelease(*reference_, out);
  }
}

// The suite's config with `input` as its one input, written to `path`.
std::string ConfigWithInput(const std::string& config, const std::string& input,
                            const std::string& path) {
  std::string text = *ReadFileToString(Env::Default(), config);
  const size_t at = text.find("paths = [\"");
  EXPECT_NE(at, std::string::npos);
  const size_t begin = at + 10, end = text.find('"', begin);
  text.replace(begin, end - begin, input);
  EXPECT_TRUE(WriteFileAtomic(Env::Default(), path, text).ok());
  return path;
}

std::string ReadAll(const std::string& path) { return *ReadFileToString(Env::Default(), path); }

TEST_F(BuildFaultTest, AChangedInputRunsTheStagesAgainAndTheManifestNamesWhatTheyRead) {
  TempDir t;
  const std::string input = t.Join("corpus.jsonl");
  const std::string text = ReadAll(dir_->Join("corpus.jsonl"));
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
  BuildOptions o = Options(t.Join("rel"));
  o.config_path = ConfigWithInput(*config_, input, t.Join("c.toml"));
  ASSERT_TRUE(BuildRelease(Env::Default(), o).ok());
  const auto first = ReleaseBytes(t.Join("rel"));
  EXPECT_THAT(first.at("manifest.json"), HasSubstr(Hash128Of(text).ToHex()));

  // The same bytes written again (a new file, a new modification time): every stage resumes.
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
  auto same = BuildRelease(Env::Default(), o);
  ASSERT_TRUE(same.ok()) << same.status();
  for (const StageSummary& s : same->stages) {
    if (s.name != "pack+shard") {
      EXPECT_TRUE(s.resumed) << s.name;
    }
  }
  ExpectSameRelease(first, t.Join("rel"));

  // The last 100 of its 300 documents gone: clean reads other bytes, so every stage after it
  // reads other outputs, and all run again, to the release a first build of the new input makes.
  const std::string cut = text.substr(0, [&] {
    size_t at = 0;
    for (int line = 0; line < 200; ++line) at = text.find('\n', at) + 1;
    return at;
  }());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, cut).ok());
  ::testing::internal::CaptureStderr();
  auto changed = BuildRelease(Env::Default(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(changed.ok()) << changed.status();
  for (const char* stage : {"clean", "dedup", "tokenizer", "tokenize"}) {
    EXPECT_THAT(err, HasSubstr(absl::StrCat(
                         "stages/", stage, ".json: what the stage read has changed since it ran")));
  }
  for (const StageSummary& s : changed->stages) {
    if (s.name != "pack+shard") {
      EXPECT_FALSE(s.resumed) << s.name;
    }
    if (s.name == "clean") {
      EXPECT_EQ(s.docs_in, 200u);
    }
  }
  BuildOptions fresh = o;
  fresh.output_dir = t.Join("fresh");
  ASSERT_TRUE(BuildRelease(Env::Default(), fresh).ok());
  ExpectSameRelease(ReleaseBytes(t.Join("fresh")), t.Join("rel"));
  const std::string manifest = ReadAll(t.Join("rel/manifest.json"));
  EXPECT_THAT(manifest, HasSubstr(Hash128Of(cut).ToHex()));
  EXPECT_THAT(manifest, HasSubstr(absl::StrCat("\"bytes\": ", cut.size())));
  EXPECT_THAT(manifest, ::testing::Not(HasSubstr(Hash128Of(text).ToHex())));
}

// The real file system with every file's times ten seconds back (settled, as those of a corpus
// made long before the build: WORK/sums.json remembers only such files' checksums), counting the
// files opened for reading under a folder.
class SettledTimesEnv : public grist::testing::ForwardingEnv {
 public:
  absl::StatusOr<FileStat> Stat(const std::string& p) override {
    absl::StatusOr<FileStat> st = ForwardingEnv::Stat(p);
    if (st.ok()) {
      st->mtime_ns -= 10'000'000'000;
      st->ctime_ns -= 10'000'000'000;
    }
    return st;
  }
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& p) override {
    Count(p);
    return ForwardingEnv::NewSequentialFile(p);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& p) override {
    Count(p);
    return ForwardingEnv::NewRandomAccessFile(p);
  }
  // Files opened for reading under `dir` since the last call.
  int Opened(const std::string& dir) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (auto it = opened_.begin(); it != opened_.end();) {
      if (it->rfind(dir + "/", 0) == 0) {
        ++n;
        it = opened_.erase(it);
      } else {
        ++it;
      }
    }
    return n;
  }

 private:
  void Count(const std::string& p) {
    std::lock_guard<std::mutex> l(mu_);
    opened_.push_back(p);
  }
  std::mutex mu_;
  std::vector<std::string> opened_;
};

// The real file system, following which bytes written through it are durable: a file is dirty
// from its first Append until a Sync of its writer or a SyncFile of its path (renames followed).
// When a stage's record is renamed into place (WORK/stages/NAME.json), every file then under that
// stage's output root must have been written through it and be durable: otherwise a power loss
// could leave a record that vouches for outputs that are not there.
class DurabilityEnv : public grist::testing::ForwardingEnv {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, ForwardingEnv::NewWritableFile(p));
    Set(p, false);
    return std::unique_ptr<WritableFile>(new File(std::move(f), this));
  }
  absl::Status SyncFile(const std::string& p) override {
    RETURN_IF_ERROR(ForwardingEnv::SyncFile(p));
    Set(p, false);
    return absl::OkStatus();
  }
  absl::Status RemoveFile(const std::string& p) override {
    RETURN_IF_ERROR(ForwardingEnv::RemoveFile(p));
    std::lock_guard<std::mutex> l(mu_);
    dirty_.erase(p);
    return absl::OkStatus();
  }
  absl::Status RenameFile(const std::string& a, const std::string& b) override {
    static const std::map<std::string, std::string> kRoots = {{"clean", "clean"},
                                                              {"dedup", "dedup"},
                                                              {"tokenizer", "tokenizer.model"},
                                                              {"tokenize", "tokens"}};
    const std::string stages = DirName(b), name = BaseName(b);
    const std::string stage = name.size() > 5 ? name.substr(0, name.size() - 5) : "";
    if (BaseName(stages) == "stages" && kRoots.contains(stage)) {
      std::lock_guard<std::mutex> l(mu_);
      const std::string root = JoinPath(DirName(stages), kRoots.at(stage));
      std::vector<std::string> files;
      if (std::filesystem::is_directory(root)) {
        for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
          if (e.is_regular_file()) files.push_back(e.path().string());
        }
      } else if (std::filesystem::exists(root)) {
        files.push_back(root);
      }
      for (const std::string& f : files) {
        const auto it = dirty_.find(f);
        if (it == dirty_.end() || it->second) not_durable_.push_back(name + ": " + f);
      }
      ++records_;
    }
    RETURN_IF_ERROR(ForwardingEnv::RenameFile(a, b));
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = dirty_.find(a); it != dirty_.end()) {
      dirty_[b] = it->second;
      dirty_.erase(a);
    }
    return absl::OkStatus();
  }
  std::vector<std::string> not_durable() {
    std::lock_guard<std::mutex> l(mu_);
    return not_durable_;
  }
  int records() {
    std::lock_guard<std::mutex> l(mu_);
    return records_;
  }

 private:
  class File : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> base, DurabilityEnv* env)
        : base_(std::move(base)), env_(env) {}
    absl::Status Append(std::string_view d) override {
      env_->Set(base_->path(), true);
      return base_->Append(d);
    }
    absl::Status Flush() override { return base_->Flush(); }
    absl::Status Sync() override {
      RETURN_IF_ERROR(base_->Sync());
      env_->Set(base_->path(), false);
      return absl::OkStatus();
    }
    absl::Status Close() override { return base_->Close(); }
    uint64_t Size() const override { return base_->Size(); }
    const std::string& path() const override { return base_->path(); }
    void SetWritebackBytes(uint64_t b) override { base_->SetWritebackBytes(b); }

   private:
    std::unique_ptr<WritableFile> base_;
    DurabilityEnv* env_;
  };
  void Set(const std::string& p, bool dirty) {
    std::lock_guard<std::mutex> l(mu_);
    dirty_[p] = dirty;
  }
  std::mutex mu_;
  std::map<std::string, bool> dirty_;  // every file written through this Env: whether dirty
  std::vector<std::string> not_durable_;
  int records_ = 0;
};

// The unstaged build syncs a stage's outputs beside the next stage (DeferredSyncEnv), not as it
// writes them: its record must still come after they are durable.
TEST_F(BuildFaultTest, EveryStageOutputIsDurableBeforeItsRecord) {
  TempDir t;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    DurabilityEnv env;
    BuildOptions o = Options(t.Join(absl::StrCat("rel-", threads)));
    o.run.threads = threads;
    auto r = BuildRelease(&env, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(env.records(), 4) << "clean, dedup, tokenizer, tokenize";
    EXPECT_THAT(env.not_durable(), ::testing::IsEmpty());
    ExpectSameRelease(*reference_, o.output_dir);
  }
}

// `--stage tokenizer` runs clean and dedup first in its own process, each completed on a thread
// beside the next stage; the tokenizer's record must name what they wrote, so it is written only
// once theirs are: with every fsync slowed (their completions still running when the tokenizer
// is done), the steps after it find the tokenizer's record holding and the release is the
// reference's.
TEST_F(BuildFaultTest, TheTokenizerStepRecordsAfterTheStagesItRan) {
  class SlowSyncEnv : public grist::testing::ForwardingEnv {
   public:
    absl::Status SyncFile(const std::string& p) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return ForwardingEnv::SyncFile(p);
    }
  } env;
  TempDir t;
  BuildOptions o = Options(t.Join("rel"));
  for (const char* step : {"tokenizer", "tokenize", "tokenize-merge", "pack"}) {
    o.stage = step;
    auto r = BuildRelease(&env, o);
    ASSERT_TRUE(r.ok()) << step << ": " << r.status();
  }
  for (const char* stage : {"clean", "dedup", "tokenizer", "tokenize"}) {
    const std::string record = absl::StrCat(o.output_dir, ".work/stages/", stage, ".json");
    EXPECT_TRUE(Env::Default()->FileExists(record)) << stage;
  }
  ExpectSameRelease(*reference_, o.output_dir);
}

TEST_F(BuildFaultTest, AResumedBuildReadsNoInputOrOutputWhoseStatHolds) {
  TempDir t;
  const std::string corpus = t.Join("corpus"), input = t.Join("corpus/corpus.jsonl");
  ASSERT_TRUE(Env::Default()->CreateDirs(corpus).ok());
  const std::string text = ReadAll(dir_->Join("corpus.jsonl"));
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
  BuildOptions o = Options(t.Join("rel"));
  o.config_path = ConfigWithInput(*config_, input, t.Join("c.toml"));
  SettledTimesEnv env;
  ASSERT_TRUE(BuildRelease(&env, o).ok());
  EXPECT_GT(env.Opened(corpus), 0) << "the first build reads its input through the Env";
  const auto first = ReleaseBytes(t.Join("rel"));
  const std::string sums = ReadAll(t.Join("rel.work/sums.json"));
  EXPECT_THAT(sums, HasSubstr(absl::StrCat("\"kind\":\"xxh3_128\",\"path\":\"", input, "\"")));
  EXPECT_THAT(sums, HasSubstr(Hash128Of(text).ToHex()));
  EXPECT_THAT(sums, HasSubstr("\"kind\":\"xxh3_128_of_4mib_pieces\""));
  (void)env.Opened(t.Join("rel.work"));

  // Nothing changed: every stage resumes without reading the input or the outputs of clean and
  // dedup (tokenize's are what pack reads).
  auto resumed = BuildRelease(&env, o);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const StageSummary& s : resumed->stages) {
    if (s.name != "pack+shard") {
      EXPECT_TRUE(s.resumed) << s.name;
    }
  }
  EXPECT_EQ(env.Opened(corpus), 0);
  EXPECT_EQ(env.Opened(t.Join("rel.work/clean")), 0);
  EXPECT_EQ(env.Opened(t.Join("rel.work/dedup")), 0);
  ExpectSameRelease(first, t.Join("rel"));

  // The input written again in place, the same bytes: new times, so it is read (and found the
  // same: every stage resumes).
  grist::testing::OverwriteInPlace(input, 0, text);
  auto rewritten = BuildRelease(&env, o);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_GT(env.Opened(corpus), 0);
  for (const StageSummary& s : rewritten->stages) {
    if (s.name != "pack+shard") {
      EXPECT_TRUE(s.resumed) << s.name;
    }
  }

  // A byte of a clean part changed in place, its size kept: read, found changed, and clean and
  // every stage after it run again, to the same release.
  auto parts = Env::Default()->ListDir(t.Join("rel.work/clean"));
  ASSERT_TRUE(parts.ok());
  std::string part;
  for (const std::string& n : *parts) {
    if (n.ends_with(".jsonl.zst")) part = t.Join("rel.work/clean/" + n);
  }
  ASSERT_FALSE(part.empty());
  grist::testing::OverwriteInPlace(part, 20, "\xff");
  ::testing::internal::CaptureStderr();
  auto damaged = BuildRelease(&env, o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_THAT(err, HasSubstr("does not match its checksum")) << err;
  for (const StageSummary& s : damaged->stages) {
    if (s.name == "clean") {
      EXPECT_FALSE(s.resumed);
    }
  }
  ExpectSameRelease(first, t.Join("rel"));
}

// SettledTimesEnv that also counts the metadata requests (stat, the folder test, the size, the
// existence test) made of one path: on a shared file system each is a request to its metadata
// servers, per input and per task of an array.
class MetadataCountingEnv : public SettledTimesEnv {
 public:
  explicit MetadataCountingEnv(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<FileStat> Stat(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::Stat(p);
  }
  bool IsDirectory(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::IsDirectory(p);
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::GetFileSize(p);
  }
  bool FileExists(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::FileExists(p);
  }
  int Take() { return requests_.exchange(0); }

 private:
  void Count(const std::string& p) {
    if (p == path_) ++requests_;
  }
  std::string path_;
  std::atomic<int> requests_{0};
};

// A step of a staged build that does not read the inputs (here dedup-signatures, which checks the
// clean stage's record: the inputs' checksums, remembered in sums.json) asks the file system about
// each input once: its stat when listed serves the listing, the stat the build compares later, and
// the remembered checksum (four requests each before: the folder test and the size in the listing,
// a stat for the build, a stat for the cache). The clean task that reads it asks twice (seven
// before): the build's listing, which the cleaner reads by, and the check that it did not change.
TEST_F(BuildFaultTest, AStagedStepAsksAboutEachInputOnce) {
  TempDir t;
  const std::string corpus = t.Join("corpus"), input = t.Join("corpus/corpus.jsonl");
  ASSERT_TRUE(Env::Default()->CreateDirs(corpus).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ReadAll(dir_->Join("corpus.jsonl"))).ok());
  BuildOptions o = Options(t.Join("rel"));
  o.config_path = ConfigWithInput(*config_, corpus, t.Join("c.toml"));
  MetadataCountingEnv env(input);
  o.stage = "clean";
  auto r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(env.Take(), 2);
  o.stage = "clean-merge";
  r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  (void)env.Take();
  (void)env.Opened(corpus);
  o.stage = "dedup-signatures";
  r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(env.Take(), 1);
  EXPECT_EQ(env.Opened(corpus), 0);
}

TEST_F(BuildFaultTest, ARebuildWithNothingChangedLeavesThePublishedReleaseAsItIs) {
  TempDir t;
  const std::string out = t.Join("rel");
  ASSERT_TRUE(BuildRelease(Env::Default(), Options(out)).ok());
  ExpectSameRelease(*reference_, out);
  EXPECT_TRUE(Env::Default()->FileExists(out + ".work/stages/pack.json"));
  const std::string manifest = out + "/" + std::string(shard::kManifestName);
  const FileStat before = Env::Default()->Stat(manifest).value();
  const std::string shard = out + "/shards/" + FirstFile(out + "/shards", ".bin");
  // Nothing changed: every stage resumes, and so does pack (its record names this release, whose
  // files are as its manifest lists them); the release is not written again.
  auto again = BuildRelease(Env::Default(), Options(out));
  ASSERT_TRUE(again.ok()) << again.status();
  for (const StageSummary& s : again->stages) EXPECT_TRUE(s.resumed) << s.name;
  EXPECT_EQ(again->stages.back().note, "release up to date");
  EXPECT_THAT(ReadAll(manifest), HasSubstr(again->release_id));
  EXPECT_EQ(Env::Default()->Stat(manifest).value(), before) << "the manifest was written again";
  ExpectSameRelease(*reference_, out);
  // A byte of a shard changed in place: pack runs again and publishes the release whole.
  grist::testing::OverwriteInPlace(shard, 10, "\xff");
  ::testing::internal::CaptureStderr();
  BuildOptions o = Options(out);
  o.run.progress = true;
  auto damaged = BuildRelease(Env::Default(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_THAT(err, HasSubstr("does not match its checksum in the manifest; packing again")) << err;
  EXPECT_FALSE(damaged->stages.back().resumed);
  ExpectSameRelease(*reference_, out);
  // The release removed: pack runs again.
  ASSERT_TRUE(Env::Default()->RemoveAll(out).ok());
  auto removed = BuildRelease(Env::Default(), Options(out));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(removed->stages.back().resumed);
  ExpectSameRelease(*reference_, out);
}

TEST_F(BuildFaultTest, AReplacedTokenizerModelRunsTheTokenizerAndTokenizeAgain) {
  TempDir t;
  // Two models of the suite's corpus: the reference build's (300 pieces), and one of 320.
  const std::string m300 = ReadAll(dir_->Join("ref.work/tokenizer.model"));
  std::string text = ReadAll(*config_);
  text.replace(text.find("vocab_size = 300"), 16, "vocab_size = 320");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("c320.toml"), text).ok());
  BuildOptions o320 = Options(t.Join("rel320"));
  o320.config_path = t.Join("c320.toml");
  ASSERT_TRUE(BuildRelease(Env::Default(), o320).ok());
  const std::string m320 = ReadAll(t.Join("rel320.work/tokenizer.model"));
  ASSERT_NE(m300, m320);
  // A config that gives tokenizer.model (no training keys), the file replaced between builds.
  const std::string model = t.Join("given.model");
  text = ReadAll(*config_);
  const size_t begin = text.find("[tokenizer]\n"), end = text.find("[pack]");
  text.replace(begin, end - begin, "[tokenizer]\nmodel = \"" + model + "\"\n");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("given.toml"), text).ok());
  BuildOptions o = Options(t.Join("rel"));
  o.config_path = t.Join("given.toml");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), model, m300).ok());
  ASSERT_TRUE(BuildRelease(Env::Default(), o).ok());
  EXPECT_EQ(ReadAll(t.Join("rel/tokenizer.model")), m300);
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), model, m320).ok());
  ::testing::internal::CaptureStderr();
  auto r = BuildRelease(Env::Default(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(err,
              HasSubstr("stages/tokenizer.json: what the stage read has changed since it ran"));
  for (const StageSummary& s : r->stages) {
    if (s.name == "pack+shard") continue;
    const bool after_model = s.name.rfind("tokeniz", 0) == 0;  // tokenizer (pretrained), tokenize
    EXPECT_EQ(s.resumed, !after_model) << s.name;
  }
  EXPECT_EQ(ReadAll(t.Join("rel/tokenizer.model")), m320);
  BuildOptions fresh = o;
  fresh.output_dir = t.Join("fresh");
  ASSERT_TRUE(BuildRelease(Env::Default(), fresh).ok());
  ExpectSameRelease(ReleaseBytes(t.Join("fresh")), t.Join("rel"));
}

// Does `act` once, when the build clears the clean stage's output folder: after the build listed
// its inputs, before clean reads them.
class ActBeforeCleanEnv : public grist::testing::ForwardingEnv {
 public:
  explicit ActBeforeCleanEnv(std::function<void()> act) : act_(std::move(act)) {}
  absl::Status RemoveAll(const std::string& p) override {
    if (act_ && p.size() > 11 && p.compare(p.size() - 11, 11, ".work/clean") == 0) {
      std::exchange(act_, nullptr)();
    }
    return ForwardingEnv::RemoveAll(p);
  }

 private:
  std::function<void()> act_;
};

TEST_F(BuildFaultTest, AnInputThatChangesOrGoesWhileTheBuildReadsItFailsTheBuild) {
  TempDir t;
  const std::string input = t.Join("corpus.jsonl");
  const std::string text = ReadAll(dir_->Join("corpus.jsonl"));
  const std::string config = ConfigWithInput(*config_, input, t.Join("c.toml"));
  // A document appended: the build stops before clean is recorded, naming the file and both sizes.
  {
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
    const std::string more =
        text + "{\"text\": \"One more document, appended while the build ran.\"}\n";
    ActBeforeCleanEnv env([&] { ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, more).ok()); });
    BuildOptions o = Options(t.Join("appended"));
    o.config_path = config;
    auto r = BuildRelease(&env, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_THAT(r.status().message(),
                HasSubstr(absl::StrCat("input ", input, " changed while the build read it: ",
                                       text.size(), " bytes when the build listed it, ",
                                       more.size(), " now")));
    EXPECT_FALSE(Env::Default()->FileExists(t.Join("appended")));
    EXPECT_FALSE(Env::Default()->FileExists(t.Join("appended.work/stages/clean.json")));
    // Built again, it cleans the file as it is now.
    auto again = BuildRelease(Env::Default(), o);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->stages[0].docs_in, 301u);
    EXPECT_THAT(ReadAll(t.Join("appended/manifest.json")), HasSubstr(Hash128Of(more).ToHex()));
  }
  // One letter changed in place, the size kept: the build stops alike, saying so.
  {
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
    const size_t at = text.find("the ");
    ASSERT_NE(at, std::string::npos);
    ActBeforeCleanEnv env([&] { grist::testing::OverwriteInPlace(input, at, "T"); });
    BuildOptions o = Options(t.Join("edited"));
    o.config_path = config;
    auto r = BuildRelease(&env, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_THAT(r.status().message(),
                HasSubstr(absl::StrCat("input ", input, " changed while the build read it: the "
                                       "same size (", text.size(), " bytes), but written or "
                                       "replaced since the build listed it")));
    EXPECT_FALSE(Env::Default()->FileExists(t.Join("edited")));
    EXPECT_FALSE(Env::Default()->FileExists(t.Join("edited.work/stages/clean.json")));
    // Built again, it cleans the file as it is now.
    auto again = BuildRelease(Env::Default(), o);
    ASSERT_TRUE(again.ok()) << again.status();
    std::string edited = text;
    edited[at] = 'T';
    EXPECT_THAT(ReadAll(t.Join("edited/manifest.json")), HasSubstr(Hash128Of(edited).ToHex()));
  }
  // The input removed: the build stops with NotFound naming it, and publishes nothing.
  {
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
    ActBeforeCleanEnv env([&] { ASSERT_TRUE(Env::Default()->RemoveFile(input).ok()); });
    BuildOptions o = Options(t.Join("removed"));
    o.config_path = config;
    auto r = BuildRelease(&env, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(input));
    EXPECT_FALSE(Env::Default()->FileExists(t.Join("removed")));
  }
}

TEST_F(BuildFaultTest, InjectedFailuresAtEveryPowerOfTwoWriteFailCleanlyAndResume) {
  // The bytes an uninterrupted build appends, through the fault-injecting Env.
  uint64_t total = 0;
  {
    FaultInjectionEnv env(Env::Default());
    const std::string out = dir_->Join("count");
    auto r = BuildRelease(&env, Options(out));
    ASSERT_TRUE(r.ok()) << r.status();
    total = static_cast<uint64_t>(env.appended_bytes());
    ExpectSameRelease(*reference_, out);
  }
  ASSERT_GT(total, 0u);
  struct Fault {
    std::string name;
    std::function<void(FaultInjectionEnv*)> arm;
    absl::StatusCode code;
    std::string message;
  };
  std::vector<Fault> faults;
  for (int k = 1; k < 8; ++k) {
    const int64_t space = static_cast<int64_t>(total * k / 8);
    faults.push_back({absl::StrCat("disk full after ", space, " bytes"),
                      [space](FaultInjectionEnv* e) { e->SetDiskSpace(space); },
                      absl::StatusCode::kResourceExhausted, "No space left on device"});
  }
  // The disk fills during the last file, the manifest (reports/ before it vary by a few bytes
  // between runs: half the manifest's size is margin enough).
  {
    const int64_t space =
        static_cast<int64_t>(total - reference_->at(std::string(shard::kManifestName)).size() / 2);
    faults.push_back({"disk full in the manifest",
                      [space](FaultInjectionEnv* e) { e->SetDiskSpace(space); },
                      absl::StatusCode::kResourceExhausted, "manifest.json"});
  }
  for (int n = 1; n <= (1 << 16); n *= 2) {
    faults.push_back({absl::StrCat("append ", n, " fails"),
                      [n](FaultInjectionEnv* e) { e->FailNthAppend(n); }, absl::StatusCode::kDataLoss,
                      "Input/output error (injected)"});
  }
  faults.push_back({"fsync fails", [](FaultInjectionEnv* e) { e->SetFailSync(true); },
                    absl::StatusCode::kDataLoss, "Input/output error (injected)"});
  faults.push_back({"rename fails", [](FaultInjectionEnv* e) { e->SetFailRename(true); },
                    absl::StatusCode::kDataLoss, "Input/output error (injected)"});
  int i = 0;
  int beyond = 0;  // FailNthAppend past the build's last append: it must then succeed
  for (const Fault& f : faults) {
    SCOPED_TRACE(f.name);
    const std::string out = dir_->Join(absl::StrCat("fault-", i++));
    {
      FaultInjectionEnv env(Env::Default());
      f.arm(&env);
      auto r = BuildRelease(&env, Options(out));
      if (r.ok()) {
        // Only a FailNthAppend beyond every append may leave the build untouched.
        EXPECT_THAT(f.name, HasSubstr("append ")) << "a fault was not reported";
        ++beyond;
        ExpectSameRelease(*reference_, out);
        continue;
      }
      EXPECT_EQ(r.status().code(), f.code) << r.status();
      EXPECT_THAT(std::string(r.status().message()), HasSubstr(f.message)) << r.status();
      EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, std::string(shard::kManifestName))))
          << "a failed build published a manifest";
    }
    auto r = BuildRelease(Env::Default(), Options(out));
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectSameRelease(*reference_, out);
  }
  EXPECT_GE(beyond, 1) << "raise the largest FailNthAppend: every one fired";
  EXPECT_LE(beyond, 8) << "most FailNthAppend values never fired";
}

}  // namespace
}  // namespace grist::release
