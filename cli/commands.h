#pragma once
// Each sublet subcommand registers itself on the application from its own file.
#include <CLI/CLI.hpp>

namespace sublet::cli {

// Thrown by a command that has already said what went wrong (e.g. a data-parallel launcher whose
// worker failed): main() exits with `code` and prints nothing more.
struct ExitWith {
  int code;
};

void add_demo_command(CLI::App& app);
void add_bench_alloc_command(CLI::App& app);  // `bench alloc`; other benchmarks join bench_app(app)
CLI::App* bench_app(CLI::App& app);            // the `bench` parent, created on first use
void add_bench_step_command(CLI::App& app);   // `bench step`: training-step time and peak memory
void add_replay_command(CLI::App& app);
void add_plan_command(CLI::App& app);         // `plan`: a recorded step's lower bound and static arena
void add_profile_command(CLI::App& app);     // `profile`: the per-layer memory study (profile/)
void add_train_command(CLI::App& app);        // `train`: the training loop of train/trainer.h
void add_config_command(CLI::App& app);       // `config`: the allocator configuration and switches in force
void add_generate_command(CLI::App& app);     // `generate`: sampling from a trained GPT

}  // namespace sublet::cli
