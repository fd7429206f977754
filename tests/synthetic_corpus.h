// A deterministic English-like corpus for the tests that must run on a fresh clone (no
// ../shared): documents of sentences over a fixed vocabulary, which pass the quality filters, mixed
// with short ones the filters reject, exact duplicates and near duplicates for dedup to remove.
// Same arguments, same bytes, on every machine.
#ifndef GRIST_TESTS_SYNTHETIC_CORPUS_H_
#define GRIST_TESTS_SYNTHETIC_CORPUS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"

namespace grist::testing {

struct SyntheticCorpusOptions {
  int documents = 1000;
  uint64_t seed = 1;
  // Per mille of the documents: too short to keep, an exact copy of an earlier document, an earlier
  // document with a few words changed.
  int short_per_mille = 100;
  int exact_per_mille = 50;
  int near_per_mille = 50;
  int min_paragraphs = 2, max_paragraphs = 6;
};

class SyntheticText {
 public:
  explicit SyntheticText(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int Uniform(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  std::string Word() {
    static const char* const kWords[] = {
        "the", "of", "and", "to", "in", "that", "with", "have", "be", "for", "on", "was", "as",
        "it", "by", "from", "at", "this", "which", "were", "their", "river", "village", "council",
        "market", "winter", "harvest", "bridge", "teacher", "station", "garden", "letter",
        "engine", "morning", "evening", "history", "mountain", "library", "machine", "doctor",
        "family", "summer", "valley", "railway", "harbour", "factory", "meeting", "journey",
        "building", "question", "answer", "weather", "country", "people", "children", "women",
        "farmers", "workers", "students", "writers", "sailors", "builders", "neighbours",
        "travellers", "opened", "closed", "carried", "followed", "measured", "repaired",
        "described", "painted", "planted", "collected", "crossed", "reached", "answered",
        "explained", "remembered", "discovered", "prepared", "visited", "watched", "wrote",
        "built", "found", "gave", "took", "brought", "kept", "heard", "left", "made", "told",
        "quiet", "narrow", "ancient", "careful", "bright", "heavy", "gentle", "distant", "simple",
        "famous", "patient", "honest", "useful", "strange", "silver", "wooden", "northern",
        "southern", "eastern", "western", "early", "late", "small", "large", "long", "short",
        "slowly", "quickly", "often", "always", "rarely", "together", "before", "after", "again",
        "under", "over", "between", "through", "around", "beyond", "near", "along", "across",
        "during", "because", "although", "while", "until", "several", "many", "every", "most",
        "some", "each", "another", "their", "our", "his", "her", "they", "we", "she", "he",
        "stone", "water", "bread", "salt", "iron", "paper", "glass", "wool", "coal", "grain",
        "road", "field", "forest", "island", "castle", "church", "school", "hospital", "office",
        "kitchen", "window", "door", "table", "chair", "lamp", "clock", "map", "ship", "cart",
        "horse", "sheep", "orchard", "meadow", "lake", "coast", "storm", "rain", "snow", "wind",
    };
    constexpr size_t n = sizeof(kWords) / sizeof(kWords[0]);
    // Zipf-like: low indexes (the stop words) far more often.
    uint64_t a = Next() % n, b = Next() % n;
    return kWords[std::min(a, b) % n];
  }
  std::string Sentence() {
    std::string s;
    int words = Uniform(6, 16);
    for (int i = 0; i < words; ++i) {
      std::string w = Word();
      if (i == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
      absl::StrAppend(&s, i ? " " : "", w);
      if (i > 2 && i + 2 < words && Next() % 11 == 0) s.push_back(',');
    }
    s.push_back(Next() % 13 == 0 ? '?' : '.');
    return s;
  }
  std::string Paragraph() {
    std::string p;
    int sentences = Uniform(3, 7);
    for (int i = 0; i < sentences; ++i) absl::StrAppend(&p, i ? " " : "", Sentence());
    return p;
  }
  std::string Document(int min_paragraphs, int max_paragraphs) {
    std::string d;
    int n = Uniform(min_paragraphs, max_paragraphs);
    for (int i = 0; i < n; ++i) absl::StrAppend(&d, i ? "\n\n" : "", Paragraph());
    return d;
  }

 private:
  uint64_t state_;
};

// The texts of a synthetic corpus, in order.
inline std::vector<std::string> SyntheticDocuments(const SyntheticCorpusOptions& o) {
  SyntheticText g(o.seed);
  std::vector<std::string> docs;
  for (int i = 0; i < o.documents; ++i) {
    const int r = static_cast<int>(g.Next() % 1000);
    if (r < o.short_per_mille) {
      docs.push_back(g.Sentence());
    } else if (r < o.short_per_mille + o.exact_per_mille && i > 0) {
      docs.push_back(docs[g.Next() % docs.size()]);
    } else if (r < o.short_per_mille + o.exact_per_mille + o.near_per_mille && i > 0) {
      std::string d = docs[g.Next() % docs.size()];
      // Change a few words in place: a near duplicate.
      for (int k = 0; k < 3; ++k) {
        size_t at = d.find(' ', g.Next() % d.size());
        if (at == std::string::npos || at + 1 >= d.size()) continue;
        size_t end = d.find_first_of(" .,?\n", at + 1);
        if (end == std::string::npos) continue;
        d.replace(at + 1, end - at - 1, g.Word());
      }
      docs.push_back(std::move(d));
    } else {
      docs.push_back(g.Document(o.min_paragraphs, o.max_paragraphs));
    }
  }
  return docs;
}

// JSON Lines of the corpus: {"id":"synthetic/N","text":...}.
inline std::string SyntheticJsonl(const SyntheticCorpusOptions& o) {
  std::string out;
  std::vector<std::string> docs = SyntheticDocuments(o);
  for (size_t i = 0; i < docs.size(); ++i) {
    absl::StrAppend(&out, "{\"id\":\"synthetic/", i, "\",\"text\":");
    AppendJsonString(&out, docs[i]);
    out.append("}\n");
  }
  return out;
}

// Writes the corpus to `path` (JSON Lines) and returns the path.
inline std::string WriteSyntheticCorpus(const std::string& path,
                                        const SyntheticCorpusOptions& o = {}) {
  (void)WriteFileAtomic(Env::Default(), path, SyntheticJsonl(o));
  return path;
}

}  // namespace grist::testing

#endif  // GRIST_TESTS_SYNTHETIC_CORPUS_H_
