// The switch table and the tuning options (core/switch_table.h, core/tuning.h,
// core/switch_report.h): how each type's value is read, the in-process override, what
// `sublet config` shows (secrets only as set/unset) and the warnings for unknown names.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/switch_report.h"
#include "core/switch_table.h"
#include "core/tuning.h"
#include "tests/throw_message.h"

namespace sublet {
namespace {

EnvironmentLookup lookup_in(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    return it == variables.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

const SwitchRow& row_of(const std::vector<SwitchRow>& rows, std::string_view name) {
  for (const SwitchRow& row : rows)
    if (row.name == name) return row;
  static const SwitchRow missing{"(missing)", "", "", "", SettingSource::Default, ""};
  ADD_FAILURE() << name << " has no row";
  return missing;
}

TEST(SwitchTable, NamesAreUniqueAndEveryEntryIsDocumented) {
  std::set<std::string_view> names;
  for (const SwitchSpec& spec : switch_table()) {
    EXPECT_TRUE(spec.name.starts_with("SUBLET_")) << spec.name;
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name << " is listed twice";
    EXPECT_FALSE(spec.doc.empty()) << spec.name;
    EXPECT_EQ(find_switch(spec.name), &spec);
  }
  EXPECT_EQ(find_switch("SUBLET_NOT_A_SWITCH"), nullptr);
}

TEST(SwitchTable, EveryRuntimeSwitchIsAnOption) {
  // A runtime switch the table lists but TuningOptions does not read would be a dead entry.
  const TuningOptions defaults;
  for (const SwitchSpec& spec : switch_table()) {
    const std::optional<std::string> value = defaults.value_text(spec.name);
    EXPECT_EQ(value.has_value(), spec.scope == SwitchScope::Runtime) << spec.name;
    if (value && spec.type == SwitchType::Flag) {
      EXPECT_EQ(*value, spec.default_value) << spec.name;
    }
  }
}

TEST(SwitchTable, NearestNameIgnoresRetiredOnes) {
  EXPECT_EQ(nearest_switch("SUBLET_LOG_CONV_PLAN"), kLogConvPlansSwitch);
  EXPECT_EQ(nearest_switch("SUBLET_CPU_NO_AVX"), kCpuNoAvx512Switch);
  EXPECT_EQ(nearest_switch("SUBLET_ALOC_CONF"), "SUBLET_ALLOC_CONF");
  // SUBLET_NO_UPDATE_OVERLAP is retired: the nearest live name is suggested instead.
  const SwitchSpec* suggested = find_switch(nearest_switch("SUBLET_NO_UPDATE_OVERLAP"));
  ASSERT_NE(suggested, nullptr);
  EXPECT_NE(suggested->scope, SwitchScope::Retired);
}

TEST(TuningOptions, DefaultsWhenNothingIsSet) {
  const TuningOptions o = TuningOptions::from_environment(lookup_in({}));
  EXPECT_FALSE(o.log_conv_plans);
  EXPECT_TRUE(o.stream_overlap);
  EXPECT_TRUE(o.cpu_avx512);
  EXPECT_FALSE(o.gelu_epilogue);
  EXPECT_EQ(o.nccl_library, "libnccl.so.2");
  EXPECT_EQ(o.nvtx_capture, "");
}

TEST(TuningOptions, FlagsAreOnForOneAndOffForZeroOrEmpty) {
  const TuningOptions on = TuningOptions::from_environment(
      lookup_in({{"SUBLET_LOG_CONV_PLANS", "1"}, {"SUBLET_NO_STREAM_OVERLAP", "1"}, {"SUBLET_CPU_NO_AVX512", "1"}}));
  EXPECT_TRUE(on.log_conv_plans);
  EXPECT_FALSE(on.stream_overlap);
  EXPECT_FALSE(on.cpu_avx512);
  const TuningOptions epilogue = TuningOptions::from_environment(lookup_in({{"SUBLET_GELU_EPILOGUE", "1"}}));
  EXPECT_TRUE(epilogue.gelu_epilogue);
  EXPECT_EQ(epilogue.value_text("SUBLET_GELU_EPILOGUE"), "1");
  for (const std::string off : {"0", ""}) {
    const TuningOptions o = TuningOptions::from_environment(
        lookup_in({{"SUBLET_LOG_CONV_PLANS", off}, {"SUBLET_NO_STREAM_OVERLAP", off}, {"SUBLET_CPU_NO_AVX512", off}}));
    EXPECT_FALSE(o.log_conv_plans) << "'" << off << "'";
    EXPECT_TRUE(o.stream_overlap) << "'" << off << "'";
    EXPECT_TRUE(o.cpu_avx512) << "'" << off << "'";
    EXPECT_FALSE(TuningOptions::from_environment(lookup_in({{"SUBLET_GELU_EPILOGUE", off}})).gelu_epilogue)
        << "'" << off << "'";
  }
}

TEST(TuningOptions, NoFusedLayerNormTurnsTheFusedLayerNormOff) {
  EXPECT_TRUE(TuningOptions::from_environment(lookup_in({})).fused_layer_norm);
  const TuningOptions off = TuningOptions::from_environment(lookup_in({{"SUBLET_NO_FUSED_LAYER_NORM", "1"}}));
  EXPECT_FALSE(off.fused_layer_norm);
  EXPECT_EQ(off.value_text("SUBLET_NO_FUSED_LAYER_NORM"), "1");
}

TEST(TuningOptions, NoFloat32WeightGradientsTurnsTheFloat32WeightGradientsOff) {
  EXPECT_TRUE(TuningOptions::from_environment(lookup_in({})).float32_weight_gradients);
  const TuningOptions off =
      TuningOptions::from_environment(lookup_in({{"SUBLET_NO_FLOAT32_WEIGHT_GRADIENTS", "1"}}));
  EXPECT_FALSE(off.float32_weight_gradients);
  EXPECT_EQ(off.value_text("SUBLET_NO_FLOAT32_WEIGHT_GRADIENTS"), "1");
}

TEST(TuningOptions, AttentionBackendIsAutoCudnnOrSublet) {
  EXPECT_EQ(TuningOptions::from_environment(lookup_in({})).attention_backend, AttentionBackend::Auto);
  EXPECT_EQ(TuningOptions::from_environment(lookup_in({{"SUBLET_ATTENTION_BACKEND", ""}})).attention_backend,
            AttentionBackend::Auto);
  for (const AttentionBackend backend : {AttentionBackend::Auto, AttentionBackend::Cudnn, AttentionBackend::Sublet}) {
    const std::string name = attention_backend_name(backend);
    const TuningOptions o = TuningOptions::from_environment(lookup_in({{"SUBLET_ATTENTION_BACKEND", name}}));
    EXPECT_EQ(o.attention_backend, backend) << name;
    EXPECT_EQ(o.value_text("SUBLET_ATTENTION_BACKEND"), name);
  }
  const std::string message = testing::message_of<ValueError>(
      [&] { TuningOptions::from_environment(lookup_in({{"SUBLET_ATTENTION_BACKEND", "flash"}})); });
  EXPECT_NE(message.find("SUBLET_ATTENTION_BACKEND: expected auto, cudnn or sublet, got 'flash'"), std::string::npos)
      << message;
}

TEST(TuningOptions, ConvPadChannelsIsOffFourOrEight) {
  const TuningOptions defaults = TuningOptions::from_environment(lookup_in({}));
  EXPECT_EQ(defaults.conv_pad_channels, kConvPadChannelsOff);
  EXPECT_EQ(defaults.value_text("SUBLET_CONV_PAD_CHANNELS"), find_switch("SUBLET_CONV_PAD_CHANNELS")->default_value)
      << "the table's default is the option's";
  EXPECT_EQ(TuningOptions::from_environment(lookup_in({{"SUBLET_CONV_PAD_CHANNELS", ""}})).conv_pad_channels,
            kConvPadChannelsOff);
  const std::pair<std::string, int> values[] = {{"off", kConvPadChannelsOff}, {"4", 4}, {"8", 8}};
  for (const auto& [text, multiple] : values) {
    const TuningOptions o = TuningOptions::from_environment(lookup_in({{"SUBLET_CONV_PAD_CHANNELS", text}}));
    EXPECT_EQ(o.conv_pad_channels, multiple) << text;
    EXPECT_EQ(o.value_text("SUBLET_CONV_PAD_CHANNELS"), text);
  }
  for (const std::string bad : {"on", "2", "16", "0", " 4", "auto"}) {
    const std::string message = testing::message_of<ValueError>(
        [&] { TuningOptions::from_environment(lookup_in({{"SUBLET_CONV_PAD_CHANNELS", bad}})); });
    EXPECT_NE(message.find("SUBLET_CONV_PAD_CHANNELS: expected off, 4 or 8, got '" + bad + "'"), std::string::npos)
        << message;
  }
}

TEST(TuningOptions, BnReluMaskIsInputOrOutput) {
  const TuningOptions defaults = TuningOptions::from_environment(lookup_in({}));
  EXPECT_EQ(defaults.bn_relu_mask, BnReluMask::Input);
  EXPECT_EQ(defaults.value_text("SUBLET_BN_RELU_MASK"), find_switch("SUBLET_BN_RELU_MASK")->default_value)
      << "the table's default is the option's";
  EXPECT_EQ(TuningOptions::from_environment(lookup_in({{"SUBLET_BN_RELU_MASK", ""}})).bn_relu_mask, BnReluMask::Input);
  for (const BnReluMask mask : {BnReluMask::Input, BnReluMask::Output}) {
    const std::string name = bn_relu_mask_name(mask);
    const TuningOptions o = TuningOptions::from_environment(lookup_in({{"SUBLET_BN_RELU_MASK", name}}));
    EXPECT_EQ(o.bn_relu_mask, mask) << name;
    EXPECT_EQ(o.value_text("SUBLET_BN_RELU_MASK"), name);
  }
  for (const std::string bad : {"y", "Output", "1", " input"}) {
    const std::string message = testing::message_of<ValueError>(
        [&] { TuningOptions::from_environment(lookup_in({{"SUBLET_BN_RELU_MASK", bad}})); });
    EXPECT_NE(message.find("SUBLET_BN_RELU_MASK: expected input or output, got '" + bad + "'"), std::string::npos)
        << message;
  }
}

TEST(TuningOptions, AnyOtherFlagValueIsAnError) {
  for (const std::string bad : {"yes", "true", "2", " 1"}) {
    const std::string message = testing::message_of<ValueError>(
        [&] { TuningOptions::from_environment(lookup_in({{"SUBLET_NO_STREAM_OVERLAP", bad}})); });
    EXPECT_NE(message.find("SUBLET_NO_STREAM_OVERLAP"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + bad + "'"), std::string::npos) << message;
  }
}

TEST(TuningOptions, PathsTakeANonEmptyValue) {
  const TuningOptions set = TuningOptions::from_environment(
      lookup_in({{"SUBLET_NCCL_LIBRARY", "/opt/nccl/libnccl.so"}, {"SUBLET_NVTX_CAPTURE", "ranges-%p.json"}}));
  EXPECT_EQ(set.nccl_library, "/opt/nccl/libnccl.so");
  EXPECT_EQ(set.nvtx_capture, "ranges-%p.json");
  const TuningOptions empty = TuningOptions::from_environment(lookup_in({{"SUBLET_NCCL_LIBRARY", ""}}));
  EXPECT_EQ(empty.nccl_library, "libnccl.so.2") << "an empty path is the default";
}

TEST(ScopedTuning, OverridesForAScopeAndNests) {
  const TuningOptions before = tuning();
  {
    const ScopedTuning outer([](TuningOptions& o) { o.stream_overlap = false; });
    EXPECT_FALSE(tuning().stream_overlap);
    EXPECT_EQ(tuning().cpu_avx512, before.cpu_avx512) << "the other switches keep their values";
    {
      const ScopedTuning inner([](TuningOptions& o) { o.log_conv_plans = !o.log_conv_plans; });
      EXPECT_FALSE(tuning().stream_overlap) << "the inner scope starts from the outer one's options";
      EXPECT_NE(tuning().log_conv_plans, before.log_conv_plans);
    }
    EXPECT_FALSE(tuning().stream_overlap);
    EXPECT_EQ(tuning().log_conv_plans, before.log_conv_plans);
  }
  EXPECT_EQ(tuning().stream_overlap, before.stream_overlap);
  EXPECT_EQ(tuning().log_conv_plans, before.log_conv_plans);
}

TEST(SwitchRows, SayWhereEachValueCameFrom) {
  const EnvironmentLookup env = lookup_in({{"SUBLET_CPU_NO_AVX512", "1"}, {"SUBLET_ALLOC_CONF", "max_split_size_mb:64"}});
  TuningOptions in_force = TuningOptions::from_environment(env);
  in_force.log_conv_plans = true;  // as a command's flag would
  const std::vector<SwitchRow> rows = switch_rows(env, in_force);
  EXPECT_EQ(row_of(rows, "SUBLET_CPU_NO_AVX512").value, "1");
  EXPECT_EQ(row_of(rows, "SUBLET_CPU_NO_AVX512").source, SettingSource::Environment);
  EXPECT_EQ(row_of(rows, "SUBLET_LOG_CONV_PLANS").value, "1");
  EXPECT_EQ(row_of(rows, "SUBLET_LOG_CONV_PLANS").source, SettingSource::Flag);
  EXPECT_EQ(row_of(rows, "SUBLET_NO_STREAM_OVERLAP").value, "0");
  EXPECT_EQ(row_of(rows, "SUBLET_NO_STREAM_OVERLAP").source, SettingSource::Default);
  EXPECT_EQ(row_of(rows, "SUBLET_NCCL_LIBRARY").value, "libnccl.so.2");
  EXPECT_EQ(row_of(rows, "SUBLET_ALLOC_CONF").value, "max_split_size_mb:64");
  EXPECT_EQ(row_of(rows, "SUBLET_ALLOC_CONF").source, SettingSource::Environment);
  for (const SwitchRow& row : rows) EXPECT_NE(row.scope, "retired") << row.name << " is not set: no row";
}

TEST(SwitchRows, ShowASecretOnlyAsSetOrUnset) {
  const std::string token = "0123456789abcdef0123456789abcdef";
  const std::vector<SwitchRow> set = switch_rows(lookup_in({{"SUBLET_STORE_TOKEN", token}}), TuningOptions{});
  EXPECT_EQ(row_of(set, "SUBLET_STORE_TOKEN").value, "set");
  EXPECT_EQ(row_of(set, "SUBLET_STORE_TOKEN").source, SettingSource::Environment);
  for (const SwitchRow& row : set) {
    EXPECT_EQ(row.value.find(token), std::string::npos) << row.name;
    EXPECT_EQ(row.doc.find(token), std::string::npos) << row.name;
  }
  const std::vector<SwitchRow> unset = switch_rows(lookup_in({}), TuningOptions{});
  EXPECT_EQ(row_of(unset, "SUBLET_STORE_TOKEN").value, "unset");
  EXPECT_EQ(row_of(unset, "SUBLET_STORE_TOKEN").source, SettingSource::Default);
}

TEST(SwitchRows, ListARetiredSwitchOnlyWhenSet) {
  const std::vector<SwitchRow> rows = switch_rows(lookup_in({{"SUBLET_NO_UPDATE_OVERLAP", "1"}}), TuningOptions{});
  EXPECT_EQ(row_of(rows, "SUBLET_NO_UPDATE_OVERLAP").scope, "retired");
}

TEST(EnvironmentWarnings, NameTheNearestSwitchForAnUnknownOne) {
  const std::vector<std::string> warnings =
      environment_warnings({"PATH", "SUBLET_LOG_CONV_PLAN", "SUBLET_ALLOC_CONF", "SUBLET_NO_DEFERRED_JOIN"});
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("SUBLET_LOG_CONV_PLAN "), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("did you mean SUBLET_LOG_CONV_PLANS?"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("SUBLET_NO_DEFERRED_JOIN"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[1].find("no longer read"), std::string::npos) << warnings[1];
  EXPECT_TRUE(environment_warnings({"HOME", "SUBLET_REQUIRE_GPU", "SUBLET_STORE_TOKEN"}).empty());
}

}  // namespace
}  // namespace sublet
