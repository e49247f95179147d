// LD_PRELOAD shim for bench/omp_region_profile.sh: wraps libgomp's GOMP_parallel (every
// `#pragma omp parallel` region GCC compiles) and records, per region, its wall time, each
// thread's CPU time inside it and the serial gap since the previous region ended. That separates
// the three ways a 2-thread CPU step loses to half its 1-thread time: serial code between
// regions, threads waiting or descheduled inside a region, and more CPU work per thread.
// Output (REGION_PROFILE_OUT): one line per region call after the first REGION_PROFILE_SKIP:
//   <function offset in its object, hex> <object> <wall ms> <gap before ms> <threads> <cpu ms of thread 0..n-1>
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kMaxThreads = 64 };

typedef void (*RegionFunction)(void*);

struct Call {
  RegionFunction function;
  void* data;
  int threads;
  double cpu_ms[kMaxThreads];
};

static FILE* out;
static long calls, skip;
static double last_end_ms;

static double clock_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Runs on every thread of the region: the region's body, timed in the thread's own CPU clock
// (a thread that sleeps in a barrier or is descheduled does not count).
static void timed_body(void* argument) {
  struct Call* call = argument;
  const int thread = omp_get_thread_num();
  if (thread == 0) call->threads = omp_get_num_threads();
  const double start = clock_ms(CLOCK_THREAD_CPUTIME_ID);
  call->function(call->data);
  if (thread < kMaxThreads) call->cpu_ms[thread] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - start;
}

static void close_output(void) {
  if (out != NULL) fclose(out);
}

void GOMP_parallel(RegionFunction function, void* data, unsigned num_threads, unsigned flags) {
  static void (*real)(RegionFunction, void*, unsigned, unsigned);
  if (real == NULL) {
    real = (void (*)(RegionFunction, void*, unsigned, unsigned))dlsym(RTLD_NEXT, "GOMP_parallel");
    const char* path = getenv("REGION_PROFILE_OUT");
    const char* skip_text = getenv("REGION_PROFILE_SKIP");
    out = fopen(path != NULL ? path : "omp_regions.txt", "w");
    skip = skip_text != NULL ? atol(skip_text) : 0;
    atexit(close_output);
  }
  if (++calls <= skip || out == NULL) {
    real(function, data, num_threads, flags);
    last_end_ms = clock_ms(CLOCK_MONOTONIC);
    return;
  }
  struct Call call;
  memset(&call, 0, sizeof call);
  call.function = function;
  call.data = data;
  const double start = clock_ms(CLOCK_MONOTONIC);
  const double gap = last_end_ms > 0 ? start - last_end_ms : 0;
  real(timed_body, &call, num_threads, flags);
  last_end_ms = clock_ms(CLOCK_MONOTONIC);
  Dl_info info;
  unsigned long offset = 0;
  const char* object = "?";
  if (dladdr((void*)function, &info) != 0) {
    offset = (unsigned long)((char*)function - (char*)info.dli_fbase);
    object = info.dli_fname;
  }
  const int threads = call.threads < kMaxThreads ? call.threads : kMaxThreads;
  fprintf(out, "%lx %s %.4f %.4f %d", offset, object[0] != '\0' ? object : "?", last_end_ms - start, gap, threads);
  for (int t = 0; t < threads; ++t) fprintf(out, " %.4f", call.cpu_ms[t]);
  fputc('\n', out);
}
