// Arbitrary bytes as a pickle, gzip-compressed or not, then as a PyTorch snapshot: an IoError or a
// Document whose every value can be read, and a converted trace whose frees pair with live allocs
// and which replays; never a crash, a hang, a leak or another exception.
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "analysis/pickle_reader.h"
#include "analysis/pytorch_snapshot.h"
#include "analysis/replay.h"
#include "core/errors.h"

namespace {

using sublet::memory::pickle::Kind;
using sublet::memory::pickle::Value;

// Every value reachable from the root, each node once (a pickle may share and even loop).
void read_everything(const sublet::memory::pickle::Document& doc) {
  std::vector<bool> seen(doc.node_count());
  std::vector<Value> todo{doc.root()};
  while (!todo.empty()) {
    const Value v = todo.back();
    todo.pop_back();
    if (seen[v.node()]) continue;
    seen[v.node()] = true;
    switch (v.kind()) {
      case Kind::None: break;
      case Kind::Bool: (void)v.as_bool(); break;
      case Kind::Int: (void)v.as_int(); (void)v.as_float(); break;
      case Kind::BigInt:
        try {
          (void)v.as_uint64();
        } catch (const sublet::IoError&) {
        }
        break;
      case Kind::Float: (void)v.as_float(); break;
      case Kind::String: (void)v.as_string().size(); break;
      case Kind::Bytes: (void)v.as_bytes().size(); break;
      case Kind::List:
      case Kind::Tuple:
        for (std::size_t i = 0; i < v.size(); ++i) todo.push_back(v.at(i));
        break;
      case Kind::Dict:
        for (std::size_t i = 0; i < v.size(); ++i) {
          todo.push_back(v.key_at(i));
          todo.push_back(v.value_at(i));
        }
        (void)v.find("device_traces");
        break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace pickle = sublet::memory::pickle;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    if (pickle::is_gzip(bytes)) bytes = pickle::gunzip(bytes, "input");
    const pickle::Document doc = pickle::parse(std::move(bytes), "input");
    read_everything(doc);
    const auto snapshot = sublet::memory::convert_pytorch_snapshot(doc, 0, "input");
    std::unordered_set<std::uint64_t> live;
    for (const auto& e : snapshot.events) {
      if (e.action == sublet::memory::TraceEvent::Action::Alloc && !live.insert(e.id).second) std::abort();
      if (e.action == sublet::memory::TraceEvent::Action::Free && live.erase(e.id) != 1) std::abort();
    }
    // Sizes are arbitrary: a 64 MiB simulated device refuses the large ones (OOM is an answer).
    sublet::memory::replay_trace(snapshot.events, snapshot.alloc_conf, std::size_t{64} << 20);
  } catch (const sublet::IoError&) {
  }
  return 0;
}
