#include "common/crash_point.h"

#if GRIST_TEST_HOOKS

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace grist::crash {
namespace {

struct State {
  std::mutex mu;
  std::string armed;      // empty: nothing armed
  uint64_t armed_hit = 0; // the hit of `armed` (counted from arming) that fires
  uint64_t armed_seen = 0;
  Action action = Action::kKill;
  std::map<std::string, uint64_t, std::less<>> hits;
  std::vector<std::string> reached;
  int trace_fd = -1;
};

State& GetState() {
  static State* s = [] {
    auto* st = new State();
    if (const char* p = std::getenv("GRIST_CRASH_POINT"); p != nullptr && *p != '\0') {
      std::string spec = p;
      uint64_t hit = 1;
      if (size_t at = spec.rfind('@'); at != std::string::npos) {
        if (!absl::SimpleAtoi(spec.substr(at + 1), &hit) || hit == 0) hit = 1;
        spec.resize(at);
      }
      st->armed = spec;
      st->armed_hit = hit;
      const char* a = std::getenv("GRIST_CRASH_ACTION");
      st->action = (a != nullptr && std::string_view(a) == "fail") ? Action::kFail : Action::kKill;
    }
    if (const char* t = std::getenv("GRIST_CRASH_TRACE"); t != nullptr && *t != '\0') {
      st->trace_fd = ::open(t, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    return st;
  }();
  return *s;
}

}  // namespace

absl::Status Point(std::string_view name) {
  State& s = GetState();
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.hits.find(name);
  if (it == s.hits.end()) it = s.hits.emplace(std::string(name), 0).first;
  ++it->second;
  s.reached.push_back(it->first);
  if (s.trace_fd >= 0) {
    std::string line = absl::StrCat(std::string(name), "\n");
    (void)!::write(s.trace_fd, line.data(), line.size());  // O_APPEND: one write, one line
  }
  if (s.armed.empty() || s.armed != name || ++s.armed_seen != s.armed_hit) return absl::OkStatus();
  if (s.action == Action::kKill) {
    ::kill(::getpid(), SIGKILL);
    ::pause();  // SIGKILL is delivered before kill() returns to user space for the caller itself
  }
  s.armed.clear();
  return absl::InternalError(absl::StrCat("injected failure at crash point ", std::string(name)));
}

void Arm(std::string_view name, int hit, Action action) {
  State& s = GetState();
  std::lock_guard<std::mutex> l(s.mu);
  s.armed = std::string(name);
  s.armed_hit = hit > 0 ? static_cast<uint64_t>(hit) : 1;
  s.armed_seen = 0;
  s.action = action;
}

void Disarm() {
  State& s = GetState();
  std::lock_guard<std::mutex> l(s.mu);
  s.armed.clear();
}

uint64_t Hits(std::string_view name) {
  State& s = GetState();
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.hits.find(name);
  return it == s.hits.end() ? 0 : it->second;
}

std::vector<std::string> Reached() {
  State& s = GetState();
  std::lock_guard<std::mutex> l(s.mu);
  return s.reached;
}

void ResetHits() {
  State& s = GetState();
  std::lock_guard<std::mutex> l(s.mu);
  s.hits.clear();
  s.reached.clear();
}

bool Enabled() { return true; }

}  // namespace grist::crash

#else  // !GRIST_TEST_HOOKS

namespace grist::crash {

absl::Status Point(std::string_view) { return absl::OkStatus(); }
void Arm(std::string_view, int, Action) {}
void Disarm() {}
uint64_t Hits(std::string_view) { return 0; }
std::vector<std::string> Reached() { return {}; }
void ResetHits() {}
bool Enabled() { return false; }

}  // namespace grist::crash

#endif  // GRIST_TEST_HOOKS
