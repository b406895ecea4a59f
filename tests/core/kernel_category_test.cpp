// The category table, demangling, short names, families and architecture-from-name, on real
// kernel names as torch.profiler writes them (PyTorch 2.x on Ampere/Hopper).
#include "tprobe/core/trace/stats/kernel_category.hpp"

#include <gtest/gtest.h>

namespace tprobe::core {
namespace {

struct Case {
  const char* name;
  KernelCategory category;
  int32_t sm;
};

// Names seen in PyTorch traces, each with the category a person would give it.
const Case kCases[] = {
    {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<256, 64, 64, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<256, 64, 64, 4, cutlass::bfloat16_t> >, false, "
     "true, false, false, true, true, false, false>(Flash_fwd_params)",
     KernelCategory::kAttention, 0},
    {"fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<"
     "cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, false, 64, 64, 128, false>::Params)",
     KernelCategory::kAttention, 80},
    {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
     KernelCategory::kAttention, 90},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     KernelCategory::kDenseGemm, 90},
    {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", KernelCategory::kDenseGemm, 0},
    {"ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", KernelCategory::kDenseGemm, 80},
    {"cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8",
     KernelCategory::kDenseGemm, 80},
    {"void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, "
     "__nv_bfloat16, true, false, false>(cublasLt::cublasSplitKParams<float>, float const*, "
     "__nv_bfloat16 const*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, "
     "float const*, __nv_bfloat16*, void*, long, float*, int*)",
     KernelCategory::kDenseGemm, 0},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
     "GroupProblemShape<cute::tuple<int, int, int> >, cutlass::gemm::collective::CollectiveMma<"
     "cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized<4, cute::tuple<cute::C<2>, "
     "cute::C<1>, cute::C<1> >, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative> > > >"
     "(cutlass::gemm::kernel::GemmUniversal<...>::Params)",
     KernelCategory::kGroupedGemm, 90},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
     "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
     "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
     "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, "
     "3>)",
     KernelCategory::kElementwise, 0},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
     "at::native::MeanOps<float, "
     "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::"
     "MeanOps<float, float, float, float>, unsigned int, float, 4>)",
     KernelCategory::kReduction, 0},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float, float, float, "
     "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
     KernelCategory::kReduction, 0},
    {"void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, "
     "long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
     KernelCategory::kReduction, 0},
    {"void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
     "{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, ...)",
     KernelCategory::kCopyCast, 0},
    {"void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
     "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(...)",
     KernelCategory::kCopyCast, 0},
    {"void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, "
     "4, at::native::templates::cuda::normal_and_transform<...>(...)",
     KernelCategory::kElementwise, 0},
    {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<"
     "float, 4, (at::native::ADAM_MODE)1, false>, ...>(...)",
     KernelCategory::kElementwise, 0},
    {"void at::native::index_elementwise_kernel<128, 4, ...>(long, ...)",
     KernelCategory::kElementwise, 0},
    {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     KernelCategory::kCommunication, 0},
    // TensorIterator kernels whose template arguments say "nocast" / "LoadWithCast" are not casts.
    {"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
     "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
     "MulFunctor<float> > >(at::TensorIteratorBase&, ...)",
     KernelCategory::kElementwise, 0},
    {"void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul>, 4, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<"
     "1, unsigned int>, at::native::memory::LoadWithCast<2>, at::native::memory::StoreWithCast<1> "
     ">(...)",
     KernelCategory::kElementwise, 0},
    {"void cudnn::fusion::compute_dot_do_o_specialized<true, 256>(void const*, void const*, ...)",
     KernelCategory::kAttention, 0},
    {"void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda("
     "at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, ...)",
     KernelCategory::kCopyCast, 0},
    {"my_custom_triton_free_kernel_v2", KernelCategory::kOther, 0},
    // The kernel's own name decides, not its template arguments or parameters (issue 35): fbgemm's
    // "gemm" and its FixedDivisor parameter made every fbgemm_gpu kernel a GEMM.
    {"void fbgemm_gpu::permute_2D_data_kernel<long, float>(int, int, int, fbgemm_gpu::FixedDivisor, "
     "long const*, long const*, float const*, long*, float*)",
     KernelCategory::kCopyCast, 0},
    {"void fbgemm_gpu::split_embedding_codegen_forward_unweighted_kernel<float, float, 4, 32, long>("
     "at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, "
     "fbgemm_gpu::FixedDivisor, long const*)",
     KernelCategory::kElementwise, 0},
    {"void my_lib::scale_kernel<my_lib::GemmLikeTile<128> >(float*, int)", KernelCategory::kOther,
     0},
    {"void at::native::(anonymous namespace)::fill_gemm_workspace_kernel_v2<float>(float*)",
     KernelCategory::kDenseGemm, 0},
    // A launcher's own name says nothing: its template arguments decide.
    {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
     "flash::CollectiveMainloopFwd<2, cute::tuple<cute::C<1> > > > > >(flash::Params)",
     KernelCategory::kAttention, 90},
    {"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>("
     "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)",
     KernelCategory::kDenseGemm, 80},
    {"void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, false>(int, "
     "int, long, float*, float*)",
     KernelCategory::kDenseGemm, 0},
    // Triton's prefix is the kind: a fused norm's pointwise kernel is pointwise.
    {"triton_poi_fused_native_layer_norm_0", KernelCategory::kElementwise, 0},
    {"triton_red_fused__to_copy_mean_pow_0", KernelCategory::kReduction, 0},
    {"triton_per_fused_add_mul_rsqrt_sum_1", KernelCategory::kReduction, 0},
    {"triton_tem_fused_mm_0", KernelCategory::kDenseGemm, 0},
};

TEST(KernelCategory, RealNamesLandWhereAPersonWouldPutThem) {
  for (const Case& c : kCases) {
    EXPECT_EQ(to_string(categorize(ActivityKind::kKernel, c.name)),
              std::string(to_string(c.category)))
        << c.name;
    EXPECT_EQ(kernel_architecture(c.name).sm, c.sm) << c.name;
  }
}

TEST(KernelCategory, MemcpyAndMemsetByKindWhateverTheName) {
  EXPECT_EQ(categorize(ActivityKind::kMemcpy, "Memcpy DtoD (Device -> Device)"),
            KernelCategory::kMemcpyMemset);
  EXPECT_EQ(categorize(ActivityKind::kMemset, "gemm-looking memset"),
            KernelCategory::kMemcpyMemset);
}

TEST(KernelCategory, NamesRoundTrip) {
  for (KernelCategory c : all_kernel_categories()) {
    ASSERT_TRUE(parse_kernel_category(to_string(c)).has_value());
    EXPECT_EQ(*parse_kernel_category(to_string(c)), c);
  }
  EXPECT_FALSE(parse_kernel_category("gemm").has_value());
  EXPECT_EQ(all_kernel_categories().size(), static_cast<std::size_t>(kKernelCategoryCount));
}

TEST(KernelCategory, EveryRuleIsLowerCaseAndDocumented) {
  for (const CategoryRule& r : category_rules()) {
    const std::string p = r.pattern;
    for (char ch : p) EXPECT_FALSE(ch >= 'A' && ch <= 'Z') << p;  // matching is on lower case
    EXPECT_GT(std::string(r.why).size(), 5u) << p;
  }
}

// Expected strings from binutils' c++filt, not from the code under test.
TEST(Demangle, ItaniumNames) {
  EXPECT_EQ(demangle("_ZN2at6native18elementwise_kernelILi128ELi2EEEvi"),
            "void at::native::elementwise_kernel<128, 2>(int)");
  EXPECT_EQ(demangle("_ZN7cutlass13device_kernelIN4gemm6KernelEEEvNT_6ParamsE"),
            "void cutlass::device_kernel<gemm::Kernel>(gemm::Kernel::Params)");
  EXPECT_EQ(demangle("_Z3fooi"), "foo(int)");
}

TEST(Demangle, OtherNamesUnchanged) {
  EXPECT_EQ(demangle("nvjet_tst_128x256"), "nvjet_tst_128x256");
  EXPECT_EQ(demangle("_Zgarbage!"), "_Zgarbage!");
  EXPECT_EQ(demangle(""), "");
  EXPECT_EQ(demangle("_Z"), "_Z");
}

TEST(ShortName, ElidesDeepTemplatesAndParameters) {
  EXPECT_EQ(short_kernel_name(kCases[9].name, 200),
            "at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor…, "
            "at::detail::Array…>");
  EXPECT_EQ(short_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, "
                              "float>(float*, int)"),
            "at::native::cunn_SoftMaxForward<8, float>");
  EXPECT_EQ(short_kernel_name("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN"),
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN");
}

TEST(ShortName, LambdasAndNestedParametersDropped) {
  EXPECT_EQ(short_kernel_name(kCases[13].name, 200),
            "at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast…");
}

TEST(ShortName, PlainNamesKeptWhole) {
  EXPECT_EQ(short_kernel_name("Memcpy DtoD (Device -> Device)"), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(kernel_family("Memcpy DtoD (Device -> Device)"), "Memcpy DtoD (Device -> Device)");
}

TEST(ShortName, CutToTheLimitAtACharacterBoundary) {
  const std::string s = short_kernel_name(std::string(200, 'a'), 40);
  EXPECT_EQ(s, std::string(37, 'a') + "…");
  // A multi-byte character straddling the cut is not split.
  const std::string t = short_kernel_name("ab<…, …, …, …>" + std::string(100, 'z'), 6);
  EXPECT_LE(t.size(), 6u);
}

TEST(KernelFamily, DropsTemplatesAndParameters) {
  EXPECT_EQ(kernel_family(kCases[9].name), "at::native::vectorized_elementwise_kernel");
  EXPECT_EQ(kernel_family(kCases[0].name), "pytorch_flash::flash_fwd_kernel");
  EXPECT_EQ(kernel_family(kCases[1].name), "fmha_cutlassB_bf16_aligned_64x64_k128_sm80");
  EXPECT_EQ(kernel_family(kCases[14].name), "at::native::CatArrayBatchedCopy");
}

TEST(KernelArchitecture, GenerationWords) {
  EXPECT_EQ(kernel_architecture("volta_sgemm_128x64_nn").sm, 70);
  EXPECT_EQ(kernel_architecture("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn").sm, 75);
  EXPECT_EQ(kernel_architecture("sm100_xmma_gemm_bf16").sm, 100);
  EXPECT_EQ(kernel_architecture("cutlass::arch::Sm120 kernel").sm, 120);
  EXPECT_EQ(kernel_architecture("sm_86_kernel").sm, 86);
  EXPECT_EQ(kernel_architecture("fmha_cutlassF_sm80").evidence, "sm80");
}

TEST(KernelArchitecture, WordsThatLookLikeButAreNot) {
  EXPECT_EQ(kernel_architecture("rmsnorm_kernel").sm, 0);  // "sm" inside a word
  EXPECT_EQ(kernel_architecture("ssm_scan_fwd").sm, 0);    // mamba's ssm
  EXPECT_EQ(kernel_architecture("sm9_thing").sm, 0);       // one digit
  EXPECT_EQ(kernel_architecture("sm1234_thing").sm, 0);    // four digits
  EXPECT_EQ(kernel_architecture("sm20_old").sm, 0);        // not a plausible tensor-core SM
  EXPECT_EQ(kernel_architecture("preampere_x").sm, 0);     // prefix inside a word
  EXPECT_EQ(sm_label(90), "sm_90");
  EXPECT_EQ(sm_label(0), "unknown");
}

}  // namespace
}  // namespace tprobe::core
