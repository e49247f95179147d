// What cuDNN's NHWC batch norm (cudnnBatchNormalization{ForwardTraining,Backward}Ex, the
// persistent spatial mode PyTorch uses for channels-last) offers sublet's fused batch norm
// (+ residual + ReLU): for each shape, dtype and bnOps, whether cuDNN takes it, the reserve space
// and workspaces it asks for, whether the backward also runs without the reserve space (sublet's
// backward has the forward's output, not a mask), the largest error against a float64 reference
// on the host, and the kernels' times (CUDA events over repeated launches).
// Whether cuDNN's NHWC batch norm could replace sublet's three launches each way (tried in the
// step and not kept: docs/performance.md); built as build/bench/kernels/cudnn_batch_norm_ex_probe
// in CUDA builds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

#include "memory/cuda_check.h"
#include "ops/cuda/cuda_checks.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

struct Shape {
  int n, c, h, w;
  long long count() const { return static_cast<long long>(n) * h * w; }
  long long numel() const { return count() * c; }
};

struct Type {
  const char* name;
  cudnnDataType_t cudnn;
  int bytes;
};

// Host values rounded to the storage type, as raw bytes for the device.
std::vector<unsigned char> encode(const std::vector<float>& v, const Type& t, std::vector<double>& rounded) {
  std::vector<unsigned char> raw(v.size() * t.bytes);
  rounded.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.cudnn == CUDNN_DATA_FLOAT) {
      std::memcpy(&raw[i * 4], &v[i], 4);
      rounded[i] = v[i];
    } else if (t.cudnn == CUDNN_DATA_HALF) {
      const __half h = __float2half(v[i]);
      std::memcpy(&raw[i * 2], &h, 2);
      rounded[i] = __half2float(h);
    } else {
      const __nv_bfloat16 b = __float2bfloat16(v[i]);
      std::memcpy(&raw[i * 2], &b, 2);
      rounded[i] = __bfloat162float(b);
    }
  }
  return raw;
}

std::vector<double> decode(const std::vector<unsigned char>& raw, const Type& t) {
  std::vector<double> out(raw.size() / t.bytes);
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.cudnn == CUDNN_DATA_FLOAT) {
      float f;
      std::memcpy(&f, &raw[i * 4], 4);
      out[i] = f;
    } else if (t.cudnn == CUDNN_DATA_HALF) {
      __half h;
      std::memcpy(&h, &raw[i * 2], 2);
      out[i] = __half2float(h);
    } else {
      __nv_bfloat16 b;
      std::memcpy(&b, &raw[i * 2], 2);
      out[i] = __bfloat162float(b);
    }
  }
  return out;
}

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { SUBLET_CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1)); }
  ~Device() { cudaFree(p); }
};

// float64 reference of relu(BN(x) + z) (ops: 0 = BN, 1 = + ReLU, 2 = + z + ReLU) and its backward
// for dy: dx, dz (the gated dy), dscale, dbias. NHWC, per channel over N*H*W.
struct Reference {
  std::vector<double> y, dx, dz, dscale, dbias;
};

Reference reference(const Shape& s, int ops, const std::vector<double>& x, const std::vector<double>& z,
                    const std::vector<double>& dy, const std::vector<float>& scale, const std::vector<float>& bias,
                    double eps) {
  const long long m = s.count();
  Reference r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dz.resize(x.size());
  r.dscale.assign(s.c, 0.0);
  r.dbias.assign(s.c, 0.0);
  for (int c = 0; c < s.c; ++c) {
    double mean = 0, var = 0;
    for (long long i = 0; i < m; ++i) mean += x[i * s.c + c];
    mean /= m;
    for (long long i = 0; i < m; ++i) var += (x[i * s.c + c] - mean) * (x[i * s.c + c] - mean);
    var /= m;
    const double invstd = 1.0 / std::sqrt(var + eps);
    double sum_g = 0, sum_g_xhat = 0;
    for (long long i = 0; i < m; ++i) {
      const long long k = i * s.c + c;
      const double xhat = (x[k] - mean) * invstd;
      double v = xhat * scale[c] + bias[c];
      if (ops == 2) v += z[k];
      if (ops >= 1) v = v > 0 ? v : 0;
      r.y[k] = v;
      const double g = (ops >= 1 && v <= 0) ? 0.0 : dy[k];
      r.dz[k] = g;
      sum_g += g;
      sum_g_xhat += g * xhat;
    }
    r.dbias[c] = sum_g;
    r.dscale[c] = sum_g_xhat;
    for (long long i = 0; i < m; ++i) {
      const long long k = i * s.c + c;
      const double xhat = (x[k] - mean) * invstd;
      r.dx[k] = scale[c] * invstd * (r.dz[k] - sum_g / m - xhat * sum_g_xhat / m);
    }
  }
  return r;
}

// Largest |got - want| / (|want|-scale of the whole vector); NaN gives NaN.
double error(const std::vector<double>& got, const std::vector<double>& want) {
  double scale = 1e-30, worst = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got[i] - want[i]) / scale;
    if (!(e <= worst)) worst = e;  // keeps NaN
  }
  return worst;
}

const char* ops_name(int ops) { return ops == 0 ? "BN" : ops == 1 ? "BN+ReLU" : "BN+add+ReLU"; }

void probe(cudnnHandle_t handle, const Shape& s, const Type& t, int ops, bool check) {
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const cudnnBatchNormOps_t bn_ops =
      ops == 0 ? CUDNN_BATCHNORM_OPS_BN : ops == 1 ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  cudnnTensorDescriptor_t x_desc, p_desc;
  SUBLET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc));
  SUBLET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p_desc));
  SUBLET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NHWC, t.cudnn, s.n, s.c, s.h, s.w));
  SUBLET_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p_desc, x_desc, mode));
  cudnnActivationDescriptor_t act = nullptr;
  if (ops > 0) {
    SUBLET_CUDNN_CHECK(cudnnCreateActivationDescriptor(&act));
    SUBLET_CUDNN_CHECK(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  }
  const auto release = [&] {
    if (act != nullptr) cudnnDestroyActivationDescriptor(act);
    cudnnDestroyTensorDescriptor(x_desc);
    cudnnDestroyTensorDescriptor(p_desc);
  };
  const cudnnTensorDescriptor_t z_desc = ops == 2 ? x_desc : nullptr;
  size_t fwd_ws = 0, bwd_ws = 0, reserve = 0;
  const cudnnStatus_t q1 = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, mode, bn_ops, x_desc, z_desc,
                                                                                     x_desc, p_desc, act, &fwd_ws);
  const cudnnStatus_t q2 = cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, mode, bn_ops, x_desc, x_desc, x_desc,
                                                                             z_desc, x_desc, p_desc, act, &bwd_ws);
  const cudnnStatus_t q3 = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, mode, bn_ops, act, x_desc, &reserve);
  std::printf("%-5s %-12s n%d c%d %dx%d: ", t.name, ops_name(ops), s.n, s.c, s.h, s.w);
  if (q1 != CUDNN_STATUS_SUCCESS || q2 != CUDNN_STATUS_SUCCESS || q3 != CUDNN_STATUS_SUCCESS) {
    std::printf("not taken (%s / %s / %s)\n", cudnnGetErrorString(q1), cudnnGetErrorString(q2), cudnnGetErrorString(q3));
    return release();
  }
  const long long numel = s.numel();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2.0f, 3.0f), g(-1.0f, 1.0f), sc(0.5f, 1.5f), bi(-0.5f, 0.5f);
  std::vector<float> hx(numel), hz(numel), hdy(numel), scale(s.c), bias(s.c), zeros(s.c, 0.0f), ones(s.c, 1.0f);
  for (auto& v : hx) v = u(rng);
  for (auto& v : hz) v = g(rng);
  for (auto& v : hdy) v = g(rng);
  for (auto& v : scale) v = sc(rng);
  for (auto& v : bias) v = bi(rng);
  std::vector<double> rx, rz, rdy;
  const auto bx = encode(hx, t, rx), bz = encode(hz, t, rz), bdy = encode(hdy, t, rdy);
  const size_t bytes = numel * t.bytes, pbytes = s.c * sizeof(float);
  Device x(bytes), z(bytes), y(bytes), dy(bytes), dx(bytes), dz(bytes), p_scale(pbytes), p_bias(pbytes), rm(pbytes),
      rv(pbytes), sm(pbytes), sv(pbytes), dscale(pbytes), dbias(pbytes), fws(fwd_ws), bws(bwd_ws), res(reserve);
  SUBLET_CUDA_CHECK(cudaMemcpy(x.p, bx.data(), bytes, cudaMemcpyHostToDevice));
  SUBLET_CUDA_CHECK(cudaMemcpy(z.p, bz.data(), bytes, cudaMemcpyHostToDevice));
  SUBLET_CUDA_CHECK(cudaMemcpy(dy.p, bdy.data(), bytes, cudaMemcpyHostToDevice));
  SUBLET_CUDA_CHECK(cudaMemcpy(p_scale.p, scale.data(), pbytes, cudaMemcpyHostToDevice));
  SUBLET_CUDA_CHECK(cudaMemcpy(p_bias.p, bias.data(), pbytes, cudaMemcpyHostToDevice));
  SUBLET_CUDA_CHECK(cudaMemcpy(rm.p, zeros.data(), pbytes, cudaMemcpyHostToDevice));
  SUBLET_CUDA_CHECK(cudaMemcpy(rv.p, ones.data(), pbytes, cudaMemcpyHostToDevice));
  const float one = 1.0f, zero = 0.0f;
  const double eps = 1e-5;
  const auto forward = [&] {
    return cudnnBatchNormalizationForwardTrainingEx(handle, mode, bn_ops, &one, &zero, x_desc, x.p, z_desc,
                                                    ops == 2 ? z.p : nullptr, x_desc, y.p, p_desc, p_scale.p, p_bias.p,
                                                    0.1, rm.p, rv.p, eps, sm.p, sv.p, act, fws.p, fwd_ws, res.p, reserve);
  };
  const auto backward = [&](bool with_reserve) {
    return cudnnBatchNormalizationBackwardEx(handle, mode, bn_ops, &one, &zero, &one, &zero, x_desc, x.p,
                                             ops > 0 ? x_desc : nullptr, ops > 0 ? y.p : nullptr, x_desc, dy.p,
                                             z_desc, ops == 2 ? dz.p : nullptr, x_desc, dx.p, p_desc, p_scale.p,
                                             p_bias.p, dscale.p, dbias.p, eps, sm.p, sv.p, act, bws.p, bwd_ws,
                                             with_reserve ? res.p : nullptr, with_reserve ? reserve : 0);
  };
  const cudnnStatus_t f = forward();
  const cudnnStatus_t b = f == CUDNN_STATUS_SUCCESS ? backward(true) : f;
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("reserve %zu B, workspace %zu / %zu B, forward %s, backward %s", reserve, fwd_ws, bwd_ws,
              cudnnGetErrorString(f), cudnnGetErrorString(b));
  if (f != CUDNN_STATUS_SUCCESS || b != CUDNN_STATUS_SUCCESS) {
    std::printf("\n");
    return release();
  }
  if (check) {
    std::vector<unsigned char> out(bytes);
    const Reference r = reference(s, ops, rx, rz, rdy, scale, bias, eps);
    SUBLET_CUDA_CHECK(cudaMemcpy(out.data(), y.p, bytes, cudaMemcpyDeviceToHost));
    const double ey = error(decode(out, t), r.y);
    SUBLET_CUDA_CHECK(cudaMemcpy(out.data(), dx.p, bytes, cudaMemcpyDeviceToHost));
    const double edx = error(decode(out, t), r.dx);
    std::vector<float> ds(s.c), db(s.c);
    SUBLET_CUDA_CHECK(cudaMemcpy(ds.data(), dscale.p, pbytes, cudaMemcpyDeviceToHost));
    SUBLET_CUDA_CHECK(cudaMemcpy(db.data(), dbias.p, pbytes, cudaMemcpyDeviceToHost));
    const double eds = error(std::vector<double>(ds.begin(), ds.end()), r.dscale);
    const double edb = error(std::vector<double>(db.begin(), db.end()), r.dbias);
    double edz = 0;
    if (ops == 2) {
      SUBLET_CUDA_CHECK(cudaMemcpy(out.data(), dz.p, bytes, cudaMemcpyDeviceToHost));
      edz = error(decode(out, t), r.dz);
    }
    std::printf(", errors y %.1e dx %.1e dz %.1e dscale %.1e dbias %.1e", ey, edx, edz, eds, edb);
    // Without the reserve space: does the backward still run, and give the same dx?
    std::vector<unsigned char> dx_with(bytes);
    SUBLET_CUDA_CHECK(cudaMemcpy(dx_with.data(), dx.p, bytes, cudaMemcpyDeviceToHost));
    SUBLET_CUDA_CHECK(cudaMemset(dx.p, 0, bytes));
    const cudnnStatus_t nb = backward(false);
    SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
    if (nb == CUDNN_STATUS_SUCCESS) {
      SUBLET_CUDA_CHECK(cudaMemcpy(out.data(), dx.p, bytes, cudaMemcpyDeviceToHost));
      std::printf(", no reserve: dx %s", out == dx_with ? "identical" : "DIFFERS");
    } else {
      std::printf(", no reserve: %s", cudnnGetErrorString(nb));
    }
  }
  cudaEvent_t start, stop;
  SUBLET_CUDA_CHECK(cudaEventCreate(&start));
  SUBLET_CUDA_CHECK(cudaEventCreate(&stop));
  const int reps = 200;
  float fwd_ms = 0, bwd_ms = 0;
  SUBLET_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) SUBLET_CUDNN_CHECK(forward());
  SUBLET_CUDA_CHECK(cudaEventRecord(stop));
  SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
  SUBLET_CUDA_CHECK(cudaEventElapsedTime(&fwd_ms, start, stop));
  SUBLET_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) SUBLET_CUDNN_CHECK(backward(true));
  SUBLET_CUDA_CHECK(cudaEventRecord(stop));
  SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
  SUBLET_CUDA_CHECK(cudaEventElapsedTime(&bwd_ms, start, stop));
  std::printf(", us forward %.2f backward %.2f\n", 1000.0 * fwd_ms / reps, 1000.0 * bwd_ms / reps);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  release();
}

void run_probes() {
  cudnnHandle_t handle;
  SUBLET_CUDNN_CHECK(cudnnCreate(&handle));
  std::printf("cuDNN %zu\n", cudnnGetVersion());
  // ResNet-18 32x32 batch 128's batch-norm shapes, and two of ResNet-50 224 batch 64's.
  const std::vector<Shape> r18 = {{128, 64, 16, 16}, {128, 64, 8, 8}, {128, 128, 4, 4}, {128, 256, 2, 2}, {128, 512, 1, 1}};
  const std::vector<Shape> r50 = {{64, 256, 56, 56}, {64, 2048, 7, 7}};
  const Type f32{"fp32", CUDNN_DATA_FLOAT, 4}, bf16{"bf16", CUDNN_DATA_BFLOAT16, 2}, f16{"fp16", CUDNN_DATA_HALF, 2};
  for (int ops = 0; ops < 3; ++ops) {
    for (const Shape& s : r18) probe(handle, s, f32, ops, true);
  }
  for (const Type& t : {bf16, f16}) {
    for (int ops = 0; ops < 3; ++ops) {
      probe(handle, r18[0], t, ops, true);
      for (const Shape& s : r50) probe(handle, s, t, ops, false);
    }
  }
  cudnnDestroy(handle);
}

}  // namespace

// Any failed CUDA or cuDNN call (no GPU, a bad launch) ends the probe with its message.
int main() {
  try {
    run_probes();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudnn_batch_norm_ex_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
