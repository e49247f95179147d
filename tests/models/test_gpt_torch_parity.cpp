// GPT parity with PyTorch: `sublet train`'s Trainer (gpt-mini, AdamW with nanoGPT's groups, lr 1e-3
// after a 10-step warm-up then cosine to 1e-4 at step 20 (nanoGPT's get_lr), gradient clipping
// 1.0, float32) and nanoGPT's model in PyTorch
// (tests/models/gpt_torch_parity.py) start from the same weights (sublet writes them, PyTorch
// loads them with load_state_dict(strict=True)) and train 20 steps on the same batches; every
// step's loss must agree within 1e-3 (absolute). The warm-up matters: at a constant 1e-3 from the
// first step both sides train identically (1e-5 apart) until a loss spike, which turns float32
// rounding differences into differences of 1e-2 a few steps later (chaotic dynamics, not a
// difference in the math); a warm-up keeps the 20 steps out of that regime.
//
// Skips when no python3 with torch was found at configure time. Environment (the GPU machine):
//   SUBLET_TORCH_PYTHON       python3 to run (default: the one found at configure time)
//   SUBLET_GPT_PARITY_SCRIPT  the script (default: this source tree's)
//   SUBLET_PARITY_DEVICE      cpu (default) or cuda: both sides run there (TF32 off on both)
//   SUBLET_PARITY_ATTENTION   manual (default) or sdpa: PyTorch's attention (sdpa needs 2.x)
//   SUBLET_PARITY_BATCH / SUBLET_PARITY_SEQ_LEN  windows per step and their length (4 x 64)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/registry.h"
#include "runtime/data/token_dataset.h"
#include "runtime/io/safetensors.h"
#include "train/trainer.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

// A few kilobytes of varied English-like text: the parity does not need meaning, only tokens.
void write_text(const fs::path& path) {
  std::ofstream out(path);
  const char* words[] = {"the", "allocator", "splits", "a", "segment", "into", "blocks", "and", "every", "tensor",
                         "returns", "its", "block", "to", "free", "list", "when", "last", "handle", "dies"};
  std::uint64_t state = 12345;
  for (int i = 0; i < 3000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    out << words[(state >> 33) % 20] << ((state >> 20) % 9 == 0 ? ".\n" : " ");
  }
}

TEST(GptTorchParity, TwentyAdamWStepsMatchPyTorch) {
#ifndef SUBLET_GPT_PARITY_PYTHON
  GTEST_SKIP() << "not configured: no python3 with torch at configure time (install python3-torch and "
                  "reconfigure), or a sanitizer build";
#else
  const std::string python = env_or("SUBLET_TORCH_PYTHON", SUBLET_GPT_PARITY_PYTHON);
  const std::string script = env_or("SUBLET_GPT_PARITY_SCRIPT", SUBLET_GPT_PARITY_SCRIPT_PATH);
  const std::string device = env_or("SUBLET_PARITY_DEVICE", "cpu");
  if (device != "cpu" && !memory::cuda_available()) GTEST_SKIP() << "no CUDA device: GPT parity on " << device;
  const std::int64_t batch = std::stoll(env_or("SUBLET_PARITY_BATCH", "4"));
  const std::int64_t seq_len = std::stoll(env_or("SUBLET_PARITY_SEQ_LEN", "64"));
  constexpr std::int64_t kSteps = 20;

  const fs::path dir = fs::temp_directory_path() / ("sublet_gpt_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_text(dir / "text.txt");

  train::TrainOptions options;
  options.model = "gpt-mini";
  options.data = "text";
  options.data_dir = dir / "text.txt";
  options.device = device;
  options.optimizer = "adamw";
  options.lr = 1e-3;
  options.weight_decay = 0.1;
  options.label_smoothing = 0.0;
  options.schedule = "cosine";
  options.warmup_steps = 10;
  options.grad_clip = 1.0;
  options.batch_size = batch;
  options.seq_len = seq_len;
  options.steps = kSteps;
  options.eval_interval = kSteps;
  options.eval_batches = 1;
  options.seed = 11;
  train::Trainer trainer(options);
  trainer.save_language_model_weights(dir / "init.safetensors");

  // The Trainer's batches: its sampler's batch k for step k, rebuilt here from the same seed.
  const data::RandomWindowSampler sampler(trainer.data().tokens->train,
                                          data::TokenBatchOptions(batch, seq_len).seed(options.seed));
  std::vector<std::int64_t> inputs, targets;
  for (std::int64_t step = 0; step < kSteps; ++step) {
    const data::TokenBatch b = sampler.batch(step);
    for (std::int64_t v : b.inputs.to_vector<std::int64_t>()) inputs.push_back(v);
    for (std::int64_t v : b.targets.to_vector<std::int64_t>()) targets.push_back(v);
  }
  io::save_safetensors(dir / "batches.safetensors",
                       {{"inputs", io::make_i64_record({kSteps, batch, seq_len}, inputs)},
                        {"targets", io::make_i64_record({kSteps, batch, seq_len}, targets)}});

  std::vector<double> ours;
  for (std::int64_t step = 0; step < kSteps; ++step) {
    const std::optional<float> loss = trainer.train_step();
    ASSERT_TRUE(loss.has_value()) << "step " << step;
    ours.push_back(*loss);
  }

  const std::string command = python + " " + script + " --weights " + (dir / "init.safetensors").string() +
                              " --batches " + (dir / "batches.safetensors").string() + " --out " +
                              (dir / "torch.json").string() + " --lr 1e-3 --warmup-steps 10 --weight-decay 0.1 --grad-clip 1.0" +
                              " --device " + device + " --attention " + env_or("SUBLET_PARITY_ATTENTION", "manual");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir / "torch.json");
  const nlohmann::json result = nlohmann::json::parse(in);
  const std::vector<double> theirs = result.at("losses").get<std::vector<double>>();
  ASSERT_EQ(theirs.size(), ours.size());
  double worst = 0.0;
  std::ostringstream table;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double diff = std::abs(ours[i] - theirs[i]);
    if (!(diff <= worst)) worst = diff;
    table << "step " << i << ": sublet " << ours[i] << ", torch " << theirs[i] << "\n";
  }
  std::cout << "largest loss difference over " << ours.size() << " steps: " << worst << " (PyTorch "
            << result.at("torch").get<std::string>() << ", " << device << ")\n";
  EXPECT_TRUE(worst <= 1e-3) << "largest loss difference " << worst << " (PyTorch "
                             << result.at("torch").get<std::string>() << ")\n" << table.str();
  // Training moved: 20 steps bring the loss well below its start.
  EXPECT_TRUE(ours.back() <= ours.front() - 0.5) << table.str();
  fs::remove_all(dir);
#endif
}

}  // namespace
}  // namespace sublet
