// End-to-end `tprobe report`: real evidence from the probes plus hand-written files for probes that
// write shapes the report draws (tests/fixtures/report/), then the page in a real browser: Debian's
// chromium in headless mode loads it from disk (skipped with a message when chromium is absent).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>

#include "run_tprobe.hpp"
#include "tprobe/core/evidence/profile_point.hpp"
#include "tprobe/core/report/svg_chart.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

const std::string kFixtures = TPROBE_FIXTURES_DIR;

// Evidence from real probe runs (small inputs) and the hand-written fixtures, in one directory.
std::string evidence_dir() {
  static std::string dir;
  if (!dir.empty()) return dir;
  dir = make_temp_dir();
  auto run = [&](std::vector<std::string> args, const std::string& name, int want) {
    args.push_back("--json");
    args.push_back(dir + "/" + name);
    RunResult r = run_tprobe(args);
    EXPECT_EQ(r.exit_code, want) << name << ": " << r.err;
  };
  const std::string lengths = kFixtures + "/lengths/small.jsonl";
  run({"env"}, "env.json", 0);
  run({"padding", "--dataset", lengths}, "padding.json", 0);
  run({"scaling-fit", "--batch", "2", "--point", "2048:1.776", "--point", "8192:11.570", "--point",
       "16384:35.017", "--widths-from", dir + "/padding.json"},
      "scaling-fit.json", 0);
  run({"bucket", "--dataset", lengths, "--scaling-fit", dir + "/scaling-fit.json"}, "bucket.json",
      0);
  run({"flops", "--step-time", "16.39", "--lengths", "16384,8192"}, "flops.json", 0);
  run({"inspect", "--model", "gemma4-26b-a4b"}, "inspect.json", 0);
  run({"lora-gate", kFixtures + "/adapters/attention-only-optimizer", "--checkpoint",
       kFixtures + "/gemma4-tiny-hf"},
      "lora-gate.json", 3);
  for (const char* f : {"profile.json", "kernels.json", "mask.json", "future-schema.json",
                        "not-evidence.json", "broken.json"}) {
    write_text(dir + "/" + f, read_text(kFixtures + "/report/" + f));
  }
  return dir;
}

// The figure ids the page must hold for this evidence set.
const std::vector<std::string> kFigures = {
    "fig-inspect-blocks",         "fig-padding-lengths",
    "fig-bucket-waste",           "fig-bucket-time",
    "fig-bucket-sources",         "fig-profile-time",
    "fig-profile-expert-load",    "fig-scaling-fit-time",
    "fig-kernels-categories",     "fig-kernels-top-kernels",
    "fig-kernels-sum-union-wall", "fig-kernels-kernel-phases",
    "fig-flops-components",       "fig-flops-mfu",
    "fig-lora-gate-norms"};

struct Built {
  std::string html, md;
  json evidence;
};

const Built& built() {
  static Built b;
  if (!b.html.empty()) return b;
  const std::string dir = evidence_dir();
  const std::string out = make_temp_dir();
  RunResult r = run_tprobe({"report", dir, "--html", out + "/report.html", "--markdown",
                            out + "/report.md", "--json", out + "/report-evidence.json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  b.html = out + "/report.html";
  b.md = out + "/report.md";
  b.evidence = json::parse(read_text(out + "/report-evidence.json"));
  return b;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

TEST(ReportCli, EveryFigureNamesItsFileAndFields) {
  const std::string html = read_text(built().html);
  for (const auto& id : kFigures) {
    EXPECT_NE(html.find("<figure id=\"" + id + "\">"), std::string::npos) << id;
  }
  std::set<std::string> ids;
  for (const auto& s : built().evidence["results"]["sections"]) {
    for (const auto& f : s["figures"]) {
      ids.insert(f["id"].get<std::string>());
      EXPECT_FALSE(f["fields"].empty()) << f.dump();
      EXPECT_EQ(f["source"], s["source"]);
    }
  }
  for (const auto& id : kFigures) EXPECT_TRUE(ids.count(id)) << id;
  EXPECT_EQ(count(html, "<svg "), ids.size());
  EXPECT_EQ(count(html, "<figcaption>"), ids.size());
  EXPECT_EQ(count(html, "Source: <code>"), ids.size() + count(html, "<table class=\"data\">"));
}

TEST(ReportCli, SelfContainedNoScriptsNoNetwork) {
  const std::string html = read_text(built().html);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  // The only absolute URL is the SVG namespace name, which is never fetched.
  std::string rest =
      std::regex_replace(html, std::regex("xmlns=\"http://www\\.w3\\.org/2000/svg\""), "");
  EXPECT_EQ(rest.find("http:"), std::string::npos);
  EXPECT_EQ(rest.find("https:"), std::string::npos);
}

TEST(ReportCli, UnknownSchemaToolVersionAndBrokenFilesAreNotes) {
  const std::string html = read_text(built().html);
  EXPECT_NE(html.find("schema version 2 is not the one this tprobe reads"), std::string::npos);
  EXPECT_NE(html.find("written by tprobe 9.0.0"), std::string::npos);
  EXPECT_NE(html.find("broken.json: not read"), std::string::npos);
  EXPECT_NE(html.find("not-evidence.json: not a tprobe evidence file"), std::string::npos);
  // Provenance: every evidence file is listed with its command and device.
  EXPECT_NE(html.find("id=\"provenance\""), std::string::npos);
  EXPECT_NE(html.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(html.find("sliding: sdpa(mask=bool); full: sdpa(is_causal)"), std::string::npos);
  const std::string md = read_text(built().md);
  EXPECT_NE(md.find("## Provenance"), std::string::npos);
  EXPECT_NE(md.find("**evidence says no**"), std::string::npos);  // lora-gate partial, mask
}

TEST(ReportCli, DirectoryDefaultsAndEmptyInput) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/a.json", read_text(kFixtures + "/report/kernels.json"));
  RunResult r = run_tprobe({"report", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(dir + "/report.html"));
  EXPECT_TRUE(file_exists(dir + "/report.md"));
  const std::string empty = make_temp_dir();
  r = run_tprobe({"report", empty});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no tprobe evidence files"), std::string::npos) << r.err;
  EXPECT_EQ(run_tprobe({"report", "/nonexistent/x.json"}).exit_code, 1);  // like every missing input
}

// A CPU profile has no caching allocator: its points carry null peak memory (the fixture is a CPU
// run), and the report says "not measured" instead of drawing a chart at 0 GiB. With the peaks a
// CUDA run writes (allocated, and reserved above it), the same file draws the figure.
TEST(ReportCli, ProfileMemoryFigureOnlyWithMeasuredPeaks) {
  nlohmann::json doc = nlohmann::json::parse(read_text(kFixtures + "/report/profile.json"));
  const std::string dir = make_temp_dir();
  write_text(dir + "/profile.json", doc.dump(2));
  RunResult r = run_tprobe({"report", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string md = read_text(dir + "/report.md");
  EXPECT_NE(md.find("peak memory not measured"), std::string::npos) << md;
  EXPECT_EQ(md.find("Peak memory against width"), std::string::npos) << md;
  ASSERT_FALSE(doc["results"]["points"].empty());
  for (auto& p : doc["results"]["points"]) {
    ASSERT_TRUE(p["peak_allocated_bytes"].is_null());
    p["peak_allocated_bytes"] = int64_t{3} << 30;
    p["peak_reserved_bytes"] = int64_t{4} << 30;
  }
  const std::string measured = make_temp_dir();
  write_text(measured + "/profile.json", doc.dump(2));
  r = run_tprobe({"report", measured});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  md = read_text(measured + "/report.md");
  EXPECT_NE(md.find("Peak memory against width"), std::string::npos) << md;
  EXPECT_EQ(md.find("peak memory not measured"), std::string::npos) << md;
  EXPECT_EQ(md.find("profile figures not drawn"), std::string::npos) << md;
}

// The points' and the sweep's tables come from the field tables: every field of the point table
// that the file's points hold as a scalar (not null in one of them at least) is a row; a list
// (samples_s), an object (step) or a field profile adds beside the table (intended_flops) is not.
TEST(ReportCli, ProfileFieldTablesHoldEveryScalarField) {
  const json doc = json::parse(read_text(kFixtures + "/report/profile.json"));
  const std::string html = read_text(built().html);
  const std::size_t at = html.find("id=\"point-fields\"");
  ASSERT_NE(at, std::string::npos);
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  std::set<std::string> declared;
  for (const auto& d : core::evidence::field_docs<core::PointFigures>()) declared.insert(d.path);
  ASSERT_TRUE(declared.count("samples_s") && declared.count("loss_targets"));
  std::size_t rows = 0;
  for (const auto& [key, v] : doc["results"]["points"][0].items()) {
    bool shown = declared.count(key) > 0;
    bool any = false;
    for (const auto& p : doc["results"]["points"]) {
      shown = shown && !p[key].is_array() && !p[key].is_object();
      any = any || !p[key].is_null();
    }
    const bool row = table.find("<tr><td>" + key + "</td>") != std::string::npos;
    EXPECT_EQ(row, shown && any) << key;
    rows += shown && any;
  }
  EXPECT_GT(rows, 10u);
  EXPECT_EQ(table.find("<tr><td>intended_flops</td>"), std::string::npos);
  EXPECT_EQ(table.find("<tr><td>samples_s</td>"), std::string::npos);
  EXPECT_EQ(count(table, "<tr>") - 1, rows);  // the header, then one row per field
  const std::size_t sweep = html.find("id=\"sweep-fields\"");
  ASSERT_NE(sweep, std::string::npos);
  EXPECT_NE(html.find("<td>" + doc["results"]["config_digest"].get<std::string>() + "</td>", sweep),
            std::string::npos);
}

// Profile evidence the reader refuses (a hand-written point of an older shape, missing fields)
// draws no profile figure and says which field, instead of drawing what it can guess.
TEST(ReportCli, ProfileEvidenceTheReaderRefusesIsANote) {
  nlohmann::json doc = nlohmann::json::parse(read_text(kFixtures + "/report/profile.json"));
  doc["results"]["points"][1].erase("loss_targets");
  const std::string dir = make_temp_dir();
  write_text(dir + "/profile.json", doc.dump(2));
  RunResult r = run_tprobe({"report", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = read_text(dir + "/report.md");
  EXPECT_NE(md.find("profile figures not drawn: results points\\[1\\]: missing field 'loss_targets'"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("Step time against width"), std::string::npos) << md;
}

// The edge search (issue 44): the probes on a batch x width grid with the measured edges and the
// model's predictions as lines, and a table of each edge; a search whose probes are not an array
// (a hostile file) is refused by the reader: nothing of the profile is drawn, and a note says where.
TEST(ReportCli, ProfileEdgeSearchIsDrawn) {
  const std::string dir = make_temp_dir();
  nlohmann::json doc =
      nlohmann::json::parse(read_text(kFixtures + "/report/profile-edge-search.json"));
  write_text(dir + "/profile.json", doc.dump(2));
  RunResult r = run_tprobe({"report", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = read_text(dir + "/report.html");
  const std::string md = read_text(dir + "/report.md");
  EXPECT_NE(html.find("id=\"fig-profile-edge-search-0\""), std::string::npos);
  // Both edges and both predictions are lines, labelled with their values.
  const auto& s = doc["results"]["memory_fit"]["budgets"][0]["searches"];
  for (const auto& e : s) {
    for (const char* key : {"edge", "predicted"}) {
      EXPECT_NE(html.find(core::axis_number(e[key].get<double>()) + " ("), std::string::npos)
          << key;
    }
  }
  EXPECT_NE(html.find("What fits, measured"), std::string::npos);
  EXPECT_NE(md.find("Edge search under a 40.0 GiB budget"), std::string::npos) << md;
  // Not vacuous: without the searches there is no such figure.
  const std::string bare = make_temp_dir();
  doc["results"]["memory_fit"]["budgets"][0]["searches"][0]["probes"] = "many";
  doc["results"]["memory_fit"]["budgets"][0]["searches"][1]["probes"] = 7;
  doc["results"]["memory_fit"]["budgets"][0]["searches"][1]["edge"] = nullptr;
  doc["results"]["memory_fit"]["budgets"][0]["searches"][0]["edge"] = nullptr;
  doc["results"]["memory_fit"]["budgets"][0]["searches"][0]["predicted"] = nullptr;
  doc["results"]["memory_fit"]["budgets"][0]["searches"][1]["predicted"] = nullptr;
  write_text(bare + "/profile.json", doc.dump(2));
  r = run_tprobe({"report", bare});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(bare + "/report.html").find("fig-profile-edge-search-0"), std::string::npos);
  // The reader refuses the file, and the page says where.
  EXPECT_NE(read_text(bare + "/report.md").find("budgets\\[0\\] searches\\[0\\]: field 'probes' must be an array"),
            std::string::npos);
}

// ---- a real browser ----

std::string chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(c, X_OK) == 0) return c;
  }
  return "";
}

int shell(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const char* kFlags =
    " --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions "
    "--allow-file-access-from-files"
    " --disable-background-networking --enable-logging=stderr --v=0 --virtual-time-budget=2000";

TEST(ReportBrowser, ChromiumLoadsThePageWithoutConsoleErrors) {
  const std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP() << "chromium is not installed (apt-get install chromium): browser test skipped";
  const std::string out = make_temp_dir();
  const std::string cmd = browser + kFlags + " --user-data-dir=" + out +
                          "/profile --dump-dom file://" + built().html + " > " + out +
                          "/dom.html 2> " + out + "/stderr.txt";
  ASSERT_EQ(shell("timeout 180 " + cmd), 0) << read_text(out + "/stderr.txt");
  const std::string dom = read_text(out + "/dom.html");
  const std::string log = read_text(out + "/stderr.txt");
  // Chromium logs page console messages as "CONSOLE(...)" / "Uncaught" lines.
  EXPECT_EQ(log.find("CONSOLE"), std::string::npos) << log;
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  // The parsed DOM holds every figure as an SVG element with drawn content.
  for (const auto& id : kFigures) EXPECT_NE(dom.find("id=\"" + id + "\""), std::string::npos) << id;
  EXPECT_EQ(count(dom, "<svg "), count(read_text(built().html), "<svg "));
  EXPECT_GT(count(dom, "<circle class=\"series point\""), 10u);
  EXPECT_GT(count(dom, "<rect class=\"bar\""), 20u);
  EXPECT_GT(count(dom, "<polyline class=\"series line\""), 2u);
  EXPECT_GT(count(dom, "<path class=\"cross\""), 0u);  // the OOM point and inert modules
}

uint32_t be32(const std::string& s, std::size_t at) {
  return (static_cast<uint32_t>(static_cast<unsigned char>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

TEST(ReportBrowser, ScreenshotHasTheWindowSizeAndContent) {
  const std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP() << "chromium is not installed (apt-get install chromium): browser test skipped";
  const std::string out = make_temp_dir();
  const std::string png = out + "/shot.png";
  const std::string cmd = browser + kFlags + " --user-data-dir=" + out +
                          "/profile --hide-scrollbars" +
                          " --window-size=1280,2400 --screenshot=" + png + " file://" +
                          built().html + " > " + out + "/log.txt 2>&1";
  ASSERT_EQ(shell("timeout 180 " + cmd), 0) << read_text(out + "/log.txt");
  ASSERT_TRUE(file_exists(png)) << read_text(out + "/log.txt");
  const std::string bytes = read_text(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(bytes, 16), 1280u);
  EXPECT_EQ(be32(bytes, 20), 2400u);
  // A blank or single-colour page compresses to a few KB; charts and text do not.
  EXPECT_GT(bytes.size(), 60u * 1024) << "screenshot looks empty";
}

}  // namespace
}  // namespace tprobe::testing
