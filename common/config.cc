#include "common/config.h"

#include <utility>

#include <set>
#include <variant>

// toml++ is used header-only, with exceptions, which are caught here and turned into Status.
#include <toml++/toml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace grist {

using Resolved = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;

struct Config::Impl {
  toml::table table;
  std::string source = "<defaults>";
  std::map<std::string, Resolved> resolved;                // what was read (or set)
  std::map<std::string, Resolved> overrides;               // Set*()
};

Config::Config() : impl_(std::make_unique<Impl>()) {}
Config::~Config() = default;
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;

namespace {

// TOML text is UTF-8 without control characters other than tab, LF and CR (TOML 1.0). Checked
// before toml++ sees the text: its parser reaches __builtin_unreachable on some invalid input
// (found by fuzz/fuzz_config.cc), so nothing outside this grammar may get to it. Returns the
// 1-based line and column of the first offending byte, or {0, 0}.
std::pair<size_t, size_t> FirstInvalidByte(std::string_view t) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < t.size();) {
    const auto b = static_cast<unsigned char>(t[i]);
    if ((b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7f) return {line, col};
    const size_t n = Utf8SequenceLength(t.data() + i, t.size() - i);
    if (n == 0) return {line, col};
    if (b == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    i += n;
  }
  return {0, 0};
}

// Outside strings and comments TOML is ASCII (bare keys, numbers, whitespace). toml++ classifies
// such characters with a table that reaches __builtin_unreachable for most non-ASCII code points
// (e.g. "a = 1 \xc3\xa9"), so they are refused here. Returns the 1-based line and column of the
// first non-ASCII byte outside a string or comment, or {0, 0}.
std::pair<size_t, size_t> FirstBareNonAscii(std::string_view t) {
  size_t line = 1, line_start = 0;
  auto newline = [&](size_t i) {
    ++line;
    line_start = i + 1;
  };
  // A quote opens a string only where TOML allows one (a value after '=', '[' or ',', a key at a
  // line start or after '.', '[', '{' or ','); elsewhere toml++ reads it as part of a bare token.
  char last = '\n';       // the last significant ASCII character
  bool in_value = false;  // after '=' on this line: a '.' there is part of a number, not a key
  auto string_may_start = [&] {
    if (last == '.') return !in_value;
    return std::string_view("=[,{\n").find(last) != std::string_view::npos;
  };
  for (size_t i = 0; i < t.size(); ++i) {
    const char ch = t[i];
    if (ch == '\n') {
      newline(i);
      last = '\n';
      in_value = false;
    } else if (ch == ' ' || ch == '\t' || ch == '\r') {
      continue;
    } else if (ch == '#') {
      while (i + 1 < t.size() && t[i + 1] != '\n') ++i;
    } else if ((ch == '"' || ch == '\'') && string_may_start()) {
      last = ch;
      const std::string quote3(3, ch);
      const bool multi = t.substr(i, 3) == quote3;
      const bool escapes = ch == '"';
      i += multi ? 3 : 1;
      for (; i < t.size(); ++i) {
        if (escapes && t[i] == '\\') {
          ++i;
          if (i < t.size() && t[i] == '\n') newline(i);
          continue;
        }
        if (t[i] == '\n') {
          newline(i);
          if (!multi) break;
          continue;
        }
        if (multi ? t.substr(i, 3) == quote3 : t[i] == ch) {
          if (multi) i += 2;
          break;
        }
      }
    } else if (static_cast<unsigned char>(ch) >= 0x80) {
      return {line, i - line_start + 1};
    } else {
      last = ch;
      if (ch == '=') in_value = true;
    }
  }
  return {0, 0};
}

}  // namespace

absl::StatusOr<Config> Config::FromString(std::string_view text, std::string source_name) {
  Config c;
  c.impl_->source = std::move(source_name);
  if (auto [line, col] = FirstInvalidByte(text); line != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", c.impl_->source, ":", line, ":", col,
        ": not TOML text (invalid UTF-8 or a control character)"));
  }
  if (auto [line, col] = FirstBareNonAscii(text); line != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", c.impl_->source, ":", line, ":", col,
        ": a non-ASCII character outside a string or comment"));
  }
  try {
    c.impl_->table = toml::parse(text, c.impl_->source);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", c.impl_->source, ":", e.source().begin.line, ":", e.source().begin.column,
        ": ", std::string(e.description())));
  }
  return c;
}

absl::StatusOr<Config> Config::FromFile(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, path));
  return FromString(text, path);
}

const std::string& Config::source() const { return impl_->source; }

namespace {
const toml::node* Find(const toml::table& t, std::string_view key) {
  return t.at_path(key).node();
}
absl::Status TypeError(const std::string& src, std::string_view key_sv, std::string_view want_sv,
                       const toml::node* n) {
  std::string key(key_sv), want(want_sv);
  std::string got;
  switch (n->type()) {
    case toml::node_type::string: got = "a string"; break;
    case toml::node_type::integer: got = "an integer"; break;
    case toml::node_type::floating_point: got = "a float"; break;
    case toml::node_type::boolean: got = "a boolean"; break;
    case toml::node_type::array: got = "an array"; break;
    case toml::node_type::table: got = "a table"; break;
    default: got = "a date/time"; break;
  }
  return absl::InvalidArgumentError(absl::StrCat("config ", src, ": key '", key, "': expected ",
                                                 want, ", got ", got));
}
absl::Status Missing(const std::string& src, std::string_view key) {
  return absl::NotFoundError(
      absl::StrCat("config ", src, ": missing required key '", std::string(key), "'"));
}
}  // namespace

bool Config::Has(std::string_view key) const {
  return impl_->overrides.count(std::string(key)) || Find(impl_->table, key) != nullptr;
}

#define GRIST_CONFIG_OVERRIDE(T)                                              \
  if (auto it = impl_->overrides.find(std::string(key)); it != impl_->overrides.end()) { \
    if (auto* v = std::get_if<T>(&it->second)) {                              \
      impl_->resolved[std::string(key)] = *v;                                 \
      return *v;                                                              \
    }                                                                         \
  }

absl::StatusOr<int64_t> Config::GetInt(std::string_view key, int64_t def) const {
  GRIST_CONFIG_OVERRIDE(int64_t)
  const toml::node* n = Find(impl_->table, key);
  int64_t v = def;
  if (n) {
    if (!n->is_integer()) return TypeError(impl_->source, key, "an integer", n);
    v = n->as_integer()->get();
  }
  impl_->resolved[std::string(key)] = v;
  return v;
}

absl::StatusOr<double> Config::GetDouble(std::string_view key, double def) const {
  GRIST_CONFIG_OVERRIDE(double)
  if (auto it = impl_->overrides.find(std::string(key)); it != impl_->overrides.end()) {
    if (auto* v = std::get_if<int64_t>(&it->second)) {
      impl_->resolved[std::string(key)] = static_cast<double>(*v);
      return static_cast<double>(*v);
    }
  }
  const toml::node* n = Find(impl_->table, key);
  double v = def;
  if (n) {
    if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else if (n->is_floating_point()) v = n->as_floating_point()->get();
    else return TypeError(impl_->source, key, "a number", n);
  }
  impl_->resolved[std::string(key)] = v;
  return v;
}

absl::StatusOr<bool> Config::GetBool(std::string_view key, bool def) const {
  GRIST_CONFIG_OVERRIDE(bool)
  const toml::node* n = Find(impl_->table, key);
  bool v = def;
  if (n) {
    if (!n->is_boolean()) return TypeError(impl_->source, key, "a boolean", n);
    v = n->as_boolean()->get();
  }
  impl_->resolved[std::string(key)] = v;
  return v;
}

absl::StatusOr<std::string> Config::GetString(std::string_view key, std::string def) const {
  GRIST_CONFIG_OVERRIDE(std::string)
  const toml::node* n = Find(impl_->table, key);
  std::string v = std::move(def);
  if (n) {
    if (!n->is_string()) return TypeError(impl_->source, key, "a string", n);
    v = n->as_string()->get();
  }
  impl_->resolved[std::string(key)] = v;
  return v;
}

absl::StatusOr<std::vector<std::string>> Config::GetStringList(
    std::string_view key, std::vector<std::string> def) const {
  GRIST_CONFIG_OVERRIDE(std::vector<std::string>)
  const toml::node* n = Find(impl_->table, key);
  std::vector<std::string> v = std::move(def);
  if (n) {
    v.clear();
    if (n->is_string()) {
      v.push_back(n->as_string()->get());
    } else if (n->is_array()) {
      for (const auto& e : *n->as_array()) {
        if (!e.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat("config ", impl_->source, ": key '", std::string(key),
                                                         "': expected an array of strings"));
        }
        v.push_back(e.as_string()->get());
      }
    } else {
      return TypeError(impl_->source, key, "an array of strings", n);
    }
  }
  impl_->resolved[std::string(key)] = v;
  return v;
}

absl::StatusOr<int64_t> Config::RequireInt(std::string_view key) const {
  if (!Has(key)) return Missing(impl_->source, key);
  return GetInt(key, 0);
}
absl::StatusOr<double> Config::RequireDouble(std::string_view key) const {
  if (!Has(key)) return Missing(impl_->source, key);
  return GetDouble(key, 0);
}
absl::StatusOr<std::string> Config::RequireString(std::string_view key) const {
  if (!Has(key)) return Missing(impl_->source, key);
  return GetString(key, "");
}
absl::StatusOr<std::vector<std::string>> Config::RequireStringList(std::string_view key) const {
  if (!Has(key)) return Missing(impl_->source, key);
  return GetStringList(key, {});
}

void Config::SetString(std::string_view key, std::string value) {
  impl_->overrides[std::string(key)] = std::move(value);
}
void Config::SetInt(std::string_view key, int64_t value) {
  impl_->overrides[std::string(key)] = value;
}
void Config::SetDouble(std::string_view key, double value) {
  impl_->overrides[std::string(key)] = value;
}
void Config::SetBool(std::string_view key, bool value) {
  impl_->overrides[std::string(key)] = value;
}
void Config::SetStringList(std::string_view key, std::vector<std::string> value) {
  impl_->overrides[std::string(key)] = std::move(value);
}

namespace {
void CollectLeaves(const toml::table& t, const std::string& prefix, std::set<std::string>* out) {
  for (const auto& [k, v] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) CollectLeaves(*v.as_table(), key, out);
    else out->insert(key);
  }
}
}  // namespace

std::vector<std::string> Config::UnusedKeys() const {
  std::set<std::string> leaves;
  CollectLeaves(impl_->table, "", &leaves);
  std::vector<std::string> out;
  for (const auto& k : leaves) {
    if (!impl_->resolved.count(k)) out.push_back(k);
  }
  return out;
}

std::string Config::ResolvedJson(int indent) const {
  // Build a nested view from the flat sorted map: std::map order makes it canonical.
  JsonWriter w(indent);
  w.BeginObject();
  std::vector<std::string> open;  // currently open sections
  for (const auto& [key, value] : impl_->resolved) {
    std::vector<std::string> parts = absl::StrSplit(key, '.');
    std::string leaf = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) ++common;
    while (open.size() > common) {
      w.EndObject();
      open.pop_back();
    }
    for (size_t i = common; i < parts.size(); ++i) {
      w.Key(parts[i]).BeginObject();
      open.push_back(parts[i]);
    }
    w.Key(leaf);
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) w.Int(v);
          else if constexpr (std::is_same_v<T, double>) w.Double(v);
          else if constexpr (std::is_same_v<T, bool>) w.Bool(v);
          else if constexpr (std::is_same_v<T, std::string>) w.String(v);
          else {
            w.BeginArray();
            for (const auto& s : v) w.String(s);
            w.EndArray();
          }
        },
        value);
  }
  while (!open.empty()) {
    w.EndObject();
    open.pop_back();
  }
  w.EndObject();
  return w.Take();
}

}  // namespace grist
