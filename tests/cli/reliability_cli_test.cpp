// End-to-end reliability: big inputs through the readers, and bad input that parses (duplicate
// keys, trailing garbage, non-UTF-8 names, binary bytes, negative fitted costs) refused with a
// one-line message naming the file, exit 1, and no evidence file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_tprobe.hpp"
#include "support/synthetic_checkpoint.hpp"
#include "tprobe/core/gemma4/model_config.hpp"

namespace tprobe::testing {
namespace {

using nlohmann::json;

// A refusal: exit `code`, the message on one line naming `needle`, nothing written at `json`.
void expect_refused(const RunResult& r, int code, const std::string& needle,
                    const std::string& json_path) {
  EXPECT_EQ(r.exit_code, code) << r.err << r.out;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "message is not one line: " << r.err;
  for (char c : r.err) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "raw byte in message: " << r.err;
  }
  EXPECT_FALSE(file_exists(json_path)) << json_path << " written by a failed run";
}

std::string write_gz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  return path;
}

// 26B text decoder + vision tower + enough small extra tower tensors for 10,000 in all, in four
// shards: the index, the headers and the cross-check all see ten thousand names.
TEST(ReliabilityCli, InspectReadsATenThousandTensorShardedCheckpoint) {
  std::string dir = make_temp_dir();
  const core::ModelConfig config = core::embedded_model("gemma4-26b-a4b");
  testing_support::SyntheticOptions opt;
  opt.shards = 4;
  opt.vision_tower = true;
  std::vector<core::TensorMeta> tensors = testing_support::synthetic_tensors(config, opt);
  ASSERT_LT(tensors.size(), 10000u);
  for (std::size_t i = tensors.size(), k = 0; i < 10000; ++i, ++k) {
    tensors.push_back(
        {"model.vision_tower.extra." + std::to_string(k) + ".weight", core::DType::kBF16, {4}});
  }
  testing_support::write_checkpoint(dir, config, tensors, opt);
  std::string path = dir + "-inspect.json";  // not inside the input folder
  RunResult r = run_tprobe({"inspect", "--checkpoint", dir, "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(path));
  int64_t counted = 0;
  for (const auto& b : doc["results"]["blocks"]) counted += b["tensors"].get<int64_t>();
  EXPECT_EQ(counted, 10000);
  EXPECT_EQ(doc["results"]["source"]["files"].size(), 4u);
  EXPECT_EQ(doc["results"]["text_params"], 25233141760);
  std::filesystem::remove_all(dir);
}

TEST(ReliabilityCli, DatasetLineWithARepeatedKeyIsRefused) {
  std::string dir = make_temp_dir();
  for (const char* line :
       {R"({"length": 5, "length": 7})", R"({"source":"a","length":3,"source":"b"})",
        R"({"input_ids":[1],"length":1,"input_ids":[1,2]})"}) {
    write_text(dir + "/d.jsonl", std::string("{\"length\": 2}\n") + line + "\n");
    RunResult r = run_tprobe({"padding", "--dataset", dir + "/d.jsonl", "--json", dir + "/p.json"});
    expect_refused(r, 1, dir + "/d.jsonl:2: key '", dir + "/p.json");
    EXPECT_NE(r.err.find("appears twice"), std::string::npos) << r.err;
  }
}

TEST(ReliabilityCli, BytesAfterTheGzipStreamAreRefused) {
  std::string dir = make_temp_dir();
  const std::string gz = write_gz(dir + "/d.jsonl.gz", "{\"length\": 2}\n{\"length\": 3}\n");
  RunResult ok = run_tprobe({"padding", "--dataset", gz, "--json", dir + "/ok.json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  // Two members concatenated (`cat a.gz b.gz`) are one valid gzip file.
  std::string bytes = read_text(gz);
  write_text(dir + "/two.gz", bytes + bytes);
  RunResult two =
      run_tprobe({"padding", "--dataset", dir + "/two.gz", "--json", dir + "/two.json"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(json::parse(read_text(dir + "/two.json"))["results"]["records"], 4);
  for (const std::string& tail :
       {std::string("garbage\n"), std::string(1, '\0'), std::string("\x1f\x8b not a member")}) {
    write_text(dir + "/bad.gz", bytes + tail);
    RunResult r = run_tprobe({"padding", "--dataset", dir + "/bad.gz", "--json", dir + "/p.json"});
    expect_refused(r, 1, dir + "/bad.gz", dir + "/p.json");
    EXPECT_NE(r.err.find("not gzip follow the gzip stream at byte " + std::to_string(bytes.size())),
              std::string::npos)
        << r.err;
  }
}

TEST(ReliabilityCli, SourceNameThatIsNotUtf8IsRefusedBeforeAnyOutput) {
  std::string dir = make_temp_dir();
  write_text(dir + "/d.csv", "length,source\n3,web\n4,b\xff\xfeo\n");
  for (bool with_json : {true, false}) {
    std::vector<std::string> args = {"padding", "--dataset", dir + "/d.csv"};
    if (with_json) args.insert(args.end(), {"--json", dir + "/p.json"});
    RunResult r = run_tprobe(args);
    expect_refused(r, 1, dir + "/d.csv:3: source name 'b\\xff\\xfeo' is not valid UTF-8",
                   dir + "/p.json");
    EXPECT_EQ(r.out, "") << "a table was printed before the refusal";
  }
}

TEST(ReliabilityCli, BinaryDatasetBytesAreNotEchoedRaw) {
  std::string dir = make_temp_dir();
  write_text(dir + "/d.txt", std::string("12\n\x01\x02\xff\x1b[31mred\n", 16));
  RunResult r = run_tprobe({"padding", "--dataset", dir + "/d.txt", "--json", dir + "/p.json"});
  expect_refused(r, 1, dir + "/d.txt:2", dir + "/p.json");
}

TEST(ReliabilityCli, NegativeFittedCoefficientIsNotACost) {
  std::string dir = make_temp_dir();
  RunResult fit =
      run_tprobe({"scaling-fit", "--csv", std::string(TPROBE_FIXTURES_DIR) + "/example_points.csv",
                  "--json", dir + "/fit.json"});
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  json doc = json::parse(read_text(dir + "/fit.json"));
  doc["results"]["coefficients"]["c_s"] = -3.5;
  write_text(dir + "/neg.json", doc.dump());
  RunResult r =
      run_tprobe({"bucket", "--scaling-fit", dir + "/neg.json", "--json", dir + "/b.json"});
  expect_refused(r, 1, "results.coefficients.c_s is negative", dir + "/b.json");
}

// invocation.options records what was given, exactly: a 64-bit seed past the signed range is the
// unsigned number (not clamped to 2^63-1), and a path that looks like a number stays a string.
TEST(ReliabilityCli, OptionsAreRecordedExactly) {
  std::string dir = make_temp_dir();
  write_text(dir + "/1e5", "5\n7\n");
  RunResult r = run_tprobe({"bucket", "--dataset", dir + "/1e5", "--sampler-seed",
                            "18446744073709551615",
                            "--seeds", "1", "--sweep", "8", "--json", dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(read_text(dir + "/b.json"));
  const json& o = doc["invocation"]["options"];
  ASSERT_TRUE(o["sampler-seed"].is_number_unsigned()) << o.dump();
  EXPECT_EQ(o["sampler-seed"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_TRUE(o["dataset"].is_string()) << o.dump();
  EXPECT_TRUE(o["batch"].is_number_integer()) << o.dump();
}

// Two outputs of one run naming the same file (also spelled differently) are a usage error before
// anything runs: nothing is written, and the file that was there is left as it was.
TEST(ReliabilityCli, TwoOutputsNamingOneFileAreRefused) {
  const std::string dir = make_temp_dir();
  write_text(dir + "/l.txt", "100\n200\n300\n");
  write_text(dir + "/keep.json", "untouched\n");
  RunResult same = run_tprobe({"bucket", dir + "/l.txt", "--json", dir + "/keep.json",
                               "--emit-order", dir + "/./keep.json"});
  EXPECT_EQ(same.exit_code, 2) << same.out << same.err;
  EXPECT_NE(same.err.find("--emit-order and --json name the same file"), std::string::npos)
      << same.err;
  EXPECT_EQ(read_text(dir + "/keep.json"), "untouched\n");
  EXPECT_EQ(same.out.find("bucket"), std::string::npos) << "ran before refusing: " << same.out;
  RunResult apart = run_tprobe({"bucket", dir + "/l.txt", "--json", dir + "/b.json",
                                "--emit-order", dir + "/order.jsonl"});
  EXPECT_EQ(apart.exit_code, 0) << apart.err;
  EXPECT_TRUE(file_exists(dir + "/order.jsonl"));
  RunResult profile = run_tprobe({"profile", "--device", "cpu", "--widths", "16", "--json",
                                  dir + "/p.json", "--raw-trace", dir + "/p.json"});
  EXPECT_EQ(profile.exit_code, 2) << profile.err;
  EXPECT_FALSE(file_exists(dir + "/p.json"));
}

// Issue 46: nlohmann's lexer ends its input at a NUL byte, so "DOCUMENT\0ANOTHER" passed the
// trailing-text check of every JSON reader and the second document was ignored. Through the CLI,
// each JSON input (a checkpoint's config.json and its index, a --config file, an adapter's
// adapter_config.json, an evidence file) with a NUL after its document is refused in one line
// naming the file (exit 1); the same file ending in whitespace still reads (negative control).
// `report`, which notes an unreadable evidence file and goes on, notes it.
TEST(ReliabilityCli, NulByteAfterAJsonDocumentIsRefusedByEveryReader) {
  namespace fs = std::filesystem;
  const std::string fixtures = TPROBE_FIXTURES_DIR;
  const std::string dir = make_temp_dir();
  const std::string ck = dir + "/ck", ad = dir + "/ad", sh = dir + "/sh", ev = dir + "/ev";
  for (const std::string& d : {ck, ad, sh, ev}) fs::create_directories(d);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(fixtures + "/gemma4-tiny-hf/" + f, ck + "/" + f);
  }
  for (const char* f : {"adapter_config.json", "adapter_model.safetensors"}) {
    fs::copy_file(fixtures + "/adapters/after-step/" + f, ad + "/" + f);
  }
  testing_support::SyntheticOptions opt;
  opt.shards = 2;
  testing_support::write_synthetic_checkpoint(sh, core::embedded_model("gemma4-tiny"), opt);
  fs::copy_file(fixtures + "/profile_points.json", ev + "/profile.json");
  struct Case {
    std::string file;
    std::vector<std::string> args;
    std::string source;  // how the reader names the file ("" : the path itself)
  };
  const std::vector<Case> cases = {
      {ck + "/config.json", {"inspect", "--checkpoint", ck}, ""},
      {ck + "/config.json", {"flops", "--config", ck + "/config.json"}, ""},
      {ck + "/config.json", {"mask", ck + "/config.json"}, ""},
      {sh + "/model.safetensors.index.json", {"inspect", "--checkpoint", sh}, ""},
      {ad + "/adapter_config.json", {"lora-gate", ad}, ""},
      {ev + "/profile.json",
       {"scaling-fit", "--profile", ev + "/profile.json", "--batch", "2"},
       "evidence file '" + ev + "/profile.json'"},
  };
  const std::string nul(1, '\0');
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[0] + " reading " + c.file);
    const std::string doc = read_text(c.file);
    for (const std::string& bad : {doc + nul + doc, doc + nul, doc + "\n" + nul + "{}\n"}) {
      write_text(c.file, bad);
      RunResult r = run_tprobe(c.args);
      expect_refused(r, 1,
                     (c.source.empty() ? c.file : c.source) + ": not valid JSON at byte " +
                         std::to_string(bad.find('\0') + 1),
                     dir + "/never-written.json");
      EXPECT_NE(r.err.find("NUL byte"), std::string::npos) << r.err;
    }
    write_text(c.file, doc + " \n\n");
    RunResult r = run_tprobe(c.args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    write_text(c.file, doc);
  }
  // `report` notes an evidence file it cannot read and draws the others: the NUL is that note.
  ASSERT_EQ(run_tprobe({"flops", "--model", "gemma4-tiny", "--json", ev + "/flops.json"}).exit_code,
            0);
  const std::string doc = read_text(ev + "/flops.json");
  for (const std::string& text : {doc + nul + doc, doc + "\n"}) {
    write_text(ev + "/flops.json", text);
    RunResult r = run_tprobe({"report", ev + "/flops.json", ev + "/profile.json", "--html",
                              dir + "/r.html", "--markdown", dir + "/r.md"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string md = read_text(dir + "/r.md");
    const bool noted = md.find("flops.json: not read") != std::string::npos &&
                       md.find("NUL byte") != std::string::npos;
    EXPECT_EQ(noted, text.find('\0') != std::string::npos) << md;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tprobe::testing
