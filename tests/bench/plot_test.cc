// SVG plots: tick choice, text escaping, and the structure of both plot kinds.
#include "bench/plot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace grist::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(PlotTest, NiceTicks) {
  EXPECT_THAT(NiceTicks(0, 97, 5), ElementsAre(0, 20, 40, 60, 80, 100));
  EXPECT_THAT(NiceTicks(0, 1, 4), ElementsAre(0, 0.25, 0.5, 0.75, 1));
  EXPECT_THAT(NiceTicks(0, 1200, 6), ElementsAre(0, 200, 400, 600, 800, 1000, 1200));
  EXPECT_THAT(NiceTicks(-3, 7, 5), ElementsAre(-4, -2, 0, 2, 4, 6, 8));
  EXPECT_THAT(NiceTicks(5, 5, 5), ElementsAre(5, 5.2, 5.4, 5.6, 5.8, 6));
}

TEST(PlotTest, TickTextAndEscaping) {
  EXPECT_EQ(TickText(0), "0");
  EXPECT_EQ(TickText(2.5), "2.5");
  EXPECT_EQ(TickText(1200), "1200");
  EXPECT_EQ(TickText(1.5e6), "1.5e+06");
  EXPECT_EQ(XmlEscape("a<b & \"c\" 'd'>\x01"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt; ");
}

TEST(PlotTest, LinePlotHasAxesLegendCeilingAndErrorBars) {
  LinePlot p;
  p.title = "write <GB/s>";
  p.x_label = "queue depth";
  p.y_label = "write (GB/s)";
  p.log2_x = true;
  Series s;
  s.label = "grist";
  s.x = {1, 2, 4, 8};
  s.y = {1, 1.8, 2.4, 2.5};
  s.y_low = {0.9, 1.7, 2.3, 2.4};
  s.y_high = {1.1, 1.9, 2.5, 2.6};
  p.series.push_back(s);
  p.lines.push_back({"fio (ceiling)", 2.6, "#2ca02c"});
  p.footnotes.push_back("note & more");
  std::string svg = RenderLinePlot(p);
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
  EXPECT_THAT(svg, HasSubstr(">write &lt;GB/s&gt;</text>"));
  EXPECT_THAT(svg, HasSubstr(">queue depth</text>"));
  EXPECT_THAT(svg, HasSubstr("rotate(-90)\">write (GB/s)</text>"));
  EXPECT_THAT(svg, HasSubstr(">fio (ceiling)</text>"));
  EXPECT_THAT(svg, HasSubstr(">note &amp; more</text>"));
  // One tick label per swept value on a log2 axis.
  for (const char* t : {">1</text>", ">2</text>", ">4</text>", ">8</text>"}) {
    EXPECT_THAT(svg, HasSubstr(t));
  }
  EXPECT_EQ(Count(svg, "<polyline"), 1);
  EXPECT_EQ(Count(svg, "<circle"), 5);  // 4 points + the legend's marker
  // Error bars: a vertical line and two caps per point.
  EXPECT_EQ(Count(svg, "stroke=\"#1f77b4\" stroke-width=\"1.2\""), 12);
  // The ceiling spans the plot area, dash-dotted.
  EXPECT_THAT(svg, HasSubstr("stroke=\"#2ca02c\" stroke-width=\"2.0\" stroke-dasharray=\"10,3,2,3\""));
}

TEST(PlotTest, CategoricalAxisAndNaNPointsAreSkipped) {
  LinePlot p;
  p.x_categories = {"buffered", "odirect"};
  Series s;
  s.x = {0, 1};
  s.y = {1, std::nan("")};
  p.series.push_back(s);
  std::string svg = RenderLinePlot(p);
  EXPECT_THAT(svg, HasSubstr(">buffered</text>"));
  EXPECT_THAT(svg, HasSubstr(">odirect</text>"));
  EXPECT_EQ(Count(svg, "<polyline"), 0);  // one finite point: no line
  EXPECT_EQ(Count(svg, "<circle"), 2);    // the point + legend
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(PlotTest, RatioBars) {
  RatioBars b;
  b.title = "t";
  b.bars.push_back({"encode", 2.0, "200 vs 100 MB/s"});
  b.bars.push_back({"write", 0.5, "1 vs 2 GB/s"});
  b.bars.push_back({"decode", std::nan(""), "no peer: x"});
  std::string svg = RenderRatioBars(b);
  EXPECT_THAT(svg, HasSubstr(">2.00x</text>"));
  EXPECT_THAT(svg, HasSubstr(">0.50x</text>"));
  EXPECT_THAT(svg, HasSubstr(">no peer</text>"));
  EXPECT_THAT(svg, HasSubstr(">peer = 1.0</text>"));
  EXPECT_EQ(Count(svg, "fill=\"#1f77b4\"/>"), 1);  // better than peer
  EXPECT_EQ(Count(svg, "fill=\"#ff7f0e\"/>"), 1);  // worse
  EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
}

}  // namespace
}  // namespace grist::bench
