// Every evidence key has one home: no source under src/, include/ or probes/ outside core/evidence
// names a key the evidence tables declare (evidence::declared_fields(), so the list cannot drift
// from the tables). A key is named by a string literal equal to it, in code (comments skipped);
// an identifier or a longer text that holds the key is not a name of it. Keys of one word
// ("batch", "model") are left out: as literals they are column heads and messages as often as
// keys, so only keys with an underscore are held. Sources still naming a key (the readers and
// writers not yet moved into core/evidence) are listed in tests/fixtures/evidence-keys-open.txt,
// exactly: a new name fails, and so does a listed one that is gone (the list only shrinks).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

#include "tprobe/core/evidence/fields.hpp"

namespace tprobe::core {
namespace {

namespace fs = std::filesystem;

std::set<std::string> held_keys() {
  std::set<std::string> keys;
  for (const evidence::FieldDoc& d : evidence::declared_fields()) {
    std::string k = d.path.substr(d.path.rfind('.') == std::string::npos ? 0 : d.path.rfind('.') + 1);
    if (k.find('_') != std::string::npos) keys.insert(k);
  }
  return keys;
}

// The string literals of C++ code, comments skipped (a // or /* */ outside a literal).
std::set<std::string> literals(const std::string& code) {
  std::set<std::string> out;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (code.compare(i, 2, "//") == 0) {
      i = code.find('\n', i);
      if (i == std::string::npos) break;
    } else if (code.compare(i, 2, "/*") == 0) {
      i = code.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else if (code[i] == '\'') {
      i = code.find('\'', i + (code[i + 1] == '\\' ? 3 : 2));  // a char literal
      if (i == std::string::npos) break;
    } else if (code[i] == '"') {
      std::string lit;
      for (++i; i < code.size() && code[i] != '"'; ++i) {
        if (code[i] == '\\') lit += code[i++];
        lit += code[i];
      }
      out.insert(lit);
    }
  }
  return out;
}

std::set<std::string> named_keys(const std::string& code, const std::set<std::string>& keys) {
  std::set<std::string> out;
  for (const std::string& lit : literals(code))
    if (keys.count(lit)) out.insert(lit);
  return out;
}

const fs::path kRoot = fs::path(TPROBE_FIXTURES_DIR) / ".." / "..";

TEST(EvidenceKeys, NegativeControls) {
  const std::set<std::string> keys = held_keys();
  ASSERT_TRUE(keys.count("peak_allocated_bytes"));  // from profile's point table
  ASSERT_TRUE(keys.count("lora_parameters"));       // from the sweep's table
  ASSERT_FALSE(keys.count("batch"));                // one word: left out
  ASSERT_TRUE(keys.count("kernel_table"));          // an object's key (KernelTableSlot)
  ASSERT_TRUE(keys.count("alive_at_peak"));         // a group's key (MemoryDevice)
  // A source naming the kernel table's key is caught; one naming it through the declared
  // constant, or a path below it, is not.
  EXPECT_EQ(named_keys("out[\"kernel_table\"] = to_json(t);", keys),
            std::set<std::string>{"kernel_table"});
  EXPECT_EQ(named_keys("jr::object(a, \"alive_at_peak\", w);", keys),
            std::set<std::string>{"alive_at_peak"});
  EXPECT_TRUE(named_keys("out[kKernelTableKey] = j; f(c, kt, \"kernel_table.\");", keys).empty());
  // Caught: a read or a write by the key.
  EXPECT_EQ(named_keys("x = j.at(\"peak_allocated_bytes\");", keys),
            std::set<std::string>{"peak_allocated_bytes"});
  EXPECT_EQ(named_keys("out[\"lora_parameters\"] = n; /* c */ k = \"init_s\";", keys),
            (std::set<std::string>{"init_s", "lora_parameters"}));
  // Not caught: a comment, an identifier, a longer literal, an escaped quote's neighbour.
  EXPECT_TRUE(named_keys("// j.at(\"peak_allocated_bytes\")\n/* \"init_s\" */", keys).empty());
  EXPECT_TRUE(named_keys("int64_t peak_allocated_bytes = 0;", keys).empty());
  EXPECT_TRUE(named_keys("fail(\"{}: peak_allocated_bytes is\", w); s = \"init_s_x\";", keys).empty());
  EXPECT_TRUE(named_keys("c = '\"'; s = \"a\\\"init_s\";", keys).empty());
}

// "path key" for every source under root's src/, include/ and probes/ outside core/evidence that
// names a key.
std::set<std::string> named_outside_evidence(const fs::path& root, const std::set<std::string>& keys) {
  std::set<std::string> found;
  for (const char* top : {"src", "include", "probes"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string rel = fs::relative(e.path(), root).generic_string();
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h")) continue;
      if (rel.rfind("src/core/evidence/", 0) == 0 ||
          rel.rfind("include/tprobe/core/evidence/", 0) == 0)
        continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      for (const std::string& k : named_keys(text.str(), keys)) found.insert(rel + " " + k);
    }
  }
  return found;
}

// The scan itself, on a made-up tree: a view naming "kernel_table" is flagged, core/evidence's
// own files (where the key is declared) and a source naming it through the constant are not.
TEST(EvidenceKeys, TheScanFlagsAViewNamingTheKernelTable) {
  const std::set<std::string> keys = held_keys();
  const fs::path root = fs::temp_directory_path() / ("tprobe-keys-" + std::to_string(::getpid()));
  auto put = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  put("src/core/trace/stats/view.cpp", "out[\"kernel_table\"] = to_json(t);\n");
  put("src/core/trace/stats/clean.cpp", "out[kKernelTableKey] = to_json(t);\n");
  put("src/core/evidence/kernel_table.cpp", "const char k[] = \"kernel_table\";\n");
  put("include/tprobe/core/evidence/kernel_table.hpp", "field(\"alive_at_peak\", ...);\n");
  const std::set<std::string> found = named_outside_evidence(root, keys);
  fs::remove_all(root);
  EXPECT_EQ(found, std::set<std::string>{"src/core/trace/stats/view.cpp kernel_table"});
}

TEST(EvidenceKeys, NamedOnlyInCoreEvidence) {
  const std::set<std::string> keys = held_keys();
  const std::set<std::string> found = named_outside_evidence(kRoot, keys);
  ASSERT_FALSE(found.empty() && keys.empty());
  std::set<std::string> open;
  std::ifstream list(fs::path(TPROBE_FIXTURES_DIR) / "evidence-keys-open.txt");
  ASSERT_TRUE(list.good());
  for (std::string line; std::getline(list, line);)
    if (!line.empty() && line[0] != '#') open.insert(line);
  for (const std::string& f : found)
    EXPECT_TRUE(open.count(f)) << f << ": names an evidence key outside core/evidence";
  for (const std::string& o : open)
    EXPECT_TRUE(found.count(o)) << o << ": listed open but no longer named: remove it from "
                                       "tests/fixtures/evidence-keys-open.txt";
}

}  // namespace
}  // namespace tprobe::core
