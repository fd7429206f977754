// `grist version`: the version and build facts, as text or --json.
#include <cstdio>

#include "common/json_writer.h"
#include "common/version.h"
#include "tools/command.h"

namespace grist::tools {
namespace {

struct VersionFlags {
  CommonFlags common;
};

Runner Setup(CLI::App* app) {
  auto f = std::make_shared<VersionFlags>();
  AddJsonFlag(app, &f->common.json_path, "the facts");
  return [f]() -> absl::Status {
    std::printf("grist %s (%s, %s)\n", GRIST_VERSION, GRIST_BUILD_TYPE, GRIST_COMPILER);
    JsonWriter w;
    w.BeginObject().Field("version", GRIST_VERSION).Field("build_type", GRIST_BUILD_TYPE);
    w.Field("compiler", GRIST_COMPILER).EndObject();
    return MaybeWriteJson(f->common, w.str());
  };
}

GRIST_REGISTER_COMMAND(version, "version", "Print grist's version and build facts", Setup);

}  // namespace
}  // namespace grist::tools
