// sublet generate --checkpoint C --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
//                 [--device auto|cpu|cuda|cuda:N] [--bpe-dir DIR]
// Continues a prompt with a trained GPT (models/gpt_sampling.h, a KV cache). The checkpoint is a
// training checkpoint of `sublet train` or a GPT weights file (models/gpt_export.h). Byte-level
// models (vocabulary 256) take and print text. Token models take and print token ids separated
// by spaces or commas, or text when --bpe-dir names GPT-2's encoder.json and vocab.bpe.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "core/errors.h"
#include "models/gpt_export.h"
#include "models/gpt_sampling.h"
#include "models/registry.h"
#include "runtime/data/gpt2_bpe.h"
#include "runtime/io/safetensors.h"
#include "train/checkpoint.h"
#include "train/train_options.h"

namespace sublet::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  fs::path checkpoint;
  std::string prompt;
  std::int64_t tokens = 200;
  double temperature = 0.8;  // nanoGPT's sample.py
  std::int64_t top_k = 200;
  std::uint64_t seed = 0;
  std::string device = "auto";
  fs::path bpe_dir;
};

// A training checkpoint (format sublet-training-checkpoint) or a GPT weights file (sublet-gpt).
std::shared_ptr<models::GPT> load_model(const fs::path& path) {
  if (!fs::is_regular_file(path)) throw IoError("--checkpoint " + path.string() + ": no such file");
  const io::SafetensorsFile file = io::load_safetensors(path);
  const auto format = file.metadata.find("format");
  if (format != file.metadata.end() && format->second == models::kGptWeightsFormat) return models::load_gpt_weights(path);
  train::Checkpoint checkpoint = train::load_checkpoint(path);  // IoError naming what it is not
  if (!models::is_language_model(checkpoint.identity.model)) {
    throw ValueError("--checkpoint " + path.string() + " holds " + checkpoint.identity.describe() +
                     ", not a GPT: generate needs a model trained on text or tokens");
  }
  auto model = std::dynamic_pointer_cast<models::GPT>(models::create_model(
      checkpoint.identity.model, {.vocab_size = checkpoint.identity.num_classes}));
  try {
    model->load_state_dict(checkpoint.model_state, /*strict=*/true);
  } catch (const Error& error) {
    throw IoError("--checkpoint " + path.string() + ": " + error.what());
  }
  return model;
}

std::vector<std::int64_t> parse_ids(const std::string& text) {
  std::vector<std::int64_t> ids;
  std::string token;
  auto flush = [&] {
    if (token.empty()) return;
    std::size_t used = 0;
    std::int64_t id = -1;
    try {
      id = std::stoll(token, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != token.size() || id < 0)
      throw ValueError("--prompt: expected token ids (non-negative integers separated by spaces or commas), got '" +
                       token + "'; pass --bpe-dir to give text");
    ids.push_back(id);
    token.clear();
  };
  for (char c : text) {
    if (c == ' ' || c == ',' || c == '\n' || c == '\t') flush();
    else token += c;
  }
  flush();
  return ids;
}

void run_generate(const GenerateArgs& args) {
  std::shared_ptr<models::GPT> model = load_model(args.checkpoint);
  model->to(train::resolve_device(args.device));
  const std::int64_t vocab = model->config().vocab_size;
  const bool bytes = vocab == 256;
  std::unique_ptr<data::Gpt2Tokenizer> tokenizer;
  if (!args.bpe_dir.empty()) {
    if (bytes) throw ValueError("--bpe-dir: this model reads bytes (vocabulary 256), not GPT-2 tokens");
    tokenizer = std::make_unique<data::Gpt2Tokenizer>(data::Gpt2Tokenizer::from_folder(args.bpe_dir));
  }
  std::vector<std::int64_t> prompt;
  if (bytes) {
    for (unsigned char c : args.prompt) prompt.push_back(c);
  } else if (tokenizer) {
    prompt = tokenizer->encode(args.prompt);
  } else {
    prompt = parse_ids(args.prompt);
  }
  if (prompt.empty()) throw ValueError("--prompt is empty: give the text (or token ids) to continue");

  // The prompt as given, then each new token as it is drawn.
  std::fputs(args.prompt.c_str(), stdout);
  if (!bytes && !tokenizer) std::fputs(" |", stdout);
  std::fflush(stdout);
  auto emit = [&](std::int64_t id) {
    if (bytes) {
      std::fputc(static_cast<int>(id), stdout);
    } else if (tokenizer && id < tokenizer->vocab_size()) {
      std::fputs(tokenizer->token_bytes(id).c_str(), stdout);
    } else {
      // Without a vocabulary, or an id of the padding past GPT-2's 50,257 tokens.
      const std::string text = tokenizer ? fmt::format("<|{}|>", id) : fmt::format(" {}", id);
      std::fputs(text.c_str(), stdout);
    }
    std::fflush(stdout);
  };
  models::generate(*model, prompt,
                   models::SamplingOptions()
                       .max_new_tokens(args.tokens)
                       .temperature(args.temperature)
                       .top_k(args.top_k)
                       .seed(args.seed),
                   emit);
  std::fputc('\n', stdout);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt with a trained GPT (sampling with a KV cache)");
  auto args = std::make_shared<GenerateArgs>();
  cmd->add_option("--checkpoint", args->checkpoint, "a checkpoint of sublet train, or a GPT weights file")->required();
  cmd->add_option("--prompt", args->prompt,
                  "text to continue (byte-level models, or token models with --bpe-dir); token ids otherwise")
      ->required();
  cmd->add_option("--tokens", args->tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "sampling temperature (0: always the most likely token)")
      ->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens (0: all)")->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the draws")->check(non_negative_integer())->capture_default_str();
  add_device_option(*cmd, args->device);
  cmd->add_option("--bpe-dir", args->bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe (token models)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace sublet::cli
