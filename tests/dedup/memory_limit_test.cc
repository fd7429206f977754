// `grist dedup --memory-limit` bounds the process: a child dedups a generated corpus larger than
// the budget (with near and exact duplicates, so every stage has work), and its peak RSS (wait4's
// ru_maxrss, which counts the binary, its libraries and every thread) stays within the budget.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/rng.h"
#include "tests/compress_util.h"
#include "tests/test_util.h"

namespace grist {
namespace {

// Runs `grist dedup --threads 2 --memory-limit budget_mb` on `inputs` in a child and returns its
// peak RSS in bytes (wait4's ru_maxrss); *log gets its output.
uint64_t PeakRssOfDedup(const std::vector<std::string>& inputs, const std::string& out,
                        int budget_mb, std::string* log) {
  const std::string log_path = out + ".log";
  pid_t pid = ::fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const std::string bin = std::string(GRIST_BINARY_DIR) + "/grist";
    const std::string mb = std::to_string(budget_mb);
    std::vector<std::string> args = {bin, "dedup", "--quiet", "--threads", "2", "--memory-limit",
                                     mb, "--output", out};
    for (const std::string& in : inputs) {
      args.push_back("--input");
      args.push_back(in);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (::wait4(pid, &status, 0, &ru) != pid) return 0;
  *log = ReadFileToString(Env::Default(), log_path).value_or("");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *log += "\n(dedup failed)";
    return 0;
  }
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

TEST(DedupMemoryLimit, PeakRssOfTheProcessStaysWithinTheBudget) {
  testing::TempDir tmp;
  constexpr int kBudgetMb = 64;
  // About 96 MB of JSONL: 1.5x the budget. Every fifth document is a near copy of an earlier one
  // (one word changed), every 50th an exact copy.
  static const char* kWords[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
                                 "hotel", "india", "juliet", "kilo", "lima", "mike", "november",
                                 "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform",
                                 "victor", "whiskey", "xray", "yankee", "zulu"};
  // Written in 1 MB pieces, keeping only the last 2000 texts, so that this process stays small:
  // the forked child's RSS before exec counts in its ru_maxrss.
  Rng rng(99);
  std::vector<std::string> texts;
  uint64_t corpus_bytes = 0;
  {
    auto f = Env::Default()->NewWritableFile(tmp.Join("corpus.jsonl"));
    ASSERT_TRUE(f.ok());
    std::string piece;
    for (int d = 0; corpus_bytes + piece.size() < (96u << 20); ++d) {
      std::string text;
      if (!texts.empty() && d % 50 == 49) {
        text = texts[rng.Uniform(texts.size())];
      } else if (!texts.empty() && d % 5 == 4) {
        text = texts[rng.Uniform(texts.size())];
        text.replace(text.find(' ') + 1, 0, "changed ");
      } else {
        for (int w = 0; w < 100; ++w) {
          if (w) text += ' ';
          text += kWords[rng.Uniform(26)];
          text += std::to_string(rng.Uniform(1000));
        }
      }
      piece += "{\"text\": \"" + text + "\"}\n";
      if (texts.size() < 2000) {
        texts.push_back(std::move(text));
      } else {
        texts[rng.Uniform(texts.size())] = std::move(text);
      }
      if (piece.size() >= (1u << 20)) {
        ASSERT_TRUE((*f)->Append(piece).ok());
        corpus_bytes += piece.size();
        piece.clear();
      }
    }
    ASSERT_TRUE((*f)->Append(piece).ok());
    corpus_bytes += piece.size();
    ASSERT_TRUE((*f)->Close().ok());
  }

  std::string log;
  const uint64_t peak = PeakRssOfDedup({tmp.Join("corpus.jsonl")}, tmp.Join("out"), kBudgetMb, &log);
  ASSERT_GT(peak, 0u) << log;
  std::printf("dedup of %.1f MB with --memory-limit %d: peak RSS %.1f MB\n", corpus_bytes / 1e6,
              kBudgetMb, peak / 1048576.0);
  EXPECT_GT(corpus_bytes, uint64_t{kBudgetMb} << 20);
  EXPECT_LE(peak, uint64_t{kBudgetMb} << 20) << log;
}

// Four exact copies of a compressed corpus, as published corpora are (.jsonl.zst without a frame
// index): three documents in four are removed, so the filter's two writers (kept and removed) both
// compress at full rate; their compressing threads count in the budget too (at 64 MB, before they
// were bounded by it, the filter peaked at about 1.13x).
TEST(DedupMemoryLimit, ExactCopiesOfCompressedFilesStayWithinTheBudget) {
  testing::TempDir tmp;
  constexpr int kBudgetMb = 64;
  Rng rng(7);
  std::vector<std::string> files;
  uint64_t decoded = 0;
  for (int f = 0; f < 8; ++f) {  // 8 files of about 5 MB of JSONL
    std::string jsonl;
    while (jsonl.size() < (5u << 20)) {
      std::string text;
      const int words = 50 + static_cast<int>(rng.Uniform(400));
      for (int w = 0; w < words; ++w) {
        if (w) text += (w % 17 == 0) ? ". " : " ";
        text += 'w';  // appended piecewise: GCC 12 reports a false -Wrestrict for "w" + string
        text += std::to_string(rng.Uniform(20000));
      }
      jsonl += "{\"text\": \"";
      jsonl += text;
      jsonl += ".\"}\n";
    }
    decoded += jsonl.size();
    files.push_back(testing::Zstd(jsonl));
  }
  std::vector<std::string> inputs;
  for (int copy = 0; copy < 4; ++copy) {
    const std::string dir = tmp.Join(absl::StrCat("c", copy));
    ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
    for (size_t f = 0; f < files.size(); ++f) {
      ASSERT_TRUE(WriteFileAtomic(Env::Default(), JoinPath(dir, absl::StrCat("part", f, ".jsonl.zst")),
                                  files[f]).ok());
    }
    inputs.push_back(dir);
  }
  // Freed before the fork: the child's RSS before exec counts in its ru_maxrss.
  files.clear();
  files.shrink_to_fit();
  std::string log;
  const uint64_t peak = PeakRssOfDedup(inputs, tmp.Join("out"), kBudgetMb, &log);
  ASSERT_GT(peak, 0u) << log;
  std::printf("dedup of 4 x %.1f MB (compressed inputs, exact copies) with --memory-limit %d: peak "
              "RSS %.1f MB\n", decoded / 1e6, kBudgetMb, peak / 1048576.0);
  EXPECT_LE(peak, uint64_t{kBudgetMb} << 20) << log;
}

}  // namespace
}  // namespace grist
