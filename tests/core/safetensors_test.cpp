// safetensors reader/writer: exact layouts, round trips, and every broken-header case.
#include "tprobe/core/io/safetensors.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/out_of_memory.hpp"
#include "test_paths.hpp"
#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

std::string raw_file(const std::string& dir, const std::string& name, const std::string& header,
                     uint64_t data_bytes, int64_t declared_len = -1) {
  std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  uint64_t n = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(prefix), 8);
  out << header;
  out << std::string(static_cast<size_t>(data_bytes), '\0');
  return path;
}

// Expects open() to throw an Error whose message holds every one of `needles`.
void expect_error(const std::string& path, std::vector<std::string> needles) {
  try {
    SafetensorsFile::open(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << " in: " << msg;
  }
}

TEST(Safetensors, DTypeSizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kF16), 2);
  EXPECT_EQ(dtype_size(DType::kF32), 4);
  EXPECT_EQ(dtype_size(DType::kF64), 8);
  EXPECT_EQ(dtype_size(DType::kI64), 8);
  EXPECT_EQ(dtype_size(DType::kI32), 4);
  EXPECT_EQ(dtype_size(DType::kU8), 1);
  EXPECT_EQ(dtype_size(DType::kBool), 1);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1);
  EXPECT_EQ(*parse_dtype("F8_E4M3"), DType::kF8E4M3);
  EXPECT_STREQ(to_string(DType::kBF16), "BF16");
  EXPECT_FALSE(parse_dtype("bf16").has_value());
  EXPECT_TRUE(dtype_is_supported(DType::kBF16));
  EXPECT_FALSE(dtype_is_supported(DType::kI64));
  EXPECT_EQ(*dtype_from_torch_name("bfloat16"), DType::kBF16);
}

TEST(Safetensors, HandWrittenHeaderParses) {
  // F32 [2, 3] = 24 bytes at [0, 24); BF16 [4] = 8 bytes at [24, 32); scalar I64 at [32, 40).
  std::string dir = testing_support::temp_dir();
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
      R"("s":{"dtype":"I64","shape":[],"data_offsets":[32,40]}})";
  std::string path = raw_file(dir, "x.safetensors", header, 40);
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.header_size(), header.size());
  EXPECT_EQ(f.data_start(), 8 + header.size());
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "a");  // header order kept
  EXPECT_EQ(f.tensor("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.tensor("a").numel(), 6);
  EXPECT_EQ(f.tensor("b").nbytes(), 8u);
  EXPECT_EQ(f.tensor("s").numel(), 1);
  EXPECT_EQ(f.tensor("s").dtype, DType::kI64);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.read("b").size(), 8u);
  EXPECT_EQ(f.find("zzz"), nullptr);
  try {
    f.read("zzz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zzz"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

TEST(Safetensors, WriteReadRoundTripAllDtypes) {
  std::string dir = testing_support::temp_dir();
  std::vector<float> f32 = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  std::vector<uint16_t> bf16 = {0x3f80, 0x4000, 0x4040};
  std::vector<int64_t> i64 = {-5, 7};
  std::vector<uint8_t> u8 = {1, 2, 3};
  std::vector<uint8_t> f8 = {9, 8, 7, 6, 5};
  std::vector<double> f64 = {0.5};
  std::vector<TensorToWrite> ts = {
      {{"u8", DType::kU8, {3}}, u8.data()},       {{"bf16", DType::kBF16, {3}}, bf16.data()},
      {{"f32", DType::kF32, {2, 3}}, f32.data()}, {{"f8", DType::kF8E4M3, {5}}, f8.data()},
      {{"i64", DType::kI64, {2}}, i64.data()},    {{"zeros", DType::kF16, {4}}, nullptr},
      {{"f64", DType::kF64, {1, 1}}, f64.data()}, {{"empty", DType::kF32, {0, 3}}, nullptr},
  };
  std::string path = dir + "/rt.safetensors";
  write_safetensors(path, ts, {{"format", "pt"}, {"note", "x"}});
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.data_start() % 8, 0u);
  // 3 + 6 + 24 + 5 + 16 + 8 + 8 = 70 data bytes.
  EXPECT_EQ(f.file_size(), f.data_start() + 70);
  EXPECT_EQ(f.metadata().at("note"), "x");
  for (const auto& t : ts) {
    const TensorInfo& info = f.tensor(t.meta.name);
    EXPECT_EQ(info.dtype, t.meta.dtype);
    EXPECT_EQ(info.shape, t.meta.shape);
    const std::vector<std::byte> bytes = f.read(t.meta.name);
    const ByteSpan span{bytes.data(), bytes.size()};
    ASSERT_EQ(span.size, t.meta.nbytes());
    // Natural alignment of every tensor in the file.
    EXPECT_EQ((f.data_start() + info.begin) % static_cast<uint64_t>(dtype_size(info.dtype)), 0u)
        << t.meta.name;
    if (t.data) {
      EXPECT_EQ(std::memcmp(span.data, t.data, span.size), 0) << t.meta.name;
    } else {
      for (size_t i = 0; i < span.size; ++i) ASSERT_EQ(span.data[i], std::byte{0});
    }
  }
  // Moving keeps the file open for reads.
  SafetensorsFile moved = std::move(f);
  EXPECT_EQ(std::memcmp(moved.read("f32").data(), f32.data(), 24), 0);
}

TEST(Safetensors, SparseZeroTensorsTakeNoDiskBlocks) {
  std::string dir = testing_support::temp_dir();
  std::string path = dir + "/sparse.safetensors";
  // 1 GiB of zeros, never written.
  write_safetensors(path, {{{"big", DType::kBF16, {512, 1024, 1024}}, nullptr}});
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size),
            SafetensorsFile::open(path).data_start() + (1ull << 30));
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 1ull << 20);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, WriterRefusesDuplicatesAndLeavesNothing) {
  std::string dir = testing_support::temp_dir();
  std::string path = dir + "/dup.safetensors";
  EXPECT_THROW(write_safetensors(
                   path, {{{"a", DType::kF32, {1}}, nullptr}, {{"a", DType::kF32, {1}}, nullptr}}),
               Error);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  EXPECT_THROW(write_safetensors(dir + "/no-such-dir/x.safetensors", {}), Error);
}

TEST(Safetensors, RandomLayoutsRoundTripContiguously) {
  std::mt19937 rng(5);
  std::string dir = testing_support::temp_dir();
  const DType dtypes[] = {DType::kBF16, DType::kF32, DType::kU8, DType::kI64, DType::kF16};
  for (int round = 0; round < 20; ++round) {
    std::vector<TensorToWrite> ts;
    int n = 1 + static_cast<int>(rng() % 12);
    uint64_t bytes = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<int64_t> shape;
      int rank = static_cast<int>(rng() % 4);
      for (int r = 0; r < rank; ++r) shape.push_back(static_cast<int64_t>(rng() % 5));
      ts.push_back({{"t" + std::to_string(i), dtypes[rng() % 5], shape}, nullptr});
      bytes += ts.back().meta.nbytes();
    }
    std::string path = dir + "/r" + std::to_string(round) + ".safetensors";
    write_safetensors(path, ts);
    SafetensorsFile f = SafetensorsFile::open(path);
    ASSERT_EQ(f.tensors().size(), ts.size());
    EXPECT_EQ(f.file_size() - f.data_start(), bytes);
    uint64_t covered = 0;
    for (const auto& t : f.tensors()) covered += t.end - t.begin;
    EXPECT_EQ(covered, bytes);
  }
}

TEST(SafetensorsBroken, TooShortForTheLengthPrefix) {
  std::string dir = testing_support::temp_dir();
  std::string path = dir + "/short.safetensors";
  std::ofstream(path) << "abc";
  expect_error(path, {path, "truncated", "3 bytes"});
}

TEST(SafetensorsBroken, HeaderLongerThanFile) {
  std::string dir = testing_support::temp_dir();
  std::string path = raw_file(dir, "h.safetensors", "{}", 0, 4096);
  expect_error(path, {path, "4096", "longer than the rest of the file"});
}

// A length pointing past the header's object into the data section is the length's fault, not
// a JSON error on the data bytes (issue 23); a '}' inside a tensor name does not end the object,
// and trailing spaces (the format's padding) are still accepted.
TEST(SafetensorsBroken, HeaderLengthIntoTheData) {
  std::string dir = testing_support::temp_dir();
  const std::string header = R"({"a}b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string path = raw_file(dir, "into.safetensors", header, 8,
                              static_cast<int64_t>(header.size()) + 4);
  expect_error(path, {path, "header length " + std::to_string(header.size() + 4),
                      "runs past the header's JSON object",
                      "ends after " + std::to_string(header.size()) + " bytes"});
  path = raw_file(dir, "padded.safetensors", header + "    ", 8);
  EXPECT_EQ(SafetensorsFile::open(path).tensors().size(), 1u);
}

TEST(SafetensorsBroken, AbsurdHeaderLength) {
  std::string dir = testing_support::temp_dir();
  std::string path = raw_file(dir, "a.safetensors", "{}", 0, int64_t{1} << 40);
  expect_error(path, {path, "absurd"});
}

TEST(SafetensorsBroken, NotJson) {
  std::string dir = testing_support::temp_dir();
  std::string path = raw_file(dir, "j.safetensors", "{\"a\": [1, 2", 0);
  expect_error(path, {path, "not valid JSON"});
  path = raw_file(dir, "arr.safetensors", "[1, 2, 3]", 0);
  expect_error(path, {path, "must be a JSON object"});
}

TEST(SafetensorsBroken, UnknownDtypeNamesTensor) {
  std::string dir = testing_support::temp_dir();
  std::string path = raw_file(dir, "d.safetensors",
                              R"({"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", 2);
  expect_error(path, {path, "'w'", "Q4_K"});
}

TEST(SafetensorsBroken, ShapeByteSizeMismatch) {
  std::string dir = testing_support::temp_dir();
  // BF16 [3, 4] needs 24 bytes; the offsets span 20.
  std::string path = raw_file(dir, "s.safetensors",
                              R"({"w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,20]}})", 20);
  expect_error(path, {path, "'w'", "needs 24 bytes", "span 20"});
}

TEST(SafetensorsBroken, TruncatedDataSection) {
  std::string dir = testing_support::temp_dir();
  std::string path = dir + "/t.safetensors";
  write_safetensors(path, {{{"a", DType::kF32, {4}}, nullptr}, {{"b", DType::kF32, {8}}, nullptr}});
  struct stat st {};
  ::stat(path.c_str(), &st);
  ASSERT_EQ(::truncate(path.c_str(), st.st_size - 4), 0);
  expect_error(path, {path, "'b'", "truncated"});
}

TEST(SafetensorsBroken, OverlappingOffsets) {
  std::string dir = testing_support::temp_dir();
  std::string path = raw_file(dir, "o.safetensors",
                              R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12);
  expect_error(path, {path, "'b'", "overlaps", "'a'"});
}

TEST(SafetensorsBroken, HoleAndTrailingBytes) {
  std::string dir = testing_support::temp_dir();
  std::string hole = raw_file(dir, "hole.safetensors",
                              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                              12);
  expect_error(hole, {hole, "'b'", "hole"});
  std::string trailing = raw_file(dir, "trail.safetensors",
                                  R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 9);
  expect_error(trailing, {trailing, "5 trailing bytes"});
}

TEST(SafetensorsBroken, DuplicateNames) {
  std::string dir = testing_support::temp_dir();
  std::string path = raw_file(dir, "dup.safetensors",
                              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                              8);
  expect_error(path, {path, "'a'", "twice"});
  path = raw_file(dir, "dup2.safetensors",
                  R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", 4);
  expect_error(path, {path, "'dtype'", "twice"});
}

TEST(SafetensorsBroken, MalformedEntries) {
  std::string dir = testing_support::temp_dir();
  struct Case {
    const char* header;
    const char* needle;
  } cases[] = {
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "before begin"},
      {R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "data_offsets"},
      {R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "shape"},
      {R"({"a":{"shape":[1],"data_offsets":[0,4]}})", "dtype"},
      {R"({"a":[1,2]})", "must be an object"},
      {R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "__metadata__"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})",
       "overflows"},
  };
  int i = 0;
  for (const auto& c : cases) {
    std::string path = raw_file(dir, "m" + std::to_string(i++) + ".safetensors", c.header, 4);
    expect_error(path, {path, c.needle});
  }
}

TEST(SafetensorsBroken, HeaderParserNamesTensorWithoutFiles) {
  EXPECT_THROW(parse_safetensors_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                        3, "mem"),
               Error);
  SafetensorsHeader h = parse_safetensors_header(R"({})", 0, "mem");
  EXPECT_TRUE(h.tensors.empty());
}

// A reader's allocation that fails is the read error, naming the file and the bytes asked (the
// header's here; profile's raw traces alike), exit 1 (issue 33). Tested on the conversion itself:
// under ASan operator new reports and aborts instead of throwing std::bad_alloc, and ASan's
// shadow memory does not start under an RLIMIT_AS small enough to fail a reader's allocation.
TEST(Safetensors, AnAllocationThatFailsIsAReadErrorNamingTheBytesAsked) {
  try {
    detail::allocating("m.safetensors", 123456789, []() -> std::string { throw std::bad_alloc(); });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "out of memory reading m.safetensors (123456789 bytes asked)");
    EXPECT_EQ(e.code(), ExitCode::kError);
  }
  EXPECT_EQ(detail::allocating("m.safetensors", 3, [] { return std::string(3, 'a'); }), "aaa");
}

// A list that grows with its input grows by doubling through allocating(): the bytes of the
// growth are what a failure names (16 elements first, then twice the capacity).
TEST(Safetensors, AGrowingListAsksForTwiceItsCapacityAndNamesThatOnFailure) {
  std::vector<int64_t> v;
  detail::room_for_one(v, "d.jsonl");
  EXPECT_EQ(v.capacity(), 16u);
  v.resize(16);
  detail::room_for_one(v, "d.jsonl");
  EXPECT_EQ(v.capacity(), 32u);
  v.resize(20);
  detail::room_for_one(v, "d.jsonl");  // room left: nothing asked
  EXPECT_EQ(v.capacity(), 32u);
}

// A smaller allocation of a streaming read that fails names the file and how far the read got.
TEST(Safetensors, ASmallAllocationThatFailsInAStreamingReadNamesHowFarItRead) {
  try {
    detail::reading("t.json", [] { return uint64_t{4096}; },
                    []() -> int { throw std::bad_alloc(); });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "out of memory reading t.json (a small allocation failed after 4096 bytes of it)");
    EXPECT_EQ(e.code(), ExitCode::kError);
  }
  EXPECT_EQ(detail::reading("t.json", [] { return uint64_t{0}; }, [] { return 7; }), 7);
}

// Issue 46: tensor bytes are read with pread, never through a mapping (a mapped file that shrinks
// kills the process with SIGBUS). A file that shrinks, grows or is rewritten in place after open()
// is the one-line Error "<path> changed while it was read"; an untouched file reads the bytes it
// was written with, through every read entry point.
class SafetensorsChanged : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::temp_dir();
    path_ = dir_ + "/w.safetensors";
    a_.resize(1024);
    b_.resize(512);
    for (std::size_t i = 0; i < a_.size(); ++i) a_[i] = 0.25f * static_cast<float>(i);
    for (std::size_t i = 0; i < b_.size(); ++i) b_[i] = static_cast<uint16_t>(i * 3 + 1);
    write_safetensors(path_, {{{"a", DType::kF32, {32, 32}}, a_.data()},
                              {{"b", DType::kBF16, {512}}, b_.data()}});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The Error of `read`, checked to be the one line "<path> changed while it was read...".
  template <typename Read>
  std::string changed_error(Read&& read) {
    try {
      read();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path_ + " changed while it was read", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      return msg;
    }
    ADD_FAILURE() << "no error reading " << path_;
    return "";
  }

  std::string dir_, path_;
  std::vector<float> a_;
  std::vector<uint16_t> b_;
};

TEST_F(SafetensorsChanged, UntouchedFileReadsItsBytesThroughEveryEntryPoint) {
  SafetensorsFile f = SafetensorsFile::open(path_);
  const std::vector<std::byte> a = f.read("a");
  ASSERT_EQ(a.size(), a_.size() * 4);
  EXPECT_EQ(std::memcmp(a.data(), a_.data(), a.size()), 0);
  std::vector<uint16_t> b(b_.size());
  f.read_into("b", b.data(), b.size() * 2);
  EXPECT_EQ(b, b_);
  // One read over both tensors (a staging buffer's) is the two tensors' bytes in file order.
  const TensorInfo& first = f.tensors()[0].begin < f.tensors()[1].begin ? f.tensors()[0]
                                                                         : f.tensors()[1];
  const TensorInfo& second = &first == &f.tensors()[0] ? f.tensors()[1] : f.tensors()[0];
  std::vector<std::byte> both(f.file_size() - f.data_start());
  f.read_data(0, both.data(), both.size());
  const std::vector<std::byte> x = f.read(first.name), y = f.read(second.name);
  EXPECT_EQ(std::memcmp(both.data(), x.data(), x.size()), 0);
  EXPECT_EQ(std::memcmp(both.data() + x.size(), y.data(), y.size()), 0);
  // Read twice, the same bytes.
  EXPECT_EQ(f.read("a"), a);
  // Wrong sizes and spans outside the data section are errors, not reads.
  EXPECT_THROW(f.read_into("b", b.data(), 2), Error);
  EXPECT_THROW(f.read_data(both.size() - 4, both.data(), 8), Error);
  EXPECT_THROW(f.read_data(UINT64_MAX, both.data(), 8), Error);
}

TEST_F(SafetensorsChanged, TruncatedAfterOpenIsAnErrorBeforeAndInsideTheTensor) {
  SafetensorsFile f = SafetensorsFile::open(path_);
  const TensorInfo& last =
      f.tensors()[0].end > f.tensors()[1].end ? f.tensors()[0] : f.tensors()[1];
  const TensorInfo& early = &last == &f.tensors()[0] ? f.tensors()[1] : f.tensors()[0];
  // Cut the file in the middle of the last tensor.
  ASSERT_EQ(::truncate(path_.c_str(),
                       static_cast<off_t>(f.data_start() + (last.begin + last.end) / 2)),
            0);
  // The read runs into the end of the file.
  std::string msg = changed_error([&] { f.read(last.name); });
  EXPECT_NE(msg.find("it ends at byte"), std::string::npos) << msg;
  // A tensor wholly before the cut reads fully, but the file is not the one opened.
  msg = changed_error([&] { f.read(early.name); });
  EXPECT_NE(msg.find("bytes now"), std::string::npos) << msg;
  // Into a caller's buffer alike; and to nothing at all.
  std::vector<std::byte> buf(last.end - last.begin);
  changed_error([&] { f.read_into(last.name, buf.data(), buf.size()); });
  ASSERT_EQ(::truncate(path_.c_str(), 0), 0);
  changed_error([&] { f.read_data(0, buf.data(), 1); });
}

TEST_F(SafetensorsChanged, TruncatedThroughAnOpenDescriptorIsAnError) {
  SafetensorsFile f = SafetensorsFile::open(path_);
  const int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(f.data_start())), 0);  // every tensor gone
  ::close(fd);
  changed_error([&] { f.read("a"); });
  changed_error([&] { f.read("b"); });
}

TEST_F(SafetensorsChanged, GrownOrRewrittenInPlaceIsAnError) {
  {
    SafetensorsFile f = SafetensorsFile::open(path_);
    std::ofstream(path_, std::ios::app | std::ios::binary) << "more";
    changed_error([&] { f.read("a"); });
  }
  write_safetensors(path_, {{{"a", DType::kF32, {32, 32}}, a_.data()},
                            {{"b", DType::kBF16, {512}}, b_.data()}});
  SafetensorsFile f = SafetensorsFile::open(path_);
  // Same size, other bytes, and (set explicitly, so the test does not hang on the clock's
  // granularity) another modification time: a rewrite in place.
  const int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const char zeros[16] = {};
  ASSERT_EQ(::pwrite(fd, zeros, sizeof zeros, static_cast<off_t>(f.data_start())), 16);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_sec += 7;
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
  const std::string msg = changed_error([&] { f.read("a"); });
  EXPECT_NE(msg.find("modification time"), std::string::npos) << msg;
  // Negative control: the file as it is now, opened afresh, reads (the zeros included).
  SafetensorsFile again = SafetensorsFile::open(path_);
  const std::vector<std::byte> a = again.read("a");
  EXPECT_EQ(a.size(), a_.size() * 4);
}

}  // namespace
}  // namespace tprobe::core
