#pragma once
// Which parameters' updates go out together while a captured backward still runs
// (runtime/step/scheduler.h): a parameter joins the open group when backward reports its
// gradient final; the group is ready once it holds its share of all parameter bytes (one of
// `groups`). Smaller groups leave less of the update after backward; more of them add launches
// and graph edges. Host bookkeeping only: it launches nothing.
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "runtime/tensor.h"

namespace sublet::step {

class UpdateGroups {
 public:
  // groups >= 1 (ValueError otherwise).
  UpdateGroups(const std::vector<Tensor>& params, std::size_t groups);

  // The parameter behind `leaf` joins the open group (a leaf that is not one of the parameters
  // is ignored). True when the open group is ready: launch it, or keep adding when it cannot go
  // yet (it then stays ready).
  bool add(const TensorImpl& leaf);
  // The open group's parameter indices, in the order their gradients became final.
  const std::vector<std::size_t>& open() const { return open_; }
  // The open group went out: the next one starts empty.
  void launched();
  std::size_t group_bytes() const { return group_bytes_; }

 private:
  std::unordered_map<const TensorImpl*, std::size_t> index_of_;
  std::vector<std::size_t> bytes_;  // per parameter
  std::size_t group_bytes_ = 1;
  std::vector<std::size_t> open_;
  std::size_t open_bytes_ = 0;
};

}  // namespace sublet::step
