// The materialised mask check: the engine's masks pass, and broken masks are caught — a window off
// by one, a leaked future key, a padded key left visible, a hole compensated by an extra key.
#include <gtest/gtest.h>

#include <algorithm>

#include "tprobe/model/attention.hpp"
#include "tprobe/model/attention_mask.hpp"
#include "tprobe/model/engine.hpp"

namespace tprobe::model {

// The engine works in engine's request and result types.
using namespace engine;
namespace {

bool has_kind(const MaskTensorCheck& c, const std::string& kind) {
  return std::find(c.kinds.begin(), c.kinds.end(), kind) != c.kinds.end();
}

const torch::Device kCpu(torch::kCPU);

// Every check runs twice: the CPU byte scan and the tensor reductions (the CUDA path), both on
// the CPU.
class MaskScanTest : public ::testing::TestWithParam<MaskScan> {
 protected:
  MaskTensorCheck check(const torch::Tensor& mask, int64_t window,
                        const std::vector<int64_t>& lengths) {
    return check_mask_tensor(mask, window, lengths, 2048, GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(BothScans, MaskScanTest,
                         ::testing::Values(MaskScan::kBytes, MaskScan::kTensor),
                         [](const ::testing::TestParamInfo<MaskScan>& p) {
                           return p.param == MaskScan::kBytes ? "bytes" : "tensor";
                         });

// The reference: the band written out key by key, row by row, in plain loops.
int64_t naive_violations(const torch::Tensor& mask, int64_t window, int64_t len) {
  torch::Tensor m = mask.select(0, 0).select(0, 0).contiguous();
  const int64_t s = m.size(0);
  const bool* p = m.data_ptr<bool>();
  int64_t bad = 0;
  for (int64_t i = 0; i < s; ++i) {
    bool row_bad = false;
    for (int64_t j = 0; j < s; ++j) {
      const bool want = j <= i && j < len && (window == 0 || j > i - window);
      row_bad = row_bad || p[i * s + j] != want;
    }
    bad += row_bad ? 1 : 0;
  }
  return bad;
}

TEST_P(MaskScanTest, EngineMasksPass) {
  for (int64_t window : {0, 8}) {
    MaskTensorCheck unpadded =
        check_mask_tensor(causal_bool_mask(64, window, kCpu), window, {64, 64}, /*row_block=*/7,
                          GetParam());
    EXPECT_TRUE(unpadded.ok()) << unpadded.detail;
    EXPECT_EQ(unpadded.rows_checked, 64);  // one [1,1,S,S] mask, identical rows checked once
    EXPECT_EQ(unpadded.max_allowed_per_row, window ? 8 : 64);
    EXPECT_EQ(unpadded.saturates_at_row, window ? 7 : 63);

    const std::vector<int64_t> lengths = {64, 40};
    torch::Tensor padded = attention_bool_mask(64, window, lengths, kCpu);
    ASSERT_EQ(padded.sizes().vec(), (std::vector<int64_t>{2, 1, 64, 64}));
    MaskTensorCheck c = check_mask_tensor(padded, window, lengths, 16, GetParam());
    EXPECT_TRUE(c.ok()) << c.detail;
    EXPECT_EQ(c.rows_checked, 128);
    // Window 8: padded queries 47..63 of row 1 see no key; full layers never empty a row.
    EXPECT_EQ(c.fully_masked_rows, window ? 64 - 47 : 0);
  }
}

TEST_P(MaskScanTest, WindowOffByOneIsCaught) {
  MaskTensorCheck wide = check(causal_bool_mask(64, 9, kCpu), 8, {64});
  EXPECT_FALSE(wide.ok());
  EXPECT_EQ(wide.first_bad_row, 8);
  EXPECT_EQ(wide.violating_rows, 64 - 8);
  EXPECT_TRUE(has_kind(wide, "outside_window")) << wide.detail;
  MaskTensorCheck narrow = check(causal_bool_mask(64, 7, kCpu), 8, {64});
  EXPECT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.first_bad_row, 7);
  EXPECT_TRUE(has_kind(narrow, "missing_key")) << narrow.detail;
}

TEST_P(MaskScanTest, FutureKeyIsCaught) {
  torch::Tensor m = causal_bool_mask(64, 8, kCpu).clone();
  m.index_put_({0, 0, 10, 11}, true);
  MaskTensorCheck c = check(m, 8, {64});
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.violating_rows, 1);
  EXPECT_EQ(c.first_bad_row, 10);
  EXPECT_TRUE(has_kind(c, "future_key")) << c.detail;
  // A whole upper triangle (a non-causal mask) is caught on every row but the last.
  MaskTensorCheck all = check(torch::ones({1, 1, 32, 32}, torch::kBool), 0, {32});
  EXPECT_EQ(all.violating_rows, 31);
  EXPECT_EQ(all.first_bad_row, 0);
}

TEST_P(MaskScanTest, PaddedKeyVisibleIsCaught) {
  // The unpadded mask used for a padded batch: row 1's queries 40.. see padded keys.
  MaskTensorCheck c = check(causal_bool_mask(64, 0, kCpu), 0, {64, 40});
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.first_bad_batch_row, 1);
  EXPECT_EQ(c.first_bad_row, 40);
  EXPECT_EQ(c.violating_rows, 24);
  EXPECT_TRUE(has_kind(c, "padded_key")) << c.detail;
}

TEST_P(MaskScanTest, HoleCompensatedByAnExtraKeyIsCaught) {
  // Same count as the band, same ends, but one key moved: only the run count catches it.
  torch::Tensor m = causal_bool_mask(64, 8, kCpu).clone();
  m.index_put_({0, 0, 20, 15}, false);
  m.index_put_({0, 0, 20, 3}, true);
  MaskTensorCheck c = check(m, 8, {64});
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.first_bad_row, 20);
  EXPECT_TRUE(has_kind(c, "outside_window"));
  EXPECT_TRUE(has_kind(c, "missing_key"));
}

TEST_P(MaskScanTest, RandomFlipsAgreeWithTheNaiveReference) {
  // Widths that are not multiples of the 8-byte words the scan reads, flips near both row ends,
  // inside the band and far outside it.
  torch::manual_seed(7);
  for (int64_t s : {1, 7, 13, 64, 67}) {
    for (int64_t window : {0, 1, 5}) {
      for (int trial = 0; trial < 6; ++trial) {
        torch::Tensor m = causal_bool_mask(s, window, kCpu).clone();
        const int64_t len = trial % 2 == 0 ? s : std::max<int64_t>(1, s / 2);
        if (len < s) {
          m.slice(3, len).fill_(false);  // a correctly padded mask, then flips on top of it
        }
        const int flips = trial / 2;
        torch::Tensor at = torch::randint(s * s, {flips}, torch::kLong);
        for (int64_t k = 0; k < flips; ++k) {
          const int64_t idx = at[k].item<int64_t>();
          m.view({-1})[idx] = m.view({-1})[idx].logical_not();
        }
        MaskTensorCheck c = check(m, window, {len});
        EXPECT_EQ(c.violating_rows, naive_violations(m, window, len))
            << "s=" << s << " window=" << window << " trial=" << trial;
        EXPECT_EQ(c.rows_checked, s);
      }
    }
  }
}

TEST(MaskCheck, ByteScanRefusesADeviceMask) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::Tensor m = causal_bool_mask(16, 0, torch::Device(torch::kCUDA, 0));
  EXPECT_THROW(check_mask_tensor(m, 0, {16}, 2048, MaskScan::kBytes), std::exception);
  EXPECT_TRUE(check_mask_tensor(m, 0, {16}).ok());  // kAuto takes the tensor reductions there
}

TEST(MaskCheck, RunMaskCheckReportsEachLayerType) {
  MaskCheckOptions o;
  o.width = 4096;
  o.lengths = {4096, 2048};
  o.padded_input = true;
  o.layers = {{"sliding_attention", 1024}, {"full_attention", 0}};
  MaskCheckResult r = run_mask_check(o);
  EXPECT_TRUE(r.ok);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].check.max_allowed_per_row, 1024);
  EXPECT_EQ(r.rows[0].check.saturates_at_row, 1023);
  EXPECT_EQ(r.rows[0].check.fully_masked_rows, 4096 - (2048 + 1023));
  EXPECT_EQ(r.rows[1].check.max_allowed_per_row, 4096);
  EXPECT_EQ(r.rows[1].check.shape, (std::vector<int64_t>{2, 1, 4096, 4096}));
  o.device = "tpu";
  EXPECT_THROW(run_mask_check(o), std::exception);
}

TEST(MaskBackends, CpuBuildSaysNotSupported) {
  MaskBackendsOptions o;
  o.width = 64;
  o.shapes = {{core::LayerType::kSliding, 8, 4, 2, 16}};
  MaskBackendsResult r = run_mask_backends(o);
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_FALSE(r.supported);
  EXPECT_FALSE(r.reason.empty());
  EXPECT_TRUE(r.rows.empty());
}

}  // namespace
}  // namespace tprobe::model
