#pragma once
// Shared by the profile tests: a two-layer perceptron whose every tensor size is known, a
// temporary folder, and running python3 (Debian's /usr/bin/python3) on a file.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/nn/activation.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/module.h"

namespace sublet::profile::testing {

// fc1: 16 -> 32, relu, fc2: 32 -> 4. Parameters (float32): fc1.weight 2048 B, fc1.bias 128 B,
// fc2.weight 512 B, fc2.bias 16 B.
class Mlp : public nn::Module {
 public:
  Mlp() : Module("Mlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(16, 32));
    relu = register_module("relu", std::make_shared<nn::ReLU>());
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 4));
  }
  // The batch arrives as [N, 16, 1, 1]; the view costs no memory.
  Tensor forward(const Tensor& x) override { return (*fc2)((*relu)((*fc1)(x.view({x.size(0), 16})))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::ReLU> relu;
};

inline std::filesystem::path fresh_directory(const std::string& name) {
  // ctest runs each test case in its own process, possibly in parallel: one folder per process.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sublet_profile_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `python3 -c script file` and returns its standard output; exit status in *status.
inline std::string run_python(const std::string& script, const std::string& file, int* status) {
  const std::string command = "/usr/bin/python3 -c '" + script + "' '" + file + "' 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *status = -1;
    return "popen failed";
  }
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe)) output += buffer.data();
  *status = pclose(pipe);
  return output;
}

}  // namespace sublet::profile::testing
