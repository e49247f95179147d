#pragma once
// Names every module's forward and backward as a range on a profiler's timeline. With the NVTX
// sink (`--nvtx` on `sublet train` and `sublet bench step`), Nsight Systems shows
// "model.layer1.0.conv1 forward" above that layer's kernels, and "... backward" above its
// backward kernels. Where Nsight Systems is absent, libsublet_nvtx_capture.so
// (profile/nvtx_capture/, run by scripts/nvtx_ranges.sh) receives the same ranges through NVTX's
// injection variable and writes them as JSON, with an nvtx_sum-like table.
//
//   nn::ModuleRanges ranges(model, nn::nvtx_range_sink());   // until `ranges` is destroyed
//
// Built on the module hooks (forward pre/post, backward pre/post) of every module, so a
// module's backward range spans from its output's gradient arriving to its input's gradient
// leaving, as PyTorch's profiler shows module backward; a module whose input needs no gradient
// (the stem's conv1, the root) has an empty backward range, since nothing marks where its backward
// ends (its weight-gradient kernels fall outside it). Ranges are start/end pairs, not a stack:
// the branches of a residual block may run their backward interleaved.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/module.h"

namespace sublet::nn {

class RangeSink {
 public:
  virtual ~RangeSink() = default;
  virtual std::uint64_t start(const std::string& name) = 0;
  virtual void end(std::uint64_t id) = 0;
};

// nvtxRangeStartA / nvtxRangeEnd. NVTX is header-only and costs next to nothing while no tool
// listens. DeviceError in a build without CUDA.
std::shared_ptr<RangeSink> nvtx_range_sink();

class ModuleRanges {
 public:
  // Ranges are named "<root_name>.<dotted path> forward|backward" ("<root_name> ..." for `root`).
  ModuleRanges(Module& root, std::shared_ptr<RangeSink> sink, std::string root_name = "model");
  // Removes the hooks and ends any range still open (a forward that threw, say).
  ~ModuleRanges();
  ModuleRanges(const ModuleRanges&) = delete;
  ModuleRanges& operator=(const ModuleRanges&) = delete;

 private:
  struct Registered {
    Module* module;
    std::vector<Module::HookId> hooks;
  };
  void open(std::map<const Module*, std::vector<std::uint64_t>>& ranges, const Module& m, const std::string& name);
  void close(std::map<const Module*, std::vector<std::uint64_t>>& ranges, const Module& m);

  std::shared_ptr<RangeSink> sink_;
  std::vector<Registered> registered_;
  std::map<const Module*, std::vector<std::uint64_t>> forward_open_;
  std::map<const Module*, std::vector<std::uint64_t>> backward_open_;
};

}  // namespace sublet::nn
