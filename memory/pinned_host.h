#pragma once
// The process's allocator of pinned (page-locked) host memory: a CachingAllocator over
// PinnedHostBackend (memory/pinned_host_backend.h), as PyTorch's CachingHostAllocator behind
// pin_memory(). Its memory_stats()/memory_summary() count every pinned byte the runtime uses
// (runtime/data/pinned_buffer.h takes its batch buffers from here).
//
// Allocate on pinned_host_stream(): the host fills pinned blocks in program order, outside any
// CUDA stream. That makes every CUDA stream, the legacy default stream (nullptr) included, an
// "other" stream for record_stream, so a block freed while an async copy on any stream still
// reads it is handed out again only after that copy has finished:
//   Block* b = memory::pinned_allocator().allocate(bytes, memory::pinned_host_stream());
//   ... cudaMemcpyAsync(dst, b->ptr, bytes, cudaMemcpyHostToDevice, s);
//   memory::pinned_allocator().record_stream(b, s);
//   memory::pinned_allocator().free(b);  // reusable once the copy on s is done; no host wait
//
// Created on first use and never destroyed (buffers in static storage may be released after
// main() returns). Configured with AllocatorConfig's defaults, not SUBLET_ALLOC_CONF: those keys
// describe device memory (expandable segments need a virtual memory API pinned memory lacks).
#include "core/device.h"
#include "memory/caching_allocator.h"

namespace sublet::memory {

// Throws DeviceError when sublet is built without CUDA.
CachingAllocator& pinned_allocator();

// The stream pinned blocks are allocated on: a handle no CUDA stream can be equal to.
StreamHandle pinned_host_stream();

}  // namespace sublet::memory
