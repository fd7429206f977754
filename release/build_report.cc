// BuildReport (release/release.h): the table printed at the end of a build and its JSON.
#include <ctime>
#include <string>

#include "absl/strings/str_format.h"
#include "common/json_writer.h"
#include "common/sysinfo.h"
#include "release/release.h"

namespace grist::release {
namespace {

std::string Now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

std::string BuildReport::Table() const {
  std::string out =
      "| stage | docs in | docs out | rejected | removed | tokens | samples | seconds | MB/s |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const StageSummary& s : stages) {
    std::string secs = s.resumed ? absl::StrFormat("%.2f (earlier run)", s.seconds)
                                 : absl::StrFormat("%.2f", s.seconds);
    std::string mbs = s.seconds > 0 && s.bytes_in > 0
                          ? absl::StrFormat("%.1f", s.bytes_in / s.seconds / 1e6)
                          : std::string("-");
    out += absl::StrFormat("| %s%s | %d | %d | %d | %d | %d | %d | %s | %s |\n", s.name,
                           s.note.empty() ? "" : " (" + s.note + ")", s.docs_in, s.docs_out,
                           s.docs_rejected, s.docs_removed, s.tokens, s.samples, secs, mbs);
  }
  out += absl::StrFormat("\nrelease %s in %s, total %.2f s, peak RSS %.0f MiB\n", release_id,
                         output_dir, seconds, peak_rss_bytes / 1048576.0);
  return out;
}

std::string BuildReport::ToJson() const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("output_dir", output_dir).Field("release_id", release_id);
  w.Field("seconds", seconds).Field("peak_rss_bytes", peak_rss_bytes);
  w.Field("host", HostName()).Field("date", Now()).Field("cpu", CpuModel());
  w.Key("stages").BeginArray();
  for (const StageSummary& s : stages) {
    w.BeginObject().Field("name", s.name).Field("note", s.note).Field("resumed", s.resumed);
    w.Field("docs_in", s.docs_in).Field("docs_out", s.docs_out);
    w.Field("docs_rejected", s.docs_rejected).Field("docs_removed", s.docs_removed);
    w.Field("bytes_in", s.bytes_in).Field("tokens", s.tokens).Field("samples", s.samples);
    w.Field("seconds", s.seconds);
    w.Field("mb_per_s", s.seconds > 0 ? s.bytes_in / s.seconds / 1e6 : 0.0);
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

}  // namespace grist::release
