// The store's wire format as pure functions: round trips, partial input, and the refusals the
// server relies on (oversized, malformed, foreign bytes). fuzz/fuzz_store_protocol.cpp explores
// the rest of the input space.
#include "runtime/distributed/store_protocol.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/errors.h"

namespace {

using namespace sublet::distributed::protocol;

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::vector<std::uint8_t> frame(std::uint32_t length, std::vector<std::uint8_t> body) {
  std::vector<std::uint8_t> out{static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
                                static_cast<std::uint8_t>(length >> 16), static_cast<std::uint8_t>(length >> 24)};
  for (const auto b : body) out.push_back(b);  // (insert() trips a GCC 12 -Warray-bounds false positive)
  return out;
}

TEST(StoreProtocol, RequestsRoundTrip) {
  std::string binary(300, '\0');
  for (std::size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i);
  const std::vector<Request> requests = {
      Request::hello("0123456789abcdef"), Request::set("sublet/nccl_id", binary), Request::set("k", ""),
      Request::get("a key", 1500),        Request::wait({"a", "b", "c"}, 0),      Request::wait({}, 7),
      Request::add("counter", -5),        Request::add("c", INT64_MIN)};
  for (const auto& request : requests) {
    const auto bytes = encode_request(request);
    const auto parsed = parse_request(bytes);
    ASSERT_EQ(parsed.status, ParseStatus::Complete) << opcode_name(request.op) << ": " << parsed.error;
    EXPECT_EQ(parsed.consumed, bytes.size());
    EXPECT_EQ(parsed.message, request) << opcode_name(request.op);
  }
}

TEST(StoreProtocol, ResponsesRoundTrip) {
  const std::vector<Response> responses = {Response::ok(), Response::value_of(std::string("\0\1\2", 3)),
                                           Response::count_of(-42), Response::timeout({"x", "y"}),
                                           Response::error("store full")};
  for (const auto& response : responses) {
    const auto bytes = encode_response(response);
    const auto parsed = parse_response(bytes);
    ASSERT_EQ(parsed.status, ParseStatus::Complete) << parsed.error;
    EXPECT_EQ(parsed.consumed, bytes.size());
    EXPECT_EQ(parsed.message, response);
  }
}

TEST(StoreProtocol, EveryPrefixIsIncompleteAndTwoMessagesParseOneByOne) {
  auto bytes = encode_request(Request::set("key", "value"));
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const auto parsed = parse_request(std::span(bytes.data(), n));
    EXPECT_EQ(parsed.status, ParseStatus::Incomplete) << n;
  }
  const auto second = encode_request(Request::get("key", 5));
  const std::size_t first_size = bytes.size();
  bytes.insert(bytes.end(), second.begin(), second.end());
  const auto first = parse_request(bytes);
  ASSERT_EQ(first.status, ParseStatus::Complete);
  EXPECT_EQ(first.consumed, first_size);
  const auto next = parse_request(std::span(bytes).subspan(first.consumed));
  ASSERT_EQ(next.status, ParseStatus::Complete);
  EXPECT_EQ(next.message, Request::get("key", 5));
}

TEST(StoreProtocol, OversizedFrameIsRefusedFromItsLengthAlone) {
  // Only the four length bytes have arrived: the frame is refused before its body is buffered.
  const auto parsed = parse_request(frame(kMaxFrameBytes + 1, {}));
  EXPECT_EQ(parsed.status, ParseStatus::Malformed);
  EXPECT_NE(parsed.error.find("exceeds the limit"), std::string::npos) << parsed.error;
  // The pre-token limit is much smaller.
  const auto hello_limited = parse_request(frame(kMaxHelloFrameBytes + 1, {}), {.max_frame_bytes = kMaxHelloFrameBytes});
  EXPECT_EQ(hello_limited.status, ParseStatus::Malformed);
  // An HTTP request reads as a length of ~1.4 GB.
  EXPECT_EQ(parse_request(bytes_of("GET / HTTP/1.1\r\n\r\n")).status, ParseStatus::Malformed);
}

TEST(StoreProtocol, MalformedBodiesAreRefusedWithAReason) {
  struct Case {
    const char* what;
    std::vector<std::uint8_t> bytes;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"empty frame", frame(0, {}), "empty frame"},
      {"unknown opcode", frame(1, {99}), "unknown request opcode 99"},
      {"response opcode as request", frame(1, {64}), "unknown request opcode 64"},
      {"hello without magic", frame(9, {1, 'H', 'T', 'T', 'P', 1, 0, 0, 0}), "magic"},
      {"key length beyond body", frame(6, {3, 200, 0, 0, 0, 'k'}), "frame ends inside key"},
      {"key over the limit", frame(5, {3, 0, 0, 1, 0}), "key of 65536 bytes exceeds the limit of 4096"},
      {"empty key", frame(9, {3, 0, 0, 0, 0, 1, 0, 0, 0}), "key is empty or not printable"},
      {"control character in key", frame(10, {3, 1, 0, 0, 0, '\n', 1, 0, 0, 0}), "not printable"},
      {"trailing bytes", frame(11, {3, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 7}), "1 unexpected bytes after the Get"},
      {"huge key count", frame(9, {4, 255, 255, 255, 255, 0, 0, 0, 0}), "count"},
      {"truncated add", frame(8, {5, 1, 0, 0, 0, 'k', 1, 2}), "frame ends inside delta"},
  };
  for (const auto& c : cases) {
    const auto parsed = parse_request(c.bytes);
    EXPECT_EQ(parsed.status, ParseStatus::Malformed) << c.what;
    EXPECT_NE(parsed.error.find(c.reason), std::string::npos) << c.what << ": " << parsed.error;
    EXPECT_EQ(parsed.consumed, 0u) << c.what;
  }
}

TEST(StoreProtocol, EncoderRefusesWhatTheParserWould) {
  EXPECT_THROW(encode_request(Request::set(std::string(kMaxKeyBytes + 1, 'k'), "v")), sublet::ValueError);
  EXPECT_THROW(encode_request(Request::set("k", std::string(kMaxValueBytes + 1, 'v'))), sublet::ValueError);
  EXPECT_THROW(encode_request(Request::get("", 1)), sublet::ValueError);
  EXPECT_THROW(encode_request(Request::get("tab\tkey", 1)), sublet::ValueError);
  EXPECT_THROW(encode_request(Request::hello(std::string(kMaxTokenBytes + 1, 't'))), sublet::ValueError);
  // The largest legal Set fits the frame limit exactly.
  const auto largest = encode_request(Request::set(std::string(kMaxKeyBytes, 'k'), std::string(kMaxValueBytes, 'v')));
  EXPECT_EQ(largest.size(), kLengthFieldBytes + kMaxFrameBytes);
  EXPECT_EQ(parse_request(largest).status, ParseStatus::Complete);
}

}  // namespace
