// core/printable.h and core/json_excerpt.h: untrusted text and JSON shown in messages escaped,
// shortened and depth-limited (10^5 nested brackets crashed dump(); an ESC recoloured the terminal).
#include <gtest/gtest.h>

#include <string>

#include "core/json_excerpt.h"
#include "core/printable.h"

namespace sublet {
namespace {

TEST(Printable, EscapesControlCharactersAndShortensLongText) {
  EXPECT_EQ(printable("plain text"), "plain text");
  EXPECT_EQ(printable("x\x1b[31mred\n\t\\"), "x\\x1b[31mred\\n\\t\\\\");
  EXPECT_EQ(printable("a\x7f" "b"), "a\\x7fb");
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\u009b2J");  // C1 CSI in UTF-8
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // other UTF-8 passes
  const std::string shown = printable(std::string(131072, 'z'));
  EXPECT_EQ(shown, std::string(200, 'z') + "... (131072 bytes in all)");
}

TEST(JsonExcerpt, ShowsAFewLevelsAndAFewCharacters) {
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  EXPECT_EQ(json_excerpt(deep), "[[[[...]]]]");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse(R"({"a": [1, 2], "b": "x\u001by"})")), R"({"a": [1, 2], "b": "x\\u001by"})");
  nlohmann::json wide = nlohmann::json::array();
  for (int i = 0; i < 10000; ++i) wide.push_back(i);
  const std::string shown = json_excerpt(wide);
  EXPECT_TRUE(shown.size() <= 200) << shown.size();
  EXPECT_EQ(shown.rfind("[0, 1, 2", 0), 0u) << shown;
}

}  // namespace
}  // namespace sublet
