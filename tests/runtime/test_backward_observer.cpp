// autograd::BackwardObserver: what the engine reports to installed observers, and in which
// order: a node before it runs, a leaf's gradient before the engine launches work on it and
// once it is final, the end of backward (on the way out of an exception too).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/autograd/backward_observer.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using autograd::TensorList;

Tensor param(std::vector<double> values, const Shape& sizes) {
  return Tensor::from_vector(values, sizes, TensorOptions().requires_grad(true));
}

// Writes each event as one string: "node sum", "touch x", "final x", "finished".
class Recorder final : public autograd::BackwardObserver {
 public:
  std::vector<std::string> events;
  std::vector<std::pair<const TensorImpl*, std::string>> names;  // leaf -> its name in events
  std::vector<std::vector<double>> final_gradients;               // .grad as seen by leaf_gradient_final

  void name(const Tensor& leaf, std::string n) { names.emplace_back(leaf.unsafe_impl(), std::move(n)); }
  void node_starting(const autograd::Node& node) override { events.push_back("node " + node.name()); }
  void about_to_touch_leaf_gradient(const TensorImpl& leaf) override { events.push_back("touch " + of(leaf)); }
  void leaf_gradient_final(const TensorImpl& leaf) override {
    events.push_back("final " + of(leaf));
    final_gradients.push_back(Tensor(leaf.grad).to_vector<double>());
  }
  void backward_finished() override { events.push_back("finished"); }

 private:
  std::string of(const TensorImpl& leaf) const {
    for (const auto& [impl, n] : names)
      if (impl == &leaf) return n;
    return "?";
  }
};

TEST(BackwardObserver, HearsNodesLeavesAndTheEndInOrder) {
  Tensor x = param({1, 2, 3}, {3});
  Tensor y = param({4, 5, 6}, {3});
  Recorder recorder;
  recorder.name(x, "x");
  recorder.name(y, "y");
  {
    const autograd::BackwardObserverGuard guard(recorder);
    // Fresh gradients in the leaves' layout are stored as they are: nothing is touched.
    (x * y).sum().backward();
    EXPECT_EQ(recorder.events,
              (std::vector<std::string>{"node sum", "node mul", "final x", "final y", "finished"}));
    // Now both leaves hold a gradient: the engine adds into it, and says so first.
    recorder.events.clear();
    (x * y).sum().backward();
    EXPECT_EQ(recorder.events, (std::vector<std::string>{"node sum", "node mul", "touch x", "final x", "touch y",
                                                         "final y", "finished"}));
  }
  EXPECT_EQ(recorder.final_gradients[0], (std::vector<double>{4, 5, 6}));  // already in .grad when reported
  EXPECT_EQ(recorder.final_gradients[3], (std::vector<double>{2, 4, 6}));
  recorder.events.clear();
  (x * y).sum().backward();  // the guard is gone: nothing more is reported
  EXPECT_TRUE(recorder.events.empty());
}

TEST(BackwardObserver, ALeafUsedTwiceIsFinalOnceWithItsWholeGradient) {
  Tensor w = param({1, 2}, {2});
  Tensor x = param({3, 4}, {2});
  Recorder recorder;
  recorder.name(w, "w");
  recorder.name(x, "x");
  {
    const autograd::BackwardObserverGuard guard(recorder);
    // w reaches the loss through two edges (w * x and w * w) and through the loss as a root.
    const Tensor loss = (w * x).sum() + (w * w).sum();
    autograd::backward({loss, w}, {Tensor(), ones({2}, w.options())});
  }
  const auto w_final = std::find(recorder.events.begin(), recorder.events.end(), "final w");
  ASSERT_NE(w_final, recorder.events.end());
  EXPECT_EQ(std::count(recorder.events.begin(), recorder.events.end(), "final w"), 1);
  EXPECT_EQ(std::count(recorder.events.begin(), recorder.events.end(), "final x"), 1);
  // Every contribution after the first is added into .grad: each is announced before.
  EXPECT_GE(std::count(recorder.events.begin(), w_final, std::string("touch w")), 2);
  EXPECT_EQ(recorder.events.back(), "finished");
  const std::size_t w_index = static_cast<std::size_t>(
      std::count_if(recorder.events.begin(), w_final, [](const std::string& e) { return e.rfind("final", 0) == 0; }));
  EXPECT_EQ(recorder.final_gradients[w_index], (std::vector<double>{3 + 2 * 1 + 1, 4 + 2 * 2 + 1}));  // x + 2w + 1
}

TEST(BackwardObserver, HearsTheEndWhenANodeThrows) {
  Tensor x = param({1, 2}, {2});
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x * 2.0;
  }
  autograd::record("fails", {x}, {out}, [](const TensorList&) -> TensorList { throw std::runtime_error("node failed"); });
  Recorder recorder;
  {
    const autograd::BackwardObserverGuard guard(recorder);
    EXPECT_THROW(out.sum().backward(), std::runtime_error);
  }
  EXPECT_EQ(recorder.events, (std::vector<std::string>{"node sum", "node fails", "finished"}));
}

// An observer whose backward_finished throws: the others still hear it, and the error comes out.
class FailsAtTheEnd final : public autograd::BackwardObserver {
 public:
  void backward_finished() override { throw std::runtime_error("observer failed"); }
};

TEST(BackwardObserver, EveryObserverHearsEachEventAndGuardsMayEndInAnyOrder) {
  Tensor x = param({1, 2}, {2});
  Recorder first, second;
  FailsAtTheEnd failing;
  first.name(x, "x");
  second.name(x, "x");
  auto outer = std::make_unique<autograd::BackwardObserverGuard>(first);
  {
    const autograd::BackwardObserverGuard failing_guard(failing);
    const autograd::BackwardObserverGuard inner(second);
    EXPECT_THROW((x * 3.0).sum().backward(), std::runtime_error);
    EXPECT_EQ(first.events, second.events);
    EXPECT_EQ(second.events.back(), "finished");
    EXPECT_EQ(autograd::backward_observers().size(), 3u);
    outer.reset();  // the outer guard ends first: the others stay installed
    ASSERT_EQ(autograd::backward_observers().size(), 2u);
    EXPECT_EQ(autograd::backward_observers()[0], &failing);
    EXPECT_EQ(autograd::backward_observers()[1], &second);
  }
  EXPECT_TRUE(autograd::backward_observers().empty());
}

}  // namespace
}  // namespace sublet
