// sublet: the command-line front end. Subcommands live in their own files (see commands.h).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <system_error>

#include "cli/commands.h"
#include "cli/crash_report.h"
#include "cli/flag_checks.h"
#include "cli/openmp_wait_policy.h"
#include "cli/version.h"
#include "memory/config.h"
#include "core/errors.h"
#include "core/switch_report.h"
#include "core/tuning.h"
#include "core/printable.h"

namespace {

// "loopA/x: Too many levels of symbolic links" from "filesystem error: status: Too many ... [loopA/x]".
std::string describe_filesystem_error(const std::filesystem::filesystem_error& e) {
  std::string paths;
  if (!e.path1().empty()) paths += e.path1().string();
  if (!e.path2().empty()) paths += (paths.empty() ? "" : ", ") + e.path2().string();
  return sublet::printable(paths.empty() ? e.code().message() : paths + ": " + e.code().message());
}

bool flush_standard_output() {
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout.good();
  if (failed) std::cerr << "error: could not write the output to standard output (" << std::strerror(errno) << ")\n";
  return !failed;
}

}  // namespace

int main(int argc, char** argv) {
  // One fixed OpenMP wait policy (cli/openmp_wait_policy.h) unless the user chose one. libgomp
  // reads the variables when it is loaded, before main(): set the default and run this program
  // again, once.
  if (const auto variable = sublet::cli::openmp_wait_default(sublet::process_environment())) {
    setenv(variable->first.c_str(), variable->second.c_str(), /*overwrite=*/1);
    execv("/proc/self/exe", argv);  // returns only on failure: then go on with libgomp's default
  }
  sublet::cli::install_crash_report();
  CLI::App app{"sublet: a small C++ deep-learning runtime with a PyTorch-style caching allocator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", sublet::cli::version_text());
  app.failure_message(sublet::cli::failure_message);
  // Every command refuses a bad switch or a bad SUBLET_ALLOC_CONF (or PyTorch's PYTORCH_ALLOC_CONF or
  // PYTORCH_CUDA_ALLOC_CONF) before it starts work, including those that create their allocators
  // late (profile) or not from the environment at all (bench alloc); and says once when the
  // settings come from a PyTorch variable or one of them is not used.
  app.parse_complete_callback([] {
    sublet::tuning();  // a bad switch fails here too (ValueError naming it)
    for (const std::string& warning : sublet::environment_warnings(sublet::environment_names()))
      std::cerr << "warning: " << warning << "\n";
    sublet::memory::AllocatorConfig::from_environment();
    const sublet::memory::ConfigOrigin origin = sublet::memory::config_origin_from_environment();
    // Said when the settings come from one of PyTorch's variables, or a variable was ignored.
    if (origin.ignored_pytorch || (!origin.variable.empty() && origin.variable != sublet::memory::kSubletAllocConf))
      std::cerr << "note: allocator configuration " << origin.describe() << "\n";
  });
  sublet::cli::add_demo_command(app);
  sublet::cli::add_bench_alloc_command(app);
  sublet::cli::add_bench_step_command(app);
  sublet::cli::add_replay_command(app);
  sublet::cli::add_plan_command(app);
  sublet::cli::add_profile_command(app);
  sublet::cli::add_train_command(app);
  sublet::cli::add_config_command(app);
  sublet::cli::add_generate_command(app);
  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
  } catch (const sublet::cli::ExitWith& e) {
    code = e.code;
  } catch (const sublet::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    code = 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the file system refused (a link loop, a name too long): the user's to fix.
    std::cerr << "error: " << describe_filesystem_error(e) << "\n";
    code = 1;
  } catch (const std::system_error& e) {
    // A write the system refused (fmt::print to a full or closed standard output, ENOSPC).
    std::cerr << "error: " << sublet::printable(e.what()) << "\n";
    code = 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory (a buffer for the requested sizes could not be allocated); "
                 "try smaller inputs or settings\n";
    code = 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    code = 2;
  }
  // A command's result is often its standard output: a write that failed (a full disk, a closed
  // pipe) must not end with status 0.
  if (!flush_standard_output() && code == 0) code = 1;
  return code;
}