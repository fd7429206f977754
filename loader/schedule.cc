#include "loader/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/rng.h"
#include "loader/permutation.h"

namespace grist::loader {

std::vector<uint64_t> Apportion(const std::vector<double>& weights, uint64_t total) {
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<uint64_t> n(weights.size(), 0);
  std::vector<double> frac(weights.size(), 0.0);
  uint64_t given = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const double quota = weights[k] / sum * static_cast<double>(total);
    const double whole = std::floor(quota);
    n[k] = static_cast<uint64_t>(whole);
    frac[k] = quota - whole;
    given += n[k];
  }
  // Rounding can leave the floors a little above `total` only through a weight's quota rounding
  // up to the next integer; take such excess back from the largest shares.
  while (given > total) {
    size_t best = 0;
    for (size_t k = 1; k < n.size(); ++k) {
      if (n[k] > n[best]) best = k;
    }
    --n[best];
    --given;
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });
  for (size_t i = 0; given < total; i = (i + 1) % order.size()) {
    if (weights[order[i]] > 0) {
      ++n[order[i]];
      ++given;
    }
  }
  return n;
}

Schedule::Schedule(const ScheduleOptions& o) : o_(o) {
  accum_ = o.global_batch_size / (o.micro_batch_size * o.dp_size);
  const uint64_t g = static_cast<uint64_t>(o.global_batch_size);
  if (o.blend.empty()) {
    samples_ = {o.num_samples};
    n_ = {g};
  } else {
    std::vector<double> w;
    for (const BlendComponent& c : o.blend) {
      samples_.push_back(c.num_samples);
      w.push_back(c.weight);
    }
    n_ = Apportion(w, g);
    // Error-greedy interleave of one step: integer arithmetic, so it is the same everywhere.
    std::vector<uint64_t> taken(n_.size(), 0);
    pat_comp_.resize(g);
    pat_rank_.resize(g);
    for (uint64_t j = 0; j < g; ++j) {
      size_t best = n_.size();
      __int128 best_err = 0;
      for (size_t k = 0; k < n_.size(); ++k) {
        if (taken[k] >= n_[k]) continue;
        const __int128 err = static_cast<__int128>(n_[k]) * static_cast<__int128>(j + 1) -
                             static_cast<__int128>(g) * static_cast<__int128>(taken[k]);
        if (best == n_.size() || err > best_err) {
          best = k;
          best_err = err;
        }
      }
      pat_comp_[j] = static_cast<uint32_t>(best);
      pat_rank_[j] = static_cast<uint32_t>(taken[best]++);
    }
  }
  seg_.start = 0;
  seg_.consumed.assign(n_.size(), 0);
}

absl::StatusOr<Schedule> Schedule::Create(const ScheduleOptions& options) {
  ScheduleOptions o = options;
  if (o.blend.size() == 1) {
    o.num_samples = o.blend[0].num_samples;
    o.blend.clear();
  }
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
  if (o.blend.empty()) {
    if (o.num_samples == 0) return absl::InvalidArgumentError("the split has no samples");
  } else {
    if (o.global_batch_size > (int64_t{1} << 31)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a blend's global_batch_size must be at most 2^31, got ", o.global_batch_size));
    }
    double sum = 0;
    for (size_t k = 0; k < o.blend.size(); ++k) {
      const double w = o.blend[k].weight;
      if (!std::isfinite(w) || w < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "blend: release ", k, " has weight ", w, "; weights must be finite and >= 0"));
      }
      if (o.blend[k].num_samples == 0) {
        return absl::InvalidArgumentError(absl::StrCat("blend: release ", k, " has no samples"));
      }
      sum += w;
    }
    if (!(sum > 0)) return absl::InvalidArgumentError("blend: the weights sum to 0");
  }
  Schedule s(o);
  if (s.StepsFrom(0) < 1) {
    if (!s.is_blend()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the split's ", o.num_samples, " samples x ", o.epochs,
          " epochs are fewer than one global batch of ", o.global_batch_size));
    }
    for (size_t k = 0; k < s.n_.size(); ++k) {
      if (s.n_[k] > 0 && s.n_[k] > s.samples_[k] * static_cast<uint64_t>(o.epochs)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "blend: release ", k, "'s ", s.samples_[k], " samples x ", o.epochs,
            " epochs are fewer than its ", s.n_[k], " draws in one global batch of ",
            o.global_batch_size));
      }
    }
  }
  return s;
}

absl::StatusOr<Schedule> Schedule::WithSegment(Segment segment) const {
  if (segment.consumed.size() != n_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("loader state has ", segment.consumed.size(),
                                                   " blend components, this loader ", n_.size()));
  }
  Schedule s = *this;
  s.seg_ = std::move(segment);
  return s;
}

uint64_t Schedule::component_seed(int k) const {
  if (!is_blend()) return o_.seed;
  return SplitMix64(o_.seed ^ SplitMix64(0x626c656e64000000ULL + static_cast<uint64_t>(k)));
}

uint64_t Schedule::stream_end() const {
  if (o_.epochs == 0) return std::numeric_limits<uint64_t>::max();
  if (!is_blend()) {
    unsigned __int128 end = static_cast<unsigned __int128>(o_.num_samples) * o_.epochs;
    if (end > std::numeric_limits<uint64_t>::max()) return std::numeric_limits<uint64_t>::max();
    return static_cast<uint64_t>(end);
  }
  unsigned __int128 end = static_cast<unsigned __int128>(seg_.start) +
                          static_cast<unsigned __int128>(StepsFrom(seg_.start)) *
                              static_cast<uint64_t>(o_.global_batch_size);
  if (end > std::numeric_limits<uint64_t>::max()) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(end);
}

std::vector<uint64_t> Schedule::ConsumedAt(uint64_t p) const {
  if (!is_blend()) return {seg_.consumed[0] + (p - seg_.start)};
  const uint64_t steps = (p - seg_.start) / static_cast<uint64_t>(o_.global_batch_size);
  std::vector<uint64_t> c = seg_.consumed;
  for (size_t k = 0; k < c.size(); ++k) c[k] += steps * n_[k];
  return c;
}

uint64_t Schedule::StepsFrom(uint64_t p) const {
  if (o_.epochs == 0) return std::numeric_limits<uint64_t>::max();
  if (p < seg_.start) return 0;
  const std::vector<uint64_t> c = ConsumedAt(p);
  uint64_t steps = std::numeric_limits<uint64_t>::max();
  for (size_t k = 0; k < n_.size(); ++k) {
    if (n_[k] == 0) continue;
    const unsigned __int128 end = static_cast<unsigned __int128>(samples_[k]) * o_.epochs;
    const uint64_t left = c[k] >= end ? 0 : static_cast<uint64_t>(std::min<unsigned __int128>(
                                                end - c[k], std::numeric_limits<uint64_t>::max()));
    steps = std::min(steps, left / n_[k]);
  }
  return steps;
}

Draw Schedule::DrawAt(uint64_t q) const {
  const uint64_t rel = q - seg_.start;
  const uint64_t g = static_cast<uint64_t>(o_.global_batch_size);
  Draw d;
  uint64_t c;
  if (!is_blend()) {
    c = seg_.consumed[0] + rel;
  } else {
    const uint64_t j = rel % g;
    d.component = pat_comp_[j];
    c = seg_.consumed[d.component] + (rel / g) * n_[d.component] + pat_rank_[j];
  }
  const uint64_t n = samples_[d.component];
  FeistelPermutation perm(n, EpochKey(component_seed(static_cast<int>(d.component)), c / n));
  d.index = perm.Map(c % n);
  return d;
}

uint64_t Schedule::StreamPosition(const Position& pos, int64_t j) const {
  return pos.consumed_samples + static_cast<uint64_t>(o_.dp_rank * rank_batch_size()) +
         static_cast<uint64_t>(pos.micro_index * o_.micro_batch_size + j);
}

bool Schedule::HasBatch(const Position& pos) const { return StepsFrom(pos.consumed_samples) >= 1; }

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
  const uint64_t steps = StepsFrom(pos.consumed_samples);
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
  if (!blend.empty()) {
    w.Key("blend").BeginArray();
    for (const ComponentState& c : blend) {
      w.BeginObject();
      w.Field("release_id", c.release_id).Field("split", c.split).Field("weight", c.weight);
      w.Field("consumed", c.consumed).Field("num_samples", c.num_samples);
      w.Field("epoch", c.num_samples ? c.consumed / c.num_samples : uint64_t{0});
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return w.Take();
}

namespace {

absl::Status FieldError(const std::string& name, const char* what) {
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
  auto blend = obj["blend"];
  if (blend.error() != simdjson::NO_SUCH_FIELD) {
    simdjson::dom::array arr;
    if (blend.get_array().get(arr) != simdjson::SUCCESS) {
      return FieldError("blend", "is not an array");
    }
    size_t k = 0;
    for (simdjson::dom::element e : arr) {
      const std::string name = absl::StrCat("blend[", k++, "]");
      simdjson::dom::object c;
      if (e.get_object().get(c) != simdjson::SUCCESS) {
        return FieldError(name.c_str(), "is not an object");
      }
      ComponentState cs;
      for (auto [field, out] : {std::pair<const char*, std::string*>{"release_id", &cs.release_id},
                                {"split", &cs.split}}) {
        auto v = GetString(c, field);
        if (!v.ok()) return FieldError(absl::StrCat(name, ".", field).c_str(), "is missing or not a string");
        *out = *v;
      }
      for (auto [field, out] : {std::pair<const char*, uint64_t*>{"consumed", &cs.consumed},
                                {"num_samples", &cs.num_samples}}) {
        auto v = GetU64(c, field);
        if (!v.ok()) {
          return FieldError(absl::StrCat(name, ".", field).c_str(),
                            "is missing or not a non-negative integer");
        }
        *out = *v;
      }
      double wt;
      auto wv = c["weight"];
      if (wv.error() == simdjson::NO_SUCH_FIELD) {
        return FieldError(absl::StrCat(name, ".weight").c_str(), "is missing");
      }
      if (wv.get_double().get(wt) != simdjson::SUCCESS) {
        uint64_t wi;
        if (wv.get_uint64().get(wi) != simdjson::SUCCESS) {
          return FieldError(absl::StrCat(name, ".weight").c_str(), "is not a number");
        }
        wt = static_cast<double>(wi);
      }
      cs.weight = wt;
      s.blend.push_back(std::move(cs));
    }
    if (s.blend.size() < 2) return FieldError("blend", "must list at least 2 releases");
  }
  return s;
}

namespace {

absl::Status CheckBatchShape(const LoaderState& state, const Schedule& schedule, bool elastic) {
  const ScheduleOptions& o = schedule.options();
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
  if (!elastic && state.global_batch_size != o.global_batch_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state has global_batch_size ", state.global_batch_size,
        ", but this loader uses global_batch_size ", o.global_batch_size,
        " and is not elastic (pass elastic=True to continue the global order with another "
        "global batch)"));
  }
  return absl::OkStatus();
}

absl::Status CheckSeed(const LoaderState& state, const Schedule& schedule) {
  if (state.seed != schedule.options().seed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state was saved with seed ", state.seed, ", but this loader uses seed ",
        schedule.options().seed, "; pass seed=", state.seed, " to continue that order"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Position> CheckResume(const LoaderState& state, const std::string& release_id,
                                     const std::string& split, const Schedule& schedule,
                                     bool elastic) {
  if (!state.blend.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state is of a blend of ", state.blend.size(),
        " releases (field \"blend\"), but this loader reads one release, ", release_id));
  }
  if (state.release_id != release_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state belongs to release ", state.release_id, ", but this loader reads release ",
        release_id));
  }
  if (state.split != split) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state is for split \"", state.split, "\", but this loader reads \"", split, "\""));
  }
  RETURN_IF_ERROR(CheckSeed(state, schedule));
  RETURN_IF_ERROR(CheckBatchShape(state, schedule, elastic));
  return state.position;
}

absl::StatusOr<ResumePoint> CheckBlendResume(const LoaderState& state,
                                             const std::vector<ComponentState>& components,
                                             const Schedule& schedule, bool elastic) {
  ResumePoint out;
  if (components.size() == 1) {
    ASSIGN_OR_RETURN(out.position, CheckResume(state, components[0].release_id,
                                               components[0].split, schedule, elastic));
    out.segment.start = out.position.consumed_samples;
    out.segment.consumed = {out.position.consumed_samples};
    return out;
  }
  if (state.blend.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state belongs to release ", state.release_id,
        " (one release, no field \"blend\"), but this loader reads a blend of ",
        components.size(), " releases"));
  }
  if (state.blend.size() != components.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("loader state's field \"blend\" lists ", state.blend.size(),
                     " releases, but this loader blends ", components.size()));
  }
  bool same_weights = true;
  for (size_t k = 0; k < components.size(); ++k) {
    const ComponentState& a = state.blend[k];
    const ComponentState& b = components[k];
    if (a.release_id != b.release_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "loader state's blend[", k, "].release_id is ", a.release_id,
          ", but this loader's release ", k, " is ", b.release_id));
    }
    if (a.split != b.split) {
      return absl::FailedPreconditionError(absl::StrCat(
          "loader state's blend[", k, "].split is \"", a.split, "\", but this loader reads \"",
          b.split, "\" of release ", k));
    }
    if (a.weight != b.weight) same_weights = false;
  }
  RETURN_IF_ERROR(CheckSeed(state, schedule));
  RETURN_IF_ERROR(CheckBatchShape(state, schedule, elastic));
  if (state.position.micro_index != 0 && !same_weights) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loader state was saved mid-step (micro batch ", state.position.micro_index,
        ") with other blend weights (field \"weight\"); change weights only at a step boundary"));
  }
  out.position = state.position;
  out.segment.start = state.position.consumed_samples;
  for (const ComponentState& c : state.blend) out.segment.consumed.push_back(c.consumed);
  return out;
}

}  // namespace grist::loader
