// The command-line face of a stage's option table (common/option_table.h): one CLI11 flag per
// option, validated by CLI11 (type, range, choices: a malformed value is a usage error, exit 2),
// whose help ends with the default taken from the code and the config key; a flag given sets
// its config key, and the stage's own FromConfig then reads the result, so `--c4-min-num-sentences
// 3` and `[clean.c4] min_num_sentences = 3` are one thing.
//
//   ConfigFlags flags;
//   flags.Add(app, clean::CleanOptions::Table().Describe());
//   ... app->parse ...
//   Config config = ...;               // from --config, or empty
//   flags.ApplyTo(&config);            // flags win over the file
//   ASSIGN_OR_RETURN(auto o, clean::CleanOptions::FromConfig(config));
//
// Thread safety: none (command-line setup).
#ifndef GRIST_TOOLS_OPTION_FLAGS_H_
#define GRIST_TOOLS_OPTION_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/config.h"
#include "common/option_table.h"

namespace grist::tools {

// The help text of an option: "<help> (default: <default>; config: <key>)", or "(required; ...)".
std::string OptionHelp(const OptionInfo& info);

class ConfigFlags {
 public:
  // Adds a flag for each option that has flag names (a kBool gets NAME and its no-NAME).
  void Add(CLI::App* app, const std::vector<OptionInfo>& options);
  // Sets the config key of each flag given on the command line (call after parsing).
  void ApplyTo(Config* config) const;
  // Whether the flag of `key` was given.
  bool Given(const std::string& key) const;

 private:
  struct Value {
    OptionInfo info;
    std::vector<CLI::Option*> opts;
    bool b = false;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    std::string s;
    std::vector<std::string> list;
  };
  std::vector<std::unique_ptr<Value>> values_;
};

}  // namespace grist::tools

#endif  // GRIST_TOOLS_OPTION_FLAGS_H_
