// The sublet-alloc-trace file (replay.h): written as text event by event and read with a
// streaming (SAX) parser straight into TraceEvents, so that neither side holds a JSON document
// of the whole trace: a trace of millions of events would take gigabytes as one document.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "core/atomic_write.h"
#include "core/input_file.h"
#include "core/printable.h"
#include "core/errors.h"
#include "analysis/replay.h"

namespace sublet::memory {
namespace {

using json = nlohmann::json;

// The fields of one event object as they arrive, checked when the object closes.
struct PendingEvent {
  bool has_action = false;
  std::string action;  // empty when "action" is not a string
  std::optional<std::uint64_t> id, size, stream;
  bool has_id = false, has_size = false, has_category = false;
  std::optional<std::string> category;  // nullopt when "category" is not a string
  std::string category_text;            // as written, for the error
};

// SAX handler of the whole file: either {"format": ..., "version": ..., "events": [...]} or a bare
// list of events. Values nested where a scalar belongs are skipped and count as the wrong type.
class TraceReader : public json::json_sax_t {
 public:
  explicit TraceReader(const std::string& path) : path_(path) {}

  std::vector<TraceEvent> finish() {
    if (top_is_object_) {
      if (format_ != "sublet-alloc-trace") throw IoError(path_ + ": expected \"format\": \"sublet-alloc-trace\"");
      if (version_text_ != "1" && version_text_ != "2")
        throw IoError(path_ + ": sublet-alloc-trace version " + printable(version_text_) + " is not one this build reads (1 or 2)");
      if (!saw_events_) throw IoError(path_ + ": expected an \"events\" list");
    }
    return std::move(events_);
  }

  bool null() override { return scalar("null"); }
  bool boolean(bool value) override { return scalar(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override { return scalar(std::to_string(value)); }
  bool number_unsigned(number_unsigned_t value) override { return scalar(std::to_string(value), value); }
  bool number_float(number_float_t, const string_t& text) override { return scalar(text); }
  bool string(string_t& value) override { return scalar(json(value).dump(), std::nullopt, &value); }
  bool binary(binary_t&) override { return scalar("binary"); }

  bool start_object(std::size_t) override {
    if (skip_depth_ > 0 || opening_skipped_value()) return ++skip_depth_, true;
    if (depth_ == 0) {
      top_is_object_ = true;
    } else if (in_event_list()) {
      pending_ = PendingEvent{};
      in_event_ = true;
    } else {
      return unexpected_container();
    }
    ++depth_;
    return true;
  }
  bool end_object() override {
    if (skip_depth_ > 0) return --skip_depth_, true;
    --depth_;
    if (in_event_ && depth_ == events_depth_) {
      in_event_ = false;
      complete_event();
    }
    return true;
  }
  bool start_array(std::size_t) override {
    if (skip_depth_ > 0 || opening_skipped_value()) return ++skip_depth_, true;
    if (depth_ == 0 || (top_is_object_ && depth_ == 1 && key_ == "events")) {
      saw_events_ = true;
      events_depth_ = depth_ + 1;
      ++depth_;
      return true;
    }
    return unexpected_container();
  }
  bool end_array() override {
    if (skip_depth_ > 0) return --skip_depth_, true;
    --depth_;
    return true;
  }
  bool key(string_t& key) override {
    if (skip_depth_ == 0) key_ = key;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw IoError(path_ + ": not valid JSON (" + e.what() + ")");
  }

 private:
  bool in_event_list() const { return saw_events_ && depth_ == events_depth_; }

  // A container where a scalar belongs (inside an event, or a top-level key other than
  // "events") is skipped; its key then holds a value of the wrong type.
  bool opening_skipped_value() {
    if (in_event_ && depth_ == events_depth_ + 1) {
      mark_wrong_type();
      return true;
    }
    return top_is_object_ && depth_ == 1 && key_ != "events";
  }
  bool unexpected_container() {
    if (top_is_object_ && depth_ == 1 && key_ == "events") throw IoError(path_ + ": expected an \"events\" list");
    if (in_event_list() || depth_ == 0) throw where("expected {\"action\": \"alloc\"|\"free\"|\"empty_cache\"|\"reset_peaks\", ...}");
    throw IoError(path_ + ": expected a trace object or a list of events");
  }

  IoError where(const std::string& what) const {
    return IoError(path_ + ": event " + std::to_string(events_seen_) + ": " + what);
  }

  void mark_wrong_type() {
    if (key_ == "action") pending_.has_action = true, pending_.action.clear();
    if (key_ == "id") pending_.has_id = true, pending_.id.reset();
    if (key_ == "size") pending_.has_size = true, pending_.size.reset();
    if (key_ == "stream") pending_.stream.reset();
    if (key_ == "category") pending_.has_category = true, pending_.category.reset(), pending_.category_text = "(a JSON container)";
  }

  bool scalar(const std::string& text, std::optional<std::uint64_t> unsigned_value = std::nullopt,
              const std::string* string_value = nullptr) {
    if (skip_depth_ > 0) return true;
    if (depth_ == 0) throw IoError(path_ + ": expected a trace object or a list of events");
    if (in_event_list()) throw where("expected {\"action\": \"alloc\"|\"free\"|\"empty_cache\"|\"reset_peaks\", ...}");
    if (in_event_ && depth_ == events_depth_ + 1) {
      if (key_ == "action") pending_.has_action = true, pending_.action = string_value ? *string_value : "";
      if (key_ == "id") pending_.has_id = true, pending_.id = unsigned_value;
      if (key_ == "size") pending_.has_size = true, pending_.size = unsigned_value;
      if (key_ == "stream") pending_.stream = unsigned_value;
      if (key_ == "category") {
        pending_.has_category = true;
        pending_.category_text = text;
        if (string_value) pending_.category = *string_value; else pending_.category.reset();
      }
      return true;
    }
    if (top_is_object_ && depth_ == 1) {
      if (key_ == "format") format_ = string_value ? *string_value : "";
      if (key_ == "version") version_text_ = text;
      if (key_ == "events") throw IoError(path_ + ": expected an \"events\" list");
    }
    return true;
  }

  void complete_event() {
    const PendingEvent& p = pending_;
    if (!p.has_action) throw where("expected {\"action\": \"alloc\"|\"free\"|\"empty_cache\"|\"reset_peaks\", ...}");
    if (p.action == "empty_cache" || p.action == "reset_peaks") {
      events_.push_back({.action = p.action == "empty_cache" ? TraceEvent::Action::EmptyCache : TraceEvent::Action::ResetPeaks});
      ++events_seen_;
      return;
    }
    if (p.action != "alloc" && p.action != "free")
      throw where("unknown action '" + printable(p.action) + "' (expected alloc, free, empty_cache or reset_peaks)");
    if (!p.id) throw where("a \"" + p.action + "\" event needs a non-negative integer \"id\"");
    TraceEvent e{.id = *p.id};
    if (p.action == "alloc") {
      if (!p.size) throw where("an alloc needs a non-negative integer \"size\"");
      e.action = TraceEvent::Action::Alloc;
      e.size = *p.size;
      e.stream = p.stream.value_or(0);
      if (p.has_category) {
        const auto category = p.category ? category_from_name(*p.category) : std::nullopt;
        if (!category) throw where("unknown \"category\" " + printable(p.category_text));
        e.category = *category;
      }
      if (!live_.insert(e.id).second) throw where("id " + std::to_string(e.id) + " allocated twice without a free");
    } else {
      e.action = TraceEvent::Action::Free;
      if (live_.erase(e.id) == 0) throw where("free of id " + std::to_string(e.id) + " that is not allocated");
    }
    events_.push_back(e);
    ++events_seen_;
  }

  const std::string path_;
  std::vector<TraceEvent> events_;
  std::unordered_set<std::uint64_t> live_;  // ids allocated and not yet freed
  std::size_t events_seen_ = 0;
  int depth_ = 0;
  int skip_depth_ = 0;
  int events_depth_ = -1;
  bool top_is_object_ = false, saw_events_ = false, in_event_ = false;
  std::string key_;
  std::string format_;
  std::string version_text_ = "1";  // a trace object without "version" is version 1
  PendingEvent pending_;
};

}  // namespace

void save_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  io::write_atomically(path, [&](std::FILE* file) {
    std::string text = "{\"format\":\"sublet-alloc-trace\",\"version\":2,\"events\":[";
    const auto flush = [&] {
      io::write_or_throw(file, text.data(), text.size(), path);
      text.clear();
    };
    for (std::size_t i = 0; i < events.size(); ++i) {
      const TraceEvent& e = events[i];
      text += i == 0 ? "\n" : ",\n";
      switch (e.action) {
        case TraceEvent::Action::Alloc:
          fmt::format_to(std::back_inserter(text), R"({{"action":"alloc","id":{},"size":{},"stream":{})", e.id, e.size, e.stream);
          if (e.category != BlockCategory::Unknown) fmt::format_to(std::back_inserter(text), R"(,"category":"{}")", category_name(e.category));
          text += '}';
          break;
        case TraceEvent::Action::Free: fmt::format_to(std::back_inserter(text), R"({{"action":"free","id":{}}})", e.id); break;
        case TraceEvent::Action::EmptyCache: text += R"({"action":"empty_cache"})"; break;
        case TraceEvent::Action::ResetPeaks: text += R"({"action":"reset_peaks"})"; break;
      }
      if (text.size() > (1 << 16)) flush();
    }
    text += "\n]}\n";
    flush();
  });
}

std::vector<TraceEvent> load_trace(const std::string& path) {
  const io::InputHandle file = io::open_input(path, {.kind = io::InputKind::file_or_stream});
  return read_trace(file.get(), path == "-" ? "standard input" : path);
}

std::vector<TraceEvent> read_trace(std::FILE* file, const std::string& source) {
  // Parsed as it is read: a trace costs its events, not its text.
  TraceReader reader(source);
  json::sax_parse(file, &reader);
  if (std::ferror(file)) throw IoError(source + ": read error");
  return reader.finish();
}

std::vector<TraceEvent> parse_trace(std::string_view text, const std::string& source) {
  TraceReader reader(source);
  json::sax_parse(text, &reader);
  return reader.finish();
}

}  // namespace sublet::memory
