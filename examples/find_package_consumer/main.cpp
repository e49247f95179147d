// One training step of a small ResNet through an installed sublet: create a tensor, forward,
// loss, backward, optimizer step, then the allocator's memory summary. On the GPU when this
// sublet has the CUDA backend and a device is present, else on the CPU.
#include <cmath>
#include <cstdint>
#include <exception>
#include <iostream>
#include <vector>

#include <sublet/core/errors.h>
#include <sublet/memory/registry.h>
#include <sublet/models/registry.h>
#include <sublet/runtime/factories.h>
#include <sublet/runtime/nn/functional.h>
#include <sublet/runtime/optim/sgd.h>

int main() {
  using namespace sublet;
  try {
    const Device device = memory::cuda_available() ? Device::cuda(0) : Device::cpu();
    std::cout << "sublet consumer: CUDA backend " << (memory::cuda_built() ? "built in" : "not built")
              << ", running on " << device.str() << "\n";

    // A batch of 4 random 3x16x16 images and their labels.
    Generator generator(1);
    const Tensor images = randn({4, 3, 16, 16}, generator).to(device);
    const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3}, {4}).to(device);

    auto model = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 7});
    model->train();
    model->to(device);
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));

    const Tensor loss = nn::functional::cross_entropy((*model)(images), labels);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    const float loss_value = loss.item<float>();
    std::cout << "one training step of resnet20: loss " << loss_value << "\n";
    if (!std::isfinite(loss_value)) {
      std::cerr << "sublet consumer: expected a finite loss, got " << loss_value << "\n";
      return 1;
    }

    std::cout << memory_summary(device);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sublet consumer: " << e.what() << "\n";
    return 1;
  }
}
