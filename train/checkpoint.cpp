#include "train/checkpoint.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <map>

#include "core/errors.h"
#include "core/printable.h"
#include "runtime/io/safetensors.h"
#include "train/checkpoint_checksum.h"
#include "train/metrics_json.h"
#include "train/tensor_records.h"

namespace sublet::train {
namespace {

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";

// Reads metadata entries, turning absence or bad numbers into IoErrors that name the file.
class MetadataReader {
 public:
  MetadataReader(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata)
      : path_(path), metadata_(metadata) {}

  const std::string& text(const std::string& key) const {
    const auto it = metadata_.find(key);
    if (it == metadata_.end()) throw IoError(path_.string() + ": checkpoint metadata lacks '" + key + "'");
    return it->second;
  }

  template <typename T>
  T number(const std::string& key) const {
    const std::string& value = text(key);
    T out{};
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (error != std::errc() || end != value.data() + value.size()) {
      throw IoError(path_.string() + ": checkpoint metadata '" + key + "' is not a number: '" + printable(value) + "'");
    }
    return out;
  }

  bool boolean(const std::string& key) const {
    const std::string& value = text(key);
    if (value == "true") return true;
    if (value == "false") return false;
    throw IoError(path_.string() + ": checkpoint metadata '" + key + "' must be true or false, got '" + printable(value) + "'");
  }

 private:
  const std::filesystem::path& path_;
  const std::map<std::string, std::string>& metadata_;
};

std::string count_of(std::int64_t n, const char* singular, const char* plural) {
  return fmt::format("{} {}", n, n == 1 ? singular : plural);
}

}  // namespace

std::string ModelIdentity::describe() const {
  if (in_channels == 0) return fmt::format("{} (vocabulary {}, optimizer {})", model, num_classes, optimizer);
  return fmt::format("{} ({}, {}{}, optimizer {})", model, count_of(in_channels, "input channel", "input channels"),
                     count_of(num_classes, "class", "classes"), small_input_stem ? ", small-input stem" : "",
                     optimizer);
}

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  std::map<std::string, io::TensorRecord> tensors;
  for (const auto& [name, tensor] : checkpoint.model_state) tensors.emplace(kModelPrefix + name, to_record(tensor));
  for (const auto& [name, tensor] : checkpoint.optimizer_state) {
    tensors.emplace(kOptimizerPrefix + name, to_record(tensor));
  }
  const ModelIdentity& id = checkpoint.identity;
  const TrainingPosition& pos = checkpoint.position;
  // fmt's "{}" prints the shortest text that reads back to the same double: sums survive exactly.
  const std::map<std::string, std::string> metadata{
      {"format", kCheckpointFormat},
      {"format_version", std::to_string(kCheckpointFormatVersion)},
      {"model", id.model},
      {"in_channels", std::to_string(id.in_channels)},
      {"num_classes", std::to_string(id.num_classes)},
      {"small_input_stem", id.small_input_stem ? "true" : "false"},
      {"optimizer", id.optimizer},
      {"epoch", std::to_string(pos.epoch)},
      {"samples_in_epoch", std::to_string(pos.samples_in_epoch)},
      {"train_images", std::to_string(pos.train_images)},
      {"global_step", std::to_string(pos.global_step)},
      {"batch_size", std::to_string(pos.batch_size)},
      {"seed", std::to_string(pos.seed)},
      {"generator_state", pos.generator_state},
      {"epoch_loss_sum", fmt::format("{}", pos.epoch_loss_sum)},
      {"epoch_correct", std::to_string(pos.epoch_correct)},
      {"epoch_images", std::to_string(pos.epoch_images)},
      {"history", epochs_json_text(pos.history)},
      {"planned_epochs", std::to_string(pos.planned_epochs)},
      {"loss_scale", fmt::format("{}", pos.loss_scale)},
      {"loss_scale_growth_tracker", std::to_string(pos.loss_scale_growth_tracker)},
      {kChecksumMetadataKey, tensor_checksums_json(tensors)},
  };
  std::map<std::string, std::string> with_format = metadata;
  if (!checkpoint.precision.empty()) with_format["precision"] = checkpoint.precision;
  if (!checkpoint.memory_format.empty()) with_format["memory_format"] = checkpoint.memory_format;
  if (pos.epoch_tokens >= 0) with_format["epoch_tokens"] = std::to_string(pos.epoch_tokens);
  if (!pos.shape_schedule.empty()) with_format["shape_schedule"] = pos.shape_schedule;
  io::save_safetensors(path, tensors, with_format);
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  io::SafetensorsFile file = io::load_safetensors(path);  // IoError for anything corrupt
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kCheckpointFormat) {
    throw IoError(path.string() + ": not a sublet training checkpoint (metadata 'format' is " +
                  (format == file.metadata.end() ? std::string("missing") : "'" + printable(format->second) + "'") +
                  ", expected '" + kCheckpointFormat + "')");
  }
  const MetadataReader meta(path, file.metadata);
  if (const auto checksums = file.metadata.find(kChecksumMetadataKey); checksums != file.metadata.end())
    verify_tensor_checksums(path, checksums->second, file.tensors);
  const int version = meta.number<int>("format_version");
  if (version != kCheckpointFormatVersion) {
    throw IoError(fmt::format("{}: checkpoint format version {}, this build reads version {}", path.string(), version,
                              kCheckpointFormatVersion));
  }
  Checkpoint out;
  out.identity.model = meta.text("model");
  out.identity.in_channels = meta.number<std::int64_t>("in_channels");
  out.identity.num_classes = meta.number<std::int64_t>("num_classes");
  out.identity.small_input_stem = meta.boolean("small_input_stem");
  out.identity.optimizer = meta.text("optimizer");
  // Absent before they were recorded: empty, "unknown".
  if (file.metadata.contains("precision")) out.precision = meta.text("precision");
  if (file.metadata.contains("memory_format")) out.memory_format = meta.text("memory_format");
  if (!out.precision.empty() && out.precision != "fp32" && out.precision != "bf16" && out.precision != "fp16")
    throw IoError(path.string() + ": checkpoint metadata 'precision' is '" + printable(out.precision) + "', expected fp32, bf16 or fp16");
  if (!out.memory_format.empty() && out.memory_format != "contiguous" && out.memory_format != "channels_last")
    throw IoError(path.string() + ": checkpoint metadata 'memory_format' is '" + printable(out.memory_format) +
                  "', expected contiguous or channels_last");
  TrainingPosition& pos = out.position;
  pos.epoch = meta.number<std::int64_t>("epoch");
  pos.samples_in_epoch = meta.number<std::int64_t>("samples_in_epoch");
  pos.train_images = meta.number<std::int64_t>("train_images");
  pos.global_step = meta.number<std::int64_t>("global_step");
  pos.batch_size = meta.number<std::int64_t>("batch_size");
  pos.seed = meta.number<std::uint64_t>("seed");
  pos.generator_state = meta.text("generator_state");
  pos.epoch_loss_sum = meta.number<double>("epoch_loss_sum");
  pos.epoch_correct = meta.number<std::int64_t>("epoch_correct");
  pos.epoch_images = meta.number<std::int64_t>("epoch_images");
  pos.history = parse_epochs_json(meta.text("history"), path.string());
  // Absent from checkpoints written before it was saved: 0, "unknown".
  if (file.metadata.contains("planned_epochs")) pos.planned_epochs = meta.number<std::int64_t>("planned_epochs");
  // Absent before mixed precision: no loss scaler.
  if (file.metadata.contains("loss_scale")) {
    pos.loss_scale = meta.number<double>("loss_scale");
    pos.loss_scale_growth_tracker = meta.number<std::int64_t>("loss_scale_growth_tracker");
    if (!(pos.loss_scale >= 0.0 && std::isfinite(pos.loss_scale)) || pos.loss_scale_growth_tracker < 0)
      throw IoError(fmt::format("{}: checkpoint loss scale {} (growth tracker {}) is invalid: expected a finite scale "
                                ">= 0 and a count >= 0", path.string(), pos.loss_scale, pos.loss_scale_growth_tracker));
  }
  // Absent before GPT runs weighed their loss by tokens (-1), and in runs of fixed windows.
  if (file.metadata.contains("epoch_tokens")) pos.epoch_tokens = meta.number<std::int64_t>("epoch_tokens");
  if (file.metadata.contains("shape_schedule")) pos.shape_schedule = meta.text("shape_schedule");
  // A language model's (in_channels 0) samples are windows over train_images tokens, which may
  // outnumber them.
  const bool windows = out.identity.in_channels == 0;
  if (pos.epoch < 0 || pos.samples_in_epoch < 0 || (!windows && pos.samples_in_epoch > pos.train_images) ||
      pos.batch_size < 1 ||
      pos.epoch_images < 0 || pos.epoch_tokens < -1) {
    throw IoError(fmt::format("{}: checkpoint position is invalid (epoch {}, image {} of {}, batch size {})",
                              path.string(), pos.epoch, pos.samples_in_epoch, pos.train_images, pos.batch_size));
  }
  for (const auto& [name, record] : file.tensors) {
    if (name.starts_with(kModelPrefix)) {
      out.model_state.emplace_back(name.substr(std::string(kModelPrefix).size()), from_record(record, name));
    } else if (name.starts_with(kOptimizerPrefix)) {
      out.optimizer_state.emplace_back(name.substr(std::string(kOptimizerPrefix).size()), from_record(record, name));
    } else {
      throw IoError(path.string() + ": unexpected checkpoint entry '" + printable(name) + "' (expected model.* or optimizer.*)");
    }
  }
  return out;
}

void check_same_model(const std::filesystem::path& path, const ModelIdentity& expected, const ModelIdentity& found) {
  if (expected == found) return;
  throw ValueError("checkpoint " + path.string() + " was written for " + found.describe() + ", but this run uses " +
                   expected.describe() + "; pass the --model, --data and --optimizer of the run that wrote it");
}

}  // namespace sublet::train
