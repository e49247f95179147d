// A few SGD steps of a linear classifier through a sublet built as a subproject: the same
// <sublet/...> includes and sublet:: targets as with an installed sublet. Fails (exit status 1)
// unless the loss falls.
#include <cmath>
#include <cstdint>
#include <exception>
#include <iostream>
#include <vector>

#include <sublet/memory/registry.h>
#include <sublet/runtime/factories.h>
#include <sublet/runtime/nn/functional.h>
#include <sublet/runtime/nn/linear.h>
#include <sublet/runtime/optim/sgd.h>

int main() {
  using namespace sublet;
  try {
    Generator generator(3);
    const Tensor inputs = randn({16, 4}, generator);
    const Tensor labels =
        Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {16});
    nn::Linear classifier(nn::LinearOptions(4, 3), generator);
    optim::SGD optimizer(classifier.parameters(), optim::SGDOptions(0.5));

    float first_loss = 0.0f;
    float last_loss = 0.0f;
    for (int step = 0; step < 20; ++step) {
      const Tensor loss = nn::functional::cross_entropy(classifier(inputs), labels);
      loss.backward();
      optimizer.step();
      optimizer.zero_grad();
      last_loss = loss.item<float>();
      if (step == 0) first_loss = last_loss;
    }
    std::cout << "sublet as a subproject: cross-entropy " << first_loss << " -> " << last_loss << " after 20 steps\n";
    if (!std::isfinite(last_loss) || !(last_loss < first_loss)) {
      std::cerr << "sublet subproject consumer: expected the loss to fall from " << first_loss << ", got " << last_loss
                << "\n";
      return 1;
    }
    std::cout << memory_summary(Device::cpu());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sublet subproject consumer: " << e.what() << "\n";
    return 1;
  }
}
