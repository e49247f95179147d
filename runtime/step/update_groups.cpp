#include "runtime/step/update_groups.h"

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace sublet::step {

UpdateGroups::UpdateGroups(const std::vector<Tensor>& params, std::size_t groups) {
  if (groups < 1) throw ValueError("UpdateGroups: need at least one group per step, got " + std::to_string(groups));
  std::size_t total_bytes = 0;
  bytes_.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    index_of_.emplace(params[i].unsafe_impl(), i);
    bytes_.push_back(params[i].nbytes());
    total_bytes += params[i].nbytes();
  }
  group_bytes_ = std::max<std::size_t>(total_bytes / groups, 1);
}

bool UpdateGroups::add(const TensorImpl& leaf) {
  const auto it = index_of_.find(&leaf);
  if (it == index_of_.end()) return false;
  open_.push_back(it->second);
  open_bytes_ += bytes_[it->second];
  return open_bytes_ >= group_bytes_;
}

void UpdateGroups::launched() {
  open_.clear();
  open_bytes_ = 0;
}

}  // namespace sublet::step
