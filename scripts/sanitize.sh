#!/usr/bin/env bash
# The sanitizer runs CI does after the normal suite:
#   tsan: the allocator stress program (8 threads x 1M operations) under ThreadSanitizer (gcc,
#         build-tsan);
#   asan: the CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (less the few
#         long end-to-end runs of asan_skip below), then a short run of every fuzz target, from
#         one clang build (build-asan, scripts/clang_sanitized_build.sh).
# Usage: scripts/sanitize.sh [tsan|asan|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
jobs="$(nproc)"

# Left out of the ASan suite (the plain suite, which CI runs first, runs every one of them): long
# end-to-end runs that repeat, step after step, code that shorter tests run under ASan as well.
# Seconds: the test's time under ASan on two cores.
asan_skip=(
  # two epochs of real MNIST training, the accuracy guard: 9 minutes under ASan.
  '^TrainerMnist\.'
  # 40 SGD steps of ResNet-20 (71 s); ResNetMemory.* run steps of the same model and optimizer.
  '^ResNetTraining\.ResNet20LearnsASyntheticTaskOnTheCpu$'
  # fit_memory_budget at batch 32, in float32 (79 s) and under bfloat16 autocast (94 s): the fit
  # stays under ASan in ResNetRecompute.BlocksAreMeasuredOnPartOfTheBatchWhenTheWholeStepDoesNotFit
  # (with the allocator capped and out of memory mid-step), recomputation in the other
  # ResNetRecompute tests, recomputation under autocast in Autocast.CheckpointRecomputesUnder*.
  '^ResNetRecompute\.TheChoiceFitsTheBudgetAndAnUnreachableOneIsRefused$'
  '^ResNetRecompute\.UnderAutocastTheSixteenBitStepFitsItsBudget$'
  # Resume runs (44 s, 28-38 s): the same save/resume code as sgd_split_5 (mid-epoch, then across
  # the epoch's end) and adamw_split_3, which stay; fit() stays in TrainerGuards.* and TrainCommand.*.
  # (ctest's name of a parameterised case goes on with "  # GetParam() = ...").
  '^Cases/TrainerResume\.ResumedRunRepeatsTheUninterruptedLossesBitForBit/sgd_split_8( |$)'
  '^TrainerResume\.FitContinuesFromAnEpochCheckpointToTheSameHistory$'
  # The quick CPU allocation benchmark without a plugin (8-11 s, 11-23 s): the case with the fake
  # torch plugin, which stays, runs the same three allocators on every row and the torch column.
  '^Devices/AllocBenchSmoke\.EveryAllocatorRunsEveryRowAndTheJsonHasEveryRow/cpu( |$)'
  '^TorchPluginLoader\.NoPluginMeansNoTorchColumn$'
  # Data parallel through `sublet train` with 2-3 real processes each (3 to 7 trainings a test):
  # the same Gloo group, buckets and store code run under ASan in GlooProcessGroup.*, the fault,
  # node and store tests, which stay.
  '^TrainDataParallelCpu\.WorldsOfTwoAndThreeEqualOneProcessForEveryBucketCap$'
  '^TrainDataParallelCpu\.ResumingOnAnotherWorldSizeKeepsTheGlobalBatchSequence$'
  '^TrainDataParallelCpu\.TorchrunWorkersTrainWithAndWithoutItsAgentStoreAndAgreeWithTheLauncher$'
  # Eleven fits of --memory-budget with training around them: the fit stays in
  # ResNetRecompute.BlocksAreMeasuredOnPartOfTheBatchWhenTheWholeStepDoesNotFit and GptTraining.*.
  '^TrainerMemoryBudget\.'
  # gpt-nano steps under six allocator settings, and their replay: the rows' code runs under ASan
  # in AllocConfSweep.*, the schedule in the other BenchStepShapesCli.*.
  '^BenchStepShapesCli\.TheSweepPrintsOneRowPerSettingReadFromTheAllocatorsStatistics$'
  '^BenchStepShapesCli\.AReplayOfTheRecordedTraceGivesTheSweepsColumns$'
  # 60 gpt-nano steps on a length schedule until the loss falls (8 s without ASan): the schedule's
  # shapes, learning rate and resume run under ASan in the other TrainerShapeSchedule.* tests.
  '^TrainerShapeSchedule\.TrainsWithARangeAndTheLossFalls$'
)
asan_skip_regex() { local IFS='|'; echo "${asan_skip[*]}"; }

if [ "$what" = tsan ] || [ "$what" = all ]; then
  cmake -S . -B build-tsan -G Ninja -DSUBLET_WITH_CUDA=OFF -DSUBLET_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build-tsan -j "$jobs" --target allocator_stress
  TSAN_OPTIONS="halt_on_error=1" build-tsan/tests/allocator_stress 8 1000000
fi

if [ "$what" = asan ] || [ "$what" = all ]; then
  scripts/clang_sanitized_build.sh
  # allocator_may_return_null: an impossible host allocation must fail as it does without ASan
  # (the CLI tests ask for 1 TiB and expect sublet's out-of-memory message).
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build-asan -L cpu -E "$(asan_skip_regex)" -j "$jobs" --output-on-failure
  scripts/fuzz.sh 20000
fi
