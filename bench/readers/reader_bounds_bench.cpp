// reader_bounds_bench: the time and memory of every reader of user files, on inputs as large as
// users give them, against the bounds docs/input-limits.md states (events or bytes per second,
// bytes of memory per event or per input byte). Each reader runs in a child process of its own,
// so that its peak resident memory is its own. Prints a table, writes the rows as JSON, and exits
// 1 when a row misses its bound.
//   reader_bounds_bench [--events N] [--streams N] [--json PATH]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/pytorch_rules.h"
#include "analysis/pytorch_snapshot.h"
#include "analysis/replay.h"
#include "analysis/static_plan.h"
#include "core/atomic_write.h"
#include "runtime/data/mnist.h"
#include "runtime/io/file_bytes.h"

namespace {

namespace fs = std::filesystem;
using sublet::memory::TraceEvent;

// A sublet-alloc-trace of `events` events on `streams` streams: blocks of 4 KiB-1 MiB, at most
// 1000 live at once.
void write_trace(const fs::path& path, std::size_t events, std::size_t streams) {
  std::ofstream out(path);
  out << R"({"format": "sublet-alloc-trace", "version": 2, "events": [)";
  std::uint64_t next = 0, oldest = 0;
  for (std::size_t i = 0; i < events; ++i) {
    out << (i ? ",\n" : "\n");
    if (next - oldest < 1000 && (i % 2 == 0 || next == oldest)) {
      out << R"({"action": "alloc", "id": )" << next << R"(, "size": )" << (4096 << (next % 9)) << R"(, "stream": )"
          << next % streams << "}";
      ++next;
    } else {
      out << R"({"action": "free", "id": )" << oldest++ << "}";
    }
  }
  out << "\n]}\n";
}

// `streams` streams each allocating one 1000-byte block, then every block freed (one segment per
// stream: the shape that was quadratic when streams were found by a scan).
void write_streams_trace(const fs::path& path, std::size_t streams) {
  std::ofstream out(path);
  out << R"({"format": "sublet-alloc-trace", "version": 2, "events": [)";
  for (std::size_t i = 0; i < streams; ++i)
    out << (i ? ",\n" : "\n") << R"({"action": "alloc", "id": )" << i << R"(, "size": 1000, "stream": )" << i << "}";
  for (std::size_t i = 0; i < streams; ++i) out << ",\n" << R"({"action": "free", "id": )" << i << "}";
  out << "\n]}\n";
}

// A PyTorch snapshot (pickle protocol 2) of one 1 GiB segment and rounds of 1000 4 KiB blocks
// allocated and freed, `entries` trace entries in all, written opcode by opcode.
void write_snapshot(const fs::path& path, std::size_t entries) {
  std::string out = "\x80\x02}";
  const auto text = [&](const std::string& s) {
    out += 'X';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
    out += s;
  };
  const auto integer = [&](std::uint32_t v) {
    out += 'J';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  const auto entry = [&](const char* action, std::uint32_t addr, std::uint32_t size) {
    out += "}(";
    text("action"), text(action), text("addr"), integer(addr), text("size"), integer(size), text("stream"), integer(0);
    out += 'u';
  };
  text("device_traces");
  out += "]](";
  entry("segment_alloc", 1u << 30, 1u << 30);
  std::size_t written = 1;
  while (written < entries) {
    for (const char* action : {"alloc", "free_completed"})
      for (std::uint32_t j = 0; j < 1000 && written < entries; ++j, ++written) {
        entry(action, (1u << 30) + j * 4096, 4096);
        if (written % 1000 == 0) out += "e(";  // APPENDS in batches, as Python's pickler
      }
  }
  out += "eas.";
  std::ofstream(path, std::ios::binary) << out;
}

struct Row {
  std::string reader;
  std::string input;
  std::size_t items = 0;      // events, entries or bytes
  std::string unit;           // "events", "bytes"
  double seconds = 0;
  double peak_bytes = 0;      // resident memory the reader added
  double min_per_second = 0;  // the bounds
  double max_bytes_per_item = 0;
  bool ok() const { return seconds > 0 && items / seconds >= min_per_second && peak_bytes / items <= max_bytes_per_item; }
};

// Runs `work` in a child; its wall time and the resident memory it added.
void measure(Row& row, const std::function<void()>& work) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    const auto start = std::chrono::steady_clock::now();
    int code = 0;
    try {
      work();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", row.reader.c_str(), e.what());
      code = 1;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    const double result[2] = {seconds, static_cast<double>(after.ru_maxrss - before.ru_maxrss) * 1024.0};
    if (::write(pipe_fds[1], result, sizeof(result)) != sizeof(result)) code = 1;
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  double result[2] = {0, 0};
  const bool got = ::read(pipe_fds[0], result, sizeof(result)) == sizeof(result);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (got && WIFEXITED(status) && WEXITSTATUS(status) == 0) row.seconds = result[0], row.peak_bytes = result[1];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t events = 1000000, streams = 100000;
  std::string json_path = "reader_bounds.json";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--events") events = std::stoul(argv[i + 1]);
    else if (flag == "--streams") streams = std::stoul(argv[i + 1]);
    else if (flag == "--json") json_path = argv[i + 1];
    else return std::fprintf(stderr, "unknown flag %s\n", argv[i]), 2;
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("reader_bounds_{}", ::getpid());
  fs::create_directories(dir);
  const fs::path one_stream = dir / "one_stream.json", many_streams = dir / "many_streams.json", snapshot = dir / "snapshot.pickle";
  write_trace(one_stream, events, 1);
  write_streams_trace(many_streams, streams);
  write_snapshot(snapshot, events / 2);
  // MNIST's training images: 60,000 of 28x28, gzip-compressed as distributed.
  sublet::data::IdxImages images{.count = 60000, .rows = 28, .cols = 28};
  images.pixels.resize(std::size_t{60000} * 28 * 28);
  for (std::size_t i = 0; i < images.pixels.size(); ++i) images.pixels[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 24);
  sublet::data::write_idx_images(dir / "images-idx3-ubyte.gz", images);

  const auto trace_events = [](const fs::path& p) { return sublet::memory::load_trace(p.string()); };
  std::vector<Row> rows;
  const auto row = [&](std::string reader, std::string input, std::size_t items, std::string unit, double per_second,
                       double bytes_per_item, const std::function<void()>& work) {
    Row r{std::move(reader), std::move(input), items, std::move(unit), 0, 0, per_second, bytes_per_item};
    measure(r, work);
    rows.push_back(r);
  };
  const std::size_t capacity = std::size_t{1} << 40;
  row("trace (JSON)", "1 stream", events, "events", 1e6, 100, [&] { trace_events(one_stream); });
  row("trace (JSON)", fmt::format("{} streams", streams), 2 * streams, "events", 1e6, 100, [&] { trace_events(many_streams); });
  row("snapshot (pickle)", "1 stream", events / 2, "events", 2e5, 1000,
      [&] { sublet::memory::load_pytorch_snapshot(snapshot.string(), 0); });
  row("replay, sublet rules", "1 stream", events, "events", 5e5, 200,
      [&] { sublet::memory::replay_trace(trace_events(one_stream), "", capacity); });
  row("replay, sublet rules", fmt::format("{} streams", streams), 2 * streams, "events", 2e4, 4000,
      [&] { sublet::memory::replay_trace(trace_events(many_streams), "", capacity); });
  row("replay, PyTorch rules", "1 stream", events, "events", 5e5, 300,
      [&] { sublet::memory::replay_trace_pytorch(trace_events(one_stream), "", capacity); });
  row("replay, PyTorch rules", fmt::format("{} streams", streams), 2 * streams, "events", 2e4, 4000,
      [&] { sublet::memory::replay_trace_pytorch(trace_events(many_streams), "", capacity); });
  row("plan (static arena)", "1 stream", events, "events", 2e5, 400,
      [&] { sublet::memory::plan_static_arena(trace_events(one_stream)); });
  row("MNIST images (.gz)", "60000 x 28x28", images.pixels.size(), "bytes", 2e7, 3,
      [&] { sublet::data::read_idx_images(dir / "images-idx3-ubyte.gz"); });

  fmt::print("{:<24} {:<16} {:>10} {:>8} {:>9} {:>14} {:>10} {:>12} {:>6}\n", "reader", "input", "items", "unit",
             "seconds", "items/s", "bytes/item", "bound", "met");
  nlohmann::json out = nlohmann::json::array();
  bool all_ok = true;
  for (const Row& r : rows) {
    const double per_second = r.seconds > 0 ? r.items / r.seconds : 0;
    const double per_item = r.peak_bytes / r.items;
    all_ok = all_ok && r.ok();
    fmt::print("{:<24} {:<16} {:>10} {:>8} {:>9.3f} {:>14.0f} {:>10.1f} {:>12} {:>6}\n", r.reader, r.input, r.items, r.unit,
               r.seconds, per_second, per_item, fmt::format(">={:.0e}/s <={:.0f}", r.min_per_second, r.max_bytes_per_item),
               r.ok() ? "yes" : "NO");
    out.push_back({{"reader", r.reader}, {"input", r.input}, {"items", r.items}, {"unit", r.unit}, {"seconds", r.seconds},
                   {"items_per_second", per_second}, {"peak_bytes", r.peak_bytes}, {"bytes_per_item", per_item},
                   {"bound_items_per_second", r.min_per_second}, {"bound_bytes_per_item", r.max_bytes_per_item},
                   {"met", r.ok()}});
  }
  sublet::io::write_text_atomically(json_path, nlohmann::json({{"format", "sublet-reader-bounds"}, {"rows", out}}).dump(2) + "\n");
  fmt::print("wrote {}\n", json_path);
  fs::remove_all(dir);
  return all_ok ? 0 : 1;
}
