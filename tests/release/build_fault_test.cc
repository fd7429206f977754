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
#include <signal.h>
#include <sys/wait.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "common/hash.h"
#include "release/crash_points.h"
#include "release/release.h"
#include "shard/shard_format.h"
#include "tests/release/build_fault_fixture.h"
#include "tests/test_util.h"

namespace grist::release {
namespace {

using ::testing::HasSubstr;

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
