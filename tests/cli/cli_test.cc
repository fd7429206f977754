// The `grist` command line as a user meets it: exit statuses, flag validation over every
// subcommand, --json destinations, stage folders chained, progress on compressed input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ckptio/checkpoint.h"
#include "ckptio/writer.h"
#include "common/env.h"
#include "common/progress.h"
#include "common/records.h"
#include "loader/synthetic.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/synthetic_corpus.h"
#include "tests/test_util.h"

namespace grist::tools {
namespace {

using grist::testing::TempDir;

struct Proc {
  int status = -1;  // raw wait status
  std::string out, err;
  bool exited() const { return WIFEXITED(status); }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1000 - WTERMSIG(status); }
  std::string Describe() const {
    return absl::StrCat(WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                                            : absl::StrCat("exit ", code()),
                        "\nstdout: ", out, "\nstderr: ", err);
  }
};

std::string Grist() { return std::string(GRIST_BINARY_DIR) + "/grist"; }

// Runs grist with `args` directly (no shell: a signal shows as a signal), stdout and stderr to
// files, optional environment settings "NAME=value".
Proc RunGrist(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
         const std::string& stdout_path = "") {
  // Removed when the test process exits (the forked children leave by exec or _exit, which run
  // no destructors); it was allocated and never freed, so every test process left one behind.
  static TempDir scratch;
  static int counter = 0;
  const std::string out = stdout_path.empty() ? scratch.Join(absl::StrCat("o", ++counter))
                                              : stdout_path;
  const std::string err = scratch.Join(absl::StrCat("e", ++counter));
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | (stdout_path.empty() ? O_TRUNC : O_APPEND), 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    std::string g = Grist();
    argv.push_back(g.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(g.c_str(), argv.data());
    ::_exit(127);
  }
  Proc p;
  ::waitpid(pid, &p.status, 0);
  if (stdout_path.empty()) p.out = ReadFileToString(Env::Default(), out).value_or("");
  p.err = ReadFileToString(Env::Default(), err).value_or("");
  return p;
}

int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// ---- Exit statuses -----------------------------------------------------------------------------

void ExpectUsageError(const std::vector<std::string>& args, const std::string& mention) {
  Proc p = RunGrist(args);
  const std::string cmd = absl::StrJoin(args, " ");
  EXPECT_EQ(p.code(), 2) << cmd << ": " << p.Describe();
  EXPECT_EQ(Lines(p.err), 1) << cmd << ": " << p.Describe();
  EXPECT_TRUE(absl::StrContains(p.err, mention)) << cmd << ": " << p.err;
  EXPECT_EQ(p.out, "") << cmd;
}

TEST(CliExitCodes, UsageErrorsExitTwoWithOneLine) {
  ExpectUsageError({"no-such-command"}, "no-such-command");
  ExpectUsageError({}, "subcommand");
  ExpectUsageError({"clean", "--input", "in", "--output", "out", "--no-such-flag"}, "--no-such-flag");
  ExpectUsageError({"clean", "--output", "x"}, "--input");
  // The report that started this: a malformed seed aborted the process (std::stoull).
  ExpectUsageError({"loader", "r", "--micro-batch", "1", "--global-batch", "1", "--seed", "abc"},
                   "--seed");
  ExpectUsageError({"loader", "r", "--micro-batch", "0", "--global-batch", "1"}, "--micro-batch");
  // Found after parsing: flags that do not go together, a task outside the array.
  ExpectUsageError({"dedup", "-i", "in", "-o", "out", "--tasks", "2"}, "--stage");
  ExpectUsageError({"clean", "--input", "in", "--output", "out", "--task", "3", "--tasks", "2"},
                   "--task");
  Proc env = RunGrist({"clean", "--input", "in", "--output", "out"}, {"SLURM_ARRAY_TASK_ID=x"});
  EXPECT_EQ(env.code(), 2) << env.Describe();
}

TEST(CliExitCodes, HelpAndVersionExitZero) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"}, {"--version"},
                                                                {"dedup", "--help"}, {"version"}}) {
    Proc p = RunGrist(args);
    EXPECT_EQ(p.code(), 0) << absl::StrJoin(args, " ") << ": " << p.Describe();
    EXPECT_NE(p.out, "");
  }
}

TEST(CliExitCodes, OtherFailuresExitOne) {
  TempDir t;
  Proc p = RunGrist({"clean", "--input", t.Join("missing.jsonl"), "--output", t.Join("out")});
  EXPECT_EQ(p.code(), 1) << p.Describe();
  EXPECT_EQ(Lines(p.err), 1) << p.err;
  EXPECT_TRUE(absl::StartsWith(p.err, "grist clean: error: ")) << p.err;
  EXPECT_TRUE(absl::StrContains(p.err, "missing.jsonl")) << p.err;
  Proc v = RunGrist({"verify", t.Join("no-release")});
  EXPECT_EQ(v.code(), 1) << v.Describe();
  Proc c = RunGrist({"ckpt", "verify", t.Join("no-checkpoint")});
  EXPECT_EQ(c.code(), 1) << c.Describe();
}

// `grist bench` checks some of its flags itself (a sweep's parameter and values, sizes, bench
// names): those are usage errors too, refused before any work.
TEST(CliExitCodes, BenchFlagErrorsExitTwo) {
  TempDir t;
  ExpectUsageError({"bench", "fs", "--bad-flag"}, "--bad-flag");
  ExpectUsageError({"bench", "no-such-bench"}, "subcommand");
  ExpectUsageError({"bench", "fs", "--sweep", "block_size="}, "no values given");
  ExpectUsageError({"bench", "fs", "--sweep", "threads"}, "expected PARAM=v1,v2,...");
  ExpectUsageError({"bench", "fs", "--sweep", "threads=1,2"}, "cannot sweep 'threads'");
  ExpectUsageError({"bench", "build", "--sweep", "threads=1,x"}, "'x' is not a positive integer");
  ExpectUsageError({"bench", "build", "--sweep", "threads=0,2"}, "'0' is not a positive integer");
  ExpectUsageError({"bench", "ckpt", "--size", "12x"}, "bad size '12x'");
  ExpectUsageError({"bench", "ckpt", "--block-size", "5000"}, "multiple of 4096");
  ExpectUsageError({"bench", "all"}, "needs --output");
  ExpectUsageError({"bench", "all", "--only", "nosuch", "--output", t.Join("o")}, "--only");
  ExpectUsageError({"bench", "all", "--sweep", "threads=1,2", "--output", t.Join("o")}, "one bench");
}

TEST(CliExitCodes, CkptVerifyFindingBadDataExitsThree) {
  TempDir t;
  auto w = ckptio::FileWriter::Create(ckptio::WriterOptions{});
  ASSERT_TRUE(w.ok()) << w.status();
  auto ts = ckptio::testing::StepState(3, 64 << 10);
  const std::string dir = t.Join("step-3");
  auto h = ckptio::SaveCheckpoint(w->get(), dir, ckptio::testing::Refs(ts), {}, {});
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE((*h)->Wait().ok());
  Proc good = RunGrist({"ckpt", "verify", dir});
  EXPECT_EQ(good.code(), 0) << good.Describe();
  // One flipped byte in the middle of the rank file's data.
  auto names = Env::Default()->ListDir(dir);
  ASSERT_TRUE(names.ok());
  std::string rank_file;
  for (const auto& n : *names) {
    if (absl::EndsWith(n, ".safetensors")) rank_file = JoinPath(dir, n);
  }
  ASSERT_FALSE(rank_file.empty());
  std::string bytes = *ReadFileToString(Env::Default(), rank_file);
  bytes[bytes.size() / 2] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), rank_file, bytes).ok());
  Proc bad = RunGrist({"ckpt", "verify", dir});
  EXPECT_EQ(bad.code(), 3) << bad.Describe();
  EXPECT_EQ(Lines(bad.err), 1) << bad.err;
  // A manifest that does not parse is bad data too.
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), JoinPath(dir, "manifest.json"), "{\"not").ok());
  Proc man = RunGrist({"ckpt", "verify", dir});
  EXPECT_EQ(man.code(), 3) << man.Describe();
}

// ---- Every numeric and enum flag of every subcommand, from the help CLI11 prints -----------------

struct FlagSpec {
  std::string name;  // the long name, "--seed"
  std::string type;  // CLI11's type text: "INT", "UINT:POSITIVE", "TEXT:{a,b}", "FLOAT:..."
};

// The sections of a help text: lines under "Subcommands:" and "Options:".
void ParseHelp(const std::string& help, std::vector<std::string>* subs, std::vector<FlagSpec>* flags) {
  std::string section;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (!line.empty() && line[0] != ' ') {
      section = std::string(line);
      continue;
    }
    std::vector<std::string> tok = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tok.empty()) continue;
    if (absl::StartsWith(section, "Subcommands")) {
      subs->push_back(tok[0]);
    } else if (absl::StartsWith(section, "Options") && tok[0][0] == '-' && tok.size() >= 2) {
      std::string name;
      for (absl::string_view n : absl::StrSplit(tok[0], ',')) {
        if (absl::StartsWith(n, "--")) name = std::string(n);
      }
      if (name.empty() || name == "--help") continue;
      flags->push_back({name, tok[1]});
    }
  }
}

// Values no flag of this type may accept.
std::vector<std::string> MalformedValues(const std::string& type) {
  std::vector<std::string> v;
  const bool integer = absl::StartsWith(type, "INT") || absl::StartsWith(type, "UINT");
  const bool real = absl::StartsWith(type, "FLOAT");
  if (integer || real) {
    v = {"abc", "12x", "--"};
    if (integer) v.push_back("1.5");
    if (integer) v.push_back("99999999999999999999999999");
    if (absl::StrContains(type, "POSITIVE") || absl::StrContains(type, "NONNEGATIVE")) {
      v.push_back("-1");
    }
    if (absl::StrContains(type, "POSITIVE") && !absl::StrContains(type, "NONNEGATIVE")) {
      v.push_back("0");
    }
  }
  if (absl::StrContains(type, ":{")) v.push_back("no-such-choice");
  return v;
}

TEST(CliFlags, MalformedValuesOfEveryNumericAndEnumFlagAreUsageErrors) {
  std::vector<std::vector<std::string>> queue = {{}};
  std::set<std::string> seen_types;
  int commands = 0, checked = 0;
  while (!queue.empty()) {
    std::vector<std::string> path = queue.back();
    queue.pop_back();
    std::vector<std::string> args = path;
    args.push_back("--help");
    Proc help = RunGrist(args);
    ASSERT_EQ(help.code(), 0) << absl::StrJoin(args, " ") << ": " << help.Describe();
    ++commands;
    std::vector<std::string> subs;
    std::vector<FlagSpec> flags;
    ParseHelp(help.out, &subs, &flags);
    for (const auto& s : subs) {
      std::vector<std::string> child = path;
      child.push_back(s);
      queue.push_back(child);
    }
    if (path.empty()) continue;
    for (const FlagSpec& f : flags) {
      seen_types.insert(f.type);
      for (const std::string& bad : MalformedValues(f.type)) {
        std::vector<std::string> a = path;
        a.push_back(f.name + "=" + bad);
        const std::string cmd = absl::StrJoin(a, " ");
        Proc p = RunGrist(a);
        ASSERT_TRUE(p.exited()) << cmd << ": " << p.Describe();
        EXPECT_EQ(p.code(), 2) << cmd << " (" << f.type << "): " << p.Describe();
        EXPECT_EQ(Lines(p.err), 1) << cmd << ": " << p.err;
        EXPECT_TRUE(absl::StrContains(p.err, f.name)) << cmd << ": " << p.err;
        ++checked;
      }
    }
  }
  // The enumeration found the command tree and its typed flags (a help format change that hid
  // them would make this test vacuous).
  EXPECT_GE(commands, 15);
  EXPECT_GE(checked, 100) << absl::StrJoin(seen_types, " ");
  EXPECT_TRUE(seen_types.count("INT:NONNEGATIVE")) << absl::StrJoin(seen_types, " ");
}

// ---- --json destinations ----------------------------------------------------------------------

TEST(CliJson, DashIsTheStandardOutputAndTheSummaryMovesToStandardError) {
  Proc p = RunGrist({"version", "--json", "-"});
  ASSERT_EQ(p.code(), 0) << p.Describe();
  EXPECT_TRUE(absl::StartsWith(p.out, "{")) << p.out;
  EXPECT_TRUE(absl::StartsWith(p.err, "grist ")) << p.err;
  EXPECT_FALSE(Env::Default()->FileExists("-"));
  Proc eq = RunGrist({"version", "--json=-"});
  EXPECT_EQ(eq.out, p.out);
}

TEST(CliJson, RegularFileIsReplacedAtomically) {
  TempDir t;
  const std::string f = t.Join("r.json");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), f, std::string(10000, 'x')).ok());
  Proc p = RunGrist({"version", "--json", f});
  ASSERT_EQ(p.code(), 0) << p.Describe();
  EXPECT_TRUE(absl::StartsWith(*ReadFileToString(Env::Default(), f), "{"));
  EXPECT_EQ(Env::Default()->ListDir(t.path())->size(), 1u);  // no temporary left
}

TEST(CliJson, SymbolicLinkStaysALinkAndItsTargetIsWritten) {
  TempDir t;
  ASSERT_EQ(::mkdir(t.Join("d").c_str(), 0755), 0);
  const std::string target = t.Join("d/target.json"), link = t.Join("link.json");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), target, "old").ok());
  ASSERT_EQ(::symlink("d/target.json", link.c_str()), 0);  // relative, as users make them
  Proc p = RunGrist({"version", "--json", link});
  ASSERT_EQ(p.code(), 0) << p.Describe();
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_TRUE(absl::StartsWith(*ReadFileToString(Env::Default(), target), "{"));
  // A dangling link: its target is created.
  const std::string dangling = t.Join("dangling.json");
  ASSERT_EQ(::symlink("d/new.json", dangling.c_str()), 0);
  ASSERT_EQ(RunGrist({"version", "--json", dangling}).code(), 0);
  ASSERT_EQ(::lstat(dangling.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_TRUE(absl::StartsWith(*ReadFileToString(Env::Default(), t.Join("d/new.json")), "{"));
}

TEST(CliJson, DevStdoutAndDevicesAreWrittenThrough) {
  TempDir t;
  // /dev/stdout with the standard output redirected to a regular file: appended to, the file
  // keeps what the command printed before.
  const std::string out = t.Join("out.txt");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), out, "").ok());
  Proc p = RunGrist({"version", "--json", "/dev/stdout"}, {}, out);
  ASSERT_EQ(p.code(), 0) << p.Describe();
  std::string text = *ReadFileToString(Env::Default(), out);
  EXPECT_TRUE(absl::StartsWith(text, "grist ")) << text;
  EXPECT_TRUE(absl::StrContains(text, ")\n{")) << text;
  struct stat st;
  ASSERT_EQ(::lstat("/dev/stdout", &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  // A character device.
  ASSERT_EQ(RunGrist({"version", "--json", "/dev/null"}).code(), 0);
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A FIFO, read by another thread: the JSON comes through it, the FIFO stays one.
  const std::string fifo = t.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  Proc f = RunGrist({"version", "--json", fifo});
  reader.join();
  EXPECT_EQ(f.code(), 0) << f.Describe();
  EXPECT_TRUE(absl::StartsWith(got, "{")) << got;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// ---- A stage's output folder as the next stage's input ---------------------------------------

uint64_t JsonUint(const std::string& json, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\": ?([0-9]+)");
  if (!std::regex_search(json, m, re)) return UINT64_MAX;
  return std::stoull(m[1].str());
}

TEST(CliPipeline, DedupOfACleanOutputFolderReadsItsKeptDocumentsOnly) {
  TempDir t;
  grist::testing::SyntheticCorpusOptions o;
  o.documents = 300;
  const std::string in = grist::testing::WriteSyntheticCorpus(t.Join("in.jsonl"), o);
  Proc c = RunGrist({"clean", "--input", in, "--output", t.Join("cl"), "--json", t.Join("c.json"),
                "--quiet"});
  ASSERT_EQ(c.code(), 0) << c.Describe();
  const std::string cj = *ReadFileToString(Env::Default(), t.Join("c.json"));
  const std::string docs = cj.substr(cj.find("\"docs\""));
  const uint64_t kept = JsonUint(docs, "kept"), rejected = JsonUint(docs, "rejected");
  ASSERT_GT(kept, 0u);
  ASSERT_GT(rejected, 0u);  // so rejects/ holds documents that must not come back
  Proc d = RunGrist({"dedup", "-i", t.Join("cl"), "-o", t.Join("dd"), "--json", t.Join("d.json"),
                "--quiet"});
  ASSERT_EQ(d.code(), 0) << d.Describe();
  const std::string dj = *ReadFileToString(Env::Default(), t.Join("d.json"));
  EXPECT_EQ(JsonUint(dj, "docs_in"), kept) << dj;
  EXPECT_EQ(JsonUint(dj, "docs_rejected"), 0u) << dj;
  EXPECT_GT(JsonUint(dj, "docs_removed"), 0u) << dj;  // the corpus has duplicates
  // And dedup's output folder, given to the next stage, is its kept parts only.
  auto files = ListInputs(Env::Default(), {t.Join("dd")});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_FALSE(files->empty());
  for (const auto& f : *files) {
    EXPECT_FALSE(absl::StrContains(f.path, "/removed/")) << f.path;
    EXPECT_TRUE(absl::EndsWith(f.path, ".jsonl.zst")) << f.path;
  }
  // Named explicitly, the rejects are read.
  Proc r = RunGrist({"dedup", "-i", t.Join("cl/rejects"), "-o", t.Join("dr"), "--json", t.Join("r.json"),
                "--quiet"});
  ASSERT_EQ(r.code(), 0) << r.Describe();
  EXPECT_EQ(JsonUint(*ReadFileToString(Env::Default(), t.Join("r.json")), "docs_in"), rejected);
}

// An output inside an input folder would be read back as input by the next run: refused by every
// command that reads input folders and writes an output, before it writes anything.
TEST(CliPipeline, AnOutputInsideAnInputFolderIsRefused) {
  TempDir t;
  grist::testing::SyntheticCorpusOptions o;
  o.documents = 50;
  const std::string corpus = t.Join("corpus");
  ASSERT_TRUE(Env::Default()->CreateDirs(corpus).ok());
  grist::testing::WriteSyntheticCorpus(JoinPath(corpus, "in.jsonl"), o);
  Proc m = RunGrist({"tokenize", "train", "-i", corpus, "-o", t.Join("tok.model"),
                     "--vocab-size", "400", "--quiet"});
  ASSERT_EQ(m.code(), 0) << m.Describe();
  const std::string out = JoinPath(corpus, "out");
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"clean", "-i", corpus, "-o", out, "--quiet"},
           {"dedup", "-i", corpus, "-o", out, "--quiet"},
           {"tokenize", "encode", "--model", t.Join("tok.model"), "-i", corpus, "-o", out}}) {
    Proc p = RunGrist(cmd);
    EXPECT_EQ(p.code(), 1) << p.Describe();
    EXPECT_TRUE(absl::StrContains(p.err, absl::StrCat("--output ", out, " lies inside the input "
                                                      "folder ", corpus, " (--input)")))
        << p.Describe();
  }
  EXPECT_FALSE(Env::Default()->FileExists(out));
  // Beside the input folder is fine.
  Proc ok = RunGrist({"clean", "-i", corpus, "-o", t.Join("cleaned"), "--quiet"});
  EXPECT_EQ(ok.code(), 0) << ok.Describe();
}

// -i and -o are --input and --output in every command that takes them, as in dedup.
TEST(CliFlags, ShortInputAndOutputFlagsInEveryCommandThatTakesThem) {
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"clean"}, {"dedup"}, {"tokenize", "train"},
                                             {"tokenize", "encode"}, {"build"}, {"pack"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    Proc p = RunGrist(args);
    ASSERT_EQ(p.code(), 0) << p.Describe();
    const bool takes_input = cmd[0] != "build" && cmd[0] != "pack";
    EXPECT_EQ(absl::StrContains(p.out, "-i,--input"), takes_input) << absl::StrJoin(cmd, " ");
    EXPECT_TRUE(absl::StrContains(p.out, "-o,--output")) << absl::StrJoin(cmd, " ");
  }
  // The short forms do what the long ones do.
  TempDir t;
  grist::testing::SyntheticCorpusOptions o;
  o.documents = 50;
  const std::string in = grist::testing::WriteSyntheticCorpus(t.Join("in.jsonl"), o);
  Proc a = RunGrist({"clean", "--input", in, "--output", t.Join("long"), "--quiet"});
  ASSERT_EQ(a.code(), 0) << a.Describe();
  Proc b = RunGrist({"clean", "-i", in, "-o", t.Join("short"), "--quiet"});
  ASSERT_EQ(b.code(), 0) << b.Describe();
  const std::string part = "part-00000-of-00001-00000.jsonl.zst";
  auto x = ReadFileToString(Env::Default(), JoinPath(t.Join("long"), part));
  auto y = ReadFileToString(Env::Default(), JoinPath(t.Join("short"), part));
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*x, *y);
}

// ---- Progress on compressed input -----------------------------------------------------------

TEST(CliProgress, CompressedInputCountsWhatItsTotalCounts) {
  TempDir t;
  grist::testing::SyntheticCorpusOptions o;
  o.documents = 400;
  // Through clean: its kept part is a .jsonl.zst that decodes to several times its size.
  const std::string in = grist::testing::WriteSyntheticCorpus(t.Join("in.jsonl"), o);
  ASSERT_EQ(RunGrist({"clean", "--input", in, "--output", t.Join("cl"), "--quiet"}).code(), 0);
  auto parts = ListInputs(Env::Default(), {t.Join("cl")});
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 1u);
  const uint64_t compressed = (*parts)[0].size;
  // One thread: a progress line is skipped when two threads add at the same moment, so with more
  // the count of intermediate lines would depend on timing.
  Proc p = RunGrist({"dedup", "-i", t.Join("cl"), "-o", t.Join("dd"), "--threads", "1"},
               {"GRIST_PROGRESS_INTERVAL=0"});
  ASSERT_EQ(p.code(), 0) << p.Describe();
  // Every line of the two byte-counting stages: amount <= the compressed total, and the final line
  // ("... in N s") says exactly the total.
  const std::string total = HumanBytes(static_cast<double>(compressed));
  int lines = 0, finals = 0;
  for (absl::string_view line : absl::StrSplit(p.err, '\n')) {
    if (!absl::StartsWith(line, "dedup signatures") && !absl::StartsWith(line, "dedup filter")) {
      continue;
    }
    ++lines;
    std::smatch m;
    std::string l(line);
    ASSERT_TRUE(std::regex_search(l, m, std::regex("([0-9.]+) (B|kB|MB) [0-9.]+ [kMG]?B/s")))
        << l;
    const double scale = m[2] == "B" ? 1 : m[2] == "kB" ? 1e3 : 1e6;
    EXPECT_LE(std::stod(m[1].str()) * scale, static_cast<double>(compressed) * 1.06) << l;
    if (absl::StrContains(line, " in ")) {
      ++finals;
      EXPECT_TRUE(absl::StrContains(line, "100% " + total)) << l << " (total " << total << ")";
    }
  }
  EXPECT_GE(lines, 4);
  EXPECT_EQ(finals, 2);
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) ++n;
  return n;
}

// `grist loader` shows what grist.Loader delivers with the same settings, so its defaults are
// LoaderOptions' own: one epoch unless --epochs says otherwise.
TEST(CliLoader, DefaultsAreTheLoadersOwn) {
  TempDir t;
  loader::SyntheticReleaseOptions so;
  so.samples = 8;
  so.seq_len = 4;
  so.samples_per_shard = 8;
  so.vocab_size = 100;
  so.mean_document_tokens = 3;
  ASSERT_TRUE(loader::WriteSyntheticRelease(Env::Default(), t.Join("rel"), so).ok());
  const std::vector<std::string> args = {"loader", t.Join("rel"), "--micro-batch", "2",
                                         "--global-batch", "4", "--steps", "5"};
  Proc one = RunGrist(args);
  ASSERT_EQ(one.code(), 0) << one.Describe();
  EXPECT_EQ(Count(one.out, "step at consumed_samples"), 3u) << one.out;  // 2 steps, then the end
  EXPECT_TRUE(absl::StrContains(one.out, "  (end of the run)\n")) << one.out;
  std::vector<std::string> unlimited = args;
  unlimited.insert(unlimited.end(), {"--epochs", "0"});
  Proc all = RunGrist(unlimited);
  ASSERT_EQ(all.code(), 0) << all.Describe();
  EXPECT_EQ(Count(all.out, "step at consumed_samples"), 5u) << all.out;
  EXPECT_FALSE(absl::StrContains(all.out, "end of the run")) << all.out;
}

}  // namespace
}  // namespace grist::tools
