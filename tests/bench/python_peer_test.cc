// How benches find and run their Python peers: a missing script or module is FailedPrecondition
// naming it (the figure then records the peer as unavailable with that reason), and the peers'
// JSON is read back exactly.
#include "bench/python_peer.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace grist::bench {
namespace {

TEST(PythonPeerTest, MissingScriptIsFailedPreconditionNamingIt) {
  auto r = RunPythonPeer("no_such_peer_script.py", "json", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("no_such_peer_script.py"), std::string::npos);
}

TEST(PythonPeerTest, MissingModuleIsFailedPreconditionNamingIt) {
  ASSERT_NE(PeerScriptPath("bench_clean_peer.py"), "");
  auto r = RunPythonPeer("bench_clean_peer.py", "grist_no_such_module_xyz", {"/dev/null"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("grist_no_such_module_xyz"), std::string::npos);
}

TEST(PythonPeerTest, ReadsThePeersJson) {
  const std::string j =
      R"({"docs": 3, "mb_per_s": [1.5, 2.0, 2.5], "datatrove": "0.10.1", "x_error": "boom"})";
  EXPECT_EQ(PeerJsonNumber(j, "docs"), 3);
  EXPECT_EQ(PeerJsonNumber(j, "absent", -1), -1);
  EXPECT_EQ(PeerJsonNumbers(j, "mb_per_s"), (std::vector<double>{1.5, 2.0, 2.5}));
  EXPECT_TRUE(PeerJsonNumbers(j, "absent").empty());
  EXPECT_EQ(PeerJsonString(j, "datatrove"), "0.10.1");
  EXPECT_EQ(PeerJsonString(j, "x_error"), "boom");
}

}  // namespace
}  // namespace grist::bench
