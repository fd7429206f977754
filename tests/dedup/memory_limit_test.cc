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

#include "common/env.h"
#include "common/rng.h"
#include "tests/test_util.h"

namespace grist {
namespace {

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

  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open(tmp.Join("dedup.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const std::string bin = std::string(GRIST_BINARY_DIR) + "/grist";
    const std::string in = tmp.Join("corpus.jsonl"), out = tmp.Join("out");
    const std::string mb = std::to_string(kBudgetMb);
    ::execl(bin.c_str(), bin.c_str(), "dedup", "--quiet", "--threads", "2", "--memory-limit",
            mb.c_str(), "--input", in.c_str(), "--output", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ASSERT_EQ(::wait4(pid, &status, 0, &ru), pid);
  const std::string log = ReadFileToString(Env::Default(), tmp.Join("dedup.log")).value_or("");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  const uint64_t peak = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
  std::printf("dedup of %.1f MB with --memory-limit %d: peak RSS %.1f MB\n", corpus_bytes / 1e6,
              kBudgetMb, peak / 1048576.0);
  EXPECT_GT(corpus_bytes, uint64_t{kBudgetMb} << 20);
  EXPECT_LE(peak, uint64_t{kBudgetMb} << 20) << log;
}

}  // namespace
}  // namespace grist
