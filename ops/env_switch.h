#pragma once
// The kernels' comparison switches (SUBLET_NO_STREAM_OVERLAP, SUBLET_NO_SINGLE_TAP_GEMM,
// SUBLET_NO_IM2COL_CONV, SUBLET_BN_NO_SMALL_KERNEL): set to anything but "" or "0" turns the
// path off. Callers read it once (a function-local static) so the hot path does no getenv.
#include <cstdlib>
#include <cstring>

namespace sublet::ops {

inline bool env_switch_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

}  // namespace sublet::ops
