// The options of a stage, each declared once: its config key, type, default, help text and valid
// range. From the one table come
//   - the stage's FromConfig (OptionTable::Read: each key read from the Config, the default being
//     the value a default-constructed options struct holds),
//   - the CLI flags (tools/option_flags.h: one flag per option, which sets the config key, so a
//     flag and a config line are the same thing),
//   - the help texts (OptionInfo::default_text printed from the code, never restated by hand),
//   - the effective options in a report (WriteJson).
//
//   const OptionTable<MyOptions>& Table() {
//     static const auto* t = [] {
//       auto* t = new OptionTable<MyOptions>("my.");
//       t->Int("my.ngram", GRIST_OPTION_FIELD(ngram), "Words per shingle", {.min = 1, .max = 1000});
//       t->Bool("my.verify", GRIST_OPTION_FIELD(verify), "Verify candidate pairs");
//       return t;
//     }();
//     return *t;
//   }
//
// Flag names are derived from the key: the stage prefix dropped, a trailing ".enabled" dropped,
// '.' and '_' made '-' ("clean.c4.min_num_sentences" -> --c4-min-num-sentences; "clean.c4.enabled"
// -> --c4); a Bool also gets --no-NAME. Flags() replaces them where a flag predates its key.
//
// Errors of Read: InvalidArgument naming the config and the key (a type error from Config, a value
// outside the range "config F: key 'K': 2 is outside [0, 1]", an unknown choice "config F: key 'K':
// expected \"a\" or \"b\", got \"c\"").
//
// Thread safety: a built table is immutable; Read, Describe and WriteJson may run concurrently.
#ifndef GRIST_COMMON_OPTION_TABLE_H_
#define GRIST_COMMON_OPTION_TABLE_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/config.h"
#include "common/json_writer.h"

namespace grist {

enum class OptionKind { kBool, kInt, kUint, kDouble, kString, kEnum, kStringList };

// Inclusive bounds of a kInt or kDouble option (both infinite: any value of the type).
struct OptionBounds {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
};

// What the CLI, the docs and the tests know of one option.
struct OptionInfo {
  std::string key;                 // the config key, "clean.c4.min_num_sentences"
  std::vector<std::string> flags;  // long flag names without "--" (first: the documented one);
                                   // empty: config only
  OptionKind kind = OptionKind::kString;
  std::string help;
  std::string default_text;          // the default, as a flag would spell it
  std::vector<std::string> choices;  // kEnum: the accepted values
  OptionBounds bounds;               // kInt, kDouble
  bool required = false;             // the config (or the flag) must give it; no default
};

namespace option_internal {
std::string FormatDouble(double v);
std::string JoinList(const std::vector<std::string>& v);
std::vector<std::string> DerivedFlags(const std::string& prefix, const std::string& key, bool is_bool);
absl::Status OutOfRange(const Config& c, const std::string& key, double v, const OptionBounds& b);
absl::Status BadChoice(const Config& c, const std::string& key, const std::string& v,
                       const std::vector<std::string>& choices);
bool InBounds(double v, const OptionBounds& b);
}  // namespace option_internal

// A reference to an options field, for the adders: GRIST_OPTION_FIELD(c4.min_num_sentences).
#define GRIST_OPTION_FIELD(member) [](auto& o) -> auto& { return o.member; }

template <typename T>
class OptionTable {
 public:
  // `prefix` ("clean.") is what flag names leave out of a key.
  explicit OptionTable(std::string prefix) : prefix_(std::move(prefix)) {}

  template <typename F>
  OptionTable& Bool(std::string key, F field, std::string help) {
    Entry& e = Add(std::move(key), OptionKind::kBool, std::move(help));
    e.read = [field, k = e.info.key](const Config& c, T* o) -> absl::Status {
      auto v = c.GetBool(k, field(*o));
      if (!v.ok()) return v.status();
      field(*o) = *v;
      return absl::OkStatus();
    };
    e.text = [field](const T& o) -> std::string { return field(o) ? "true" : "false"; };
    e.json = [field](const T& o, JsonWriter* w) { w->Bool(field(o)); };
    return *this;
  }

  // Any integer field; a value outside `bounds` (or the field's type) is an error.
  template <typename F>
  OptionTable& Int(std::string key, F field, std::string help, OptionBounds bounds = {}) {
    using V = std::remove_cv_t<std::remove_reference_t<decltype(field(std::declval<T&>()))>>;
    return IntAccess(
        std::move(key), [field](const T& o) { return static_cast<int64_t>(field(o)); },
        [field](T& o, int64_t v) { field(o) = static_cast<V>(v); }, std::move(help), bounds,
        static_cast<double>(std::numeric_limits<V>::lowest()),
        static_cast<double>(std::numeric_limits<V>::max()));
  }
  // An integer option stored through a conversion (e.g. a size in MB kept in bytes).
  template <typename Get, typename Set>
  OptionTable& IntAccess(std::string key, Get get, Set set, std::string help, OptionBounds bounds = {},
                         double type_min = -9.2e18, double type_max = 9.2e18) {
    Entry& e = Add(std::move(key), OptionKind::kInt, std::move(help));
    e.info.bounds = bounds;
    e.read = [get, set, bounds, type_min, type_max, k = e.info.key](const Config& c,
                                                                    T* o) -> absl::Status {
      auto v = c.GetInt(k, get(*o));
      if (!v.ok()) return v.status();
      const double d = static_cast<double>(*v);
      if (!option_internal::InBounds(d, bounds)) return option_internal::OutOfRange(c, k, d, bounds);
      if (d < type_min || d > type_max) {
        return option_internal::OutOfRange(c, k, d, OptionBounds{type_min, type_max});
      }
      set(*o, *v);
      return absl::OkStatus();
    };
    e.text = [get](const T& o) { return std::to_string(get(o)); };
    e.json = [get](const T& o, JsonWriter* w) { w->Int(get(o)); };
    return *this;
  }
  // A uint64 field (a seed): the config holds it as a TOML integer (its two's complement when
  // above 2^63), a flag takes any uint64.
  template <typename F>
  OptionTable& Uint(std::string key, F field, std::string help) {
    Entry& e = Add(std::move(key), OptionKind::kUint, std::move(help));
    e.read = [field, k = e.info.key](const Config& c, T* o) -> absl::Status {
      auto v = c.GetInt(k, static_cast<int64_t>(field(*o)));
      if (!v.ok()) return v.status();
      field(*o) = static_cast<uint64_t>(*v);
      return absl::OkStatus();
    };
    e.text = [field](const T& o) { return std::to_string(static_cast<uint64_t>(field(o))); };
    e.json = [field](const T& o, JsonWriter* w) { w->Uint(field(o)); };
    return *this;
  }

  template <typename F>
  OptionTable& Double(std::string key, F field, std::string help, OptionBounds bounds = {}) {
    Entry& e = Add(std::move(key), OptionKind::kDouble, std::move(help));
    e.info.bounds = bounds;
    e.read = [field, bounds, k = e.info.key](const Config& c, T* o) -> absl::Status {
      auto v = c.GetDouble(k, field(*o));
      if (!v.ok()) return v.status();
      if (!option_internal::InBounds(*v, bounds)) {
        return option_internal::OutOfRange(c, k, *v, bounds);
      }
      field(*o) = *v;
      return absl::OkStatus();
    };
    e.text = [field](const T& o) { return option_internal::FormatDouble(field(o)); };
    e.json = [field](const T& o, JsonWriter* w) { w->Double(field(o)); };
    return *this;
  }

  template <typename F>
  OptionTable& String(std::string key, F field, std::string help) {
    Entry& e = Add(std::move(key), OptionKind::kString, std::move(help));
    e.read = [field, k = e.info.key](const Config& c, T* o) -> absl::Status {
      auto v = c.GetString(k, field(*o));
      if (!v.ok()) return v.status();
      field(*o) = std::move(*v);
      return absl::OkStatus();
    };
    e.text = [field](const T& o) { return std::string(field(o)); };
    e.json = [field](const T& o, JsonWriter* w) { w->String(field(o)); };
    return *this;
  }

  // One of `names`: (the spelling in configs and flags, the field's value), the field being an
  // enum or a string.
  template <typename F, typename V>
  OptionTable& Enum(std::string key, F field, std::string help,
                    std::vector<std::pair<std::string, V>> names) {
    Entry& e = Add(std::move(key), OptionKind::kEnum, std::move(help));
    for (const auto& [n, v] : names) e.info.choices.push_back(n);
    auto name_of = [names](const V& v) -> std::string {
      for (const auto& [n, x] : names) {
        if (x == v) return n;
      }
      return "?";
    };
    e.read = [field, names, name_of, choices = e.info.choices, k = e.info.key](
                 const Config& c, T* o) -> absl::Status {
      auto v = c.GetString(k, name_of(field(*o)));
      if (!v.ok()) return v.status();
      for (const auto& [n, x] : names) {
        if (n == *v) {
          field(*o) = x;
          return absl::OkStatus();
        }
      }
      return option_internal::BadChoice(c, k, *v, choices);
    };
    e.text = [field, name_of](const T& o) { return name_of(field(o)); };
    e.json = [field, name_of](const T& o, JsonWriter* w) { w->String(name_of(field(o))); };
    return *this;
  }

  // A list of strings (a TOML array, or a comma-separated flag value).
  template <typename F>
  OptionTable& StringList(std::string key, F field, std::string help) {
    Entry& e = Add(std::move(key), OptionKind::kStringList, std::move(help));
    e.read = [field, k = e.info.key](const Config& c, T* o) -> absl::Status {
      auto v = c.GetStringList(k, field(*o));
      if (!v.ok()) return v.status();
      field(*o) = std::move(*v);
      return absl::OkStatus();
    };
    e.text = [field](const T& o) { return option_internal::JoinList(field(o)); };
    e.json = [field](const T& o, JsonWriter* w) {
      w->BeginArray();
      for (const auto& s : field(o)) w->String(s);
      w->EndArray();
    };
    return *this;
  }

  // The flag names of the option added last (without "--"), replacing the derived ones; none:
  // the option is set by the config only.
  OptionTable& Flags(std::vector<std::string> names) {
    entries_.back().info.flags = std::move(names);
    return *this;
  }
  // The option added last has no default: Read fails with NotFound when the config lacks it.
  OptionTable& Required() {
    entries_.back().info.required = true;
    return *this;
  }
  // Leaves the option added last out of WriteJson (where a report's format predates it).
  OptionTable& NotInJson() {
    entries_.back().in_json = false;
    return *this;
  }

  // Reads every key of the table from `config` into *options; a key absent from the config
  // leaves the field as it is. Stops at the first error.
  absl::Status Read(const Config& config, T* options) const {
    for (const Entry& e : entries_) {
      if (e.info.required && !config.Has(e.info.key)) {
        return config.RequireString(e.info.key).status();  // NotFound naming the key
      }
      absl::Status s = e.read(config, options);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Every option, in table order, default_text from a default-constructed T.
  std::vector<OptionInfo> Describe() const {
    const T defaults{};
    std::vector<OptionInfo> out;
    out.reserve(entries_.size());
    for (const Entry& e : entries_) {
      out.push_back(e.info);
      if (!e.info.required) out.back().default_text = e.text(defaults);
    }
    return out;
  }

  // The value of every option of `options` as its flag would spell it, in table order.
  std::vector<std::pair<std::string, std::string>> Values(const T& options) const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const Entry& e : entries_) out.emplace_back(e.info.key, e.text(options));
    return out;
  }

  // The options as members of the JSON object being written (keys below the prefix, sections as
  // nested objects, in table order; a section must be contiguous in the table).
  void WriteJson(const T& options, JsonWriter* w) const {
    std::vector<std::string> open;
    for (const Entry& e : entries_) {
      if (!e.in_json) continue;
      std::string rest = e.info.key.substr(prefix_.size());
      std::vector<std::string> parts;
      for (size_t p; (p = rest.find('.')) != std::string::npos; rest = rest.substr(p + 1)) {
        parts.push_back(rest.substr(0, p));
      }
      size_t common = 0;
      while (common < open.size() && common < parts.size() && open[common] == parts[common]) {
        ++common;
      }
      while (open.size() > common) {
        w->EndObject();
        open.pop_back();
      }
      for (size_t i = common; i < parts.size(); ++i) {
        w->Key(parts[i]).BeginObject();
        open.push_back(parts[i]);
      }
      w->Key(rest);
      e.json(options, w);
    }
    while (!open.empty()) {
      w->EndObject();
      open.pop_back();
    }
  }

  const std::string& prefix() const { return prefix_; }

 private:
  struct Entry {
    OptionInfo info;
    bool in_json = true;
    std::function<absl::Status(const Config&, T*)> read;
    std::function<std::string(const T&)> text;
    std::function<void(const T&, JsonWriter*)> json;
  };

  Entry& Add(std::string key, OptionKind kind, std::string help) {
    Entry& e = entries_.emplace_back();
    e.info.flags = option_internal::DerivedFlags(prefix_, key, kind == OptionKind::kBool);
    e.info.key = std::move(key);
    e.info.kind = kind;
    e.info.help = std::move(help);
    return e;
  }

  std::string prefix_;
  std::vector<Entry> entries_;
};

}  // namespace grist

#endif  // GRIST_COMMON_OPTION_TABLE_H_
