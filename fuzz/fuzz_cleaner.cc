// Fuzzes the cleaner with arbitrary bytes under several option sets and checks its contract:
// with the repair policy the output is valid UTF-8 without NUL, CR or other C0 controls (except
// '\n' and, without whitespace normalization, '\t'); cleaning is deterministic (a second Cleaner, and
// the same Cleaner reused, give the same result); normalizing already-normalized text changes
// nothing (idempotence) with NFC and whitespace normalization.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "clean/cleaner.h"
#include "common/utf8.h"

namespace {

grist::clean::CleanOptions OptionsFor(int which) {
  grist::clean::CleanOptions o;
  switch (which) {
    case 1:
      o.normalization = grist::clean::Normalization::kNfkc;
      break;
    case 2:
      o.normalize_whitespace = false;
      o.c4.filter_no_terminal_punct = true;
      break;
    case 3:
      o = grist::clean::CleanOptions::NormalizeOnly();
      break;
    default:
      break;
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int which = data[0] & 3;
  std::string_view raw(reinterpret_cast<const char*>(data + 1), size - 1);
  grist::clean::CleanOptions o = OptionsFor(which);
  static grist::clean::Cleaner* reused[4] = {nullptr, nullptr, nullptr, nullptr};
  if (reused[which] == nullptr) reused[which] = new grist::clean::Cleaner(o);
  grist::clean::Cleaner fresh(o);
  grist::clean::CleanResult a, b;
  fresh.Clean(raw, &a);
  reused[which]->Clean(raw, &b);
  if (a.text != b.text || a.reasons != b.reasons) __builtin_trap();
  if (!grist::IsValidUtf8(a.text)) __builtin_trap();
  for (unsigned char c : a.text) {
    if (c == 0 || c == '\r' || (c < 0x20 && c != '\n' && !(c == '\t' && which == 2))) __builtin_trap();
  }
  if (o.normalize_whitespace && which != 1) {  // NFKC may map a character to " " + mark
    std::string once, twice;
    grist::clean::NormalizeCounters counters;
    fresh.Normalize(raw, &once, &counters);
    fresh.Normalize(once, &twice, &counters);
    if (once != twice) __builtin_trap();
  }
  return 0;
}
