// Hand-drawn SVG: axis ranges and "nice" ticks, x/y charts and horizontal bar charts.
#include "tprobe/core/report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tprobe/core/base/table.hpp"

namespace tprobe::core {

namespace {

// Colour-blind-safe palette (Okabe-Ito); red is kept for highlights.
const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                          "#D55E00", "#000000", "#F0E442", "#999999"};
constexpr unsigned kColors = sizeof(kPalette) / sizeof(kPalette[0]);
const char* color(int i) { return kPalette[static_cast<unsigned>(i) % kColors]; }
constexpr const char* kHighlight = "#C00000";
constexpr const char* kFont = "font-family=\"sans-serif\"";
constexpr double kCharW = 7.0;  // a generous average glyph width of 12 px sans-serif

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  // One tick at or above the maximum, so the largest point never sits on the frame.
  if (ticks.empty() || ticks.back() < hi - step * 1e-9) {
    ticks.push_back((ticks.empty() ? lo : ticks.back()) + step);
  }
  return ticks;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(hi >= lo); }
};

std::string fmt_coord(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string axis_number(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  // Large counts (parameters, FLOPs) with a unit prefix: 2.5e13 -> "25 T".
  static const std::pair<double, const char*> kPrefixes[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}};
  if (a >= 1e7) {
    for (const auto& [scale, prefix] : kPrefixes) {
      if (a >= scale) return fmt::format("{:.3g} {}", v / scale, prefix);
    }
  }
  if (a < 1e-3) return fmt::format("{:.3g}", v);
  if (a >= 1000 && std::abs(v - std::round(v)) < 1e-9) {
    return (v < 0 ? "-" : "") + format_count(static_cast<int64_t>(std::llround(a)));
  }
  return fmt::format("{:.4g}", v);
}

// Size: one SVG drawn top to bottom (axes, ticks, series, legend) in one set of coordinates.
std::string render_svg(const XYChart& c) {
  const double left = 72, right = 16, top = 34, bottom = 54;
  std::size_t labelled = 0;  // unlabelled series (a line joining points) get no legend row
  for (const auto& series : c.series) labelled += !series.label.empty();
  const double legend_h = 18.0 * static_cast<double>(labelled + (c.crosses_x.empty() ? 0 : 1));
  const double W = c.width, H = c.height + legend_h;
  const double pw = W - left - right, ph = c.height - top - bottom;

  Range xr, yr;
  for (const auto& s : c.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      xr.add(s.x[i]);
      yr.add(s.y[i]);
      if (i < s.y_low.size()) yr.add(s.y_low[i]);
      if (i < s.y_high.size()) yr.add(s.y_high[i]);
    }
  }
  for (double x : c.crosses_x) xr.add(x);
  for (const auto& m : c.markers) (m.vertical ? xr : yr).add(m.at);
  if (xr.empty()) xr.add(0), xr.add(1);
  if (yr.empty()) yr.add(0), yr.add(1);
  if (c.y_from_zero) yr.add(0);

  auto tx = [&](double v) { return c.log2_x ? std::log2(std::max(v, 1e-300)) : v; };
  double x0 = tx(xr.lo), x1 = tx(xr.hi);
  std::vector<double> xticks;
  if (c.log2_x) {
    x0 = std::floor(x0);
    x1 = std::ceil(x1);
    if (x1 <= x0) x1 = x0 + 1;
    for (double e = x0; e <= x1 + 1e-9; e += std::max(1.0, std::ceil((x1 - x0) / 10))) {
      xticks.push_back(std::pow(2.0, e));
    }
    x0 -= 0.4;  // margin: points at the ends stay off the frame
    x1 += 0.4;
  } else {
    if (x1 <= x0) x0 -= 1, x1 += 1;
    const double pad = (x1 - x0) * 0.04;
    x0 -= pad;
    x1 += pad;
    xticks = nice_ticks(x0, x1, 6);
  }
  std::vector<double> yticks = nice_ticks(yr.lo, yr.hi, 5);
  double y0 = std::min(yr.lo, yticks.front()), y1 = std::max(yr.hi, yticks.back());
  if (y1 <= y0) y1 = y0 + 1;
  auto px = [&](double v) { return left + (tx(v) - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return top + ph - (v - y0) / (y1 - y0) * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" role=\"img\" width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" {2} font-size=\"12\"><title>{3}</title>\n",
      W, H, kFont, xml_escape(c.title));
  s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                   left, xml_escape(c.title));
  s += fmt::format(
      "<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" "
      "stroke=\"#999\"/>\n",
      left, top, fmt_coord(pw), fmt_coord(ph));
  for (double t : yticks) {
    if (t < y0 - 1e-12 || t > y1 + 1e-12) continue;
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#e3e3e3\"/>"
        "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        left, fmt_coord(left + pw), fmt_coord(py(t)), left - 6, fmt_coord(py(t) + 4),
        axis_number(t));
  }
  for (double t : xticks) {
    const double x = px(t);
    if (x < left - 0.5 || x > left + pw + 0.5) continue;
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e3e3e3\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        fmt_coord(x), top, fmt_coord(top + ph), fmt_coord(top + ph + 16), axis_number(t));
  }
  s += fmt::format("<text class=\"x-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   fmt_coord(left + pw / 2), fmt_coord(top + ph + 36), xml_escape(c.x_label));
  s += fmt::format(
      "<text class=\"y-label\" transform=\"translate(16,{}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      fmt_coord(top + ph / 2), xml_escape(c.y_label));
  // Labels of markers of one direction are staggered (vertical: down a line each; horizontal:
  // right by a column each), so that two close markers (an edge beside its prediction) both read.
  int verticals = 0, horizontals = 0;
  for (const auto& m : c.markers) {
    if (m.vertical) {
      const double x = px(m.at);
      const bool right_half = x > left + pw * 0.6;  // the label runs leftward from the line
      s += fmt::format(
          "<line class=\"marker\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#777\" "
          "stroke-dasharray=\"2 3\"/><text x=\"{3}\" y=\"{4}\" fill=\"#555\"{6}>{5}</text>\n",
          fmt_coord(x), top, fmt_coord(top + ph), fmt_coord(right_half ? x - 3 : x + 3),
          top + 24 + 14 * (verticals++ % 8), xml_escape(m.label),
          right_half ? " text-anchor=\"end\"" : "");
    } else {
      const double y = py(m.at);
      s += fmt::format(
          "<line class=\"marker\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#777\" "
          "stroke-dasharray=\"2 3\"/><text x=\"{3}\" y=\"{4}\" fill=\"#555\">{5}</text>\n",
          left, fmt_coord(left + pw), fmt_coord(y), fmt_coord(left + 4 + pw / 3 * (horizontals++ % 3)),
          fmt_coord(y - 14 < top ? y + 13 : y - 3), xml_escape(m.label));
    }
  }
  std::vector<std::pair<double, double>> below;  // the previous filled series' line, in px
  for (const auto& series : c.series) {
    const char* col = color(series.color);
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (std::isfinite(series.x[i]) && std::isfinite(series.y[i])) order.push_back(i);
    }
    if (series.kind == ChartSeries::Kind::kLine) {
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return series.x[a] < series.x[b]; });
      std::string pts;
      for (std::size_t i : order)
        pts += fmt_coord(px(series.x[i])) + "," + fmt_coord(py(series.y[i])) + " ";
      if (series.fill_below && !order.empty()) {
        std::vector<std::pair<double, double>> line;
        for (std::size_t i : order) line.emplace_back(px(series.x[i]), py(series.y[i]));
        std::string poly;
        for (const auto& [x, y] : line) poly += fmt_coord(x) + "," + fmt_coord(y) + " ";
        if (below.empty()) {
          poly += fmt_coord(line.back().first) + "," + fmt_coord(top + ph) + " " +
                  fmt_coord(line.front().first) + "," + fmt_coord(top + ph);
        } else {
          for (auto it = below.rbegin(); it != below.rend(); ++it)
            poly += fmt_coord(it->first) + "," + fmt_coord(it->second) + " ";
        }
        s += fmt::format(
            "<polygon class=\"series area\" fill=\"{}\" fill-opacity=\"0.55\" stroke=\"none\" "
            "points=\"{}\"><title>{}</title></polygon>\n",
            col, poly, xml_escape(series.label));
        below = std::move(line);
      }
      s += fmt::format(
          "<polyline class=\"series line\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} "
          "points=\"{}\"/>\n",
          col, series.fill_below ? "1" : "2", series.dashed ? " stroke-dasharray=\"6 4\"" : "",
          pts);
    } else {
      for (std::size_t i : order) {
        const double x = px(series.x[i]);
        if (i < series.y_low.size() && i < series.y_high.size()) {
          s += fmt::format(
              "<line class=\"spread\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"{3}\"/>"
              "<line x1=\"{4}\" x2=\"{5}\" y1=\"{1}\" y2=\"{1}\" stroke=\"{3}\"/>"
              "<line x1=\"{4}\" x2=\"{5}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\"/>\n",
              fmt_coord(x), fmt_coord(py(series.y_low[i])), fmt_coord(py(series.y_high[i])), col,
              fmt_coord(x - 4), fmt_coord(x + 4));
        }
        s += fmt::format(
            "<circle class=\"series point\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\" "
            "stroke=\"white\"><title>{}: x = {}, y = {}</title></circle>\n",
            fmt_coord(x), fmt_coord(py(series.y[i])), col, xml_escape(series.label),
            axis_number(series.x[i]), axis_number(series.y[i]));
      }
    }
  }
  for (double x : c.crosses_x) {
    const double cx = px(x), cy = top + ph - 8;
    s += fmt::format(
        "<path class=\"cross\" d=\"M{0},{1} L{2},{3} M{0},{3} L{2},{1}\" stroke=\"{4}\" "
        "stroke-width=\"2.5\"><title>{5} at x = {6}</title></path>\n",
        fmt_coord(cx - 6), fmt_coord(cy - 6), fmt_coord(cx + 6), fmt_coord(cy + 6), kHighlight,
        xml_escape(c.crosses_label), axis_number(x));
  }
  double ly = c.height + 2;
  for (const auto& series : c.series) {
    if (series.label.empty()) continue;
    const char* col = color(series.color);
    if (series.kind == ChartSeries::Kind::kLine) {
      s += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" "
          "stroke-width=\"2\"{4}/>",
          left, left + 24, fmt_coord(ly), col, series.dashed ? " stroke-dasharray=\"6 4\"" : "");
    } else {
      s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/>", left + 12,
                       fmt_coord(ly), col);
    }
    s += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n", left + 32,
                     fmt_coord(ly + 4), xml_escape(series.label));
    ly += 18;
  }
  if (!c.crosses_x.empty()) {
    s += fmt::format(
        "<path d=\"M{0},{1} L{2},{3} M{0},{3} L{2},{1}\" stroke=\"{4}\" stroke-width=\"2.5\"/>"
        "<text class=\"legend\" x=\"{5}\" y=\"{6}\">{7}</text>\n",
        left + 6, fmt_coord(ly - 6), left + 18, fmt_coord(ly + 6), kHighlight, left + 32,
        fmt_coord(ly + 4), xml_escape(c.crosses_label));
  }
  s += "</svg>";
  return s;
}

std::string render_svg(const BarChart& c) {
  std::size_t nseries = c.stacked ? 1 : std::max<std::size_t>(1, c.series.size());
  double label_w = 120;
  for (const auto& item : c.items)
    label_w = std::max(label_w,
                       kCharW * static_cast<double>(item.label.size() + (item.highlight ? 2 : 0)));
  label_w = std::min(label_w, c.width * 0.45);
  const double left = label_w + 12, right = std::max(0, c.note_room), top = 34;
  const double bar_h = 14, row_h = bar_h * static_cast<double>(nseries) + 8;
  const bool band = c.band && std::isfinite(c.band_low) && std::isfinite(c.band_high) &&
                    c.band_low <= c.band_high;
  const double legend_h = 18.0 * static_cast<double>((c.series.size() > 1 ? c.series.size() : 0) +
                                                     (c.highlight_label.empty() ? 0 : 1) +
                                                     (band && !c.band_label.empty() ? 1 : 0));
  const double ph = row_h * static_cast<double>(std::max<std::size_t>(1, c.items.size()));
  const double W = c.width, H = top + ph + 40 + legend_h;
  const double pw = W - left - right;
  double hi = 0;
  for (const auto& item : c.items) {
    double total = 0;
    for (double v : item.values) {
      if (!std::isfinite(v)) continue;
      hi = std::max(hi, v);
      total += std::max(0.0, v);
    }
    if (c.stacked) hi = std::max(hi, total);
  }
  if (band) hi = std::max(hi, c.band_high);
  std::vector<double> ticks = nice_ticks(0, hi > 0 ? hi : 1, 5);
  const double x1 = std::max(hi, ticks.back());
  auto px = [&](double v) { return left + (x1 > 0 ? v / x1 : 0) * pw; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart bars\" role=\"img\" width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" {2} font-size=\"12\"><title>{3}</title>\n",
      W, fmt_coord(H), kFont, xml_escape(c.title));
  s += fmt::format("<text x=\"8\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                   xml_escape(c.title));
  for (double t : ticks) {
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e3e3e3\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        fmt_coord(px(t)), top, fmt_coord(top + ph), fmt_coord(top + ph + 14), axis_number(t));
  }
  s += fmt::format("<text class=\"x-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   fmt_coord(left + pw / 2), fmt_coord(top + ph + 32), xml_escape(c.value_label));
  if (band) {  // under the bars: a shaded band and its two edges
    const double x0 = px(std::max(0.0, c.band_low)), x1b = px(std::max(0.0, c.band_high));
    s += fmt::format(
        "<rect class=\"band\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#7f7f7f\" "
        "fill-opacity=\"0.18\"><title>{}: {}–{}</title></rect>\n",
        fmt_coord(x0), top, fmt_coord(x1b - x0), fmt_coord(ph), xml_escape(c.band_label),
        axis_number(c.band_low), axis_number(c.band_high));
    for (double x : {x0, x1b}) {
      s += fmt::format(
          "<line class=\"band-edge\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" "
          "stroke=\"#555555\" stroke-dasharray=\"4 3\"/>\n",
          fmt_coord(x), top, fmt_coord(top + ph));
    }
  }
  double y = top + 4;
  for (const auto& item : c.items) {
    std::string label = item.label;
    const std::size_t max_chars =
        static_cast<std::size_t>(label_w / kCharW) - (item.highlight ? 2 : 0);
    if (label.size() > max_chars && max_chars > 3) label = label.substr(0, max_chars - 1) + "…";
    s += fmt::format(
        "<text class=\"bar-label\" x=\"{}\" y=\"{}\" "
        "text-anchor=\"end\"{}>{}<title>{}</title></text>\n",
        left - 6, fmt_coord(y + row_h / 2), item.highlight ? " fill=\"#C00000\"" : "",
        xml_escape((item.highlight ? "! " : "") + label), xml_escape(item.label));
    double from = 0;  // stacked: where the next segment starts
    for (std::size_t k = 0; k < item.values.size() && c.stacked; ++k) {
      const double v = std::isfinite(item.values[k]) ? std::max(0.0, item.values[k]) : 0;
      if (v <= 0) continue;
      s += fmt::format(
          "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>{}{}: {}</title></rect>\n",
          fmt_coord(px(from)), fmt_coord(y), fmt_coord(std::max(0.5, px(from + v) - px(from))),
          bar_h - 2, color(static_cast<int>(k)), xml_escape(item.label),
          c.series.size() > k ? " (" + xml_escape(c.series[k]) + ")" : "", axis_number(v));
      from += v;
    }
    for (std::size_t k = 0; k < item.values.size() && !c.stacked; ++k) {
      const double v = std::isfinite(item.values[k]) ? item.values[k] : 0;
      s += fmt::format(
          "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}>"
          "<title>{}{}: {}</title></rect>\n",
          left, fmt_coord(y + bar_h * static_cast<double>(k)),
          fmt_coord(std::max(0.5, px(v) - left)), bar_h - 2, color(static_cast<int>(k)),
          item.highlight ? " stroke=\"#C00000\" stroke-width=\"2\"" : "", xml_escape(item.label),
          c.series.size() > k ? " (" + xml_escape(c.series[k]) + ")" : "", axis_number(v));
    }
    if (!item.note.empty()) {
      double end = left;
      for (double v : item.values) end = std::max(end, px(std::isfinite(v) ? v : 0));
      if (c.stacked) end = px(from);
      s += fmt::format("<text class=\"bar-note\" x=\"{}\" y=\"{}\">{}</text>\n", fmt_coord(end + 4),
                       fmt_coord(y + bar_h - 3), xml_escape(item.note));
    }
    y += row_h;
  }
  double ly = top + ph + 52;
  if (c.series.size() > 1) {
    for (std::size_t k = 0; k < c.series.size(); ++k) {
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>"
          "<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n",
          left, fmt_coord(ly - 8), color(static_cast<int>(k)), left + 20, fmt_coord(ly + 1),
          xml_escape(c.series[k]));
      ly += 18;
    }
  }
  if (band && !c.band_label.empty()) {
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"#7f7f7f\" "
        "fill-opacity=\"0.18\" stroke=\"#555555\" stroke-dasharray=\"4 3\"/>"
        "<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n",
        left, fmt_coord(ly - 8), left + 20, fmt_coord(ly + 1), xml_escape(c.band_label));
    ly += 18;
  }
  if (!c.highlight_label.empty()) {
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"none\" stroke=\"#C00000\" "
        "stroke-width=\"2\"/><text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n",
        left, fmt_coord(ly - 8), left + 20, fmt_coord(ly + 1), xml_escape(c.highlight_label));
  }
  s += "</svg>";
  return s;
}

std::string render_svg(const HeatMap& m) {
  std::size_t columns = 0;
  double top = 0;
  for (const auto& row : m.values) {
    columns = std::max(columns, row.size());
    for (double v : row) {
      if (std::isfinite(v)) top = std::max(top, v);
    }
  }
  const std::size_t rows = m.values.size();
  std::size_t label_chars = 1;
  for (const auto& l : m.row_labels) label_chars = std::max(label_chars, l.size());
  const double left = 34 + kCharW * static_cast<double>(label_chars), right = 16, head = 34;
  const double plot_w = std::max(40.0, m.width - left - right);
  const double cw = columns > 0 ? plot_w / static_cast<double>(columns) : plot_w;
  const double ch = rows > 40 ? 8.0 : 14.0;
  const double plot_h = ch * static_cast<double>(rows);
  const double height = head + plot_h + 70;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\"><title>{}</title>",
      m.width, fmt_coord(height), m.width, fmt_coord(height), xml_escape(m.title));
  out += fmt::format("<text x=\"{}\" y=\"18\" {} font-size=\"14\">{}</text>", fmt_coord(left),
                     kFont, xml_escape(m.title));
  // Sequential blues, white at 0: colour-blind safe and legible in greyscale.
  auto shade = [top](double v) -> std::string {
    if (!std::isfinite(v)) return "#bbbbbb";
    const double t = top > 0 ? std::clamp(v / top, 0.0, 1.0) : 0.0;
    auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
    return fmt::format("#{:02x}{:02x}{:02x}", mix(247, 8), mix(251, 48), mix(255, 107));
  };
  for (std::size_t r = 0; r < rows; ++r) {
    const double y = head + ch * static_cast<double>(r);
    if (r < m.row_labels.size() && (rows <= 40 || r % 5 == 0)) {
      out += fmt::format(
          "<text x=\"{}\" y=\"{}\" {} font-size=\"{}\" text-anchor=\"end\">{}</text>",
          fmt_coord(left - 4), fmt_coord(y + ch - 2), kFont, rows > 40 ? 8 : 11,
          xml_escape(m.row_labels[r]));
    }
    for (std::size_t c = 0; c < m.values[r].size(); ++c) {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>",
                         fmt_coord(left + cw * static_cast<double>(c)), fmt_coord(y),
                         fmt_coord(cw), fmt_coord(ch), shade(m.values[r][c]));
    }
  }
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                     "stroke=\"#333\"/>",
                     fmt_coord(left), fmt_coord(head), fmt_coord(cw * static_cast<double>(columns)),
                     fmt_coord(plot_h));
  // Column ticks: about eight, at round expert numbers.
  const std::size_t step = columns <= 16 ? 1 : columns <= 64 ? 8 : 16;
  for (std::size_t c = 0; c < columns; c += step) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" {} font-size=\"10\" text-anchor=\"middle\">{}</text>",
                       fmt_coord(left + cw * (static_cast<double>(c) + 0.5)),
                       fmt_coord(head + plot_h + 12), kFont, c);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" {} font-size=\"12\" text-anchor=\"middle\">{}</text>",
                     fmt_coord(left + plot_w / 2), fmt_coord(head + plot_h + 28), kFont,
                     xml_escape(m.x_label));
  out += fmt::format("<text x=\"12\" y=\"{}\" {} font-size=\"12\" transform=\"rotate(-90 12 {})\" "
                     "text-anchor=\"middle\">{}</text>",
                     fmt_coord(head + plot_h / 2), kFont, fmt_coord(head + plot_h / 2),
                     xml_escape(m.y_label));
  // The legend: the scale's two ends.
  const double ly = head + plot_h + 40;
  for (int i = 0; i <= 10; ++i) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"10\" fill=\"{}\"/>",
                       fmt_coord(left + 12.0 * i), fmt_coord(ly), shade(top * i / 10.0));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" {} font-size=\"11\">{}: 0 to {}</text>",
                     fmt_coord(left + 140), fmt_coord(ly + 9), kFont, xml_escape(m.value_label),
                     axis_number(top));
  out += "</svg>";
  return out;
}

}  // namespace tprobe::core
