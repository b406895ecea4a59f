// Inline SVG charts drawn by tprobe itself (no scripts, no fonts, no network): x/y charts with
// lines, points and spread bars, and horizontal bar charts. Used by the report.
#pragma once

#include <string>
#include <vector>

namespace tprobe::core {

// One drawn series. Points draw markers (with a vertical spread bar where y_low/y_high are given);
// lines connect the points in x order. `marked` points (e.g. OOM) are drawn as crosses at the
// bottom of the plot, with `marked_label` in the legend.
struct ChartSeries {
  enum class Kind { kLine, kPoints };
  std::string label;
  Kind kind = Kind::kPoints;
  std::vector<double> x, y;
  std::vector<double> y_low, y_high;  // empty, or one per point
  bool dashed = false;
  int color = 0;  // palette index
  // A line drawn as a stacked area: filled down to the previous filled series (the same x), or to
  // the plot's bottom for the first one. Give the series in stacking order with cumulative y.
  bool fill_below = false;
};

struct ChartMarker {  // a vertical or horizontal reference line with a label
  bool vertical = true;
  double at = 0;
  std::string label;
};

struct XYChart {
  std::string title;
  std::string x_label, y_label;  // with units, e.g. "width (tokens per sequence)"
  bool log2_x = false;           // ticks at powers of two
  bool y_from_zero = true;
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;
  std::vector<double> crosses_x;  // points that have no y (OOM, failed): crosses on the x axis
  std::string crosses_label;
  int width = 640, height = 340;
};

struct BarItem {
  std::string label;
  std::vector<double> values;  // one per BarChart::series (stacked side by side); none: no bar
  bool highlight = false;      // drawn with a red outline and a "!" (e.g. architecture mismatch)
  std::string note;            // drawn right of the bar
};

// Horizontal bars, one row per item, one bar per series within a row.
struct BarChart {
  std::string title;
  std::string value_label;          // axis label with unit
  std::vector<std::string> series;  // legend names; one value per series in each item
  std::vector<BarItem> items;
  std::string highlight_label;  // legend text for highlighted rows
  // true: one bar per item, its values stacked left to right in series order (a total split
  // into parts); false: one bar per series side by side.
  bool stacked = false;
  int width = 640;
  // Room right of the plot for the notes beside the longest bars (px).
  int note_room = 110;
  // A shaded vertical band across every row from band_low to band_high, with a line at each edge
  // and band_label in the legend (e.g. the baseline's min–max: the noise band). Drawn when
  // `band` is set and both ends are finite with band_low <= band_high.
  bool band = false;
  double band_low = 0, band_high = 0;
  std::string band_label;
};

// A grid of cells, one row per row label, shaded from white (0) to dark blue (the largest value);
// a non-finite value is drawn grey. The legend gives the scale's ends.
struct HeatMap {
  std::string title;
  std::string x_label, y_label;  // e.g. "expert", "layer"
  std::string value_label;       // the shaded quantity with its unit
  std::vector<std::string> row_labels;
  std::vector<std::vector<double>> values;  // rows × columns (rows may differ in length)
  int width = 640;
};

// The SVG element (no XML prolog), with role="img" and a <title> for accessibility.
std::string render_svg(const XYChart& chart);
std::string render_svg(const BarChart& chart);
std::string render_svg(const HeatMap& map);

// Text escaped for HTML/SVG character data and attribute values.
std::string xml_escape(const std::string& text);
// A compact axis number: 2048 -> "2,048", 0.0123 -> "0.0123", 1.5e9 -> "1.5e+09".
std::string axis_number(double v);

}  // namespace tprobe::core
