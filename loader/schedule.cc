#include "loader/schedule.h"

#include <cstdint>
#include <limits>
#include <string>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"
#include "loader/permutation.h"

namespace grist::loader {

Schedule::Schedule(const ScheduleOptions& o) : o_(o) {
  accum_ = o.global_batch_size / (o.micro_batch_size * o.dp_size);
}

absl::StatusOr<Schedule> Schedule::Create(const ScheduleOptions& o) {
  if (o.micro_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batch_size must be positive, got ", o.micro_batch_size));
  }
  if (o.global_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch_size must be positive, got ", o.global_batch_size));
  }
  if (o.dp_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("dp_size must be positive, got ", o.dp_size));
  }
  if (o.dp_rank < 0 || o.dp_rank >= o.dp_size) {
    return absl::InvalidArgumentError(absl::StrCat("dp_rank ", o.dp_rank,
                                                   " is out of range for dp_size ", o.dp_size,
                                                   " (valid: 0..", o.dp_size - 1, ")"));
  }
  if (o.global_batch_size % (o.micro_batch_size * o.dp_size) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size ", o.global_batch_size, " is not divisible by micro_batch_size * dp_size = ",
        o.micro_batch_size, " * ", o.dp_size, " = ", o.micro_batch_size * o.dp_size));
  }
  if (o.epochs < 0) {
    return absl::InvalidArgumentError(absl::StrCat("epochs must be >= 0, got ", o.epochs));
  }
  if (o.num_samples == 0) {
    return absl::InvalidArgumentError("the split has no samples");
  }
  Schedule s(o);
  if (s.stream_end() < static_cast<uint64_t>(o.global_batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the split's ", o.num_samples, " samples x ", o.epochs,
        " epochs are fewer than one global batch of ", o.global_batch_size));
  }
  return s;
}

uint64_t Schedule::stream_end() const {
  if (o_.epochs == 0) return std::numeric_limits<uint64_t>::max();
  unsigned __int128 end = static_cast<unsigned __int128>(o_.num_samples) * o_.epochs;
  if (end > std::numeric_limits<uint64_t>::max()) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(end);
}

uint64_t Schedule::SampleAt(uint64_t q) const {
  const uint64_t epoch = q / o_.num_samples;
  FeistelPermutation perm(o_.num_samples, EpochKey(o_.seed, epoch));
  return perm.Map(q % o_.num_samples);
}

uint64_t Schedule::StreamPosition(const Position& pos, int64_t j) const {
  return pos.consumed_samples + static_cast<uint64_t>(o_.dp_rank * rank_batch_size()) +
         static_cast<uint64_t>(pos.micro_index * o_.micro_batch_size + j);
}

bool Schedule::HasBatch(const Position& pos) const {
  const uint64_t end = stream_end();
  const uint64_t g = static_cast<uint64_t>(o_.global_batch_size);
  return pos.consumed_samples <= end && end - pos.consumed_samples >= g;
}

Position Schedule::Advance(const Position& pos) const {
  Position next = pos;
  if (++next.micro_index == accum_) {
    next.micro_index = 0;
    next.consumed_samples += static_cast<uint64_t>(o_.global_batch_size);
  }
  return next;
}

int64_t Schedule::RemainingBatches(const Position& pos) const {
  if (o_.epochs == 0) return std::numeric_limits<int64_t>::max();
  const uint64_t end = stream_end();
  if (pos.consumed_samples > end) return 0;
  const uint64_t steps = (end - pos.consumed_samples) / static_cast<uint64_t>(o_.global_batch_size);
  const int64_t total = static_cast<int64_t>(steps) * accum_ - pos.micro_index;
  return total < 0 ? 0 : total;
}

std::string LoaderState::ToJson() const {
  JsonWriter w(0);
  w.BeginObject();
  w.Field("format", kFormat).Field("version", kVersion);
  w.Field("release_id", release_id).Field("split", split).Field("seed", seed);
  w.Field("consumed_samples", position.consumed_samples).Field("micro_index", position.micro_index);
  w.Field("global_batch_size", global_batch_size).Field("micro_batch_size", micro_batch_size);
  w.Field("dp_size", dp_size).Field("num_samples", num_samples);
  w.Field("epoch", num_samples ? position.consumed_samples / num_samples : uint64_t{0});
  w.EndObject();
  return w.Take();
}

namespace {

absl::Status FieldError(const char* name, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("loader state: field \"", name, "\" ", what));
}

absl::StatusOr<uint64_t> GetU64(simdjson::dom::object& obj, const char* name) {
  auto v = obj[name];
  if (v.error() == simdjson::NO_SUCH_FIELD) return FieldError(name, "is missing");
  uint64_t out;
  if (v.get_uint64().get(out) != simdjson::SUCCESS) {
    return FieldError(name, "is not a non-negative integer");
  }
  return out;
}

absl::StatusOr<std::string> GetString(simdjson::dom::object& obj, const char* name) {
  auto v = obj[name];
  if (v.error() == simdjson::NO_SUCH_FIELD) return FieldError(name, "is missing");
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return FieldError(name, "is not a string");
  return std::string(s);
}

}  // namespace

absl::StatusOr<LoaderState> LoaderState::FromJson(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(json).get(root); err != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("loader state: not valid JSON: ", simdjson::error_message(err)));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("loader state: not a JSON object");
  }
  auto format = GetString(obj, "format");
  if (!format.ok()) return format.status();
  if (*format != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("loader state: format is \"", *format, "\", expected \"", kFormat, "\""));
  }
  auto version = GetU64(obj, "version");
  if (!version.ok()) return version.status();
  if (*version != static_cast<uint64_t>(kVersion)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loader state: version ", *version, " is not supported (expected ", kVersion, ")"));
  }
  LoaderState s;
  auto release_id = GetString(obj, "release_id");
  if (!release_id.ok()) return release_id.status();
  s.release_id = *release_id;
  auto split = GetString(obj, "split");
  if (!split.ok()) return split.status();
  s.split = *split;
  struct U64Field {
    const char* name;
    uint64_t* out;
  };
  uint64_t micro = 0, gbs = 0, mbs = 0, dps = 0;
  for (U64Field f : {U64Field{"seed", &s.seed}, {"consumed_samples", &s.position.consumed_samples},
                     {"micro_index", &micro}, {"global_batch_size", &gbs},
                     {"micro_batch_size", &mbs}, {"dp_size", &dps},
                     {"num_samples", &s.num_samples}}) {
    auto v = GetU64(obj, f.name);
    if (!v.ok()) return v.status();
    *f.out = *v;
  }
  constexpr uint64_t kMax = uint64_t{1} << 62;
  if (gbs == 0 || mbs == 0 || dps == 0 || gbs > kMax || mbs > kMax || dps > kMax || micro > kMax) {
    return absl::InvalidArgumentError(
        "loader state: global_batch_size, micro_batch_size and dp_size must be positive and "
        "micro_index in range");
  }
  s.position.micro_index = static_cast<int64_t>(micro);
  s.global_batch_size = static_cast<int64_t>(gbs);
  s.micro_batch_size = static_cast<int64_t>(mbs);
  s.dp_size = static_cast<int64_t>(dps);
  return s;
}

absl::StatusOr<Position> CheckResume(const LoaderState& state, const std::string& release_id,
                                     const std::string& split, const Schedule& schedule) {
  const ScheduleOptions& o = schedule.options();
  if (state.release_id != release_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state belongs to release ", state.release_id, ", but this loader reads release ",
        release_id));
  }
  if (state.split != split) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state is for split \"", state.split, "\", but this loader reads \"", split, "\""));
  }
  if (state.seed != o.seed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state was saved with seed ", state.seed, ", but this loader uses seed ", o.seed,
        "; pass seed=", state.seed, " to continue that order"));
  }
  if (state.position.micro_index != 0) {
    if (state.global_batch_size != o.global_batch_size ||
        state.micro_batch_size != o.micro_batch_size || state.dp_size != o.dp_size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "loader state was saved mid-step (micro batch ", state.position.micro_index,
          ") with global_batch_size ", state.global_batch_size, ", micro_batch_size ",
          state.micro_batch_size, ", dp_size ", state.dp_size,
          "; resume with the same three, or save at a step boundary to change them"));
    }
    if (state.position.micro_index >= schedule.micro_batches_per_step()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loader state: micro_index ", state.position.micro_index, " is not below ",
          schedule.micro_batches_per_step(), " micro batches per step"));
    }
  }
  return state.position;
}

}  // namespace grist::loader
