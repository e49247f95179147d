#pragma once
// Checks shared by the subcommands, so that a bad flag value fails before the work (a training
// run, a benchmark) and not after it, with the same wording in every command.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

namespace sublet::cli {

// An output file such as --json or --checkpoint: its folder must exist and take a new file, and
// the path must not be a folder. Throws IoError naming the flag, the path and what is wrong.
void check_output_file(const std::string& flag, const std::filesystem::path& path);

// An output folder such as profile --out: created when missing; must take new files.
void check_output_folder(const std::string& flag, const std::filesystem::path& path);

// A switch that is on by default: --NAME turns it on, --no-NAME off; --help shows both with
// "(default on)" rather than CLI11's "--NAME,--no-NAME{false}".
void add_default_on_switch(CLI::App& app, const std::string& name, bool& value, const std::string& description);

// CLI11's ExistingFile, with "-" (standard input) allowed too: for traces and snapshots.
CLI::Validator existing_file_or_stdin();

// CLI11 turns "-1" into 2^64-1 for unsigned options; this check refuses it instead.
CLI::Validator non_negative_integer();

// CLI11's parse errors in sublet's words where CLI11's own say too little: "Could not convert:
// --epochs = many" becomes "--epochs: expected an integer, got 'many'", a flag given twice says
// so, and a missing or unknown command lists the commands. Install with app.failure_message().
std::string failure_message(const CLI::App* app, const CLI::Error& error);

}  // namespace sublet::cli
