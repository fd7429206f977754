#include "common/option_table.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace grist::option_internal {

std::string FormatDouble(double v) { return absl::StrCat(v); }

std::string JoinList(const std::vector<std::string>& v) { return absl::StrJoin(v, ","); }

std::vector<std::string> DerivedFlags(const std::string& prefix, const std::string& key,
                                      bool is_bool) {
  std::string name = key.rfind(prefix, 0) == 0 ? key.substr(prefix.size()) : key;
  constexpr std::string_view kEnabled = ".enabled";
  if (is_bool && name.size() > kEnabled.size() &&
      name.compare(name.size() - kEnabled.size(), kEnabled.size(), kEnabled) == 0) {
    name.resize(name.size() - kEnabled.size());
  }
  for (char& c : name) {
    if (c == '.' || c == '_') c = '-';
  }
  if (is_bool) return {name, "no-" + name};
  return {name};
}

bool InBounds(double v, const OptionBounds& b) { return v >= b.min && v <= b.max; }

absl::Status OutOfRange(const Config& c, const std::string& key, double v, const OptionBounds& b) {
  return absl::InvalidArgumentError(absl::StrCat("config ", c.source(), ": key '", key, "': ", v,
                                                 " is outside [", b.min, ", ", b.max, "]"));
}

absl::Status BadChoice(const Config& c, const std::string& key, const std::string& v,
                       const std::vector<std::string>& choices) {
  std::string allowed;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) allowed += i + 1 == choices.size() ? " or " : ", ";
    absl::StrAppend(&allowed, "\"", choices[i], "\"");
  }
  return absl::InvalidArgumentError(absl::StrCat("config ", c.source(), ": key '", key,
                                                 "': expected ", allowed, ", got \"", v, "\""));
}

}  // namespace grist::option_internal
