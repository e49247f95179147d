#include <chrono>
#include <cstdio>
#include <vector>
#include "ops/cpu/batch_norm_relu_cpu.h"
using namespace sublet;
int main() {
  struct S { long c, h; } shapes[] = {{16, 28}, {32, 14}, {64, 7}};
  for (auto sh : shapes) {
    ops::BatchNormShape s; s.batch = 128; s.channels = sh.c; s.height = sh.h; s.width = sh.h;
    const long n = s.numel();
    std::vector<float> in(n), res(n), out(n), go(n), gi(n), gr(n), w(sh.c, 1.f), b(sh.c, 0.1f), rm(sh.c), rv(sh.c, 1.f), sm(sh.c), si(sh.c), gw(sh.c), gb(sh.c);
    for (long i = 0; i < n; ++i) { in[i] = (i * 7919 % 1000) / 500.f - 1; res[i] = (i * 31 % 100) / 100.f - 0.5f; go[i] = (i * 13 % 200) / 100.f - 1; }
    std::vector<float> junk(64 << 20 >> 2);
    double tf = 1e9, tb = 1e9, tf2 = 1e9, tb2 = 1e9;
    for (int rep = 0; rep < 15; ++rep) {
      for (auto& j : junk) j += 1;  // evict: the step's activations come from L3/memory
      auto t0 = std::chrono::steady_clock::now();
      ops::cpu::batch_norm_relu_forward_training<float>(s, in.data(), nullptr, w.data(), b.data(), rm.data(), rv.data(), 0.1, 1e-5, out.data(), sm.data(), si.data());
      auto t1 = std::chrono::steady_clock::now();
      ops::cpu::batch_norm_relu_backward_training<float>(s, go.data(), out.data(), in.data(), w.data(), sm.data(), si.data(), gi.data(), gw.data(), gb.data(), nullptr);
      auto t2 = std::chrono::steady_clock::now();
      ops::cpu::batch_norm_relu_forward_training<float>(s, in.data(), res.data(), w.data(), b.data(), rm.data(), rv.data(), 0.1, 1e-5, out.data(), sm.data(), si.data());
      auto t3 = std::chrono::steady_clock::now();
      ops::cpu::batch_norm_relu_backward_training<float>(s, go.data(), out.data(), in.data(), w.data(), sm.data(), si.data(), gi.data(), gw.data(), gb.data(), gr.data());
      auto t4 = std::chrono::steady_clock::now();
      auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
      tf = std::min(tf, ms(t0, t1)); tb = std::min(tb, ms(t1, t2)); tf2 = std::min(tf2, ms(t2, t3)); tb2 = std::min(tb2, ms(t3, t4));
    }
    printf("%ldx%ld: fwd %.3f bwd %.3f | residual fwd %.3f bwd %.3f ms  (%.1f Melem)\n", sh.c, sh.h, tf, tb, tf2, tb2, n / 1e6);
  }
}
