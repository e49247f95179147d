// The op descriptors of cuDNN's fused attention graphs (ops/cuda/attention_cudnn_graph.h),
// built on the CPU: cuDNN finalizes every tensor and op descriptor without a device, so a wrong
// attribute type, a missing input or a dimension mismatch between ops fails here. Whether an
// engine runs the graph is checked on the GPU (tests/runtime/nn/test_attention_cuda.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"
#include "ops/cuda/attention_cudnn_graph.h"

namespace sublet::ops::cuda {
namespace {

// q, k, v as [B, H, T, D] views of one [B, T, 3 * H * D] projection; o and the gradients in the
// [B, T, H, D] layout the runtime allocates.
SdpaGraphKey packed_key(SdpaPass pass, DType dtype, std::int64_t b, std::int64_t h, std::int64_t t, std::int64_t d,
                        bool causal) {
  SdpaGraphKey key;
  key.pass = pass;
  key.dtype = dtype;
  key.batch = b;
  key.heads = h;
  key.query_len = t;
  key.key_len = t;
  key.head_dim = d;
  key.causal = causal;
  const AttentionStrides packed{t * 3 * h * d, d, 3 * h * d}, tokens_major{t * h * d, d, h * d};
  key.q = key.k = key.v = packed;
  key.o = key.grad_out = tokens_major;
  key.grad_q = key.grad_k = key.grad_v = packed;
  return key;
}

// Dense [B, H, T, D] operands, with a key length of its own.
SdpaGraphKey dense_key(SdpaPass pass, DType dtype, std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk,
                       std::int64_t d, bool causal) {
  SdpaGraphKey key = packed_key(pass, dtype, b, h, tq, d, causal);
  key.key_len = tk;
  key.q = key.o = key.grad_out = key.grad_q = {h * tq * d, tq * d, d};
  key.k = key.v = key.grad_k = key.grad_v = {h * tk * d, tk * d, d};
  return key;
}

// Ops per graph: forward 10 (two matmuls, scale, the softmax's 7), backward 19; the causal mask
// adds 4 to each (two index generators, a comparison, a select).
std::size_t expected_ops(const SdpaGraphKey& key) {
  return (key.pass == SdpaPass::Forward ? 10u : 19u) + (key.causal ? 4u : 0u);
}

TEST(AttentionCudnnGraph, EveryPassDtypeAndMaskBuilds) {
  for (const SdpaPass pass : {SdpaPass::Forward, SdpaPass::Backward}) {
    for (const DType dtype : {DType::BFloat16, DType::Float16}) {
      for (const bool causal : {false, true}) {
        for (const SdpaGraphKey& key : {packed_key(pass, dtype, 16, 12, 1024, 64, causal),
                                        packed_key(pass, dtype, 2, 3, 65, 128, causal),
                                        dense_key(pass, dtype, 2, 3, 7, 7, 32, causal),
                                        dense_key(pass, dtype, 1, 2, 1, 200, 64, causal),
                                        dense_key(pass, dtype, 1, 2, 100, 33, 16, causal)}) {
          SCOPED_TRACE(std::string(pass == SdpaPass::Forward ? "forward " : "backward ") + dtype_name(dtype) +
                       (causal ? " causal" : "") + " T" + std::to_string(key.query_len) + " S" +
                       std::to_string(key.key_len) + " D" + std::to_string(key.head_dim));
          SdpaOperations built;
          ASSERT_NO_THROW(built = build_sdpa_operations(key));
          EXPECT_EQ(built.ops.size(), expected_ops(key));
          for (const BackendDescriptor& op : built.ops) EXPECT_NE(op.get(), nullptr);
        }
      }
    }
  }
}

TEST(AttentionCudnnGraph, RefusesWideTypesWithTheirName) {
  try {
    build_sdpa_operations(dense_key(SdpaPass::Forward, DType::Float32, 1, 1, 8, 8, 64, true));
    ADD_FAILURE() << "expected a DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("expected bfloat16 or float16, got float32"), std::string::npos) << e.what();
  }
}

// Plans are cached by this key: every stride, the mask and the pass must tell two graphs apart.
TEST(AttentionCudnnGraph, KeyTellsStridesMaskAndPassApart) {
  const SdpaGraphKey base = packed_key(SdpaPass::Backward, DType::BFloat16, 2, 3, 65, 64, true);
  const auto reference = base.as_array(0);
  EXPECT_NE(base.as_array(1), reference);
  SdpaGraphKey other = base;
  other.causal = false;
  EXPECT_NE(other.as_array(0), reference);
  other = base;
  other.pass = SdpaPass::Forward;
  EXPECT_NE(other.as_array(0), reference);
  other = base;
  other.dtype = DType::Float16;
  EXPECT_NE(other.as_array(0), reference);
  for (AttentionStrides SdpaGraphKey::*operand : {&SdpaGraphKey::q, &SdpaGraphKey::k, &SdpaGraphKey::v,
                                                  &SdpaGraphKey::o, &SdpaGraphKey::grad_out, &SdpaGraphKey::grad_q,
                                                  &SdpaGraphKey::grad_k, &SdpaGraphKey::grad_v}) {
    for (std::int64_t AttentionStrides::*stride :
         {&AttentionStrides::batch, &AttentionStrides::head, &AttentionStrides::token}) {
      other = base;
      (other.*operand).*stride += 8;
      EXPECT_NE(other.as_array(0), reference);
    }
  }
}

TEST(AttentionCudnnGraph, GradQueryAccumulatorIsOneFloatPerQueryElement) {
  const SdpaGraphKey key = dense_key(SdpaPass::Backward, DType::BFloat16, 2, 3, 70, 33, 64, true);
  EXPECT_EQ(sdpa_grad_query_accumulator_bytes(key), 2 * 3 * 70 * 64 * 4);
}

TEST(AttentionCudnnGraph, MaskValueHidesEveryScore) {
  const float value = sdpa_mask_value();
  EXPECT_TRUE(value == -std::numeric_limits<float>::infinity() || value == std::numeric_limits<float>::lowest())
      << value;
}

}  // namespace
}  // namespace sublet::ops::cuda
