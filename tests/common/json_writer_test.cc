#include "common/json_writer.h"

#include <gtest/gtest.h>

namespace grist {
namespace {

TEST(JsonWriterTest, CompactAndPretty) {
  JsonWriter w(0);
  w.BeginObject().Field("a", int64_t{1}).Key("b").BeginArray().Double(0.5).Bool(true).Null().EndArray();
  w.Field("s", "x\"y\n").EndObject();
  EXPECT_EQ(w.str(), "{\"a\":1,\"b\":[0.5,true,null],\"s\":\"x\\\"y\\n\"}");

  JsonWriter p(2);
  p.BeginObject().Field("k", uint64_t{7}).Key("e").BeginObject().EndObject().EndObject();
  EXPECT_EQ(p.str(), "{\n  \"k\": 7,\n  \"e\": {}\n}\n");
}

TEST(JsonWriterTest, EscapesControlAndInvalidUtf8) {
  std::string out;
  AppendJsonString(&out, std::string("a\x01\x7f") + "\xc3\xa9" + "\xff" + "\xe2\x82");
  EXPECT_EQ(out, "\"a\\u0001\\u007f\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(JsonWriterTest, Doubles) {
  EXPECT_EQ(JsonDouble(0.1), "0.1");
  EXPECT_EQ(JsonDouble(3), "3.0");
  EXPECT_EQ(JsonDouble(1e300), "1e+300");
  EXPECT_EQ(JsonDouble(std::numeric_limits<double>::quiet_NaN()), "null");
}

}  // namespace
}  // namespace grist
