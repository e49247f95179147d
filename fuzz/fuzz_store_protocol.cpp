// The rendezvous store's wire format (runtime/distributed/store_protocol.h) on arbitrary bytes,
// read as the server reads a connection (requests, frame after frame, under both the pre-token
// and the admitted limits) and as a client reads answers. Parsing must never crash or throw,
// must consume only bytes it was given, and every message it accepts must encode back to
// exactly the bytes it came from (one encoding per message).
#include <cstdint>
#include <cstdlib>
#include <span>

#include "runtime/distributed/store_protocol.h"

namespace {

namespace proto = sublet::distributed::protocol;

template <typename Parse, typename Encode>
void parse_stream(std::span<const std::uint8_t> bytes, std::size_t max_frame_bytes, Parse parse, Encode encode) {
  while (!bytes.empty()) {
    const auto parsed = parse(bytes, proto::ParseLimits{.max_frame_bytes = max_frame_bytes});
    if (parsed.status != proto::ParseStatus::Complete) {
      // Refused or waiting for more: nothing may be consumed, and a refusal says why.
      if (parsed.consumed != 0) std::abort();
      if (parsed.status == proto::ParseStatus::Malformed && parsed.error.empty()) std::abort();
      return;
    }
    if (parsed.consumed == 0 || parsed.consumed > bytes.size()) std::abort();
    if (parsed.consumed > proto::kLengthFieldBytes + max_frame_bytes) std::abort();
    const auto again = encode(parsed.message);
    if (again.size() != parsed.consumed || !std::equal(again.begin(), again.end(), bytes.begin())) std::abort();
    bytes = bytes.subspan(parsed.consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const auto parse_request = [](std::span<const std::uint8_t> b, const proto::ParseLimits& l) { return proto::parse_request(b, l); };
  const auto parse_response = [](std::span<const std::uint8_t> b, const proto::ParseLimits& l) { return proto::parse_response(b, l); };
  const auto encode_request = [](const proto::Request& m) { return proto::encode_request(m); };
  const auto encode_response = [](const proto::Response& m) { return proto::encode_response(m); };
  parse_stream(bytes, proto::kMaxHelloFrameBytes, parse_request, encode_request);
  parse_stream(bytes, proto::kMaxFrameBytes, parse_request, encode_request);
  parse_stream(bytes, proto::kMaxFrameBytes, parse_response, encode_response);
  return 0;
}
