#pragma once
// The C interface of libsublet_torch_allocator.so: sublet's caching allocator for PyTorch's
// torch.cuda.memory.CUDAPluggableAllocator, and everything PyTorch refuses to report for a
// pluggable allocator (statistics, summary, snapshot, peak reset, empty_cache, record_stream,
// memory fraction). python/sublet_torch/ loads it with ctypes; PyTorch calls the first two.
//
// One caching allocator per device, created at its first allocation with the environment's
// settings (memory/config.h: SUBLET_ALLOC_CONF, else PyTorch's variables) or sublet_torch_set_config's,
// on top of sublet's CUDA defaults (expandable segments on).
// Per-stream pools as in sublet. All functions are thread-safe.
//
// Errors: sublet_torch_malloc throws a C++ exception (std::exception; sublet::OutOfMemoryError
// with sublet's out-of-memory report) because PyTorch calls it from C++ and turns it into a Python
// RuntimeError; a null pointer instead would be used as memory. (The torch hooks call
// sublet_torch_try_malloc instead and throw PyTorch's own c10::OutOfMemoryError.) Every other function catches
// everything: those returning int return 0 on success and -1 on failure, and the message is kept
// for sublet_torch_last_error (per thread). sublet_torch_free never throws (PyTorch calls it from
// destructors): a failure is printed to stderr and kept for sublet_torch_last_error.
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>  // ssize_t

// Exactly the CUDA runtime's definition, so that this header needs no CUDA toolkit.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

#ifdef __cplusplus
extern "C" {
#endif

#define SUBLET_TORCH_API __attribute__((visibility("default")))

// The pair PyTorch calls (torch.cuda.memory.CUDAPluggableAllocator(so, "sublet_torch_malloc",
// "sublet_torch_free")). `size` 0 is served as a minimum block, so every pointer is distinct.
SUBLET_TORCH_API void* sublet_torch_malloc(ssize_t size, int device, cudaStream_t stream);
SUBLET_TORCH_API void sublet_torch_free(void* ptr, ssize_t size, int device, cudaStream_t stream);
// sublet_torch_malloc for callers that cannot take a C++ exception (ctypes, C): nullptr on
// failure, with the message in sublet_torch_last_error.
SUBLET_TORCH_API void* sublet_torch_try_malloc(ssize_t size, int device, cudaStream_t stream);

// The block holding `ptr` (the pointer sublet_torch_malloc returned) will also be used on `stream`:
// it is reused only after the work queued there before its free has completed.
SUBLET_TORCH_API int sublet_torch_record_stream(void* ptr, cudaStream_t stream);

// `device` < 0: every device that has an allocator.
SUBLET_TORCH_API int sublet_torch_empty_cache(int device);
SUBLET_TORCH_API int sublet_torch_reset_peak_memory_stats(int device);
SUBLET_TORCH_API int sublet_torch_reset_accumulated_memory_stats(int device);
// PyTorch's cacheInfo (what cuDNN's benchmark may use as a workspace): the larger of the device's
// free memory and the largest free cached block. Creates the device's allocator when missing.
SUBLET_TORCH_API int sublet_torch_cache_info(int device, size_t* largest_block);
// Caps the device's reserved memory at fraction * its capacity (torch.cuda.set_per_process_memory_fraction).
SUBLET_TORCH_API int sublet_torch_set_memory_fraction(double fraction, int device);

// One statistic by PyTorch's name ("allocated_bytes.all.current", "num_device_alloc", ...).
// Returns 0 and sets *value; -1 for an unknown key. A device without an allocator yet reads 0.
SUBLET_TORCH_API int sublet_torch_stat(int device, const char* key, int64_t* value);
// Text outputs: the full length (without the terminating NUL) is returned; when `capacity` is
// larger, the text and a NUL are written to `out` (call with capacity 0 to learn the size).
// On failure they return 0 and the message is in sublet_torch_last_error.
//   memory_stats: one "key value" line per statistic, PyTorch's keys, sorted.
SUBLET_TORCH_API size_t sublet_torch_memory_stats(int device, char* out, size_t capacity);
SUBLET_TORCH_API size_t sublet_torch_memory_summary(int device, char* out, size_t capacity);
// The device's allocator settings as SUBLET_ALLOC_CONF text and the backend's name ("cuda", "simulated").
SUBLET_TORCH_API size_t sublet_torch_config(int device, char* out, size_t capacity);
SUBLET_TORCH_API size_t sublet_torch_last_error(char* out, size_t capacity);
// 1 when this thread's last failure was an out-of-memory error (sublet_torch_try_malloc), else 0.
SUBLET_TORCH_API int sublet_torch_last_error_is_out_of_memory(void);

// Settings (SUBLET_ALLOC_CONF syntax, PyTorch's keys) for allocators created from now on, in place
// of the environment's (SUBLET_ALLOC_CONF, else PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF);
// NULL: the environment's again. Fails (-1) on bad text, or once an allocator exists with other settings.
SUBLET_TORCH_API int sublet_torch_set_config(const char* conf);

// What this library tracks (for consistency checks against the statistics): live pointers of
// the device and the sum of their requested sizes and of their blocks' (rounded) sizes.
SUBLET_TORCH_API int sublet_torch_live_allocations(int device, int64_t* count, int64_t* requested_bytes,
                                                   int64_t* block_bytes);
// Number of device slots in use: 1 + the highest device index that has an allocator (0: none).
SUBLET_TORCH_API int sublet_torch_device_count(void);

// Allocation history for snapshots (torch.cuda.memory._record_memory_history): enabled != 0
// starts recording every device's events, keeping the newest max_entries per device (0: 1,000,000);
// enabled == 0 stops and drops what was recorded.
SUBLET_TORCH_API int sublet_torch_record_history(int enabled, size_t max_entries);
// Stacks for the history: while a callback is set, it is called at every allocation before any of
// the library's locks is taken, and returns the id sublet_torch_intern_frames gave the caller's
// stack (0: none). Blocks and their alloc/segment/oom events carry it; snapshots show it as frames.
// NULL stops it. The text is one frame per line, innermost first: "filename\tline\tname".
typedef uint32_t (*sublet_torch_frames_fn)(void);
SUBLET_TORCH_API void sublet_torch_set_frames_callback(sublet_torch_frames_fn callback);
// The id of `frames` (the same text gives the same id; 0 on failure, see sublet_torch_last_error).
SUBLET_TORCH_API uint32_t sublet_torch_intern_frames(const char* frames);
// Writes a pickle in the layout of torch.cuda.memory._snapshot() (pytorch.org/memory_viz and
// torch.cuda._memory_viz read it): segments of every device and, when recording, the traces.
SUBLET_TORCH_API int sublet_torch_dump_snapshot(const char* path);

// For tests and what-if runs without a GPU: devices 0..count-1 become simulated devices of
// `capacity_bytes` each (fake addresses: never touch the memory). Only before any allocation.
SUBLET_TORCH_API int sublet_torch_use_simulated_devices(int count, size_t capacity_bytes);
// Returns 1 when the library was built with the CUDA backend, 0 otherwise.
SUBLET_TORCH_API int sublet_torch_cuda_built(void);
// sublet's version (CMake's project version), e.g. "0.1.0".
SUBLET_TORCH_API const char* sublet_torch_version(void);

#ifdef __cplusplus
}
#endif
