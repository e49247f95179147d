// sublet train [--model NAME] [--data mnist|fashion-mnist|cifar10|synthetic] [--data-dir DIR] [--device auto|cpu|cuda]
//              [--epochs N] [--batch-size B] [--lr X] [--optimizer sgd|adam|adamw] [--schedule none|step|cosine]
//              [--limit-train N] [--limit-test N] [--seed S] [--checkpoint PATH] [--resume PATH]
//              [--metrics-json PATH] [--cuda-graph] [--no-oom-retry]
//              [--nproc-per-node N [--nnodes M --node-rank R --master-addr HOST --master-port PORT]]
//              [--bucket-cap-mb MB] [--sync-batch-norm] [--backend auto|nccl|gloo] [--dist-timeout S]
//              [--nvtx] [--precision fp32|bf16|fp16] [--channels-last]
// GPT models (--model gpt-nano|gpt-mini|gpt2-small, --data text|tokens): [--seq-len N] [--steps N]
//              [--eval-interval N] [--eval-batches N] [--warmup-steps N] [--grad-clip X] [--val-fraction X]
//              [--seq-len-range MIN:MAX --tokens-per-batch N | --shape-schedule FILE] [--write-shape-schedule FILE]
// Data parallel: with --nproc-per-node this process is the launcher (as torchrun): it starts N
// workers running the same command without the launcher flags, with torchrun's variables set;
// a process started with those variables (by this launcher, torchrun or SLURM) is a worker.
// --batch-size is per rank then (global batch = batch size x world size), as with torchrun + DDP.
// A thin layer over train::Trainer (train/trainer.h): flags to TrainOptions, a progress printer,
// and every problem reported as one line by main() through the sublet::Error family.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/config_report.h"
#include "cli/data_parallel_launch.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "cli/image_shape_flag.h"
#include "cli/precision_flags.h"
#include "cli/run_files.h"
#include "cli/shape_schedule_flags.h"
#include "core/errors.h"
#include "models/registry.h"
#include "runtime/nn/module_ranges.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace sublet::cli {
namespace {

namespace fs = std::filesystem;

void parse_synthetic_shape(const std::string& text, train::TrainOptions& options) {
  const ImageShape shape = parse_image_shape("--synthetic-shape", text);
  options.synthetic_channels = shape.channels;
  options.synthetic_height = shape.height;
  options.synthetic_width = shape.width;
}

// The dataset files a run reads (both names of MNIST's, with and without .gz), so that no output
// replaces one of them.
std::vector<fs::path> dataset_files(const train::TrainOptions& options) {
  const fs::path dir = options.data_dir.empty() ? train::default_data_dir(options.data) : options.data_dir;
  std::vector<fs::path> files;
  if (options.data == "mnist") {
    for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                             "t10k-labels-idx1-ubyte"}) {
      files.push_back(dir / name);
      files.push_back(dir / (std::string(name) + ".gz"));
    }
  } else if (options.data == "cifar10") {
    for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                             "data_batch_5.bin", "test_batch.bin"})
      files.push_back(dir / name);
  }
  return files;
}

// --resume names a checkpoint: a regular file (a FIFO would block the reader, a folder is a
// slip), checked before the model is built.
void check_resume_file(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    throw IoError("--resume " + path.string() + ": " + (error == ENOENT ? std::string("no such file") : std::strerror(error)));
  }
  if (S_ISDIR(info.st_mode)) throw IoError("--resume " + path.string() + ": expected a checkpoint file, found a folder");
  if (!S_ISREG(info.st_mode))
    throw IoError("--resume " + path.string() + ": expected a checkpoint file, found " +
                  (S_ISFIFO(info.st_mode) ? "a FIFO" : S_ISSOCK(info.st_mode) ? "a socket" : "a device"));
}

void run_train(train::TrainOptions options, const std::string& synthetic_shape, const ShapeScheduleFlags& shapes,
               bool nvtx) {
  parse_synthetic_shape(synthetic_shape, options);
  train::validate(options);
  // Training can take hours: refuse an output that cannot be written before, not after.
  check_output_file("--checkpoint", options.checkpoint);
  check_output_file("--metrics-json", options.metrics_json);
  check_output_file("--write-shape-schedule", shapes.write_path);
  if (!options.resume.empty()) check_resume_file(options.resume);
  RunFiles files;
  files.input("--resume", options.resume, "checkpoint").input("--shape-schedule", shapes.read_path, "shape schedule");
  for (const fs::path& file : dataset_files(options)) files.input("--data-dir", file, "dataset");
  files.output("--checkpoint", options.checkpoint, "checkpoint").output("--metrics-json", options.metrics_json, "metrics");
  files.output("--write-shape-schedule", shapes.write_path, "shape schedule");
  files.check();
  if (options.shape_schedule) write_shape_schedule_if_asked(shapes, *options.shape_schedule, std::cout);
  train::Trainer trainer(options);
  std::optional<nn::ModuleRanges> ranges;  // --nvtx: each module's forward and backward on Nsight's timeline
  if (nvtx) ranges.emplace(trainer.model(), nn::nvtx_range_sink());
  train::ProgressPrinter printer(stdout, ::isatty(::fileno(stdout)) == 1);
  const bool speaks = trainer.rank() == 0;  // rank 0 speaks for the group
  if (speaks) {
    trainer.set_observer(&printer);
    printer.note(trainer.describe());
  }
  if (!options.resume.empty()) trainer.resume_from(options.resume);
  const auto& history = trainer.fit();
  if (history.empty() || !speaks) return;
  double seconds = 0;
  for (const auto& m : history) seconds += m.seconds;
  if (history.back().language_model) {
    printer.note(fmt::format("final validation loss {:.4f} (perplexity {:.2f}) after {} steps ({:.1f} s)",
                             history.back().val_loss, history.back().val_perplexity, history.back().step, seconds));
    return;
  }
  printer.note(fmt::format("final test accuracy {:.2f}% after {} epoch{} ({:.1f} s{})", 100.0 * history.back().test_acc,
                           history.size(), history.size() == 1 ? "" : "s", seconds,
                           trainer.oom_retries() > 0 ? fmt::format(", {} out-of-memory retries", trainer.oom_retries())
                                                     : std::string()));
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model: a ResNet on MNIST, Fashion-MNIST, CIFAR-10 or synthetic images, or a GPT on text or token files");
  add_print_config_flag(*cmd);
  auto options = std::make_shared<train::TrainOptions>();
  auto synthetic_shape = std::make_shared<std::string>("3x32x32");
  std::string models;
  for (const std::string& name : models::model_names()) models += (models.empty() ? "" : ", ") + name;
  // Values are checked by train::validate (one message format for CLI and library), not CLI11.
  cmd->add_option("--model", options->model, "model: " + models)->capture_default_str();
  cmd->add_option("--data", options->data,
                  "mnist, fashion-mnist, cifar10 or synthetic (images); text or tokens (GPT models, default text)")
      ->capture_default_str();
  cmd->add_option("--data-dir", options->data_dir,
                  "dataset folder (default data/mnist, /usr/share/datasets/fashion-mnist, data/cifar-10-batches-bin; "
                  "text: the default corpus); for text a file or folder, for tokens a .bin file or a folder of "
                  "train/val .bin files");
  add_device_option(*cmd, options->device);
  cmd->add_option("--epochs", options->epochs, "epochs to train (in total, counting resumed ones)")->capture_default_str();
  cmd->add_option("--batch-size", options->batch_size,
                  "images per step (GPT: windows per step, default 16); data parallel: per rank (the global batch "
                  "is this times the world size, as torchrun + DDP)")
      ->capture_default_str();
  cmd->add_option("--lr", options->lr, "learning rate (default: 0.1 for sgd, 0.001 for adam/adamw)");
  cmd->add_option("--optimizer", options->optimizer, "sgd (momentum 0.9), adam or adamw (GPT default: adamw, betas 0.9/0.95)")
      ->capture_default_str();
  cmd->add_option("--schedule", options->schedule, "none, step (x0.1 every third of the run) or cosine")
      ->capture_default_str();
  cmd->add_option("--momentum", options->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", options->weight_decay, "weight decay (GPT default 0.1, on 2-D weights only)")->capture_default_str();
  cmd->add_option("--label-smoothing", options->label_smoothing, "cross-entropy label smoothing in [0, 1)")
      ->capture_default_str();
  cmd->add_option("--limit-train", options->limit_train, "use the first N training images (0: all)");
  cmd->add_option("--limit-test", options->limit_test, "use the first N test images (0: all)");
  cmd->add_option("--seed", options->seed, "seed of initialisation, order and augmentation")
      ->check(non_negative_integer())
      ->capture_default_str();
  cmd->add_option("--checkpoint", options->checkpoint, "write a checkpoint here after every epoch");
  cmd->add_option("--resume", options->resume, "continue from this checkpoint");
  cmd->add_option("--metrics-json", options->metrics_json, "write per-epoch metrics here (JSON)");
  cmd->add_option("--synthetic-shape", *synthetic_shape, "image shape CxHxW of --data synthetic")
      ->capture_default_str();
  cmd->add_flag("--cuda-graph", options->cuda_graph, "capture the training step in a CUDA graph");
  CLI::Option* memory_plan =
      cmd->add_option("--memory-plan", options->memory_plan,
                      "with --cuda-graph: static (the captured step is served from one arena laid out offline from a "
                      "recorded probe capture) or cached (the graph's pool follows the caching allocator)")
          ->check(CLI::IsMember({"static", "cached"}))
          ->capture_default_str();
  cmd->add_option("--memory-budget", options->memory_budget,
                  "fit the step's peak allocated memory into SIZE (6GiB, 512MiB) or a FRACTION of the measured peak "
                  "(0.5) by recomputing blocks in backward (ResNet blocks, or GPT transformer blocks), the cheapest set that fits");
  add_default_on_switch(*cmd, "oom-retry", options->oom_retry, "on out of memory, halve the batch size and continue");
  cmd->add_flag("--allow-nonfinite", options->allow_nonfinite,
                "go on when the loss becomes NaN or infinite (default: stop with an error, keeping the last checkpoint)");
  cmd->add_option("--seq-len", options->seq_len,
                  "GPT: tokens per window, in training and evaluation (default: the model's context); with a shape "
                  "schedule (--seq-len-range, --shape-schedule) training takes the schedule's lengths and evaluation "
                  "keeps this default, fixed");
  cmd->add_option("--steps", options->steps, "GPT: optimizer steps in all")->capture_default_str();
  cmd->add_option("--eval-interval", options->eval_interval,
                  "GPT: steps between evaluations (validation loss, checkpoint, metrics)")
      ->capture_default_str();
  cmd->add_option("--eval-batches", options->eval_batches, "GPT: validation batches per evaluation (0: all)")
      ->capture_default_str();
  cmd->add_option("--warmup-steps", options->warmup_steps,
                  "GPT: linear warm-up steps of the cosine schedule (default min(100, steps / 10))");
  cmd->add_option("--grad-clip", options->grad_clip, "GPT: clip gradients to this global norm (0: off)")
      ->capture_default_str();
  cmd->add_option("--val-fraction", options->validation_fraction,
                  "GPT: the end of a single text or token file kept for validation")
      ->capture_default_str();
  auto shapes = std::make_shared<ShapeScheduleFlags>();
  add_shape_schedule_flags(*cmd, *shapes,
                           {.read_help = "GPT: step k trains on entry k (the file needs --steps entries)",
                            .images = false,
                            .write = true});
  auto launch = std::make_shared<LaunchFlags>();
  add_launch_flags(*cmd, *launch);
  auto nvtx = std::make_shared<bool>(false);
  cmd->add_flag("--nvtx", *nvtx, "mark every module's forward and backward as NVTX ranges (Nsight Systems shows layers)");
  add_precision_flags(*cmd, options->precision, options->channels_last);
  cmd->add_flag("--sync-batch-norm", options->sync_batch_norm,
                "data parallel: batch norm statistics over all ranks' batches (default: each rank's own)");
  cmd->add_option("--bucket-cap-mb", options->bucket_cap_mb,
                  "data parallel: gradient bucket size of the all-reduce in MiB (fractions allowed, from 1 KiB)")
      ->capture_default_str();
  cmd->add_option("--backend", options->backend,
                  "data parallel: auto (NCCL on GPUs, Gloo on the CPU), nccl, or gloo (CPU, or GPUs through pinned "
                  "host memory)")
      ->capture_default_str();
  cmd->add_option("--dist-timeout", options->dist_timeout_s,
                  "data parallel: seconds any wait for the other ranks may take (joining, store, collectives) before "
                  "the run stops naming the rank that did not answer")
      ->capture_default_str();
  cmd->callback([cmd, options, synthetic_shape, memory_plan, shapes, launch, nvtx] {
    train::use_language_model_defaults(*options, [cmd](const char* flag) { return cmd->count(flag) > 0; });
    // Drawn from --seed for --steps steps; a resumed run draws the same schedule again.
    if (std::optional<data::ShapeSchedule> schedule = shape_schedule_from_flags(
            "train", *shapes, {.batch_size = cmd->count("--batch-size") > 0, .seq_len = cmd->count("--seq-len") > 0},
            {.seed = options->seed, .steps = options->steps}))
      options->shape_schedule = std::make_shared<const data::ShapeSchedule>(std::move(*schedule));
    if (memory_plan->count() > 0 && !options->cuda_graph)
      throw ValueError("--memory-plan lays out a captured step's memory, so it needs --cuda-graph");
    if (launch->launching()) {
      parse_synthetic_shape(*synthetic_shape, *options);
      options->data_parallel = true;  // what the workers will be: checks their options once, here
      train::validate(*options);
      const int code = launch_workers(*launch, options->device, "train", /*cpu_workers=*/true);
      if (code != 0) throw ExitWith{code};
      return;
    }
    options->data_parallel = launched_as_worker();
    run_train(*options, *synthetic_shape, *shapes, *nvtx);
  });
}

}  // namespace sublet::cli
