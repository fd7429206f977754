// Each stage's option table (common/option_table.h) against the `grist` command line: every option
// appears once in its command's help, with the default the code holds and its config key; and
// setting an option by its flag gives the same options as setting it in a config file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clean/cleaner.h"
#include "common/config.h"
#include "common/option_table.h"
#include "dedup/dedup.h"
#include "loader/loader.h"
#include "pack/pack.h"
#include "shard/split_policy.h"
#include "shard/split_writer.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"
#include "tools/option_flags.h"

namespace grist {
namespace {

std::string HelpOf(const std::string& command) {
  std::string cmd = absl::StrCat(GRIST_BINARY_DIR, "/grist ", command, " --help 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) ++n;
  return n;
}

// A flag name as CLI11 lists it: at the start of an option entry, then a space, ',' or '{'.
size_t CountFlag(const std::string& help, const std::string& flag) {
  size_t n = 0;
  for (const char* sep : {" ", ",", "{"}) {
    n += Count(help, "  --" + flag + sep) + Count(help, ",--" + flag + sep);
  }
  return n;
}

void ExpectHelpListsEveryOption(const std::string& command, const std::vector<OptionInfo>& options) {
  const std::string help = HelpOf(command);
  int with_flags = 0;
  for (const OptionInfo& o : options) {
    if (o.flags.empty()) continue;
    ++with_flags;
    for (const std::string& f : o.flags) {
      EXPECT_EQ(CountFlag(help, f), 1u) << command << ": --" << f << " (" << o.key << ")\n" << help;
    }
    EXPECT_EQ(Count(help, "config: " + o.key + ")"), 1u) << command << ": " << o.key;
    const std::string text = tools::OptionHelp(o);
    EXPECT_TRUE(absl::StrContains(help, text)) << command << ": " << text;
    EXPECT_TRUE(absl::StrContains(
        text, o.required ? std::string("(required; ")
                         : "(default: " + (o.default_text.empty() ? "\"\"" : o.default_text)))
        << text;
  }
  EXPECT_GT(with_flags, 0) << command;
}

// Values other than the default for an option: (TOML text, flag text) pairs to try in order.
std::vector<std::pair<std::string, std::string>> OtherValues(const OptionInfo& o) {
  std::vector<std::pair<std::string, std::string>> v;
  switch (o.kind) {
    case OptionKind::kBool:
      v.push_back(o.default_text == "true" ? std::pair{"false", "false"} : std::pair{"true", "true"});
      break;
    case OptionKind::kInt:
    case OptionKind::kUint: {
      const int64_t d = o.required ? static_cast<int64_t>(o.bounds.min) : std::stoll(o.default_text);
      // A candidate that overflows int64 is left out (a default near the limit, such as dedup's
      // seed; computing it was undefined behaviour, which UBSan stopped on).
      std::vector<int64_t> candidates;
      int64_t c = 0;
      if (!__builtin_add_overflow(d, 1, &c)) candidates.push_back(c);
      if (!__builtin_sub_overflow(d, 1, &c)) candidates.push_back(c);
      if (!__builtin_add_overflow(d, 7, &c)) candidates.push_back(c);
      if (!__builtin_mul_overflow(d, 2, &c)) candidates.push_back(c);
      for (int64_t x : candidates) {
        if (x == d || x < o.bounds.min || x > o.bounds.max) continue;
        if (o.kind == OptionKind::kUint && x < 0) continue;
        v.emplace_back(std::to_string(x), std::to_string(x));
      }
      break;
    }
    case OptionKind::kDouble: {
      const double d = std::stod(o.default_text);
      const bool bounded = std::isfinite(o.bounds.min) && std::isfinite(o.bounds.max);
      for (double x : bounded ? std::vector<double>{(o.bounds.min + o.bounds.max) / 2,
                                                    (3 * o.bounds.min + o.bounds.max) / 4}
                              : std::vector<double>{d + 1.5, d / 2}) {
        if (x == d) continue;
        v.emplace_back(absl::StrCat(x, std::floor(x) == x ? ".0" : ""), absl::StrCat(x));
      }
      break;
    }
    case OptionKind::kString:
      v.emplace_back("\"body\"", "body");
      break;
    case OptionKind::kEnum:
      for (const std::string& c : o.choices) {
        if (c != o.default_text) v.emplace_back("\"" + c + "\"", c);
      }
      break;
    case OptionKind::kStringList:
      v.emplace_back("[\"x\", \"y\"]", "x,y");
      break;
  }
  return v;
}

// `base`: (key, TOML value) of keys the stage requires, in both configs unless under test.
template <typename T>
void ExpectFlagEqualsConfig(const OptionTable<T>& table,
                            const std::function<absl::StatusOr<T>(const Config&)>& from_config,
                            const std::vector<std::pair<std::string, std::string>>& base = {}) {
  const std::vector<OptionInfo> infos = table.Describe();
  auto base_toml = [&](const std::string& except) {
    std::string t;
    for (const auto& [k, v] : base) {
      if (k != except) absl::StrAppend(&t, k, " = ", v, "\n");
    }
    return t;
  };
  auto base_config = Config::FromString(base_toml(""), "base.toml");
  ASSERT_TRUE(base_config.ok());
  auto defaults = from_config(*base_config);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  const auto default_values = table.Values(*defaults);
  for (size_t i = 0; i < infos.size(); ++i) {
    const OptionInfo& o = infos[i];
    if (o.flags.empty()) continue;
    bool checked = false;
    for (const auto& [toml, flag] : OtherValues(o)) {
      auto file =
          Config::FromString(absl::StrCat(base_toml(o.key), o.key, " = ", toml, "\n"), "t.toml");
      ASSERT_TRUE(file.ok()) << file.status();
      auto by_config = from_config(*file);
      if (!by_config.ok()) continue;  // a value the stage's own checks refuse: try the next

      CLI::App app("t");
      tools::ConfigFlags flags;
      flags.Add(&app, infos);
      std::vector<std::string> args;
      if (o.kind == OptionKind::kBool) {
        args.push_back("--" + std::string(flag == "true" ? o.flags[0] : o.flags[1]));
      } else {
        args = {"--" + o.flags[0], flag};
      }
      std::vector<const char*> argv = {"t"};
      for (const auto& a : args) argv.push_back(a.c_str());
      ASSERT_NO_THROW(app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data())))
          << absl::StrJoin(args, " ");
      EXPECT_TRUE(flags.Given(o.key));
      auto config = Config::FromString(base_toml(o.key), "base.toml");
      ASSERT_TRUE(config.ok());
      flags.ApplyTo(&*config);
      auto by_flag = from_config(*config);
      ASSERT_TRUE(by_flag.ok()) << absl::StrJoin(args, " ") << ": " << by_flag.status();
      const auto a = table.Values(*by_config), b = table.Values(*by_flag);
      EXPECT_EQ(a, b) << o.key << " = " << toml << " vs " << absl::StrJoin(args, " ");
      if (!o.required) {
        EXPECT_NE(a[i].second, default_values[i].second) << o.key << " = " << toml;
      }
      checked = true;
      break;
    }
    EXPECT_TRUE(checked) << o.key << ": no value other than the default was accepted";
  }
}

TEST(OptionFlags, CleanHelpListsEveryOptionWithItsDefault) {
  ExpectHelpListsEveryOption("clean", clean::CleanOptions::Table().Describe());
}

TEST(OptionFlags, CleanFlagEqualsConfig) {
  ExpectFlagEqualsConfig<clean::CleanOptions>(clean::CleanOptions::Table(),
                                              clean::CleanOptions::FromConfig);
}

TEST(OptionFlags, CleanDefaultsAreTheStructsInitializers) {
  // The table's defaults are a default-constructed CleanOptions, and reading an empty config
  // changes nothing.
  auto o = clean::CleanOptions::FromConfig(Config());
  ASSERT_TRUE(o.ok());
  std::vector<std::pair<std::string, std::string>> described;
  for (const OptionInfo& i : clean::CleanOptions::Table().Describe()) {
    described.emplace_back(i.key, i.default_text);
  }
  EXPECT_EQ(clean::CleanOptions::Table().Values(*o), described);
  EXPECT_EQ(clean::CleanOptions::Table().Values(clean::CleanOptions()), described);
}

TEST(OptionFlags, DedupHelpListsEveryOptionWithItsDefault) {
  ExpectHelpListsEveryOption("dedup", dedup::DedupOptions::Table().Describe());
}

TEST(OptionFlags, DedupFlagEqualsConfig) {
  ExpectFlagEqualsConfig<dedup::DedupOptions>(dedup::DedupOptions::Table(),
                                              dedup::DedupOptions::FromConfig);
}

TEST(OptionFlags, TokenizeEncodeHelpListsEveryOptionWithItsDefault) {
  ExpectHelpListsEveryOption("tokenize encode", tokenize::EncodeStageOptions::Table().Describe());
}

TEST(OptionFlags, TokenizeEncodeFlagEqualsConfig) {
  ExpectFlagEqualsConfig<tokenize::EncodeStageOptions>(tokenize::EncodeStageOptions::Table(),
                                                       tokenize::EncodeStageOptions::FromConfig);
}

TEST(OptionFlags, TokenizeTrainHelpListsEveryOptionWithItsDefault) {
  ExpectHelpListsEveryOption("tokenize train", tokenize::TrainOptions::Table().Describe());
}

TEST(OptionFlags, TokenizeTrainFlagEqualsConfig) {
  ExpectFlagEqualsConfig<tokenize::TrainOptions>(tokenize::TrainOptions::Table(),
                                                 tokenize::TrainOptions::FromConfig,
                                                 {{"tokenizer.vocab_size", "1000"}, {"seed", "5"}});
}

TEST(OptionFlags, PackHelpListsEveryOptionWithItsDefault) {
  // `grist pack` carries the tables of the pack+shard stage: [pack], [split] and [shard].
  ExpectHelpListsEveryOption("pack", pack::PackOptions::Table().Describe());
  ExpectHelpListsEveryOption("pack", shard::SplitPolicy::Table().Describe());
  ExpectHelpListsEveryOption("pack", shard::ShardOptions::Table().Describe());
}

TEST(OptionFlags, PackFlagEqualsConfig) {
  ExpectFlagEqualsConfig<pack::PackOptions>(pack::PackOptions::Table(),
                                            pack::PackOptions::FromConfig,
                                            {{"pack.seq_len", "64"}});
}

TEST(OptionFlags, SplitFlagEqualsConfig) {
  ExpectFlagEqualsConfig<shard::SplitPolicy>(
      shard::SplitPolicy::Table(),
      [](const Config& c) { return shard::SplitPolicy::FromConfig(c, /*seed=*/7); });
}

TEST(OptionFlags, ShardFlagEqualsConfig) {
  ExpectFlagEqualsConfig<shard::ShardOptions>(shard::ShardOptions::Table(),
                                              shard::ShardOptions::FromConfig);
}

TEST(OptionFlags, PackDefaultsAreTheStructsInitializers) {
  auto p = pack::PackOptions::FromConfig(*Config::FromString("pack.seq_len = 64\n", "t.toml"));
  ASSERT_TRUE(p.ok()) << p.status();
  pack::PackOptions expected;
  expected.seq_len = 64;
  EXPECT_EQ(pack::PackOptions::Table().Values(*p), pack::PackOptions::Table().Values(expected));
  std::vector<std::pair<std::string, std::string>> described;
  for (const OptionInfo& i : pack::PackOptions::Table().Describe()) {
    if (!i.required) described.emplace_back(i.key, i.default_text);
  }
  EXPECT_EQ(described, (std::vector<std::pair<std::string, std::string>>{
                           {"pack.strategy", "bestfit"},
                           {"pack.bestfit_window_tokens", std::to_string(16ull << 20)}}));
  auto s = shard::SplitPolicy::FromConfig(Config(), 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->validation_fraction, shard::SplitPolicy().validation_fraction);
  auto m = shard::ShardOptions::FromConfig(Config());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_bytes, shard::ShardOptions().max_bytes);
  // A missing seq_len, and values out of range, name the key.
  auto missing = pack::PackOptions::FromConfig(Config());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "pack.seq_len")) << missing.status();
  for (const char* bad : {"pack.seq_len = 0\n", "pack.seq_len = 8\npack.strategy = \"x\"\n",
                          "pack.seq_len = 8\npack.bestfit_window_tokens = 0\n"}) {
    auto r = pack::PackOptions::FromConfig(*Config::FromString(bad, "t.toml"));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(
      shard::SplitPolicy::FromConfig(*Config::FromString("split.validation_fraction = 1.0\n", "t"), 0)
          .ok());
  EXPECT_FALSE(shard::ShardOptions::FromConfig(*Config::FromString("shard.max_bytes = 0\n", "t")).ok());
}

TEST(OptionFlags, PackFlagNames) {
  // The flags of `grist pack` as docs/pack.md lists them.
  CLI::App app("t");
  tools::ConfigFlags flags;
  flags.Add(&app, pack::PackOptions::Table().Describe());
  flags.Add(&app, shard::SplitPolicy::Table().Describe());
  flags.Add(&app, shard::ShardOptions::Table().Describe());
  const char* argv[] = {"t", "--seq-len", "512", "--strategy", "concat", "--bestfit-window-tokens",
                        "4096", "--validation-fraction", "0.1", "--shard-max-bytes", "65536"};
  ASSERT_NO_THROW(app.parse(static_cast<int>(std::size(argv)), const_cast<char**>(argv)));
  Config config;
  flags.ApplyTo(&config);
  auto p = pack::PackOptions::FromConfig(config);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->seq_len, 512);
  EXPECT_EQ(p->strategy, "concat");
  EXPECT_EQ(p->bestfit_window_tokens, 4096u);
  auto s = shard::SplitPolicy::FromConfig(config, 3);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->validation_fraction, 0.1);
  auto m = shard::ShardOptions::FromConfig(config);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_bytes, 65536u);
  // A malformed value is CLI11's usage error.
  CLI::App app2("t");
  tools::ConfigFlags flags2;
  flags2.Add(&app2, pack::PackOptions::Table().Describe());
  const char* bad[] = {"t", "--strategy", "greedy"};
  EXPECT_THROW(app2.parse(3, const_cast<char**>(bad)), CLI::ValidationError);
}

TEST(OptionFlags, DedupFlagsOfBeforeTheTableStillWork) {
  // Scripts written for the flags `grist dedup` had before its table: same names, same meaning.
  CLI::App app("t");
  tools::ConfigFlags flags;
  flags.Add(&app, dedup::DedupOptions::Table().Describe());
  const char* argv[] = {"t",          "--no-verify",    "--no-exact",      "--no-near",
                        "--line-dedup", "--keep-work",  "--memory-limit",  "64",
                        "--threshold", "0.7",           "--seed",          "18446744073709551615",
                        "--exact-normalize", "lower",   "--shingle",       "char",
                        "--ngram",     "4",             "--num-perm",      "64",
                        "--work-dir",  "w",             "--text-field",    "body",
                        "--txt-mode",  "blocks"};
  ASSERT_NO_THROW(app.parse(static_cast<int>(std::size(argv)), const_cast<char**>(argv)));
  Config config;
  flags.ApplyTo(&config);
  auto o = dedup::DedupOptions::FromConfig(config);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->verify);
  EXPECT_FALSE(o->exact);
  EXPECT_FALSE(o->near);
  EXPECT_TRUE(o->line_dedup);
  EXPECT_TRUE(o->keep_work);
  EXPECT_EQ(o->memory_limit, 64ull << 20);
  EXPECT_EQ(o->threshold, 0.7);
  EXPECT_EQ(o->bands, 0);  // a threshold alone: automatic bands x rows, as before
  EXPECT_EQ(o->rows, 0);
  EXPECT_EQ(o->seed, 18446744073709551615ull);
  EXPECT_EQ(o->exact_normalize, dedup::ExactNormalize::kLower);
  EXPECT_EQ(o->shingle.kind, dedup::ShingleKind::kChar);
  EXPECT_EQ(o->shingle.n, 4);
  EXPECT_EQ(o->num_perm, 64);
  EXPECT_EQ(o->work_dir, "w");
  EXPECT_EQ(o->input.text_field, "body");
  EXPECT_EQ(o->input.txt_mode, "blocks");
}

TEST(OptionFlags, DedupStagesAreNamedOnce) {
  // --stage's choices, the names ParseDedupStage accepts and the order of kDedupStages are the one
  // list of dedup/dedup.h; spelled out here to pin the command line (scripts/slurm/ uses them).
  const std::vector<std::string> names = dedup::DedupStageNames();
  EXPECT_EQ(names, (std::vector<std::string>{"signatures", "buckets", "clusters", "merge", "filter",
                                             "report"}));
  ASSERT_EQ(names.size(), std::size(dedup::kDedupStages));
  for (size_t i = 0; i < names.size(); ++i) {
    auto s = dedup::ParseDedupStage(names[i]);
    ASSERT_TRUE(s.ok()) << names[i];
    EXPECT_EQ(*s, dedup::kDedupStages[i]) << names[i];
  }
  EXPECT_EQ(dedup::ParseDedupStage("sort").status().message(),
            "unknown dedup stage 'sort' (expected signatures, buckets, clusters, merge, filter, "
            "report)");
  const std::string help = HelpOf("dedup");
  EXPECT_TRUE(absl::StrContains(help, "{" + absl::StrJoin(names, ",") + "}")) << help;
}

TEST(OptionFlags, DedupExactNormalizeChoices) {
  for (const OptionInfo& o : dedup::DedupOptions::Table().Describe()) {
    if (o.key != "dedup.exact_normalize") continue;
    EXPECT_EQ(o.choices, (std::vector<std::string>{"none", "whitespace", "lower"}));
    EXPECT_EQ(o.default_text, "whitespace");
    return;
  }
  ADD_FAILURE() << "no dedup.exact_normalize";
}

TEST(OptionFlags, LoaderHelpTakesItsDefaultsFromLoaderOptions) {
  // `grist loader` shows what grist.Loader delivers with the same settings: the defaults its help
  // states are a default LoaderOptions' (grist.Loader's too: one epoch, one rank, train).
  const loader::LoaderOptions d;
  EXPECT_EQ(d.epochs, 1);
  const std::string help = HelpOf("loader");
  for (const std::string& want :
       {absl::StrCat("Epochs of the run, 0: unlimited (default: ", d.epochs, ")"),
        absl::StrCat("Data-parallel ranks (default: ", d.dp_size, ")"),
        absl::StrCat("Split to read (default: ", d.split, ")")}) {
    EXPECT_TRUE(absl::StrContains(help, want)) << want << "\n" << help;
  }
}

}  // namespace
}  // namespace grist
