#pragma once
// A reader of the plain-data subset of Python's pickle format, protocols 2 to 5: None, bools,
// ints, floats, str, bytes, lists, tuples and dicts, with the memo. That is everything
// `pickle.dump` writes for a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) and what
// profile/pickle_writer.h writes. Opcodes that import or call Python code (GLOBAL, REDUCE,
// BUILD, ...) are refused with an IoError that names the opcode and its offset: nothing in such a
// file runs.
//
// Values live in one Document as nodes addressed by index, not as a tree of owned values,
// because a pickle shares objects through its memo: PyTorch's snapshot refers to one frames list
// from thousands of entries. Sharing by index keeps the memory proportional to the input (a
// memo reference costs one index, never a copy), makes a self-referencing list (legal in a
// pickle) harmless, and frees everything at once without recursion.
//
// Bounded for untrusted input: every length is checked against the bytes left before anything
// is allocated, each opcode adds at most one node, and the mark depth and memo size have limits
// (ReadLimits). Malformed input throws IoError; it never crashes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sublet::memory::pickle {

enum class Kind : std::uint8_t { None, Bool, Int, BigInt, Float, String, Bytes, List, Tuple, Dict };

// "None", "bool", "int", "int" (BigInt too), "float", "str", "bytes", "list", "tuple", "dict":
// Python's names, for messages.
const char* kind_name(Kind kind);

class Document;

// A handle to one value of a Document (valid while the Document lives). The accessors throw
// IoError naming the expected and the found type, so a reader of a given layout can say what in
// the file was not as expected.
class Value {
 public:
  Value(const Document& document, std::uint32_t node) : document_(&document), node_(node) {}

  Kind kind() const;
  bool is_none() const { return kind() == Kind::None; }
  bool as_bool() const;
  // Int only; a BigInt (beyond 64 bits) throws.
  std::int64_t as_int() const;
  // A non-negative int below 2^64 (Python writes size_t values such as addresses this way).
  std::uint64_t as_uint64() const;
  // Float, or an Int as Python would compare it.
  double as_float() const;
  // String (UTF-8, checked on reading) or Bytes: a view into the Document.
  std::string_view as_string() const;
  std::string_view as_bytes() const;

  // List, Tuple or Dict: the number of items (of key/value pairs for a Dict).
  std::size_t size() const;
  // The i-th item of a List or Tuple.
  Value at(std::size_t index) const;
  // The i-th key and value of a Dict, in insertion order. A key set twice appears twice.
  Value key_at(std::size_t index) const;
  Value value_at(std::size_t index) const;
  // The value of a str key of a Dict (the last one set, as Python's dict holds it), or nullopt.
  std::optional<Value> find(std::string_view key) const;

  std::uint32_t node() const { return node_; }

 private:
  void expect(Kind kind, const char* wanted) const;
  const Document* document_;
  std::uint32_t node_;
};

struct ReadLimits {
  // Open MARKs at once: a snapshot needs about 5; deep nesting only grows the reader's stacks.
  std::size_t max_mark_depth = 1000;
  std::size_t max_memo_entries = std::size_t{1} << 28;
};

// The values of one pickle. Move-only: Values point into it.
class Document {
 public:
  Document() = default;
  Document(Document&&) = default;
  Document& operator=(Document&&) = default;
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;

  Value root() const { return Value(*this, root_); }
  int protocol() const { return protocol_; }  // 0 when the pickle had no PROTO opcode
  std::size_t node_count() const { return nodes_.size(); }

 private:
  friend class Value;
  friend class Parser;
  struct Node {
    Kind kind = Kind::None;
    std::uint64_t first = 0;   // Int/Bool/Float bits; String/Bytes/BigInt offset; container index
    std::uint64_t second = 0;  // String/Bytes/BigInt length
  };
  std::string bytes_;                                 // the input: strings are views into it
  std::vector<Node> nodes_;
  std::vector<std::vector<std::uint32_t>> children_;  // per container: items, or keys and values interleaved
  std::uint32_t root_ = 0;
  int protocol_ = 0;
};

// Parses one pickle (bytes after its STOP are ignored, as pickle.loads does). `source` names the
// input in messages ("snap.pickle: pickle opcode 0x63 (GLOBAL) at offset 17 ...").
Document parse(std::string bytes, const std::string& source, const ReadLimits& limits = {});

// The file's bytes, gunzipped when they start with gzip's magic (PyTorch users often compress
// snapshots). "-" is standard input; a FIFO with a writer streams (core/input_file.h). Throws
// IoError naming the path.
std::string read_file_maybe_gzip(const std::string& path);
// Gzip data (one or more members) decompressed, at most io::default_gunzip_limit of the
// compressed size; `source` names it in messages.
std::string gunzip(std::string_view compressed, const std::string& source);
bool is_gzip(std::string_view bytes);

}  // namespace sublet::memory::pickle
