#include "runtime/autograd/node.h"

namespace sublet::autograd {

Node::~Node() {
  // Take the children out before they die, and only descend into a child that this node held
  // last: each destructor then finds its edges already empty, so the depth stays constant.
  std::vector<std::shared_ptr<Node>> pending;
  auto take_children = [&pending](Node& node) {
    for (auto& edge : node.next_edges_) {
      if (edge.node) pending.push_back(std::move(edge.node));
    }
  };
  take_children(*this);
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    if (node.use_count() == 1) take_children(*node);
  }
}

}  // namespace sublet::autograd
