// The backward pass. Iterative throughout (discovery, execution, and Node destruction), so a
// graph of any depth runs in constant stack. Nodes run in dependency order, later-created first
// among the ready ones; each node's closure (its saved tensors) and its incoming gradients are
// dropped as soon as it has run, unless retain_graph.
#include <exception>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "runtime/allocation_scope.h"
#include "runtime/autocast.h"
#include "runtime/autograd/backward_observer.h"
#include "runtime/autograd/function.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

namespace sublet::autograd {

class Engine {
 public:
  // Takes roots and grads by value and drops them once the walk is set up (the caller's own
  // handles, if any, keep them alive as before).
  static void run(TensorList roots, TensorList grads, bool retain_graph);

 private:
  static TensorList run_node(Node& node, TensorList grad_outputs, bool retain_graph, const BackwardContext& context);
  static void accumulate_into_leaf(TensorImpl& leaf, Tensor grad);
  static void store_first_gradient(TensorImpl& leaf, Tensor grad);
};

// While an observer is installed: how many of a backward's edges still lead into each leaf, and
// whether one brought a gradient. A leaf reached through several edges (a parameter used twice)
// is reported once, after its last one, when its .grad is final for this backward, as PyTorch's
// post-accumulate-grad hooks: an optimizer may update it from there.
class LeafArrivals {
 public:
  explicit LeafArrivals(bool watching) : watching_(watching) {}
  void expect(TensorImpl* leaf) {
    if (watching_) ++left_[leaf].edges;
  }
  // After the edge's gradient (if any) is accumulated.
  void arrived(TensorImpl& leaf, bool with_gradient);

 private:
  struct Left {
    int edges = 0;
    bool received = false;
  };
  bool watching_;
  std::unordered_map<TensorImpl*, Left> left_;
};

namespace {

// Each installed observer, in order. By index: the list is the thread's own.
template <typename Event>
void notify(const Event& event) {
  const std::vector<BackwardObserver*>& observers = backward_observers();
  for (std::size_t i = 0; i < observers.size(); ++i) event(*observers[i]);
}

// A buffered gradient nobody but the engine's buffer can see (no other handle, no view of its
// storage, no autograd history): it may be written in place.
bool held_only_by_engine(const Tensor& t) {
  return t.defined() && t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && !t.requires_grad() &&
         !t.grad_fn();
}

// A buffered gradient held only by the engine, of the incoming one's dtype and shape, both
// contiguous: the sum goes into it in place, the same values as existing + incoming without
// writing a fresh buffer (a residual block's two gradients meet this way).
bool can_accumulate_in_place(const Tensor& existing, const Tensor& incoming) {
  return held_only_by_engine(existing) && existing.dtype() == incoming.dtype() &&
         existing.device() == incoming.device() && existing.sizes() == incoming.sizes() && existing.is_contiguous() &&
         incoming.is_contiguous() && !existing.is_same(incoming);
}

// A buffered gradient a node may add its own into in place: only the buffer holds it, and it
// is a dense tensor like the input the node's gradient is for.
bool can_take_sum(const Tensor& slot, const TensorMeta& input) {
  return held_only_by_engine(slot) && slot.dtype() == input.dtype && slot.device() == input.device &&
         slot.sizes() == input.sizes && slot.is_non_overlapping_and_dense();
}

// Takes the slot's tensor (not a copy of its handle) so that an exclusive one stays exclusive.
void add_gradients(Tensor& slot, const Tensor& incoming) {
  if (!slot.defined()) {
    slot = incoming;
  } else if (can_accumulate_in_place(slot, incoming)) {
    slot.add_(incoming);
  } else {
    slot = slot + incoming;
  }
}

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

}  // namespace

namespace {

// Whether store_first_gradient keeps `grad` itself as the leaf's .grad: a fresh gradient nobody
// else can see, in the leaf's layout when that is dense (else contiguous).
bool kept_as_is(const TensorImpl& leaf, const Tensor& grad) {
  const Shape& layout = leaf.strides;
  const bool right_layout = sublet::detail::is_dense_layout(leaf.sizes, layout)
                                ? sublet::detail::same_layout(grad.sizes(), grad.strides(), layout)
                                : grad.is_contiguous();
  return grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1 && right_layout &&
         grad.storage_offset() == 0 && grad.storage().nbytes() == grad.nbytes();
}

// Tells the observers that backward ended: finished() on the way out of the walk, the destructor
// on the way out of an exception (dropping theirs: the first one goes on).
class BackwardFinishedNotice {
 public:
  ~BackwardFinishedNotice() {
    if (!told_) {
      notify([](BackwardObserver& o) {
        try {
          o.backward_finished();
        } catch (...) {
        }
      });
    }
  }
  // Every observer hears it even when one throws; the first exception is rethrown after.
  void finished() {
    told_ = true;
    std::exception_ptr first;
    notify([&first](BackwardObserver& o) {
      try {
        o.backward_finished();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    });
    if (first) std::rethrow_exception(first);
  }

 private:
  bool told_ = false;
};

}  // namespace

void Engine::accumulate_into_leaf(TensorImpl& leaf, Tensor grad) {
  // Storing a gradient as it is launches nothing; anything else is announced first (a gradient
  // may still be being written on another stream: runtime/step/scheduler.h).
  if (!backward_observers().empty() && (grad.dtype() != leaf.dtype || leaf.grad || !kept_as_is(leaf, grad)))
    notify([&leaf](BackwardObserver& o) { o.about_to_touch_leaf_gradient(leaf); });
  if (grad.dtype() != leaf.dtype) grad = grad.to(leaf.dtype);
  if (leaf.grad) {
    Tensor(leaf.grad).add_(grad);
  } else {
    store_first_gradient(leaf, std::move(grad));
  }
}

void LeafArrivals::arrived(TensorImpl& leaf, bool with_gradient) {
  if (!watching_) return;
  Left& left = left_[&leaf];
  left.received = left.received || with_gradient;
  if (--left.edges == 0 && left.received) notify([&leaf](BackwardObserver& o) { o.leaf_gradient_final(leaf); });
}

void Engine::store_first_gradient(TensorImpl& leaf, Tensor grad) {
  // Keep a fresh gradient nobody else can see; copy one that is a view or shared (the same
  // tensor may flow to several inputs, e.g. both operands of add).
  // The gradient takes the leaf's layout when that is dense (a channels-last parameter gets a
  // channels-last gradient, as PyTorch's AccumulateGrad), else the contiguous one: later
  // accumulations and the fused optimizers then see parameter and gradient element for element.
  const Shape& layout = leaf.strides;
  const bool leaf_dense = sublet::detail::is_dense_layout(leaf.sizes, layout);
  const bool exclusive = kept_as_is(leaf, grad);
  Tensor owned = exclusive       ? grad
                 : leaf_dense    ? sublet::detail::in_layout(grad, layout)
                                 : grad.contiguous();
  if (owned.is_same(grad) && !exclusive) owned = grad.clone();
  owned.storage().set_category(memory::BlockCategory::Gradient);
  leaf.grad = owned.impl_ptr();
}

TensorList Engine::run_node(Node& node, TensorList grad_outputs, bool retain_graph, const BackwardContext& context) {
  if (node.released_) {
    throw Error("backward: node '" + node.name() +
                "' has already run and freed its saved tensors; pass retain_graph=true to the first backward "
                "to run backward through the graph a second time");
  }
  bool any_gradient = false;
  for (const auto& g : grad_outputs) any_gradient = any_gradient || g.defined();
  TensorList grad_inputs(node.num_inputs());
  if (any_gradient) {
    for (std::size_t i = 0; i < grad_outputs.size(); ++i) {
      if (!grad_outputs[i].defined()) {
        const TensorMeta& meta = node.output_meta_[i];
        grad_outputs[i] = zeros(meta.sizes, TensorOptions().dtype(meta.dtype).device(meta.device));
      }
    }
    for (auto& hook : node.pre_hooks_) hook(grad_outputs);
    grad_inputs = node.backward_ ? node.backward_(grad_outputs) : node.backward_with_context_(grad_outputs, context);
    if (grad_inputs.size() != node.num_inputs()) {
      throw Error("backward of '" + node.name() + "' returned " + std::to_string(grad_inputs.size()) +
                  " gradients for " + std::to_string(node.num_inputs()) + " inputs");
    }
    for (std::size_t i = 0; i < grad_inputs.size(); ++i) {
      if (!grad_inputs[i].defined() || !node.next_edges_[i].valid()) continue;
      const TensorMeta& meta = node.input_meta_[i];
      if (grad_inputs[i].sizes() != meta.sizes) {
        throw ShapeError("backward of '" + node.name() + "': gradient for input " + std::to_string(i) +
                         " has shape " + shape_str(grad_inputs[i].sizes()) + ", expected " + shape_str(meta.sizes));
      }
    }
    for (auto& hook : node.post_hooks_) hook(grad_inputs, grad_outputs);
  }
  if (!retain_graph) {
    node.backward_ = nullptr;  // destroys the closure: the saved tensors go back to the allocator
    node.backward_with_context_ = nullptr;
    node.released_ = true;
  }
  return grad_inputs;
}

void Engine::run(TensorList roots, TensorList grads, bool retain_graph) {
  NoGradGuard no_grad;
  // Gradients keep the dtypes of the forward: the policy's casts are the forward's business.
  AutocastGuard no_autocast(amp::autocast_dtype(), /*enabled=*/false);
  // Everything backward allocates is a gradient (of an activation or a parameter); kernels'
  // scratch space keeps its own Workspace tag.
  AllocationCategoryGuard category(memory::BlockCategory::Gradient);
  std::vector<std::pair<Edge, Tensor>> root_edges;
  std::vector<std::pair<TensorImpl*, Tensor>> root_leaves;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    if (!root.defined()) throw ValueError("backward: root tensor is undefined");
    if (!root.requires_grad()) {
      throw Error("backward: " + root.to_string() + " does not require grad and has no grad_fn");
    }
    Tensor grad = i < grads.size() ? grads[i] : Tensor();
    if (!grad.defined()) {
      if (root.numel() != 1) {
        throw ShapeError("backward: the gradient can be implied only for a one-element output, got shape " +
                         shape_str(root.sizes()) + "; pass grad explicitly");
      }
      grad = ones(root.sizes(), root.options());
    } else if (grad.sizes() != root.sizes()) {
      throw ShapeError("backward: grad of shape " + shape_str(grad.sizes()) + " for an output of shape " +
                       shape_str(root.sizes()));
    }
    if (root.grad_fn()) {
      root_edges.push_back({Edge{root.grad_fn(), root.output_nr(), nullptr}, grad});
    } else {
      root_leaves.emplace_back(root.unsafe_impl(), grad);
    }
  }

  // Discovery: how many edges point at each reachable node.
  std::unordered_map<Node*, int> dependencies;
  LeafArrivals leaf_arrivals(!backward_observers().empty());
  for (auto& [leaf, grad] : root_leaves) leaf_arrivals.expect(leaf);
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& [edge, grad] : root_edges) {
    if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& edge : node->next_edges_) {
      if (!edge.node) {
        if (edge.leaf) leaf_arrivals.expect(edge.leaf.get());
        continue;
      }
      ++dependencies[edge.node.get()];
      if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
    }
  }

  BackwardFinishedNotice finished;
  for (auto& [leaf, grad] : root_leaves) {
    accumulate_into_leaf(*leaf, std::move(grad));
    leaf_arrivals.arrived(*leaf, true);
  }
  root_leaves.clear();

  std::unordered_map<Node*, TensorList> buffers;
  auto buffer_of = [&buffers](Node* node) -> TensorList& {
    auto& buffer = buffers[node];
    if (buffer.empty()) buffer.resize(node->num_outputs());
    return buffer;
  };
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  std::unordered_set<Node*> queued;
  for (auto& [edge, grad] : root_edges) {
    auto& slot = buffer_of(edge.node.get())[edge.input_nr];
    add_gradients(slot, grad);
    if (dependencies[edge.node.get()] == 0 && queued.insert(edge.node.get()).second) ready.push(edge.node.get());
  }
  // Only the graph is needed now: what the caller handed over goes. The root nodes are kept:
  // with the roots gone they would have no other owner (the ready queue holds raw pointers).
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (auto& [edge, grad] : root_edges) root_nodes.push_back(edge.node);
  root_edges.clear();
  roots.clear();
  grads.clear();

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    TensorList grad_outputs = std::move(buffer_of(node));
    buffers.erase(node);
    // The gradients already collected where this node's own go: it may add into them in place.
    TensorList sum_targets(node->next_edges_.size());
    for (std::size_t i = 0; i < node->next_edges_.size(); ++i) {
      const Edge& edge = node->next_edges_[i];
      if (!edge.node) continue;
      const auto found = buffers.find(edge.node.get());
      if (found != buffers.end() && can_take_sum(found->second[edge.input_nr], node->input_meta_[i]))
        sum_targets[i] = found->second[edge.input_nr];
    }
    notify([node](BackwardObserver& o) { o.node_starting(*node); });
    TensorList grad_inputs = run_node(*node, std::move(grad_outputs), retain_graph, BackwardContext(&sum_targets));
    std::vector<bool> summed_in_place(sum_targets.size(), false);
    for (std::size_t i = 0; i < sum_targets.size(); ++i)
      summed_in_place[i] = sum_targets[i].defined() && grad_inputs[i].is_same(sum_targets[i]);
    sum_targets.clear();  // the buffers are exclusive again (add_gradients may add in place)
    for (std::size_t i = 0; i < node->next_edges_.size(); ++i) {
      const Edge& edge = node->next_edges_[i];
      Tensor grad = std::move(grad_inputs[i]);
      if (edge.node) {
        if (grad.defined() && !summed_in_place[i]) {
          auto& slot = buffer_of(edge.node.get())[edge.input_nr];
          add_gradients(slot, grad);
        }
        if (--dependencies[edge.node.get()] == 0) ready.push(edge.node.get());
      } else if (edge.leaf) {
        const bool with_gradient = grad.defined();
        if (with_gradient) accumulate_into_leaf(*edge.leaf, std::move(grad));
        leaf_arrivals.arrived(*edge.leaf, with_gradient);
      }
    }
  }
  finished.finished();
}

void backward(const TensorList& roots, const TensorList& grads, bool retain_graph) {
  Engine::run(roots, grads, retain_graph);
}

void backward_releasing(TensorList&& roots, TensorList&& grads, bool retain_graph) {
  Engine::run(std::move(roots), std::move(grads), retain_graph);
}

}  // namespace sublet::autograd
