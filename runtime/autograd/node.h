#pragma once
// One recorded op in the autograd graph. A node maps the gradients of its outputs to the
// gradients of its inputs through `backward`, a closure that holds exactly the tensors it needs
// (the saved tensors). next_edges[i] says where the gradient of input i goes: another node's
// output, or a leaf tensor's .grad.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/autograd/backward_context.h"
#include "runtime/tensor.h"

namespace sublet::autograd {

// grad_outputs is the node's own copy: a backward that hands a gradient on (nn::checkpoint's,
// to a nested backward) may move it out, so that its memory goes when the receiver is done with
// it rather than when this node returns. Closures taking `const TensorList&` fit as well.
using BackwardFn = std::function<TensorList(TensorList& grad_outputs)>;
// The same, for a backward that asks the engine something while it runs (BackwardContext).
using ContextBackwardFn = std::function<TensorList(TensorList& grad_outputs, const BackwardContext& context)>;

class Node;

struct Edge {
  std::shared_ptr<Node> node;        // gradient flows to output `input_nr` of this node...
  std::uint32_t input_nr = 0;
  TensorImplPtr leaf;                // ...or is accumulated into this leaf's grad
  bool valid() const { return node != nullptr || leaf != nullptr; }
};

struct TensorMeta {
  Shape sizes;
  DType dtype = DType::Float32;
  Device device;
};

class Node {
 public:
  // Called with the output gradients just before backward runs (undefined ones already zeroed).
  using PreHook = std::function<void(const TensorList& grad_outputs)>;
  // Called with the input gradients it produced and the output gradients it received.
  using PostHook = std::function<void(const TensorList& grad_inputs, const TensorList& grad_outputs)>;

  Node(std::string name, std::uint64_t sequence_nr) : name_(std::move(name)), sequence_nr_(sequence_nr) {}
  // Unlinks the graph iteratively: destroying a 100k-node chain must not recurse 100k deep.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  // Creation order; the engine runs later nodes first when several are ready.
  std::uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::size_t num_inputs() const { return next_edges_.size(); }
  std::size_t num_outputs() const { return output_meta_.size(); }
  // True once backward ran without retain_graph: the saved tensors are gone.
  bool released() const { return released_; }

  void register_pre_hook(PreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void register_post_hook(PostHook hook) { post_hooks_.push_back(std::move(hook)); }

 private:
  friend class Engine;
  friend std::shared_ptr<Node> record(std::string name, const TensorList& inputs, const TensorList& outputs,
                                      BackwardFn backward);
  friend std::shared_ptr<Node> record(std::string name, const TensorList& inputs, const TensorList& outputs,
                                      ContextBackwardFn backward);

  std::string name_;
  std::uint64_t sequence_nr_;
  BackwardFn backward_;                       // one of the two is set until the node is released
  ContextBackwardFn backward_with_context_;
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> input_meta_;
  std::vector<TensorMeta> output_meta_;
  std::vector<PreHook> pre_hooks_;
  std::vector<PostHook> post_hooks_;
  bool released_ = false;
};

}  // namespace sublet::autograd
