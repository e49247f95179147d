#include "runtime/data/gpt2_bpe.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <queue>

#include "core/errors.h"
#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/data/regular_file.h"
#include "runtime/data/unicode_classes.h"

namespace sublet::data {
namespace {

// GPT-2 writes each byte as one printable character so that vocabulary files are text: the
// printable Latin-1 bytes stand for themselves, the other 68 bytes for U+0100 onwards, in order.
struct ByteAlphabet {
  static constexpr char32_t kEnd = 0x100 + 68;
  std::array<std::int16_t, kEnd> byte_of{};  // code point -> byte, -1 outside the alphabet

  ByteAlphabet() {
    byte_of.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_of[printable ? b : 0x100 + extra++] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

std::string code_point_name(char32_t c) {
  char text[16];
  std::snprintf(text, sizeof(text), "U+%04X", static_cast<unsigned>(c));
  return text;
}

// The bytes a vocabulary string stands for; throws IoError naming `where` for a character
// outside the alphabet.
std::string alphabet_to_bytes(std::string_view text, const std::string& where) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string bytes;
  for (std::size_t i = 0; i < text.size();) {
    const DecodedChar c = decode_utf8_at(text, i);
    if (c.code_point == kInvalidUtf8) throw IoError(where + ": invalid UTF-8");
    if (c.code_point >= ByteAlphabet::kEnd || alphabet.byte_of[c.code_point] < 0) {
      throw IoError(where + ": character " + code_point_name(c.code_point) +
                    " is outside GPT-2's byte alphabet (printable Latin-1 and U+0100-U+0143)");
    }
    bytes.push_back(static_cast<char>(alphabet.byte_of[c.code_point]));
    i += c.length;
  }
  return bytes;
}

std::string read_text_file(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = read_regular_file(path);
  return {bytes.begin(), bytes.end()};
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::from_files(const std::filesystem::path& encoder_json,
                                        const std::filesystem::path& vocab_bpe) {
  return from_contents(read_text_file(encoder_json), read_text_file(vocab_bpe),
                       encoder_json.string(), vocab_bpe.string());
}

Gpt2Tokenizer Gpt2Tokenizer::from_folder(const std::filesystem::path& folder) {
  return from_files(folder / "encoder.json", folder / "vocab.bpe");
}

Gpt2Tokenizer Gpt2Tokenizer::from_contents(std::string_view encoder_json,
                                           std::string_view vocab_bpe,
                                           const std::string& encoder_name,
                                           const std::string& merges_name) {
  Gpt2Tokenizer tokenizer;
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(encoder_json);
  } catch (const nlohmann::json::exception& error) {
    throw IoError(encoder_name + ": expected a JSON object of token -> id, found invalid JSON (" +
                  error.what() + ")");
  }
  if (!encoder.is_object() || encoder.empty()) {
    throw IoError(encoder_name + ": expected a non-empty JSON object of token -> id, found " +
                  std::string(encoder.type_name()));
  }
  const std::size_t count = encoder.size();
  if (count > static_cast<std::size_t>(INT32_MAX)) {
    throw IoError(encoder_name + ": " + std::to_string(count) + " tokens is too many");
  }
  tokenizer.token_bytes_.resize(count);
  std::vector<bool> seen(count, false);
  std::unordered_map<std::string, std::int32_t> id_of;
  id_of.reserve(count);
  for (const auto& [key, value] : encoder.items()) {
    const std::string where = encoder_name + ": token \"" + key + "\"";
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() >= static_cast<std::int64_t>(count)) {
      throw IoError(where + ": expected an integer id in [0, " + std::to_string(count) +
                    ") (ids 0..n-1, each once), found " + value.dump());
    }
    const auto id = static_cast<std::int32_t>(value.get<std::int64_t>());
    if (seen[id]) {
      throw IoError(where + ": id " + std::to_string(id) + " is used by two tokens");
    }
    seen[id] = true;
    std::string bytes = alphabet_to_bytes(key, where);
    if (bytes.empty()) throw IoError(where + ": a token must stand for at least one byte");
    if (!id_of.emplace(bytes, id).second) {
      throw IoError(where + ": two tokens stand for the same bytes");
    }
    tokenizer.token_bytes_[id] = std::move(bytes);
  }
  std::vector<bool> made(count, false);  // single bytes and the results of merges so far
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) {
      throw IoError(encoder_name + ": expected a token for every byte, found none for byte " +
                    std::to_string(b));
    }
    tokenizer.byte_token_[b] = it->second;
    made[it->second] = true;
  }
  if (const auto it = id_of.find("<|endoftext|>"); it != id_of.end()) tokenizer.eot_id_ = it->second;

  const std::vector<std::string_view> lines = split_lines(vocab_bpe);
  for (std::size_t n = 0; n < lines.size(); ++n) {
    const std::string_view line = lines[n];
    if (line.empty() || (n == 0 && line.front() == '#')) continue;  // "#version: 0.2"
    const std::string where = merges_name + ": line " + std::to_string(n + 1);
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.size() != 2) {
      throw IoError(where + ": expected two tokens separated by a space, found " +
                    std::to_string(fields.size()) + " fields");
    }
    std::int32_t parts[2];
    for (int side = 0; side < 2; ++side) {
      const auto it = id_of.find(alphabet_to_bytes(fields[side], where));
      if (it == id_of.end()) {
        throw IoError(where + ": token \"" + std::string(fields[side]) + "\" is not in " +
                      encoder_name);
      }
      if (!made[it->second]) {
        throw IoError(where + ": token \"" + std::string(fields[side]) +
                      "\" is neither a single byte nor made by an earlier merge");
      }
      parts[side] = it->second;
    }
    const std::string joined = tokenizer.token_bytes_[parts[0]] + tokenizer.token_bytes_[parts[1]];
    const auto result = id_of.find(joined);
    if (result == id_of.end()) {
      throw IoError(where + ": the merge of \"" + std::string(fields[0]) + "\" and \"" +
                    std::string(fields[1]) + "\" is not a token of " + encoder_name);
    }
    const auto rank = static_cast<std::int32_t>(tokenizer.merges_.size());
    if (!tokenizer.merges_.emplace(pair_key(parts[0], parts[1]), Merge{rank, result->second}).second) {
      throw IoError(where + ": the merge of \"" + std::string(fields[0]) + "\" and \"" +
                    std::string(fields[1]) + "\" is listed twice");
    }
    made[result->second] = true;
  }
  return tokenizer;
}

// Merges the piece's bytes pair by pair, always the pair of lowest rank (leftmost among equals).
// A merge's result only appears in merges of higher rank (the load checks that merges are in
// learned order), so taking pairs from a heap merges exactly as GPT-2's reference loop does:
// every occurrence of the best pair, left to right, then the next best pair.
void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const {
  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
  };
  struct Candidate {
    std::int32_t rank;
    std::int32_t left;
    std::int32_t left_id;
    std::int32_t right_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  const auto n = static_cast<std::int32_t>(piece.size());
  std::vector<Symbol> symbols(piece.size());
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_token_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto offer = [&](std::int32_t left) {
    const std::int32_t right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, symbols[left].id, symbols[right].id});
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const Candidate best = heap.top();
    heap.pop();
    Symbol& left = symbols[best.left];
    // Stale when either side has been merged since: ids only grow, so equal ids mean the pair.
    if (left.id != best.left_id || left.next < 0 || symbols[left.next].id != best.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = merges_.at(pair_key(best.left_id, best.right_id)).result;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = best.left;
    if (left.prev >= 0) offer(left.prev);
    offer(best.left);
  }
  for (std::int32_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

std::vector<std::int64_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<std::int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (const std::string_view piece : gpt2_pretokenize(text)) encode_piece(piece, ids);
  return ids;
}

const std::string& Gpt2Tokenizer::token_bytes(std::int64_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw ValueError("GPT-2 tokenizer: token id " + std::to_string(id) +
                     " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
  }
  return token_bytes_[static_cast<std::size_t>(id)];
}

std::string Gpt2Tokenizer::decode(std::span<const std::int64_t> ids) const {
  std::string text;
  for (const std::int64_t id : ids) text += token_bytes(id);
  return text;
}

}  // namespace sublet::data
