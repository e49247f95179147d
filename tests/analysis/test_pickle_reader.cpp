// The plain-data pickle reader against pickles CPython wrote (tests/data/pickle, protocols 2 to
// 5), the opcodes Python writes only for huge or legacy values (hand-made), and bad input:
// truncated, flipped, deep, refused opcodes. Bad input must end in IoError, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "analysis/pickle_reader.h"
#include "core/errors.h"

namespace sublet::memory::pickle {
namespace {

std::string fixture_path(const std::string& name) { return std::string(SUBLET_SOURCE_DIR) + "/tests/data/pickle/" + name; }

std::string fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << fixture_path(name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A string literal's bytes, embedded NULs included.
template <std::size_t N>
std::string B(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

// The message of the IoError that parsing `bytes` throws ("" when it parses).
std::string parse_error(const std::string& bytes, const ReadLimits& limits = {}) {
  try {
    parse(bytes, "input", limits);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

Value get(const Value& dict, const char* key) {
  const auto v = dict.find(key);
  if (!v) throw std::runtime_error(std::string("no key ") + key);
  return *v;
}

class PythonPickles : public ::testing::TestWithParam<int> {};

TEST_P(PythonPickles, ReadEveryPlainKindAsPythonWroteIt) {
  const int protocol = GetParam();
  const Document doc = parse(fixture("values_p" + std::to_string(protocol) + ".pickle"), "values");
  EXPECT_EQ(doc.protocol(), protocol);
  const Value v = doc.root();
  ASSERT_EQ(v.kind(), Kind::Dict);

  EXPECT_TRUE(get(v, "none").is_none());
  EXPECT_TRUE(get(v, "true").as_bool());
  EXPECT_FALSE(get(v, "false").as_bool());
  EXPECT_EQ(get(v, "small").as_int(), 7);
  EXPECT_EQ(get(v, "byte").as_int(), 255);
  EXPECT_EQ(get(v, "short").as_int(), 65535);
  EXPECT_EQ(get(v, "int32_min").as_int(), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(get(v, "int32_max").as_int(), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(get(v, "int64").as_int(), (std::int64_t{1} << 62) + 5);
  EXPECT_EQ(get(v, "int64_min").as_int(), std::numeric_limits<std::int64_t>::min());
  // 2^64-1 does not fit int64 but is a size_t: as_uint64 reads it, as_int refuses it.
  EXPECT_EQ(get(v, "uint64_max").kind(), Kind::BigInt);
  EXPECT_EQ(get(v, "uint64_max").as_uint64(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_THROW(get(v, "uint64_max").as_int(), IoError);
  EXPECT_EQ(get(v, "big").kind(), Kind::BigInt);  // 2^100
  EXPECT_THROW(get(v, "big").as_uint64(), IoError);
  EXPECT_EQ(get(v, "huge").kind(), Kind::BigInt);  // 2^2100: LONG4
  EXPECT_EQ(get(v, "float").as_float(), 1.5);
  EXPECT_EQ(get(v, "neg_float").as_float(), -0.1);
  EXPECT_TRUE(std::isinf(get(v, "inf").as_float()) && get(v, "inf").as_float() > 0);
  EXPECT_EQ(get(v, "str").as_string(), "hello");
  EXPECT_EQ(get(v, "unicode").as_string(), "gr\xc3\xb6\xc3\x9f" "e \xe2\x88\x91 \xf0\x9f\x9a\x80");
  EXPECT_EQ(get(v, "long_str").as_string(), std::string(300, 'x'));
  EXPECT_EQ(get(v, "empty_str").as_string(), "");

  const Value list = get(v, "list");
  ASSERT_EQ(list.kind(), Kind::List);
  ASSERT_EQ(list.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(list.at(i).as_int(), static_cast<std::int64_t>(i + 1));
  EXPECT_EQ(get(v, "empty_list").size(), 0u);
  EXPECT_EQ(get(v, "one_item").at(0).as_string(), "only");
  for (const auto& [key, n] : {std::pair{"tuple1", 1}, {"tuple2", 2}, {"tuple3", 3}, {"tuple4", 4}, {"empty_tuple", 0}}) {
    EXPECT_EQ(get(v, key).kind(), Kind::Tuple) << key;
    EXPECT_EQ(get(v, key).size(), static_cast<std::size_t>(n)) << key;
  }
  EXPECT_EQ(get(v, "tuple2").at(1).as_string(), "a");
  EXPECT_EQ(get(v, "tuple4").at(3).as_int(), 4);
  EXPECT_EQ(get(get(get(v, "nested"), "a").at(0), "b").at(1).at(0).as_int(), 2);

  // One list referred to twice through the memo is one node, not a copy.
  const Value shared = get(v, "shared");
  EXPECT_EQ(shared.at(0).node(), shared.at(1).node());
  EXPECT_EQ(shared.at(1).at(1).as_int(), 2);

  // Lists and dicts longer than one APPENDS/SETITEMS batch (Python batches 1000).
  const Value many = get(v, "many");
  ASSERT_EQ(many.size(), 2001u);
  for (std::size_t i = 0; i < many.size(); ++i) ASSERT_EQ(many.at(i).as_int(), static_cast<std::int64_t>(i));
  const Value bigdict = get(v, "bigdict");
  ASSERT_EQ(bigdict.size(), 1001u);
  EXPECT_EQ(get(bigdict, "1000").as_int(), 1000);
  EXPECT_EQ(bigdict.key_at(3).as_string(), "3");
  const Value int_keys = get(v, "int_keys");
  EXPECT_EQ(int_keys.key_at(1).as_int(), 2);
  EXPECT_EQ(int_keys.value_at(1).as_string(), "two");

  if (protocol >= 3) {
    EXPECT_EQ(get(v, "bytes").as_bytes(), std::string_view("\x00\x01\xff", 3));
    EXPECT_EQ(get(v, "long_bytes").as_bytes().size(), 512u);
    EXPECT_EQ(static_cast<unsigned char>(get(v, "long_bytes").as_bytes()[255]), 255);
  }
  if (protocol >= 5) {
    EXPECT_EQ(get(v, "bytearray").as_bytes(), "ab");
  }
}

INSTANTIATE_TEST_SUITE_P(Protocols, PythonPickles, ::testing::Values(2, 3, 4, 5));

TEST(PickleReader, OpcodesPythonWritesOnlyForHugeOrLegacyValues) {
  // BINUNICODE8, BINBYTES8, SHORT_BINSTRING, BINSTRING in a LIST built with MARK, then DICT.
  const std::string list = B("\x80\x04(\x8d\x02\0\0\0\0\0\0\0hi\x8e\x01\0\0\0\0\0\0\0zU\x02okT\x03\0\0\0abcl.");
  const Document doc = parse(list, "list");
  ASSERT_EQ(doc.root().size(), 4u);
  EXPECT_EQ(doc.root().at(0).as_string(), "hi");
  EXPECT_EQ(doc.root().at(1).as_bytes(), "z");
  EXPECT_EQ(doc.root().at(2).as_string(), "ok");
  EXPECT_EQ(doc.root().at(3).as_string(), "abc");
  const Document dict = parse(B("\x80\x02(K\x01K\x02" "d."), "dict");
  EXPECT_EQ(dict.root().key_at(0).as_int(), 1);
  EXPECT_EQ(dict.root().value_at(0).as_int(), 2);
  // LONG_BINPUT/LONG_BINGET, POP and POP_MARK.
  const Document memo = parse(B("\x80\x02K\x07r\x00\x01\x00\x00" "0(NN1j\x00\x01\x00\x00."), "memo");
  EXPECT_EQ(memo.root().as_int(), 7);
  // LONG1 of a negative value and of zero length.
  EXPECT_EQ(parse(B("\x80\x02\x8a\x02\x00\xff."), "long").root().as_int(), -256);
  EXPECT_EQ(parse(B("\x80\x02\x8a\x00."), "long").root().as_int(), 0);
  // A later value for the same key wins on lookup, as in Python's dict.
  const Document twice = parse(B("}(X\x01\0\0\0aK\x01X\x01\0\0\0aK\x02u."), "twice");
  EXPECT_EQ(get(twice.root(), "a").as_int(), 2);
  EXPECT_EQ(twice.protocol(), 0);  // no PROTO opcode
}

TEST(PickleReader, RefusesCodeAndNamesTheOpcodeAndOffset) {
  // GLOBAL builtins.print, then a call of it: nothing may run.
  EXPECT_EQ(parse_error(B("\x80\x02" "cbuiltins\nprint\n)R.")),
            "input: pickle opcode 0x63 (GLOBAL) at offset 2 is not supported: sublet reads plain data only (None, bool, "
            "int, float, str, bytes, list, tuple, dict of protocols 2 to 5), never objects, classes or calls");
  EXPECT_NE(parse_error(B("\x80\x04N\x93.")).find("(STACK_GLOBAL) at offset 3"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02NNR.")).find("(REDUCE) at offset 4"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x05\x97.")).find("(NEXT_BUFFER) at offset 2"), std::string::npos);
  EXPECT_NE(parse_error(B("I1\n.")).find("(INT) at offset 0"), std::string::npos);  // protocol 0 text
  EXPECT_EQ(parse_error(B("\x80\x02\xff.")), "input: unknown pickle opcode 0xff at offset 2 (not a pickle, or a damaged one)");
  EXPECT_NE(parse_error(B("\x80\x06N.")).find("protocol 6 is newer than the 5"), std::string::npos);
}

TEST(PickleReader, MalformedInputIsAnErrorThatSaysWhat) {
  EXPECT_EQ(parse_error(""), "input: the pickle ends at offset 0 without its STOP opcode (a truncated file?)");
  EXPECT_NE(parse_error(B("\x80\x04N")).find("without its STOP"), std::string::npos);
  EXPECT_NE(parse_error(".").find("STOP at offset 0: needs a value on the stack"), std::string::npos);
  // Lengths beyond the input are refused before anything is allocated.
  EXPECT_NE(parse_error(B("\x80\x02X\xff\xff\xff\xff" "ab.")).find("a length of 4294967295 bytes, but only 3 follow"),
            std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.")).find("a length of 18446744073709551615"),
            std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x04\x95\xff\0\0\0\0\0\0\0N.")).find("a frame of 255 bytes, but only 2 follow"),
            std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02\x8b\xff\xff\xff\xff.")).find("negative length -1"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02J\x01\x02")).find("needs 4 argument bytes"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x04\x8c\x01\xff.")).find("a str that is not UTF-8 (byte 0 of it)"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02h\x05.")).find("memo entry 5 was never stored"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02}]Ns.")).find("a dict key of type list (unhashable in Python)"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02}(NNe.")).find("APPENDS at offset 6: appends to a dict, expected a list"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02](NNu.")).find("sets items of a list, expected a dict"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02}(Nu.")).find("has a key without a value"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02(NNe.")).find("has no list below its MARK"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02Nt.")).find("needs a MARK before it"), std::string::npos);
  // Items below a MARK are out of reach until the MARK is popped, as in CPython.
  EXPECT_NE(parse_error(B("\x80\x02](Na.")).find("APPEND at offset 5: needs a value on the stack"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02(\x85.")).find("TUPLE1 at offset 3: needs 1 items"), std::string::npos);
  ReadLimits two_memo;
  two_memo.max_memo_entries = 2;
  EXPECT_NE(parse_error(B("\x80\x04N\x94\x94\x94.") , two_memo).find("more than 2 memo entries"), std::string::npos);
  // The accessors say what they expected.
  const Document doc = parse(B("\x80\x02K\x05."), "int");
  try {
    (void)doc.root().as_string();
    ADD_FAILURE() << "as_string of an int did not throw";
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "expected a str, found int");
  }
  EXPECT_THROW((void)doc.root().size(), IoError);
  EXPECT_THROW((void)doc.root().find("x"), IoError);
  // Bytes after STOP are ignored, as pickle.loads ignores them.
  EXPECT_EQ(parse(B("\x80\x02K\x05.garbage"), "trailing").root().as_int(), 5);
}

TEST(PickleReader, DeepNestingIsBoundedOrHarmless) {
  // MARKs nest only as deep as the limit.
  const std::string marks = B("\x80\x04") + std::string(5000, '(');
  EXPECT_NE(parse_error(marks).find("more than 1000 nested MARKs"), std::string::npos);
  // Lists nested 200000 deep without MARKs: no recursion in reading, walking or freeing.
  const std::size_t depth = 200000;
  const std::string lists = B("\x80\x04") + std::string(depth, ']') + std::string(depth - 1, 'a') + ".";
  const Document doc = parse(lists, "deep");
  Value v = doc.root();
  std::size_t seen = 1;
  while (v.size() > 0) {
    v = v.at(0);
    ++seen;
  }
  EXPECT_EQ(seen, depth);
  // A list that contains itself (legal in a pickle) is one node referring to itself.
  const Document loop = parse(B("\x80\x04]\x94h\x00" "a."), "loop");
  EXPECT_EQ(loop.root().at(0).node(), loop.root().node());
}

// Every cut of a real snapshot and every single-byte change of it: an IoError or a value, never a
// crash (the sanitizer build checks the memory accesses).
TEST(PickleReader, TruncatedAndCorruptedInputNeverCrashes) {
  const std::string snapshot = fixture("snapshot.pickle");
  ASSERT_GT(snapshot.size(), 1000u);
  for (std::size_t cut = 0; cut + 1 < snapshot.size(); ++cut)
    EXPECT_THROW(parse(snapshot.substr(0, cut), "cut"), IoError) << "cut at " << cut;
  std::size_t parsed = 0, refused = 0;
  for (std::size_t at = 0; at < snapshot.size(); ++at) {
    for (const unsigned char replacement : {0x00, 0x28, 0x2e, 0x80, 0xff}) {
      std::string changed = snapshot;
      changed[at] = static_cast<char>(replacement);
      try {
        parse(std::move(changed), "changed");
        ++parsed;
      } catch (const IoError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(parsed, 0u);  // e.g. a changed int
}

TEST(PickleFile, GzipIsDetectedByContentAndChecked) {
  const std::string plain = fixture("snapshot.pickle");
  const std::string gz = fixture("snapshot.pickle.gz");
  ASSERT_TRUE(is_gzip(gz));
  EXPECT_FALSE(is_gzip(plain));
  EXPECT_EQ(gunzip(gz, "gz"), plain);
  EXPECT_EQ(read_file_maybe_gzip(fixture_path("snapshot.pickle.gz")), plain);
  EXPECT_EQ(read_file_maybe_gzip(fixture_path("snapshot.pickle")), plain);
  EXPECT_EQ(gunzip(gz + gz, "twice"), plain + plain);  // concatenated members, as Python's gzip reads them

  const auto error = [](const std::string& bytes) -> std::string {
    try {
      gunzip(bytes, "snap.gz");
    } catch (const IoError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(gz.substr(0, gz.size() - 4)).find("snap.gz: the gzip data ends early"), std::string::npos);
  EXPECT_NE(error(gz.substr(0, gz.size() / 2)).find("ends early"), std::string::npos);
  std::string corrupt = gz;
  corrupt[gz.size() - 6] = static_cast<char>(corrupt[gz.size() - 6] ^ 0x55);  // the CRC32
  EXPECT_NE(error(corrupt).find("snap.gz: corrupt gzip data"), std::string::npos);
  EXPECT_NE(error(gz + "xyz").find("3 bytes after the end of the gzip data"), std::string::npos);
  EXPECT_THROW(read_file_maybe_gzip(fixture_path("absent.pickle")), IoError);
}

}  // namespace
}  // namespace sublet::memory::pickle
