// `grist ckpt latest|verify|inspect|export`: find, check, describe and export checkpoints written
// by ckptio.
#include <cstdio>
#include <memory>

#include "ckptio/checkpoint.h"
#include "ckptio/export.h"
#include "ckptio/reader.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "tools/command.h"

namespace grist::tools {
namespace {

namespace ck = grist::ckptio;

struct CkptFlags {
  CommonFlags common;
  std::string path;
  bool verify = false;
  std::string out;
  std::string prefix;
  double max_shard_gb = 5;
};

Runner Setup(CLI::App* app) {
  app->require_subcommand(1);
  auto f = std::make_shared<CkptFlags>();
  CLI::App* latest = app->add_subcommand("latest", "Print the newest published checkpoint under ROOT");
  latest->add_option("root", f->path, "Folder holding checkpoint folders")->required();
  latest->add_flag("--verify", f->verify, "Read and checksum candidates, newest first");
  CLI::App* verify = app->add_subcommand("verify", "Read every file of a checkpoint and check every checksum");
  verify->add_option("dir", f->path, "Checkpoint folder")->required();
  CLI::App* inspect = app->add_subcommand("inspect", "Print a checkpoint's manifest and tensors");
  inspect->add_option("dir", f->path, "Checkpoint folder")->required();
  CLI::App* exp = app->add_subcommand(
      "export", "Consolidate a (sharded) checkpoint into HF-style safetensors (model.safetensors, or "
                "model-0000k-of-0000n.safetensors + model.safetensors.index.json)");
  exp->add_option("dir", f->path, "Checkpoint folder")->required();
  exp->add_option("out", f->out, "Output folder")->required();
  exp->add_option("--prefix", f->prefix, "Only tensors whose names start with this (e.g. model.), "
                                         "written without it");
  exp->add_option("--max-shard-gb", f->max_shard_gb, "Split into several files above this size (GB)")
      ->check(CLI::PositiveNumber);
  for (CLI::App* sub : {latest, verify, inspect, exp}) {
    AddJsonFlag(sub, &f->common.json_path, "the result");
  }
  return [f, latest, verify, inspect, exp]() -> absl::Status {
    Env* env = Env::Default();
    JsonWriter w;
    if (exp->parsed()) {
      ck::ExportOptions o;
      o.prefix = f->prefix;
      o.max_shard_bytes = static_cast<uint64_t>(f->max_shard_gb * 1e9);
      if (o.max_shard_bytes == 0) o.max_shard_bytes = 1;
      ASSIGN_OR_RETURN(ck::ExportResult r, ck::ExportCheckpoint(f->path, f->out, o));
      std::printf("%s: %llu tensors, %llu bytes -> %s (%zu file(s)%s)\n", f->path.c_str(),
                  static_cast<unsigned long long>(r.tensors),
                  static_cast<unsigned long long>(r.total_bytes), f->out.c_str(), r.files.size(),
                  r.index ? " + model.safetensors.index.json" : "");
      w.BeginObject().Field("out", f->out).Key("files").BeginArray();
      for (const auto& file : r.files) w.String(file);
      w.EndArray().Field("tensors", r.tensors).Field("total_bytes", r.total_bytes).EndObject();
      return MaybeWriteJson(f->common, w.str());
    }
    if (latest->parsed()) {
      ASSIGN_OR_RETURN(std::string p, ck::LatestCheckpoint(env, f->path, f->verify));
      std::printf("%s\n", p.c_str());
      w.BeginObject().Field("latest", p).EndObject();
      return MaybeWriteJson(f->common, w.str());
    }
    if (verify->parsed()) {
      if (!env->IsDirectory(f->path)) {
        return absl::NotFoundError(absl::StrCat(f->path, ": no such checkpoint folder"));
      }
      // Whatever stops the check past this point (a checksum, a short or missing file, a
      // manifest that does not parse) is bad data in the checkpoint, exit status 3.
      if (absl::Status s = ck::VerifyCheckpoint(f->path, ck::ReadOptions{}); !s.ok()) {
        return IsEnvironmentError(s) ? s : BadDataError(s);
      }
      std::printf("%s: OK (every checksum verified)\n", f->path.c_str());
      w.BeginObject().Field("path", f->path).Field("ok", true).EndObject();
      return MaybeWriteJson(f->common, w.str());
    }
    (void)inspect;
    ASSIGN_OR_RETURN(ck::Manifest m, ck::ReadManifest(env, f->path));
    std::printf("checkpoint %s: step %lld, %d rank file(s), %s\n", f->path.c_str(),
                static_cast<long long>(m.step), m.world_size, m.created_by.c_str());
    for (const auto& [k, v] : m.metadata) std::printf("  metadata %s = %s\n", k.c_str(), v.c_str());
    w.BeginObject().Field("path", f->path).Field("step", m.step).Key("files").BeginArray();
    ck::ReadOptions ro;
    ro.verify = false;
    for (const ck::ManifestFile& mf : m.files) {
      ASSIGN_OR_RETURN(auto file, ck::ReadCheckpointFile(JoinPath(f->path, mf.name), ro, &mf));
      std::printf("  %s: %llu bytes, %zu tensors, data at %llu\n", mf.name.c_str(),
                  static_cast<unsigned long long>(mf.size), file->tensors().size(),
                  static_cast<unsigned long long>(file->header().data_start));
      w.BeginObject().Field("name", mf.name).Field("size", mf.size).Key("tensors").BeginArray();
      for (const auto& t : file->tensors()) {
        std::string shape;
        for (size_t i = 0; i < t.shape.size(); ++i) {
          if (i) shape.push_back(',');
          shape.append(std::to_string(t.shape[i]));
        }
        std::printf("    %-40s %-8s [%s] %llu bytes\n", t.name.c_str(),
                    std::string(ck::DTypeName(t.dtype)).c_str(), shape.c_str(),
                    static_cast<unsigned long long>(t.nbytes()));
        w.BeginObject().Field("name", t.name).Field("dtype", ck::DTypeName(t.dtype));
        w.Key("shape").BeginArray();
        for (int64_t d : t.shape) w.Int(d);
        w.EndArray().Field("nbytes", t.nbytes()).EndObject();
      }
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    return MaybeWriteJson(f->common, w.str());
  };
}

GRIST_REGISTER_COMMAND(ckpt, "ckpt", "Find, verify, inspect and export checkpoints (latest, verify, inspect, export)",
                       Setup);

}  // namespace
}  // namespace grist::tools
