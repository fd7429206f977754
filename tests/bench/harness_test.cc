// The bench harness: sweep parsing, statistics, the Amdahl fit, reports (Markdown, JSON, plots,
// files written) and the output-directory checks.
#include "bench/harness.h"
#include "bench/sweep_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/env.h"
#include "tests/test_util.h"

namespace grist::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SweepTest, ParsesParamAndValuesInOrder) {
  auto s = Sweep::Parse("threads=8,1, 2 ,4");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->param, "threads");
  EXPECT_THAT(s->values, ElementsAre("8", "1", "2", "4"));
  EXPECT_TRUE(s->Numeric());
  auto c = Sweep::Parse("mode=buffered,odirect");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->Numeric());
}

TEST(SweepTest, RejectsMalformedSpecsWithTheReason) {
  struct Case {
    const char* spec;
    const char* message;
  } cases[] = {
      {"threads", "--sweep 'threads': expected PARAM=v1,v2,... (e.g. threads=1,2,4,8)"},
      {"=1,2", "--sweep '=1,2': no parameter name"},
      {"threads=", "--sweep threads: no values given (expected threads=v1,v2,...)"},
      {"threads=  ", "--sweep threads: no values given (expected threads=v1,v2,...)"},
      {"threads=1,,4", "--sweep threads: empty value in '1,,4'"},
      {"threads=1,2,1", "--sweep threads: value '1' given twice"},
  };
  for (const auto& c : cases) {
    auto s = Sweep::Parse(c.spec);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(s.status().message()), c.message);
  }
}

TEST(SweepTest, FromOptionsChecksTheBenchSupportsTheParameter) {
  Options o;
  auto none = SweepFromOptions(o, {"threads"});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  o.sweep = "queue_depth=1,2";
  auto bad = SweepFromOptions(o, {"threads", "batch_size"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()),
            "--sweep queue_depth: this bench cannot sweep 'queue_depth'; it sweeps: threads, "
            "batch_size");
  auto nosweep = SweepFromOptions(o, {});
  EXPECT_THAT(std::string(nosweep.status().message()), HasSubstr("it supports no sweep"));
  o.sweep = "threads=";
  EXPECT_EQ(SweepFromOptions(o, {"threads"}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SweepTest, IntValuesWithBinarySuffixes) {
  Sweep s{"block_size", {}};
  EXPECT_EQ(*SweepInt(s, "4096"), 4096);
  EXPECT_EQ(*SweepInt(s, "4K"), 4096);
  EXPECT_EQ(*SweepInt(s, "2m"), 2 << 20);
  EXPECT_EQ(*SweepInt(s, "1G"), int64_t{1} << 30);
  for (const char* bad : {"0", "-1", "x", "K", "1.5", ""}) {
    auto r = SweepInt(s, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(std::string(r.status().message()),
              std::string("--sweep block_size: value '") + bad + "' is not a positive integer");
  }
}

TEST(StatsTest, MedianMinMax) {
  Stats odd = Stats::Of({5, 1, 3});
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 5);
  EXPECT_THAT(odd.samples, ElementsAre(5, 1, 3));  // in measured order
  Stats even = Stats::Of({4, 1, 3, 2});
  EXPECT_EQ(even.median, 2.5);
}

TEST(RepeatTest, WarmsUpThenMeasuresAndStopsAtTheFirstError) {
  Options o;
  o.warmup = 2;
  o.repetitions = 3;
  int calls = 0;
  auto st = Repeat(o, [&]() -> absl::StatusOr<double> { return ++calls; });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(calls, 5);
  EXPECT_THAT(st->samples, ElementsAre(3, 4, 5));
  calls = 0;
  auto err = Repeat(o, [&]() -> absl::StatusOr<double> {
    if (++calls == 4) return absl::DataLossError("boom");
    return 1.0;
  });
  EXPECT_EQ(err.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 4);
}

TEST(AmdahlTest, RecoversTheSerialFraction) {
  std::vector<double> n = {1, 2, 4, 8, 16};
  std::vector<double> y;
  for (double k : n) y.push_back(100.0 / (0.2 + 0.8 / k));
  auto fit = FitAmdahl(n, y);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->serial_fraction, 0.2, 1e-9);
  EXPECT_NEAR(fit->Predict(32), 100.0 / (0.2 + 0.8 / 32), 1e-6);
  // Perfect scaling: no serial part.
  std::vector<double> linear = {10, 20, 40, 80, 160};
  EXPECT_NEAR(FitAmdahl(n, linear)->serial_fraction, 0.0, 1e-9);
  // Flat: all serial.
  std::vector<double> flat = {50, 50, 50, 50, 50};
  EXPECT_NEAR(FitAmdahl(n, flat)->serial_fraction, 1.0, 1e-9);
  // Too few points, or a zero measurement.
  EXPECT_FALSE(FitAmdahl({1, 2}, {1, 2}).has_value());
  EXPECT_FALSE(FitAmdahl({1, 2, 4}, {1, 0, 2}).has_value());
}

Figure Fig(const std::string& name, double ours, std::optional<double> peer) {
  Figure f;
  f.name = name;
  f.unit = "MB/s";
  f.ours = Stats::Of({ours * 0.9, ours, ours * 1.1});
  f.peer_name = "peerx";
  if (peer) f.peer = Stats::Of({*peer});
  else f.peer_note = "peerx not installed";
  return f;
}

TEST(ReportTest, MarkdownTableOfAnUnsweptRun) {
  Report r("demo", Options{});
  r.SetParam("size", "4 MiB");
  r.AddFigure(Fig("encode", 200, 100.0));
  r.AddFigure(Fig("decode", 50, std::nullopt));
  r.AddNote("A note.");
  EXPECT_EQ(r.Markdown(),
            "### grist bench demo\n\n"
            "- size: 4 MiB\n\n"
            "| figure | grist (median [min, max]) | peer / ceiling | peer (median) | ratio | target |\n"
            "|---|---|---|---|---|---|\n"
            "| encode | 200 MB/s [180, 220] | peerx | 100 MB/s | 2x | - |\n"
            "| decode | 50.0 MB/s [45.0, 55.0] | peerx | unavailable: peerx not installed | - | - |\n"
            "\n![grist demo relative to its peers](demo.svg)\n"
            "\nA note.\n");
  auto plots = r.Plots();
  ASSERT_EQ(plots.size(), 1u);
  EXPECT_EQ(plots[0].first, "demo.svg");
  EXPECT_THAT(plots[0].second, HasSubstr(">2.00x</text>"));
  EXPECT_THAT(plots[0].second, HasSubstr("no peer: peerx not installed"));
}

TEST(ReportTest, NoPlotWithoutAnyPeer) {
  Report r("lonely", Options{});
  r.AddFigure(Fig("x", 1, std::nullopt));
  EXPECT_TRUE(r.Plots().empty());
  EXPECT_THAT(r.Markdown(), ::testing::Not(HasSubstr("svg")));
}

TEST(ReportTest, SweepOverThreadsGivesTablesPlotsAndAnAmdahlFit) {
  Report r("tok", Options{});
  Sweep sw{"threads", {"1", "2", "4", "8"}};
  absl::Status s = RunSweep(&r, sw, [&](const std::string& v) -> absl::StatusOr<std::vector<Figure>> {
    double n = std::stod(v);
    Figure f = Fig("encode", 100.0 / (0.25 + 0.75 / n), 500.0);
    f.peer_is_ceiling = true;
    f.peer_name = "memcpy";
    Figure g = Fig("latency", 10.0 / n, std::nullopt);
    g.higher_is_better = false;
    return std::vector<Figure>{f, g};
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(r.figures().size(), 8u);
  EXPECT_EQ(r.figures()[0].sweep_value, "1");
  EXPECT_EQ(r.figures()[7].sweep_value, "8");
  std::string md = r.Markdown();
  EXPECT_THAT(md, HasSubstr("### grist bench tok: sweep over threads\n"));
  EXPECT_THAT(md, HasSubstr("#### encode (MB/s)\n\n| threads | grist (median [min, max]) |"));
  EXPECT_THAT(md, HasSubstr("| 1 | 100 MB/s [90.0, 110] | memcpy | 500 MB/s | 0.2x | - |\n"));
  EXPECT_THAT(md, HasSubstr("![encode against threads](tok-encode.svg)"));
  EXPECT_THAT(md, HasSubstr("Amdahl fit: serial fraction 0.250 (at most 4.0x with unlimited threads); "
                            "measured speedup 2.91x from 1 to 8 threads."));
  EXPECT_THAT(md, HasSubstr("![latency against threads](tok-latency.svg)"));
  auto plots = r.Plots();
  ASSERT_EQ(plots.size(), 2u);
  EXPECT_EQ(plots[0].first, "tok-encode.svg");
  const std::string& svg = plots[0].second;
  EXPECT_THAT(svg, HasSubstr(">grist (median, min-max)</text>"));
  EXPECT_THAT(svg, HasSubstr(">memcpy (ceiling)</text>"));  // constant ceiling: one line
  EXPECT_THAT(svg, HasSubstr(">linear scaling (from first)</text>"));
  EXPECT_THAT(svg, HasSubstr(">Amdahl fit, serial 0.25</text>"));
  EXPECT_THAT(svg, HasSubstr(">threads</text>"));
  EXPECT_THAT(svg, HasSubstr(">encode (MB/s)</text>"));
  EXPECT_EQ(plots[1].first, "tok-latency.svg");
  EXPECT_THAT(plots[1].second, HasSubstr(">lower is better</text>"));
  EXPECT_THAT(plots[1].second, ::testing::Not(HasSubstr("Amdahl")));
}

TEST(ReportTest, SweepGoesOnPastAFailingPointAndFailsOnlyWhenAllDo) {
  Report r("s", Options{});
  Sweep sw{"batch_size", {"1", "2", "3"}};
  auto point = [&](const std::string& v) -> absl::StatusOr<std::vector<Figure>> {
    if (v == "2") return absl::ResourceExhaustedError("out of memory at 2");
    return std::vector<Figure>{Fig("f", 1, 1.0)};
  };
  ASSERT_TRUE(RunSweep(&r, sw, point).ok());
  EXPECT_EQ(r.figures().size(), 2u);
  EXPECT_THAT(r.Markdown(), HasSubstr("Point batch_size=2 failed: out of memory at 2"));
  Report all_bad("s", Options{});
  absl::Status st = RunSweep(&all_bad, sw, [](const std::string&) -> absl::StatusOr<std::vector<Figure>> {
    return absl::InternalError("nope");
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(std::string(st.message()), "every point of the sweep over batch_size failed; last: nope");
}

TEST(ReportTest, FinishWritesOneJsonPerRunTheTableAndThePlot) {
  testing::TempDir tmp;
  Options o;
  o.output_dir = tmp.Join("out");
  o.quick = true;
  for (int run = 0; run < 2; ++run) {
    Report r("demo", o);
    r.AddFigure(Fig("encode", 200, 100.0));
    ASSERT_TRUE(r.Finish().ok());
    EXPECT_EQ(r.written().size(), 3u);
  }
  Env* env = Env::Default();
  auto names = env->ListDir(o.output_dir);
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ElementsAre("demo-0.json", "demo-1.json", "demo.md", "demo.svg"));
  auto json = ReadFileToString(env, tmp.Join("out/demo-1.json"));
  ASSERT_TRUE(json.ok());
  for (const char* key : {"\"cpu_model\"", "\"cpus\"", "\"memory_bytes\"", "\"kernel\"", "\"os\"",
                          "\"fs_type\"", "\"mount\"", "\"block_device\"", "\"gpu\"",
                          "\"grist_version\"", "\"git_commit\"", "\"build_type\"", "\"cxx_flags\"",
                          "\"cuda_build\"", "\"time_utc\"", "\"command\"", "\"quick\": true",
                          "\"samples\"", "\"ratio\": 2"}) {
    EXPECT_THAT(*json, HasSubstr(key)) << key;
  }
  auto md = ReadFileToString(env, tmp.Join("out/demo.md"));
  EXPECT_THAT(*md, HasSubstr("\nMeasured on "));
  EXPECT_THAT(*md, HasSubstr("Full record in the JSON file."));
}

TEST(ReportTest, ABenchThatIgnoresSweepFailsInsteadOfReportingOnePoint) {
  Options o;
  o.sweep = "threads=1,2";
  Report r("deaf", o);
  r.AddFigure(Fig("x", 1, 1.0));
  absl::Status s = r.Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--sweep threads=1,2: grist bench deaf has no flag"));
}

TEST(SweepDriverTest, FiguresRoundTripThroughTheJsonRecord) {
  Report r("rt", Options{});
  r.SetParam("size", "1 MiB");
  r.AddNote("n1");
  Figure a = Fig("enc", 10, 5.0);
  a.peer_is_ceiling = true;
  a.target = ">= 1x";
  Figure b = Fig("lat", 2, std::nullopt);
  b.higher_is_better = false;
  r.AddFigure(a);
  r.AddFigure(b);
  std::vector<std::pair<std::string, std::string>> params;
  std::vector<std::string> notes;
  auto figs = FiguresFromJson(r.Json(), &params, &notes);
  ASSERT_TRUE(figs.ok()) << figs.status();
  ASSERT_EQ(figs->size(), 2u);
  EXPECT_EQ((*figs)[0].name, "enc");
  EXPECT_EQ((*figs)[0].unit, "MB/s");
  EXPECT_THAT((*figs)[0].ours.samples, ElementsAre(9, 10, 11));
  EXPECT_EQ((*figs)[0].ours.median, 10);
  ASSERT_TRUE((*figs)[0].peer.has_value());
  EXPECT_EQ((*figs)[0].peer->median, 5);
  EXPECT_TRUE((*figs)[0].peer_is_ceiling);
  EXPECT_EQ((*figs)[0].target, ">= 1x");
  EXPECT_FALSE((*figs)[1].peer.has_value());
  EXPECT_EQ((*figs)[1].peer_note, "peerx not installed");
  EXPECT_FALSE((*figs)[1].higher_is_better);
  EXPECT_THAT(params, ElementsAre(std::make_pair(std::string("size"), std::string("1 MiB"))));
  EXPECT_THAT(notes, ElementsAre("n1"));
  EXPECT_EQ(FiguresFromJson("{", nullptr, nullptr).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SweepFlag("queue_depth"), "--queue-depth");
}

TEST(OutputDirTest, FullDiskIsAClearError) {
  testing::TempDir tmp;
  FaultInjectionEnv env(Env::Default());
  env.SetDiskSpace(4096);
  absl::Status s = CheckOutputDir(&env, tmp.Join("res"));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("output directory " + tmp.Join("res") + " has no space left for results"));
  // Nothing is left behind.
  EXPECT_TRUE(Env::Default()->ListDir(tmp.Join("res"))->empty());
}

TEST(OutputDirTest, AFileInTheWayIsAClearError) {
  testing::TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("f"), "x").ok());
  absl::Status s = CheckOutputDir(Env::Default(), tmp.Join("f"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(s.message()),
            "output directory " + tmp.Join("f") + " exists and is not a directory");
  EXPECT_TRUE(CheckOutputDir(Env::Default(), tmp.Join("new/deep")).ok());
  EXPECT_TRUE(Env::Default()->IsDirectory(tmp.Join("new/deep")));
}

}  // namespace
}  // namespace grist::bench
