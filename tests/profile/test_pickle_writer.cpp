// The pickle encoder: what it writes loads with Python's own pickle into the same values.
#include <gtest/gtest.h>

#include <fstream>

#include "profile/pickle_writer.h"
#include "profile_test_util.h"

namespace sublet::profile {
namespace {

std::string load_and_repr(const PickleValue& value, const std::string& name) {
  const auto path = (testing::fresh_directory(name) / "value.pickle").string();
  std::ofstream(path, std::ios::binary) << pickle_dumps(value);
  int status = 0;
  const std::string out = testing::run_python("import pickle,sys; print(repr(pickle.load(open(sys.argv[1],\"rb\"))))", path, &status);
  EXPECT_EQ(status, 0) << out;
  return out;
}

TEST(PickleWriter, ScalarsLoadAsPythonValues) {
  const PickleValue::List values{PickleValue(), true, false, 0, -1, 2147483647, std::int64_t{-2147483648},
                                 std::int64_t{2147483648}, std::int64_t{-2147483649}, std::int64_t{1} << 40,
                                 std::uint64_t{18446744073709551615ull}, std::int64_t{INT64_MIN}, 0.5, -1.25e-3,
                                 "", "layer1.0.conv1/fwd", "\xc3\xa9t\xc3\xa9 \"quoted\" 'single'"};
  EXPECT_EQ(load_and_repr(values, "scalars"),
            "[None, True, False, 0, -1, 2147483647, -2147483648, 2147483648, -2147483649, 1099511627776, "
            "18446744073709551615, -9223372036854775808, 0.5, -0.00125, '', 'layer1.0.conv1/fwd', "
            "'\xc3\xa9t\xc3\xa9 \"quoted\" \\'single\\'']\n");
}

TEST(PickleWriter, NestedDictsListsAndTuples) {
  const PickleValue value = PickleValue::Dict{
      {"segments", PickleValue::List{PickleValue::Dict{{"address", std::uint64_t{140737488355328}},
                                                       {"segment_pool_id", PickleValue::Tuple{{0, 0}}},
                                                       {"blocks", PickleValue::List{}}}}},
      {"empty", PickleValue::Tuple{}},
      {"one", PickleValue::Tuple{{"x"}}}};
  EXPECT_EQ(load_and_repr(value, "nested"),
            "{'segments': [{'address': 140737488355328, 'segment_pool_id': (0, 0), 'blocks': []}], 'empty': (), 'one': ('x',)}\n");
}

TEST(PickleWriter, LongListsAreBatched) {
  // More items than one APPENDS/SETITEMS batch (1000) holds.
  PickleValue::List list;
  PickleValue::Dict dict;
  for (int i = 0; i < 2500; ++i) {
    list.push_back(i);
    dict.emplace_back(std::string("k").append(std::to_string(i)), i * 2);
  }
  const auto path = (testing::fresh_directory("batched") / "value.pickle").string();
  std::ofstream(path, std::ios::binary) << pickle_dumps(PickleValue::List{list, dict});
  int status = 0;
  const std::string out = testing::run_python(
      "import pickle,sys; l,d=pickle.load(open(sys.argv[1],\"rb\")); "
      "print(len(l), l==list(range(2500)), len(d), d[\"k2499\"], list(d)[:2])",
      path, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "2500 True 2500 4998 ['k0', 'k1']\n");
}

TEST(PickleWriter, StartsWithProtocolTwoAndEndsWithStop) {
  const std::string bytes = pickle_dumps(PickleValue(1));
  ASSERT_GE(bytes.size(), 3u);
  EXPECT_EQ(bytes[0], '\x80');
  EXPECT_EQ(bytes[1], '\x02');
  EXPECT_EQ(bytes.back(), '.');
}

}  // namespace
}  // namespace sublet::profile
