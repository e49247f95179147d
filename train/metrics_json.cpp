#include "train/metrics_json.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/atomic_write.h"

namespace sublet::train {
namespace {

using nlohmann::json;

json epoch_json(const EpochMetrics& m) {
  if (m.language_model) {
    return json{{"evaluation", m.epoch},
                {"step", m.step},
                {"train_loss", m.train_loss},
                {"val_loss", m.val_loss},
                {"val_perplexity", m.val_perplexity},
                {"tokens_per_s", m.tokens_per_s},
                {"tokens", m.tokens},
                {"peak_allocated_bytes", m.peak_allocated_bytes},
                {"peak_reserved_bytes", m.peak_reserved_bytes},
                {"seconds", m.seconds},
                {"batch_size", m.batch_size},
                {"num_sync_all_streams", m.device_syncs}};
  }
  return json{{"epoch", m.epoch},
              {"train_loss", m.train_loss},
              {"train_acc", m.train_acc},
              {"test_acc", m.test_acc},
              {"img_per_s", m.img_per_s},
              {"peak_allocated_bytes", m.peak_allocated_bytes},
              {"peak_reserved_bytes", m.peak_reserved_bytes},
              {"seconds", m.seconds},
              {"batch_size", m.batch_size},
              {"num_sync_all_streams", m.device_syncs}};
}

json epochs_array(const std::vector<EpochMetrics>& history) {
  json epochs = json::array();
  for (const EpochMetrics& m : history) epochs.push_back(epoch_json(m));
  return epochs;
}

}  // namespace

std::string metrics_json_text(const RunDescription& run, const std::vector<EpochMetrics>& history) {
  json doc{{"model", run.model}, {"device", run.device}, {"data", run.data}, {"epochs", epochs_array(history)}};
  if (const std::optional<ShapeScheduleSummary>& s = run.shape_schedule) {
    doc["shape_schedule"] = json{{"seq_len_min", s->seq_len_min},           {"seq_len_max", s->seq_len_max},
                                 {"multiple", s->multiple},                 {"tokens_per_batch", s->tokens_per_batch},
                                 {"seed", s->seed},                         {"steps", s->steps},
                                 {"eval_seq_len", s->eval_seq_len}};
  }
  if (!history.empty() && history.back().language_model) {
    doc["final_val_loss"] = history.back().val_loss;
    doc["final_val_perplexity"] = history.back().val_perplexity;
  } else {
    doc["final_test_acc"] = history.empty() ? json(nullptr) : json(history.back().test_acc);
  }
  return doc.dump(2) + "\n";
}

void write_metrics_json(const std::filesystem::path& path, const RunDescription& run,
                        const std::vector<EpochMetrics>& history) {
  const std::string text = metrics_json_text(run, history);
  io::write_text_atomically(path, text);
}

std::string epochs_json_text(const std::vector<EpochMetrics>& history) { return epochs_array(history).dump(); }

std::vector<EpochMetrics> parse_epochs_json(const std::string& text, const std::string& origin) {
  std::vector<EpochMetrics> out;
  try {
    const json epochs = json::parse(text);
    if (!epochs.is_array()) throw IoError(origin + ": the epoch history is not a JSON array");
    for (const json& e : epochs) {
      EpochMetrics m;
      m.language_model = e.contains("evaluation");
      if (m.language_model) {
        m.epoch = e.at("evaluation").get<std::int64_t>();
        m.step = e.at("step").get<std::int64_t>();
        m.val_loss = e.at("val_loss").get<double>();
        m.val_perplexity = e.at("val_perplexity").get<double>();
        m.tokens_per_s = e.at("tokens_per_s").get<double>();
        m.tokens = e.value("tokens", std::int64_t{0});  // absent in older checkpoints
      } else {
        m.epoch = e.at("epoch").get<std::int64_t>();
        m.train_acc = e.at("train_acc").get<double>();
        m.test_acc = e.at("test_acc").get<double>();
        m.img_per_s = e.at("img_per_s").get<double>();
      }
      m.train_loss = e.at("train_loss").get<double>();
      m.peak_allocated_bytes = e.at("peak_allocated_bytes").get<std::size_t>();
      m.peak_reserved_bytes = e.at("peak_reserved_bytes").get<std::size_t>();
      m.seconds = e.value("seconds", 0.0);
      m.batch_size = e.value("batch_size", std::int64_t{0});
      m.device_syncs = e.value("num_sync_all_streams", std::int64_t{0});  // absent in older checkpoints
      out.push_back(m);
    }
  } catch (const json::exception& e) {
    throw IoError(origin + ": bad epoch history JSON: " + e.what());
  }
  return out;
}

}  // namespace sublet::train
