#include "tools/option_flags.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace grist::tools {
namespace {

std::string Dashed(const std::string& name) { return "--" + name; }

// CLI11's validator for bounds: the named NONNEGATIVE / POSITIVE where they fit, else a range.
void CheckBounds(CLI::Option* opt, const OptionInfo& info) {
  const OptionBounds& b = info.bounds;
  const bool lo = std::isfinite(b.min), hi = std::isfinite(b.max);
  if (!lo && !hi) return;
  if (info.kind == OptionKind::kInt) {
    const int64_t min = lo ? static_cast<int64_t>(b.min) : std::numeric_limits<int64_t>::min();
    const int64_t max = hi ? static_cast<int64_t>(b.max) : std::numeric_limits<int64_t>::max();
    if (!hi && min == 0) {
      opt->check(CLI::NonNegativeNumber);
    } else if (!hi && min == 1) {
      opt->check(CLI::PositiveNumber);
    } else {
      opt->check(CLI::Range(min, max));
    }
  } else {
    opt->check(CLI::Range(lo ? b.min : std::numeric_limits<double>::lowest(),
                          hi ? b.max : std::numeric_limits<double>::max()));
  }
}

}  // namespace

std::string OptionHelp(const OptionInfo& info) {
  if (info.required) return absl::StrCat(info.help, " (required; config: ", info.key, ")");
  return absl::StrCat(info.help, " (default: ",
                      info.default_text.empty() ? "\"\"" : info.default_text,
                      "; config: ", info.key, ")");
}

void ConfigFlags::Add(CLI::App* app, const std::vector<OptionInfo>& options) {
  for (const OptionInfo& info : options) {
    if (info.flags.empty()) continue;
    auto v = std::make_unique<Value>();
    v->info = info;
    const std::string help = OptionHelp(info);
    if (info.kind == OptionKind::kBool) {
      // NAME sets true, no-NAME false (CLI11's "!" negation), one entry in the help.
      std::string names;
      for (const std::string& f : info.flags) {
        if (!names.empty()) names += ",";
        names += (f.rfind("no-", 0) == 0 ? "!" : "") + Dashed(f);
      }
      v->opts.push_back(app->add_flag(names, v->b, help));
    } else {
      std::string names;
      for (const std::string& f : info.flags) {
        if (!names.empty()) names += ",";
        names += Dashed(f);
      }
      CLI::Option* opt = nullptr;
      switch (info.kind) {
        case OptionKind::kInt:
          opt = app->add_option(names, v->i, help);
          CheckBounds(opt, info);
          break;
        case OptionKind::kUint:
          opt = app->add_option(names, v->u, help);
          break;
        case OptionKind::kDouble:
          opt = app->add_option(names, v->d, help);
          CheckBounds(opt, info);
          break;
        case OptionKind::kString:
          opt = app->add_option(names, v->s, help);
          break;
        case OptionKind::kEnum:
          opt = app->add_option(names, v->s, help)->check(CLI::IsMember(info.choices));
          break;
        case OptionKind::kStringList:
          opt = app->add_option(names, v->list, help)->delimiter(',')->type_name("TEXT,...");
          break;
        case OptionKind::kBool:
          break;
      }
      v->opts.push_back(opt);
    }
    values_.push_back(std::move(v));
  }
}

bool ConfigFlags::Given(const std::string& key) const {
  for (const auto& v : values_) {
    if (v->info.key != key) continue;
    for (const CLI::Option* o : v->opts) {
      if (o->count() > 0) return true;
    }
  }
  return false;
}

void ConfigFlags::ApplyTo(Config* config) const {
  for (const auto& v : values_) {
    if (!Given(v->info.key)) continue;
    const std::string& key = v->info.key;
    switch (v->info.kind) {
      case OptionKind::kBool:
        config->SetBool(key, v->b);
        break;
      case OptionKind::kInt:
        config->SetInt(key, v->i);
        break;
      case OptionKind::kUint:
        config->SetInt(key, static_cast<int64_t>(v->u));
        break;
      case OptionKind::kDouble:
        config->SetDouble(key, v->d);
        break;
      case OptionKind::kString:
      case OptionKind::kEnum:
        config->SetString(key, v->s);
        break;
      case OptionKind::kStringList:
        config->SetStringList(key, v->list);
        break;
    }
  }
}

}  // namespace grist::tools
