#include "cli/flag_checks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/atomic_write.h"
#include "core/errors.h"

namespace sublet::cli {
namespace {

namespace fs = std::filesystem;

// Creating a file is the only test that holds for root, read-only mounts and /proc alike.
void check_folder_takes_files(const std::string& flag, const fs::path& shown, const fs::path& folder) {
  const fs::path probe = folder / (".sublet-write-check." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0) {
    throw IoError(flag + " " + shown.string() + ": cannot create files in " + folder.string() + " (" +
                  std::strerror(errno) + ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

// The parsed subcommand chain from the top, deepest last.
std::vector<const CLI::App*> parsed_chain(const CLI::App* app) {
  std::vector<const CLI::App*> chain{app};
  for (;;) {
    const auto subs = chain.back()->get_subcommands();
    if (subs.empty()) return chain;
    chain.push_back(subs.front());
  }
}

std::string command_path(const std::vector<const CLI::App*>& chain) {
  std::string path = "sublet";
  for (std::size_t i = 1; i < chain.size(); ++i) path += " " + chain[i]->get_name();
  return path;
}

std::string describe_type(const std::string& type_name) {
  if (type_name == "INT") return "an integer";
  if (type_name == "UINT") return "a non-negative integer";
  if (type_name == "FLOAT") return "a number";
  if (type_name == "TEXT") return "a value";
  if (type_name.find("FILE") != std::string::npos) return "a file name";  // TEXT:FILE with CLI::ExistingFile
  return "a value of type " + type_name;
}

}  // namespace

void check_output_file(const std::string& flag, const fs::path& path) {
  if (path.empty()) return;
  std::error_code error;
  if (!path.has_filename() || fs::is_directory(path, error)) {
    throw IoError(flag + " " + path.string() + ": expected a file name, found a folder");
  }
  const fs::path parent = fs::absolute(path).parent_path();
  if (!fs::exists(parent, error)) {
    throw IoError(flag + " " + path.string() + ": the directory " + parent.string() + " does not exist");
  }
  if (!fs::is_directory(parent, error)) {
    throw IoError(flag + " " + path.string() + ": " + parent.string() + " is a file, expected a directory");
  }
  // Links lead to the file written; devices and FIFOs are written in place; anything else that
  // is not a regular file is refused (core/atomic_write.h).
  const io::OutputTarget target = io::check_writable_target(path, flag + " " + path.string());
  if (target.in_place) return;
  check_folder_takes_files(flag, path, fs::absolute(target.path).parent_path());
}

void check_output_folder(const std::string& flag, const fs::path& path) {
  std::error_code error;
  if (fs::exists(path, error) && !fs::is_directory(path, error)) {
    throw IoError(flag + " " + path.string() + ": expected a folder, found a file");
  }
  fs::create_directories(path, error);
  if (error) throw IoError(flag + " " + path.string() + ": cannot create the folder (" + error.message() + ")");
  check_folder_takes_files(flag, path, path);
}

void add_default_on_switch(CLI::App& app, const std::string& name, bool& value, const std::string& description) {
  value = true;
  bool* target = &value;
  app.add_flag_callback("--" + name, [target] { *target = true; }, description + " (default on)");
  app.add_flag_callback("--no-" + name, [target] { *target = false; }, "turn --" + name + " off");
}

CLI::Validator existing_file_or_stdin() {
  return CLI::Validator([](std::string& text) { return text == "-" ? std::string() : CLI::ExistingFile(text); }, "FILE");
}

CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.find_first_not_of(" \t") != std::string::npos && text[text.find_first_not_of(" \t")] == '-')
          return "expected a non-negative integer, got '" + text + "'";
        return {};
      },
      "UINT");
}

std::string failure_message(const CLI::App* app, const CLI::Error& error) {
  const std::string hint = "Run with --help for more information.\n";
  const std::vector<const CLI::App*> chain = parsed_chain(app);
  const std::string text = error.what();

  // "Could not convert: --epochs = many": say what the flag takes.
  const std::string convert_prefix = "Could not convert: ";
  if (dynamic_cast<const CLI::ConversionError*>(&error) != nullptr && text.starts_with(convert_prefix)) {
    const auto equals = text.find(" = ", convert_prefix.size());
    if (equals != std::string::npos) {
      const std::string name = text.substr(convert_prefix.size(), equals - convert_prefix.size());
      const std::string value = text.substr(equals + 3);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        if (const CLI::Option* option = (*it)->get_option_no_throw(name)) {
          return name + ": expected " + describe_type(option->get_type_name()) + ", got '" + value + "'\n" + hint;
        }
      }
    }
  }
  // "--epochs: 1 required INT missing": a flag at the end of the line without its value.
  const std::string required = " required ";
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr && text.ends_with(" missing") &&
      text.find(required) != std::string::npos) {
    const auto colon = text.find(": ");
    const auto type_at = text.find(required) + required.size();
    const std::string type_name = text.substr(type_at, text.size() - std::string(" missing").size() - type_at);
    if (colon != std::string::npos) {
      return text.substr(0, colon) + ": expected " + describe_type(type_name) + " after it, got nothing\n" + hint;
    }
  }
  // "--epochs: At Most 1 required but received 2": a flag given twice.
  const std::string twice = ": At Most 1 required but received ";
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr && text.find(twice) != std::string::npos) {
    const auto at = text.find(twice);
    return text.substr(0, at) + ": given " + text.substr(at + twice.size()) + " times, expected once\n" + hint;
  }
  // "A subcommand is required" (also what `sublet bogus` gets): name the commands there are.
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr && text == "A subcommand is required") {
    const CLI::App* here = chain.back();
    std::string names;
    for (const CLI::App* sub : here->get_subcommands([](const CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    const std::vector<std::string> extra = here->remaining();
    return command_path(chain) + ": expected a command (" + names + ")" +
           (extra.empty() ? std::string(", got none") : ", got '" + extra.front() + "'") + "\n" + hint;
  }
  return CLI::FailureMessage::simple(app, error);
}

}  // namespace sublet::cli
