// Fuzzes the record readers: the first byte picks the input format (JSONL, .jsonl.gz, .jsonl.zst,
// text file, text blocks, compressed text), blocks mode for compressed text, a small record
// limit and whether splits are small; the rest is the file's
// content, held in a MemEnv and read through every split PlanSplits makes, three ways: each split
// decoded on its own, the stream splits of a compressed file through one shared decoder
// (SplitDecoders), and the file whole. Any crash, sanitizer report, a document that breaks the
// reader's contract (a bad record whose error does not name the file), or ways that disagree on
// the records or the first error is a finding; so is a record that NextLineOrDoc gives as its line
// when that is not exactly the record Next gives, as grist writes it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/records.h"

namespace {

const char* kNames[] = {"in.jsonl", "in.jsonl.gz", "in.jsonl.zst", "in.txt",
                        "in.txt",   "in.txt.gz",   "in.txt.zst",   "in.ndjson"};

struct Outcome {
  std::vector<std::string> records;
  std::string error;
  bool operator==(const Outcome& o) const { return records == o.records && error == o.error; }
};

// An error without the position a read reached ("after line N: "), which differs with it.
std::string_view Cause(std::string_view error) {
  constexpr std::string_view kAfter = "after line ";
  if (error.substr(0, kAfter.size()) != kAfter) return error;
  const size_t colon = error.find(": ");
  return colon == std::string_view::npos ? error : error.substr(colon + 2);
}

// Two reads of one input agree: the same records and error; or, when both end in the same error
// (which fails the stage, so nothing read is published), the records of one are a prefix of the
// other's: a corrupt compressed stream is found where the decoder reaches it, which depends on how
// much each read decodes at a time (the records before it that one read emits, the other may not,
// and so the line its error names).
bool Agree(const Outcome& a, const Outcome& b) {
  if (a == b) return true;
  if (a.error.empty() || b.error.empty() || Cause(a.error) != Cause(b.error)) return false;
  const Outcome& s = a.records.size() <= b.records.size() ? a : b;
  const Outcome& l = &s == &a ? b : a;
  return std::equal(s.records.begin(), s.records.end(), l.records.begin());
}

// Reads `splits` in order; the first error ends the read.
Outcome Read(grist::Env* env, const grist::InputFile& file,
             const std::vector<grist::InputSplit>& splits, const grist::InputOptions& options,
             const std::string& name, grist::SplitDecoders* decoders) {
  Outcome out;
  for (const auto& split : splits) {
    auto reader = grist::OpenRecordReader(env, file, split, options, decoders);
    if (!reader.ok()) {
      out.error = std::string(reader.status().message());
      return out;
    }
    grist::Document doc;
    for (int i = 0; i < 100000; ++i) {
      auto more = (*reader)->Next(&doc);
      if (!more.ok()) {
        out.error = std::string(more.status().message());
        return out;
      }
      if (!*more) break;
      if (!doc.error.empty() && doc.error.find(name) == std::string::npos) __builtin_trap();
      out.records.push_back(absl::StrCat(doc.line, " ", doc.input_bytes, " ", doc.invalid_utf8, " ",
                                         grist::SerializeRecord(doc, "\"reasons\":[\"x\"]")));
    }
  }
  return out;
}

// Reads the splits by NextLineOrDoc, each record as the same string Describe gives for the document
// Next returns: a record given as its line must be exactly SerializeRecord of that document (a
// good record, with its text size and input bytes), one given parsed the same document; compared
// with a read by Next as Agree compares reads.
std::string Describe(const grist::Document& d) {
  return absl::StrCat(d.error, "|", d.invalid_utf8, "|", d.input_bytes, "|", d.text.size(), "|",
                      grist::SerializeRecord(d));
}

Outcome ReadLines(grist::Env* env, const grist::InputFile& file,
                  const std::vector<grist::InputSplit>& splits, const grist::InputOptions& options,
                  bool by_lines) {
  Outcome out;
  for (const auto& split : splits) {
    auto reader = grist::OpenRecordReader(env, file, split, options);
    if (!reader.ok()) {
      out.error = std::string(reader.status().message());
      return out;
    }
    grist::Document doc;
    grist::RecordReader::Line line;
    for (int i = 0; i < 100000; ++i) {
      bool as_line = false;
      auto more = by_lines ? (*reader)->NextLineOrDoc(&line, &doc, &as_line)
                           : (*reader)->Next(&doc);
      if (!more.ok()) {
        out.error = std::string(more.status().message());
        return out;
      }
      if (!*more) break;
      out.records.push_back(as_line ? absl::StrCat("|0|", line.input_bytes, "|", line.text_bytes,
                                                   "|", std::string(line.bytes))
                                    : Describe(doc));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string name = std::string("/fuzz/") + kNames[selector & 7];
  grist::MemEnv env;
  if (!env.CreateDirs("/fuzz").ok()) __builtin_trap();
  if (!grist::WriteFileAtomic(&env, name,
                              std::string_view(reinterpret_cast<const char*>(data + 1), size - 1))
           .ok()) {
    __builtin_trap();  // the in-memory file system must accept any content
  }
  grist::InputOptions options;
  const int kind = selector & 7;
  options.txt_mode = kind == 4 || (selector & 32) ? "blocks" : "file";
  options.max_record_bytes = (selector & 16) ? 100 : (1 << 20);
  auto files = grist::ListInputs(&env, {name});
  if (!files.ok()) return 0;
  // Small splits so that byte-range and stream splitting are exercised too.
  auto splits = grist::PlanSplits(&env, *files, (selector & 8) ? 64 : (32u << 20), nullptr, options);
  if (!splits.ok()) return 0;
  const grist::InputFile& file = (*files)[0];
  Outcome each = Read(&env, file, *splits, options, name, nullptr);
  if (!Agree(ReadLines(&env, file, *splits, options, true),
             ReadLines(&env, file, *splits, options, false))) {
    __builtin_trap();
  }
  if ((*splits)[0].stream_stride > 0) {
    grist::SplitDecoders decoders(&env, *files, *splits, options, 2);
    if (!Agree(Read(&env, file, *splits, options, name, &decoders), each)) __builtin_trap();
  }
  if (splits->size() > 1) {
    Outcome whole = Read(&env, file, {grist::InputSplit{}}, options, name, nullptr);
    if (!Agree(whole, each)) {
      if (std::getenv("FUZZ_DEBUG")) {  // the two reads, to see where they part
        std::fprintf(stderr, "whole: %zu records, error '%s'\nsplit: %zu records, error '%s'\n",
                     whole.records.size(), whole.error.c_str(), each.records.size(), each.error.c_str());
        for (size_t i = 0; i < std::max(whole.records.size(), each.records.size()); ++i) {
          std::fprintf(stderr, "W %s\nS %s\n", i < whole.records.size() ? whole.records[i].c_str() : "-",
                       i < each.records.size() ? each.records[i].c_str() : "-");
        }
      }
      __builtin_trap();
    }
  }
  return 0;
}
