// Connected components of the duplicate graph for the merge stage: see components.h.

#include "dedup/internal/components.h"

#include "dedup/internal/stage_context.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"
#include "dedup/internal/files.h"

namespace grist::dedup::internal {

namespace {

// The external merge (when the documents in edges do not fit the in-memory share of the budget):
// every step is a pass over sorted, checksummed scratch files in work/tmp, each sort within a
// quarter of the budget.

struct KV {  // a (key, value) pair of document keys, ordered by key then value
  uint64_t k;
  uint64_t v;
};
inline bool operator<(const KV& x, const KV& y) { return x.k != y.k ? x.k < y.k : x.v < y.v; }
struct EdgeByB {  // an edge ordered by its later document
  EdgeRecord e;
};
inline bool operator<(const EdgeByB& x, const EdgeByB& y) {
  return std::tie(x.e.b, x.e.a, x.e.kind, x.e.similarity) < std::tie(y.e.b, y.e.a, y.e.kind, y.e.similarity);
}
struct EdgeByA {  // an edge ordered by its earlier document
  EdgeRecord e;
};
inline bool operator<(const EdgeByA& x, const EdgeByA& y) {
  return std::tie(x.e.a, x.e.b, x.e.kind, x.e.similarity) < std::tie(y.e.a, y.e.b, y.e.kind, y.e.similarity);
}
struct NodeBest {  // a document's chosen partner
  uint64_t node;
  uint64_t partner;
  double sim;
  uint32_t kind;
  uint32_t reserved;
};
struct ClusterByDoc {
  ClusterRecord r;
};
inline bool operator<(const ClusterByDoc& x, const ClusterByDoc& y) { return x.r.doc < y.r.doc; }

// The choice of duplicate_of: the most similar edge, then exact before near, then the smaller
// partner (a total order, so the result does not depend on the order edges are offered in).
void OfferBest(NodeBest& b, uint64_t partner, double sim, uint32_t kind) {
  const bool better =
      sim > b.sim || (sim == b.sim && (kind < b.kind || (kind == b.kind && partner < b.partner)));
  if (b.sim < 0 || better) {
    b.partner = partner;
    b.sim = sim;
    b.kind = kind;
  }
}

// Scratch files of the external merge; those still there are removed when it goes out of scope.
class MergeScratch {
 public:
  MergeScratch(const Ctx& c, uint64_t sort_bytes)
      : c_(c), dir_(c.Dir("tmp")), sort_bytes_(sort_bytes) {}
  ~MergeScratch() {
    for (const std::string& p : files_) (void)c_.env->RemoveFile(p);
  }
  const Ctx& ctx() const { return c_; }
  const std::string& dir() const { return dir_; }
  uint64_t sort_bytes() const { return sort_bytes_; }
  std::string NewPath(const std::string& name) {
    std::string p = JoinPath(dir_, absl::StrCat("merge-", name, "-", seq_++, ".bin"));
    files_.push_back(p);
    return p;
  }
  void Drop(const std::string& path) {
    (void)c_.env->RemoveFile(path);
    files_.erase(std::remove(files_.begin(), files_.end(), path), files_.end());
  }

 private:
  const Ctx& c_;
  std::string dir_;
  uint64_t sort_bytes_;
  std::vector<std::string> files_;
  int seq_ = 0;
};

// Reads a scratch file of T records with one record of lookahead.
template <typename T>
class Cursor {
 public:
  static absl::StatusOr<Cursor> Open(Env* env, const std::string& path) {
    Cursor cur;
    ASSIGN_OR_RETURN(cur.reader_, FileReader::Open(env, path, Kind::kRun, sizeof(T)));
    RETURN_IF_ERROR(cur.Advance());
    return cur;
  }
  bool valid() const { return valid_; }
  const T& get() const { return rec_; }
  absl::Status Advance() {
    ASSIGN_OR_RETURN(valid_, reader_->Next(&rec_));
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<FileReader> reader_;
  T rec_{};
  bool valid_ = false;
};

// A scratch file written in order (no sort).
template <typename T>
absl::StatusOr<std::unique_ptr<FileWriter>> OpenScratch(MergeScratch& s, const std::string& path) {
  return FileWriter::Open(s.ctx().env, path, s.ctx().Header(Kind::kRun, sizeof(T)),
                          /*sync=*/false);
}

// Sorts the records produce(add) adds into a new scratch file (dropping repeats if `unique`).
template <typename T, typename Produce>
absl::StatusOr<std::string> SortToFile(MergeScratch& s, const std::string& name, bool unique,
                                       Produce produce) {
  const std::string path = s.NewPath(name);
  internal::ExternalSorter<T> sorter(s.ctx().env, s.dir(),
                                     absl::StrCat(path.substr(path.rfind('/') + 1), "-sort"),
                                     s.sort_bytes());
  auto add = [&](const T& x) { return sorter.Add(x); };
  RETURN_IF_ERROR(produce(add));
  ASSIGN_OR_RETURN(auto w, OpenScratch<T>(s, path));
  bool have = false;
  T last{};
  RETURN_IF_ERROR(sorter.Finish([&](const T& x) -> absl::Status {
    if (unique && have && !(last < x)) return absl::OkStatus();
    have = true;
    last = x;
    return w->Add(x);
  }));
  RETURN_IF_ERROR(w->Finish());
  return path;
}

// Calls fn(record) for every record of a scratch file.
template <typename T, typename Fn>
absl::Status ForEachRecord(Env* env, const std::string& path, Fn fn) {
  ASSIGN_OR_RETURN(auto cur, Cursor<T>::Open(env, path));
  while (cur.valid()) {
    RETURN_IF_ERROR(fn(cur.get()));
    RETURN_IF_ERROR(cur.Advance());
  }
  return absl::OkStatus();
}

// Looks keys up, in ascending order, in a scratch file of KV sorted by k: the v of key, else key.
class Relabel {
 public:
  static absl::StatusOr<Relabel> Open(Env* env, const std::string& path) {
    Relabel r;
    ASSIGN_OR_RETURN(r.cur_, Cursor<KV>::Open(env, path));
    return r;
  }
  absl::StatusOr<uint64_t> Of(uint64_t key) {
    while (cur_.valid() && cur_.get().k < key) RETURN_IF_ERROR(cur_.Advance());
    return cur_.valid() && cur_.get().k == key ? cur_.get().v : key;
  }
  absl::Status Drain() {
    while (cur_.valid()) RETURN_IF_ERROR(cur_.Advance());
    return absl::OkStatus();
  }

 private:
  Cursor<KV> cur_;
};

}  // namespace

// Connected components and the per-document choice in bounded memory, writing the same clusters
// file as the in-memory merge. Components: in each round every document of the edge graph that
// has a smaller neighbour hooks onto its smallest one (a forest whose roots are smaller than their
// children), pointer jumping takes every document to its tree's root (depth halves per pass), and
// the edges are relabelled to roots (dropping those inside a tree); the rounds repeat until no
// edge is left. Each round removes at least the largest document of every component, and the last
// root of a component is its smallest document (it has no smaller neighbour). The labels compose
// across rounds into F: (document, its component's smallest document) for every non-root.
absl::Status MergeExternal(Ctx& c, std::vector<std::unique_ptr<FileReader>>& readers,
                           std::vector<uint64_t>& stats, const std::string& dir,
                           std::vector<std::pair<uint64_t, uint64_t>>* hist_out) {
  Env* env = c.env;
  RETURN_IF_ERROR(env->CreateDirs(c.Dir("tmp")));
  MergeScratch s(c, std::max<uint64_t>(1 << 16, c.opt.memory_limit / 4));
  // The edges by their later document.
  ASSIGN_OR_RETURN(std::string by_b,
                   SortToFile<EdgeByB>(s, "edges-by-b", false, [&](auto& add) -> absl::Status {
                     for (auto& r : readers) {
                       EdgeRecord e;
                       while (true) {
                         ASSIGN_OR_RETURN(bool more, r->Next(&e));
                         if (!more) break;
                         stats[kInputBytes] += sizeof(e);
                         if (!(e.a < e.b)) {
                           return absl::DataLossError("dedup merge: edge with a >= b");
                         }
                         RETURN_IF_ERROR(add(EdgeByB{e}));
                       }
                     }
                     return absl::OkStatus();
                   }));
  // Per later document its best edge to an earlier one; the graph as KV{b, a}, sorted, distinct.
  const std::string earlier_path = s.NewPath("best-earlier");
  std::string graph = s.NewPath("graph");
  {
    ASSIGN_OR_RETURN(auto best_w, OpenScratch<NodeBest>(s, earlier_path));
    ASSIGN_OR_RETURN(auto graph_w, OpenScratch<KV>(s, graph));
    NodeBest cur{0, 0, -1, 0, 0};
    bool have = false;
    KV last{0, 0};
    RETURN_IF_ERROR(ForEachRecord<EdgeByB>(env, by_b, [&](const EdgeByB& x) -> absl::Status {
      if (have && x.e.b != cur.node) RETURN_IF_ERROR(best_w->Add(cur));
      if (!have || x.e.b != cur.node) cur = NodeBest{x.e.b, 0, -1, 0, 0};
      OfferBest(cur, x.e.a, x.e.similarity, x.e.kind);
      const KV g{x.e.b, x.e.a};
      if (!have || last < g) RETURN_IF_ERROR(graph_w->Add(g));
      have = true;
      last = g;
      return absl::OkStatus();
    }));
    if (have) RETURN_IF_ERROR(best_w->Add(cur));
    RETURN_IF_ERROR(best_w->Finish());
    RETURN_IF_ERROR(graph_w->Finish());
  }
  // Documents without an edge to an earlier one: the best edge to a later one.
  const std::string later_path = s.NewPath("best-later");
  {
    ASSIGN_OR_RETURN(std::string by_a,
                     SortToFile<EdgeByA>(s, "edges-by-a", false, [&](auto& add) {
                       return ForEachRecord<EdgeByB>(env, by_b, [&](const EdgeByB& x) {
                         return add(EdgeByA{x.e});
                       });
                     }));
    s.Drop(by_b);
    ASSIGN_OR_RETURN(auto earlier, Cursor<NodeBest>::Open(env, earlier_path));
    ASSIGN_OR_RETURN(auto best_w, OpenScratch<NodeBest>(s, later_path));
    NodeBest cur{0, 0, -1, 0, 0};
    bool have = false, skip = false;
    RETURN_IF_ERROR(ForEachRecord<EdgeByA>(env, by_a, [&](const EdgeByA& x) -> absl::Status {
      if (!have || x.e.a != cur.node) {
        if (have && !skip) RETURN_IF_ERROR(best_w->Add(cur));
        have = true;
        cur = NodeBest{x.e.a, 0, -1, 0, 0};
        while (earlier.valid() && earlier.get().node < x.e.a) RETURN_IF_ERROR(earlier.Advance());
        skip = earlier.valid() && earlier.get().node == x.e.a;
      }
      if (!skip) OfferBest(cur, x.e.b, x.e.similarity, x.e.kind);
      return absl::OkStatus();
    }));
    if (have && !skip) RETURN_IF_ERROR(best_w->Add(cur));
    RETURN_IF_ERROR(best_w->Finish());
    while (earlier.valid()) RETURN_IF_ERROR(earlier.Advance());
    s.Drop(by_a);
  }
  // Connected components.
  std::string labels;  // F: KV{document, label}, sorted by document; empty until the first round
  uint64_t rounds = 0;
  while (true) {
    uint64_t edges = 0;
    // Hook: every later document of an edge onto its smallest neighbour (graph is sorted by (b, a)).
    std::string parent = s.NewPath("parent");
    {
      ASSIGN_OR_RETURN(auto w, OpenScratch<KV>(s, parent));
      bool have = false;
      uint64_t last_b = 0;
      RETURN_IF_ERROR(ForEachRecord<KV>(env, graph, [&](const KV& g) -> absl::Status {
        ++edges;
        if (have && g.k == last_b) return absl::OkStatus();
        have = true;
        last_b = g.k;
        return w->Add(KV{g.k, g.v});
      }));
      RETURN_IF_ERROR(w->Finish());
    }
    if (edges == 0) {
      s.Drop(parent);
      break;
    }
    ++rounds;
    // Pointer jumping until every parent is a root.
    while (true) {
      ASSIGN_OR_RETURN(std::string by_parent,
                       SortToFile<KV>(s, "by-parent", false, [&](auto& add) {
                         return ForEachRecord<KV>(env, parent, [&](const KV& p) {
                           return add(KV{p.v, p.k});
                         });
                       }));
      bool changed = false;
      ASSIGN_OR_RETURN(std::string next,
                       SortToFile<KV>(s, "parent", false, [&](auto& add) -> absl::Status {
                         ASSIGN_OR_RETURN(Relabel up, Relabel::Open(env, parent));
                         RETURN_IF_ERROR(ForEachRecord<KV>(env, by_parent, [&](const KV& pc)
                                                                               -> absl::Status {
                           ASSIGN_OR_RETURN(uint64_t grand, up.Of(pc.k));
                           changed |= grand != pc.k;
                           return add(KV{pc.v, grand});
                         }));
                         return up.Drain();
                       }));
      s.Drop(by_parent);
      s.Drop(parent);
      parent = next;
      if (!changed) break;
    }
    // Relabel the edges to roots: first b (graph order), then a.
    ASSIGN_OR_RETURN(std::string half,
                     SortToFile<KV>(s, "half", false, [&](auto& add) -> absl::Status {
                       ASSIGN_OR_RETURN(Relabel root, Relabel::Open(env, parent));
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, graph, [&](const KV& g)
                                                                         -> absl::Status {
                         ASSIGN_OR_RETURN(uint64_t rb, root.Of(g.k));
                         return add(KV{g.v, rb});
                       }));
                       return root.Drain();
                     }));
    s.Drop(graph);
    ASSIGN_OR_RETURN(graph, SortToFile<KV>(s, "graph", true, [&](auto& add) -> absl::Status {
                       ASSIGN_OR_RETURN(Relabel root, Relabel::Open(env, parent));
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, half, [&](const KV& h)
                                                                        -> absl::Status {
                         ASSIGN_OR_RETURN(uint64_t ra, root.Of(h.k));
                         if (ra == h.v) return absl::OkStatus();
                         return add(KV{std::max(ra, h.v), std::min(ra, h.v)});
                       }));
                       return root.Drain();
                     }));
    s.Drop(half);
    // Compose: F' = R(F) for the documents labelled so far, and R for this round's non-roots
    // (roots of the earlier rounds, so never in F).
    std::string by_label;
    if (!labels.empty()) {
      ASSIGN_OR_RETURN(by_label, SortToFile<KV>(s, "by-label", false, [&](auto& add) {
                         return ForEachRecord<KV>(env, labels, [&](const KV& f) {
                           return add(KV{f.v, f.k});
                         });
                       }));
      s.Drop(labels);
    }
    ASSIGN_OR_RETURN(std::string next_labels,
                     SortToFile<KV>(s, "labels", false, [&](auto& add) -> absl::Status {
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, parent, add));
                       if (by_label.empty()) return absl::OkStatus();
                       ASSIGN_OR_RETURN(Relabel root, Relabel::Open(env, parent));
                       RETURN_IF_ERROR(ForEachRecord<KV>(env, by_label, [&](const KV& lv)
                                                                            -> absl::Status {
                         ASSIGN_OR_RETURN(uint64_t r, root.Of(lv.k));
                         return add(KV{lv.v, r});
                       }));
                       return root.Drain();
                     }));
    if (!by_label.empty()) s.Drop(by_label);
    s.Drop(parent);
    labels = next_labels;
  }
  s.Drop(graph);
  stats[kMergeRounds] = rounds;
  if (labels.empty()) {  // no edges at all
    labels = s.NewPath("labels");
    ASSIGN_OR_RETURN(auto w, OpenScratch<KV>(s, labels));
    RETURN_IF_ERROR(w->Finish());
  }
  // Clusters: the members of each root, sizes first, then numbered in the order of the roots.
  ASSIGN_OR_RETURN(std::string by_root, SortToFile<KV>(s, "by-root", false, [&](auto& add) {
                     return ForEachRecord<KV>(env, labels, [&](const KV& f) {
                       return add(KV{f.v, f.k});
                     });
                   }));
  s.Drop(labels);
  const std::string sizes = s.NewPath("sizes");
  {
    ASSIGN_OR_RETURN(auto w, OpenScratch<KV>(s, sizes));
    KV cur{0, 0};
    RETURN_IF_ERROR(ForEachRecord<KV>(env, by_root, [&](const KV& rv) -> absl::Status {
      if (cur.v != 0 && rv.k != cur.k) RETURN_IF_ERROR(w->Add(cur));
      if (cur.v == 0 || rv.k != cur.k) cur = KV{rv.k, 1};
      ++cur.v;
      return absl::OkStatus();
    }));
    if (cur.v != 0) RETURN_IF_ERROR(w->Add(cur));
    RETURN_IF_ERROR(w->Finish());
  }
  uint64_t clusters = 0;
  std::map<uint64_t, uint64_t> hist;
  ASSIGN_OR_RETURN(
      std::string members, SortToFile<ClusterByDoc>(s, "members", false, [&](auto& add) -> absl::Status {
        ASSIGN_OR_RETURN(auto size, Cursor<KV>::Open(env, sizes));
        bool started = false;
        uint64_t root = 0;
        RETURN_IF_ERROR(ForEachRecord<KV>(env, by_root, [&](const KV& rv) -> absl::Status {
          if (!started || rv.k != root) {
            if (started) RETURN_IF_ERROR(size.Advance());
            started = true;
            root = rv.k;
            if (!size.valid() || size.get().k != rv.k) {
              return absl::InternalError("dedup merge: cluster sizes out of step");
            }
            ++clusters;
            ++hist[size.get().v];
          }
          ClusterRecord r{};
          r.doc = rv.v;
          r.kept = rv.k;
          r.cluster = clusters - 1;
          r.cluster_size = static_cast<uint32_t>(size.get().v);
          return add(ClusterByDoc{r});
        }));
        while (size.valid()) RETURN_IF_ERROR(size.Advance());
        return absl::OkStatus();
      }));
  s.Drop(by_root);
  s.Drop(sizes);
  // The removed documents with their choice.
  {
    ASSIGN_OR_RETURN(auto clusters_w,
                     c.OpenWork(JoinPath(dir, TaskFileName("clusters", 0, 1)), Kind::kClusters,
                                sizeof(ClusterRecord)));
    ASSIGN_OR_RETURN(auto earlier, Cursor<NodeBest>::Open(env, earlier_path));
    ASSIGN_OR_RETURN(auto later, Cursor<NodeBest>::Open(env, later_path));
    RETURN_IF_ERROR(ForEachRecord<ClusterByDoc>(env, members, [&](const ClusterByDoc& m)
                                                                   -> absl::Status {
      ClusterRecord r = m.r;
      while (earlier.valid() && earlier.get().node < r.doc) RETURN_IF_ERROR(earlier.Advance());
      while (later.valid() && later.get().node < r.doc) RETURN_IF_ERROR(later.Advance());
      const NodeBest* b = nullptr;
      if (earlier.valid() && earlier.get().node == r.doc) {
        b = &earlier.get();
      } else if (later.valid() && later.get().node == r.doc) {
        b = &later.get();
      }
      if (b == nullptr) return absl::InternalError("dedup merge: a member without an edge");
      r.duplicate_of = b->partner;
      r.similarity = b->sim;
      r.kind = b->kind;
      ++stats[r.kind == static_cast<uint32_t>(PairKind::kExact) ? kRemovedExact : kRemovedNear];
      return clusters_w->Add(r);
    }));
    while (earlier.valid()) RETURN_IF_ERROR(earlier.Advance());
    while (later.valid()) RETURN_IF_ERROR(later.Advance());
    RETURN_IF_ERROR(clusters_w->Finish());
  }
  s.Drop(members);
  stats[kClusters] = clusters;
  for (const auto& [sz, n] : hist) hist_out->emplace_back(sz, n);
  return absl::OkStatus();
}

// Sorts variable-length (key, id) records by key within `memory_bytes`, spilling sorted runs
// (format::Kind::kIds, read back through FileReader) like ExternalSorter.
class IdSorter {
 public:
  IdSorter(MergeScratch& s, std::string name, uint64_t memory_bytes)
      : s_(s), name_(std::move(name)), memory_bytes_(memory_bytes) {}
  ~IdSorter() {
    for (const std::string& p : runs_) s_.Drop(p);
  }
  absl::Status Add(uint64_t key, const std::string& id) {
    if (bytes_ >= memory_bytes_) RETURN_IF_ERROR(Spill());
    buffer_.emplace_back(key, id);
    // The pair, and the string's heap block past the short-string buffer (with malloc's header).
    const std::string& kept = buffer_.back().second;
    bytes_ += sizeof(buffer_[0]) + (kept.capacity() > 15 ? kept.capacity() + 1 + 16 : 0);
    // The vector's own growth (up to twice the records), counted as it happens.
    if (buffer_.size() == buffer_.capacity()) bytes_ += sizeof(buffer_[0]) * buffer_.size();
    return absl::OkStatus();
  }
  // Writes the records in key order (equal keys in the order added) to `w`.
  absl::Status Finish(FileWriter& w) {
    std::stable_sort(buffer_.begin(), buffer_.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    if (runs_.empty()) {
      for (const auto& [key, id] : buffer_) RETURN_IF_ERROR(w.AddId(key, id));
      return absl::OkStatus();
    }
    if (!buffer_.empty()) RETURN_IF_ERROR(Spill());
    std::vector<std::unique_ptr<FileReader>> readers;
    using Head = std::tuple<uint64_t, size_t, std::string>;  // key, run, id
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
    for (size_t i = 0; i < runs_.size(); ++i) {
      ASSIGN_OR_RETURN(auto r, FileReader::Open(s_.ctx().env, runs_[i], Kind::kIds, 0));
      readers.push_back(std::move(r));
      Head h{0, i, std::string()};
      ASSIGN_OR_RETURN(bool more, readers[i]->NextId(&std::get<0>(h), &std::get<2>(h)));
      if (more) heap.push(std::move(h));
    }
    while (!heap.empty()) {
      Head h = heap.top();
      heap.pop();
      RETURN_IF_ERROR(w.AddId(std::get<0>(h), std::get<2>(h)));
      const size_t run = std::get<1>(h);
      ASSIGN_OR_RETURN(bool more, readers[run]->NextId(&std::get<0>(h), &std::get<2>(h)));
      if (more) heap.push(std::move(h));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Spill() {
    std::stable_sort(buffer_.begin(), buffer_.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    const std::string path = s_.NewPath(name_ + "-run");
    ASSIGN_OR_RETURN(auto w, FileWriter::Open(s_.ctx().env, path, s_.ctx().Header(Kind::kIds, 0),
                                              /*sync=*/false));
    for (const auto& [key, id] : buffer_) RETURN_IF_ERROR(w->AddId(key, id));
    RETURN_IF_ERROR(w->Finish());
    runs_.push_back(path);
    buffer_.clear();
    buffer_.shrink_to_fit();
    bytes_ = 0;
    return absl::OkStatus();
  }

  MergeScratch& s_;
  std::string name_;
  uint64_t memory_bytes_;
  uint64_t bytes_ = 0;
  std::vector<std::pair<uint64_t, std::string>> buffer_;
  std::vector<std::string> runs_;
};

// The ids filter writes into each removed record, as two files sorted by the removed document
// (so that filter streams them beside the clusters file): kept-ids (the cluster's kept document's
// id) and dup-ids (duplicate_of's id). The references are sorted by the referenced document and
// joined with the signatures stage's id files (each in key order).
absl::Status WriteRemovedIds(Ctx& c, const std::string& dir, std::vector<uint64_t>& stats) {
  Env* env = c.env;
  RETURN_IF_ERROR(env->CreateDirs(c.Dir("tmp")));
  MergeScratch s(c, std::max<uint64_t>(1 << 16, c.opt.memory_limit / 4));
  const std::string clusters_path = JoinPath(dir, TaskFileName("clusters", 0, 1));
  std::string refs[2];
  for (int which = 0; which < 2; ++which) {
    ASSIGN_OR_RETURN(refs[which], SortToFile<KV>(s, which == 0 ? "kept-refs" : "dup-refs", false,
                                                 [&](auto& add) -> absl::Status {
      ASSIGN_OR_RETURN(auto r, FileReader::Open(env, clusters_path, Kind::kClusters,
                                                sizeof(ClusterRecord)));
      ClusterRecord cr;
      while (true) {
        ASSIGN_OR_RETURN(bool more, r->Next(&cr));
        if (!more) break;
        RETURN_IF_ERROR(add(KV{which == 0 ? cr.kept : cr.duplicate_of, cr.doc}));
      }
      return absl::OkStatus();
    }));
  }
  IdSorter kept(s, "kept-ids", c.opt.memory_limit / 16), dup(s, "dup-ids", c.opt.memory_limit / 16);
  ASSIGN_OR_RETURN(auto id_readers, OpenAll(c, "sig", "ids", DedupStage::kSignatures, Kind::kIds, 0));
  for (auto& r : id_readers) {
    ASSIGN_OR_RETURN(auto kref, Cursor<KV>::Open(env, refs[0]));
    ASSIGN_OR_RETURN(auto dref, Cursor<KV>::Open(env, refs[1]));
    uint64_t key;
    std::string id;
    while (true) {
      ASSIGN_OR_RETURN(bool more, r->NextId(&key, &id));
      if (!more) break;
      stats[kInputBytes] += 12 + id.size();
      while (kref.valid() && kref.get().k < key) RETURN_IF_ERROR(kref.Advance());
      while (kref.valid() && kref.get().k == key) {
        RETURN_IF_ERROR(kept.Add(kref.get().v, id));
        RETURN_IF_ERROR(kref.Advance());
      }
      while (dref.valid() && dref.get().k < key) RETURN_IF_ERROR(dref.Advance());
      while (dref.valid() && dref.get().k == key) {
        RETURN_IF_ERROR(dup.Add(dref.get().v, id));
        RETURN_IF_ERROR(dref.Advance());
      }
    }
    while (kref.valid()) RETURN_IF_ERROR(kref.Advance());
    while (dref.valid()) RETURN_IF_ERROR(dref.Advance());
  }
  for (IdSorter* sorter : {&kept, &dup}) {
    const char* stem = sorter == &kept ? "kept-ids" : "dup-ids";
    ASSIGN_OR_RETURN(auto w, c.OpenWork(JoinPath(dir, TaskFileName(stem, 0, 1)), Kind::kIds, 0));
    RETURN_IF_ERROR(sorter->Finish(*w));
    RETURN_IF_ERROR(w->Finish());
  }
  return absl::OkStatus();
}

// The in-memory merge: sorted edges and a union-find whose root is the smallest document.
absl::Status MergeInMemory(Ctx& c, std::vector<std::unique_ptr<FileReader>>& readers,
                           std::vector<uint64_t>& stats, const std::string& dir,
                           std::vector<std::pair<uint64_t, uint64_t>>* hist_out) {
  std::vector<EdgeRecord> edges;
  for (auto& r : readers) {
    EdgeRecord e;
    while (true) {
      ASSIGN_OR_RETURN(bool more, r->Next(&e));
      if (!more) break;
      stats[kInputBytes] += sizeof(e);
      if (!(e.a < e.b)) return absl::DataLossError("dedup merge: edge with a >= b");
      edges.push_back(e);
    }
  }
  std::sort(edges.begin(), edges.end(), [](const EdgeRecord& x, const EdgeRecord& y) {
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  std::vector<uint64_t> nodes;
  nodes.reserve(edges.size() * 2);
  for (const EdgeRecord& e : edges) {
    nodes.push_back(e.a);
    nodes.push_back(e.b);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  auto idx = [&](uint64_t key) {
    return static_cast<uint32_t>(std::lower_bound(nodes.begin(), nodes.end(), key) - nodes.begin());
  };
  // Union-find; the root of a set is its smallest index (the first document in input order).
  std::vector<uint32_t> parent(nodes.size());
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t x) {
    uint32_t r = x;
    while (parent[r] != r) r = parent[r];
    while (parent[x] != r) {
      uint32_t n = parent[x];
      parent[x] = r;
      x = n;
    }
    return r;
  };
  // A removed document points to the partner of its most similar edge to an earlier document
  // (the edge that removes it); only when it has none (it joins the cluster through later
  // documents) to the partner of its most similar edge.
  struct Best {
    double sim = -1;
    uint32_t kind = 0;
    uint64_t partner = 0;
  };
  std::vector<Best> best(nodes.size());
  auto offer = [](Best& b, uint64_t partner, double sim, uint32_t kind) {
    bool better = sim > b.sim || (sim == b.sim && (kind < b.kind || (kind == b.kind && partner < b.partner)));
    if (b.sim < 0 || better) b = Best{sim, kind, partner};
  };
  for (const EdgeRecord& e : edges) {
    uint32_t x = idx(e.a), y = idx(e.b);
    offer(best[y], e.a, e.similarity, e.kind);
    uint32_t rx = find(x), ry = find(y);
    if (rx != ry) parent[std::max(rx, ry)] = std::min(rx, ry);
  }
  // Documents without an edge to an earlier one: their later partners.
  std::vector<bool> no_earlier(nodes.size());
  for (uint32_t i = 0; i < nodes.size(); ++i) no_earlier[i] = best[i].sim < 0;
  for (const EdgeRecord& e : edges) {
    uint32_t x = idx(e.a);
    if (no_earlier[x]) offer(best[x], e.b, e.similarity, e.kind);
  }
  std::vector<uint32_t> root(nodes.size());
  std::vector<uint32_t> size(nodes.size(), 0);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    root[i] = find(i);
    ++size[root[i]];
  }
  std::vector<uint64_t> cluster_no(nodes.size(), 0);
  uint64_t clusters = 0;
  std::map<uint64_t, uint64_t> hist;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (root[i] == i) {
      cluster_no[i] = clusters++;
      ++hist[size[i]];
    }
  }
  ASSIGN_OR_RETURN(auto clusters_w,
                   c.OpenWork(JoinPath(dir, TaskFileName("clusters", 0, 1)), Kind::kClusters,
                              sizeof(ClusterRecord)));
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (root[i] == i) continue;
    const Best& b = best[i];
    ClusterRecord r{nodes[i], nodes[root[i]], b.partner, b.sim, cluster_no[root[i]], b.kind,
                    size[root[i]]};
    RETURN_IF_ERROR(clusters_w->Add(r));
    if (b.kind == static_cast<uint32_t>(PairKind::kExact)) {
      ++stats[kRemovedExact];
    } else {
      ++stats[kRemovedNear];
    }
  }
  RETURN_IF_ERROR(clusters_w->Finish());
  stats[kClusters] = clusters;
  for (const auto& [sz, n] : hist) hist_out->emplace_back(sz, n);
  return absl::OkStatus();
}

}  // namespace grist::dedup::internal
