// SUBLET_ALLOC_CONF parsing and the size-rounding rules it controls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "memory/caching_allocator.h"
#include "memory/config.h"
#include "core/errors.h"
#include "memory/registry.h"

using sublet::ConfigError;
using sublet::memory::AllocatorConfig;
using sublet::memory::CachingAllocator;
using sublet::memory::kMiB;

namespace {

std::size_t round(std::size_t bytes, const std::string& conf = "") {
  return CachingAllocator::round_size(bytes, AllocatorConfig::parse(conf));
}

std::string error_of(const std::string& conf) {
  try {
    AllocatorConfig::parse(conf);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(AllocatorConfig, DefaultsAreOff) {
  const AllocatorConfig c = AllocatorConfig::parse("");
  EXPECT_FALSE(c.max_split_size_set());
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);
  EXPECT_EQ(c.divisions_for(100 * kMiB), 0u);
}

TEST(AllocatorConfig, ParsesEveryKey) {
  const AllocatorConfig c = AllocatorConfig::parse(
      "max_split_size_mb:512, roundup_power2_divisions:16,expandable_segments:True,garbage_collection_threshold:0.6");
  EXPECT_EQ(c.max_split_size, 512 * kMiB);
  EXPECT_EQ(c.divisions_for(3 * kMiB), 16u);
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
}

TEST(AllocatorConfig, ListFormFollowsPyTorchDocs) {
  // Under 256 MiB: 1 division; [256, 512) MiB: 2; larger: 8.
  const AllocatorConfig c = AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,>:8]");
  EXPECT_EQ(c.divisions_for(1000), 1u);
  EXPECT_EQ(c.divisions_for(100 * kMiB), 1u);
  EXPECT_EQ(c.divisions_for(255 * kMiB), 1u);
  EXPECT_EQ(c.divisions_for(300 * kMiB), 2u);
  EXPECT_EQ(c.divisions_for(600 * kMiB), 8u);
  EXPECT_EQ(c.divisions_for(40000 * kMiB), 8u);
}

TEST(AllocatorConfig, TextFormRoundTrips) {
  for (const std::string text : {"max_split_size_mb:128", "roundup_power2_divisions:[256:1,512:2,>:8]",
                                 "expandable_segments:True,garbage_collection_threshold:0.5",
                                 "roundup_power2_divisions:4",
                                 // found by fuzzing: more digits than the default stream precision keeps
                                 "garbage_collection_threshold:0.65555555555555555555555555555555",
                                 // found by fuzzing: intervals with 0 divisions print as 1 (the same rounding)
                                 "roundup_power2_divisions:[256:8]"}) {
    const AllocatorConfig a = AllocatorConfig::parse(text);
    const AllocatorConfig b = AllocatorConfig::parse(a.to_string());
    EXPECT_EQ(a.max_split_size, b.max_split_size) << text;
    for (std::size_t i = 0; i < AllocatorConfig::kRoundupIntervals; ++i)
      EXPECT_EQ(std::max<std::size_t>(a.roundup_power2_divisions[i], 1), std::max<std::size_t>(b.roundup_power2_divisions[i], 1)) << text;
    EXPECT_EQ(a.expandable_segments, b.expandable_segments) << text;
    EXPECT_EQ(a.garbage_collection_threshold, b.garbage_collection_threshold) << text;
  }
}

TEST(AllocatorConfig, ReadsTheEnvironmentVariable) {
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:64", 1);
  EXPECT_EQ(AllocatorConfig::from_environment().max_split_size, 64 * kMiB);
  setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:6", 1);
  EXPECT_THROW(AllocatorConfig::from_environment(), ConfigError);
  unsetenv("SUBLET_ALLOC_CONF");
  EXPECT_FALSE(AllocatorConfig::from_environment().max_split_size_set());
}

// PyTorch's variable is honoured when sublet's is unset; with both set, sublet's wins and the
// origin says PyTorch's was ignored. Errors name the variable the bad text came from.
TEST(AllocatorConfig, HonoursPytorchsVariableWhenSubletsIsUnset) {
  unsetenv("SUBLET_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(sublet::memory::config_origin_from_environment().describe(),
            "defaults (SUBLET_ALLOC_CONF, PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF unset)");

  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128", 1);
  EXPECT_EQ(AllocatorConfig::from_environment().max_split_size, 128 * kMiB);
  EXPECT_EQ(sublet::memory::config_origin_from_environment().describe(), "from PYTORCH_CUDA_ALLOC_CONF");

  setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:64", 1);
  EXPECT_EQ(AllocatorConfig::from_environment().max_split_size, 64 * kMiB);
  const auto origin = sublet::memory::config_origin_from_environment();
  EXPECT_TRUE(origin.ignored_pytorch);
  EXPECT_EQ(origin.describe(), "from SUBLET_ALLOC_CONF; PYTORCH_CUDA_ALLOC_CONF ignored because SUBLET_ALLOC_CONF is set");

  unsetenv("SUBLET_ALLOC_CONF");
  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:5", 1);
  try {
    AllocatorConfig::from_environment();
    ADD_FAILURE() << "max_split_size_mb:5 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("PYTORCH_CUDA_ALLOC_CONF: bad value '5'", 0), 0u) << e.what();
  }
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  // A parse of code-given text still names sublet's variable afterwards.
  EXPECT_EQ(error_of("max_split_size_mb:5").rfind("SUBLET_ALLOC_CONF:", 0), 0u);
}

// SUBLET_ALLOC_CONF, else PYTORCH_ALLOC_CONF (PyTorch's current name), else PYTORCH_CUDA_ALLOC_CONF:
// the origin names the one used and those ignored; an error names the one the text came from; a
// long or control-laden value is shortened and escaped in the message.
TEST(AllocatorConfig, ReadsThreeVariablesInPytorchsOrder) {
  unsetenv("SUBLET_ALLOC_CONF");
  setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:256", 1);
  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128", 1);
  EXPECT_EQ(AllocatorConfig::from_environment().max_split_size, 256 * kMiB);
  auto origin = sublet::memory::config_origin_from_environment();
  EXPECT_EQ(origin.describe(), "from PYTORCH_ALLOC_CONF; PYTORCH_CUDA_ALLOC_CONF ignored because PYTORCH_ALLOC_CONF is set");
  EXPECT_TRUE(origin.ignored_pytorch);

  setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:64", 1);
  EXPECT_EQ(AllocatorConfig::from_environment().max_split_size, 64 * kMiB);
  origin = sublet::memory::config_origin_from_environment();
  EXPECT_EQ(origin.describe(),
            "from SUBLET_ALLOC_CONF; PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF ignored because SUBLET_ALLOC_CONF is set");

  unsetenv("SUBLET_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  setenv("PYTORCH_ALLOC_CONF", ("max_split_size_mb:\x1b[31m" + std::string(128 * 1024, '9')).c_str(), 1);
  try {
    AllocatorConfig::from_environment();
    ADD_FAILURE() << "a 128 KiB value was accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("PYTORCH_ALLOC_CONF: unbalanced brackets in 'max_split_size_mb:\\x1b[31m999", 0), 0u) << message.substr(0, 300);
    EXPECT_TRUE(message.size() <= 600) << message.size();
    EXPECT_EQ(message.find('\x1b'), std::string::npos);
  }
  unsetenv("PYTORCH_ALLOC_CONF");
  EXPECT_TRUE(sublet::memory::config_origin_from_environment().variable.empty());
}

// PyTorch accepts 0 ("no rounding") for an interval of the list form, not as the single value.
TEST(AllocatorConfig, DivisionListAcceptsZero) {
  const AllocatorConfig c = AllocatorConfig::parse("roundup_power2_divisions:[256:0,>:4]");
  EXPECT_EQ(c.divisions_for(100 * kMiB), 0u);
  EXPECT_EQ(c.divisions_for(600 * kMiB), 4u);
  EXPECT_NE(error_of("roundup_power2_divisions:0").find("power of two"), std::string::npos);
}

// A device's defaults sit under SUBLET_ALLOC_CONF: keys the text names replace them, the others
// stay. sublet's defaults differ from PyTorch's only in expandable segments, on every device.
TEST(AllocatorConfig, TextAppliesOnTopOfTheDeviceDefaults) {
  const AllocatorConfig cpu = sublet::memory::default_config(sublet::Device::cpu());
  EXPECT_TRUE(cpu.expandable_segments);
  EXPECT_EQ(cpu.to_string(), "expandable_segments:True");
  EXPECT_FALSE(AllocatorConfig::parse("expandable_segments:False", cpu).expandable_segments);
  const AllocatorConfig cuda = sublet::memory::default_config(sublet::Device::cuda(0));
  EXPECT_TRUE(cuda.expandable_segments);
  EXPECT_FALSE(cuda.max_split_size_set());

  const AllocatorConfig kept = AllocatorConfig::parse("max_split_size_mb:64", cuda);
  EXPECT_TRUE(kept.expandable_segments);
  EXPECT_EQ(kept.max_split_size, 64 * kMiB);
  EXPECT_FALSE(AllocatorConfig::parse("expandable_segments:False", cuda).expandable_segments);

  setenv("SUBLET_ALLOC_CONF", "garbage_collection_threshold:0.5", 1);
  const AllocatorConfig from_env = AllocatorConfig::from_environment(cuda);
  EXPECT_TRUE(from_env.expandable_segments);
  EXPECT_EQ(from_env.garbage_collection_threshold, 0.5);
  unsetenv("SUBLET_ALLOC_CONF");
  EXPECT_TRUE(AllocatorConfig::from_environment(cuda).expandable_segments);
}

TEST(AllocatorConfig, ErrorsNameKeyValueAndWhatIsAllowed) {
  const std::string unknown = error_of("max_split_size:512");
  EXPECT_NE(unknown.find("unknown option 'max_split_size'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("max_split_size_mb"), std::string::npos) << unknown;  // lists known keys

  const std::string small = error_of("max_split_size_mb:10");
  EXPECT_NE(small.find("'10'"), std::string::npos) << small;
  EXPECT_NE(small.find("> 20"), std::string::npos) << small;
  // PyTorch: "must be > 20"; 20 itself is refused, and a value past the maximum names it.
  EXPECT_NE(error_of("max_split_size_mb:20").find("'20'"), std::string::npos);
  EXPECT_EQ(AllocatorConfig::parse("max_split_size_mb:21").max_split_size, 21 * kMiB);
  EXPECT_NE(error_of("max_split_size_mb:2000000000000").find("at most 2^40 (1099511627776)"), std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:2147483648").find("at most 2^30"), std::string::npos);

  EXPECT_NE(error_of("roundup_power2_divisions:3").find("power of two"), std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:[256:1,100:2]").find("power of two"), std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:[512:1,256:2]").find("increase"), std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:[256:1").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments:yes").find("True or False"), std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:1.0").find("strictly between 0 and 1"), std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:0").find("strictly between 0 and 1"), std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:abc").find("'abc'"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments").find("no value"), std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:-5").find("'-5'"), std::string::npos);
}

TEST(AllocatorConfig, CodeBuiltConfigIsValidated) {
  AllocatorConfig c;
  c.max_split_size = 5 * kMiB;
  EXPECT_THROW(c.validate(), ConfigError);
  c = AllocatorConfig{};
  c.roundup_power2_divisions.fill(3);
  EXPECT_THROW(c.validate(), ConfigError);
  c = AllocatorConfig{};
  c.garbage_collection_threshold = 1.5;
  EXPECT_THROW(c.validate(), ConfigError);
}

// The rounding table: 512-byte granules by default, power-of-two divisions when configured.
TEST(SizeRounding, DefaultRoundsTo512Bytes) {
  EXPECT_EQ(round(0), 512u);
  EXPECT_EQ(round(1), 512u);
  EXPECT_EQ(round(512), 512u);
  EXPECT_EQ(round(513), 1024u);
  EXPECT_EQ(round(kMiB + 1), kMiB + 512);
  EXPECT_EQ(round(1200 * kMiB + 7), 1200 * kMiB + 512);
}

TEST(SizeRounding, OneDivisionIsPlainRounding) {
  EXPECT_EQ(round(1200 * kMiB + 7, "roundup_power2_divisions:1"), 1200 * kMiB + 512);
  EXPECT_EQ(round(3000, "roundup_power2_divisions:1"), 3072u);
}

TEST(SizeRounding, FourDivisions) {
  const std::string conf = "roundup_power2_divisions:4";
  EXPECT_EQ(round(1200 * kMiB, conf), 1280 * kMiB);   // steps 1024, 1280, 1536, 1792
  EXPECT_EQ(round(1280 * kMiB, conf), 1280 * kMiB);   // already on a step
  EXPECT_EQ(round(5 * kMiB + 1, conf), 6 * kMiB);     // steps of 1 MiB between 4 and 8 MiB
  EXPECT_EQ(round(1024 * kMiB, conf), 1024 * kMiB);   // powers of two stay
  EXPECT_EQ(round(10000, conf), 10240u);              // steps of 2 KiB between 8 and 16 KiB
  EXPECT_EQ(round(1000, conf), 1024u);                // small sizes: plain 512-byte rounding
}

TEST(SizeRounding, SixteenDivisions) {
  const std::string conf = "roundup_power2_divisions:16";
  EXPECT_EQ(round(1200 * kMiB, conf), 1216 * kMiB);   // steps of 64 MiB
  EXPECT_EQ(round(17 * kMiB, conf), 17 * kMiB);       // steps of 1 MiB between 16 and 32 MiB
  EXPECT_EQ(round(17 * kMiB + 1, conf), 18 * kMiB);
}

TEST(SizeRounding, ListForm) {
  const std::string conf = "roundup_power2_divisions:[256:1,512:2,>:8]";
  EXPECT_EQ(round(100 * kMiB + 1, conf), 100 * kMiB + 512);  // 1 division
  EXPECT_EQ(round(300 * kMiB, conf), 384 * kMiB);            // 2 divisions: 256, 384
  EXPECT_EQ(round(1000 * kMiB, conf), 1024 * kMiB);          // 8 divisions of 64 MiB
  EXPECT_EQ(round(530 * kMiB, conf), 576 * kMiB);
}
