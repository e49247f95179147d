#include "runtime/nn/module_ranges.h"

#include "core/errors.h"
#ifdef SUBLET_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace sublet::nn {

#ifdef SUBLET_HAVE_CUDA
namespace {
class NvtxRangeSink final : public RangeSink {
 public:
  std::uint64_t start(const std::string& name) override { return nvtxRangeStartA(name.c_str()); }
  void end(std::uint64_t id) override { nvtxRangeEnd(id); }
};
}  // namespace

std::shared_ptr<RangeSink> nvtx_range_sink() { return std::make_shared<NvtxRangeSink>(); }
#else
std::shared_ptr<RangeSink> nvtx_range_sink() {
  throw DeviceError("--nvtx marks ranges for Nsight Systems (NVTX, part of the CUDA toolkit); this sublet was built "
                    "without CUDA");
}
#endif

ModuleRanges::ModuleRanges(Module& root, std::shared_ptr<RangeSink> sink, std::string root_name) : sink_(std::move(sink)) {
  for (const auto& [path, module] : root.named_modules()) {
    const std::string name = path.empty() ? root_name : root_name + "." + path;
    Registered r{module, {}};
    r.hooks.push_back(module->register_forward_pre_hook(
        [this, name](Module& m, const Tensor&) { open(forward_open_, m, name + " forward"); }));
    r.hooks.push_back(module->register_forward_hook([this](Module& m, const Tensor&, const Tensor&) { close(forward_open_, m); }));
    r.hooks.push_back(module->register_backward_pre_hook(
        [this, name](Module& m, const Tensor&) { open(backward_open_, m, name + " backward"); }));
    r.hooks.push_back(
        module->register_backward_hook([this](Module& m, const Tensor&, const Tensor&) { close(backward_open_, m); }));
    registered_.push_back(std::move(r));
  }
}

ModuleRanges::~ModuleRanges() {
  for (Registered& r : registered_)
    for (Module::HookId id : r.hooks) r.module->remove_hook(id);
  for (auto* open : {&forward_open_, &backward_open_})
    for (auto& [module, ids] : *open)
      for (std::uint64_t id : ids) sink_->end(id);
}

void ModuleRanges::open(std::map<const Module*, std::vector<std::uint64_t>>& ranges, const Module& m,
                        const std::string& name) {
  ranges[&m].push_back(sink_->start(name));
}

void ModuleRanges::close(std::map<const Module*, std::vector<std::uint64_t>>& ranges, const Module& m) {
  auto it = ranges.find(&m);
  if (it == ranges.end() || it->second.empty()) return;  // opened before this ModuleRanges existed
  sink_->end(it->second.back());
  it->second.pop_back();
}

}  // namespace sublet::nn
