// What the kernel files share (docs/algorithm.md §6.11): the instruction sets a hot function is compiled
// for, how an FFI argument's optional leading axis of class networks is read, and how work is spread
// over XLA's intra-op threads.

#ifndef NCTL_KERNEL_COMMON_H_
#define NCTL_KERNEL_COMMON_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "xla/ffi/api/ffi.h"

// A function compiled for AVX-512, AVX2 and plain x86-64, the one the processor supports chosen at load.
#if defined(__x86_64__) && defined(__GNUC__)
#define NCTL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NCTL_CLONES
#endif

// Inlined into its caller, so that it is compiled for the caller's instruction set.
#define NCTL_INLINE inline __attribute__((always_inline))

namespace nctl {

// Under jax.vmap (vmap_method="expand_dims") every argument may carry a leading axis of the class
// networks, of their count or of size 1 (shared by all); `rank` is the argument's rank without it.

// Length of an argument's optional leading network axis (1 where it has none).
template <xla::ffi::DataType D>
int64_t NetAxis(const xla::ffi::Buffer<D>& buffer, size_t rank) {
  auto dims = buffer.dimensions();
  return dims.size() == rank + 1 ? dims[0] : 1;
}

// One argument: its data and the stride of its optional leading network axis (0 where it is shared).
template <typename T>
struct Arg {
  const T* data;
  int64_t net_stride;
  const T* at(int64_t g) const { return data + g * net_stride; }
};

// The argument as seen by each of `nets` networks: its own slice where it carries their axis, else all.
template <typename T, xla::ffi::DataType D>
Arg<T> Resolve(const xla::ffi::Buffer<D>& buffer, size_t rank, int64_t nets) {
  auto dims = buffer.dimensions();
  int64_t per_net = 1;
  for (size_t d = dims.size() - rank; d < dims.size(); ++d) per_net *= dims[d];
  bool batched = dims.size() == rank + 1 && dims[0] == nets && nets > 1;
  return {reinterpret_cast<const T*>(buffer.untyped_data()), batched ? per_net : 0};
}

constexpr int64_t kThreadedProducts = 1 << 18;  // work of fewer multiply-adds (or floats moved) runs on the caller

// Run work(item) for item in [0, count) on the caller and up to threads - 1 pool threads; returns when
// every item is done. Late pool tasks find no item left and return (the state they share outlives them).
// Work of fewer than kThreadedProducts multiply-adds (or floats moved) in all runs on the caller alone:
// handing it out would cost more than it does.
// Items are taken `run` at a time: consecutive items on one thread, where each prefetches the next.
template <typename Work>
void ParallelFor(xla::ffi::ThreadPool& pool, int64_t count, int64_t products, Work work, int64_t run = 1) {
  if (products < kThreadedProducts) {
    for (int64_t item = 0; item < count; ++item) work(item);
    return;
  }
  struct Shared {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto shared = std::make_shared<Shared>();
  auto drain = [shared, count, work, run]() {
    for (int64_t first; (first = shared->next.fetch_add(run)) < count;) {
      const int64_t last = std::min(first + run, count);
      for (int64_t item = first; item < last; ++item) work(item);
      shared->done.fetch_add(last - first, std::memory_order_release);
    }
  };
  int64_t helpers = std::min<int64_t>(pool.num_threads(), count) - 1;
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([drain] { drain(); });
  drain();
  while (shared->done.load(std::memory_order_acquire) < count) std::this_thread::yield();
}

}  // namespace nctl

#endif  // NCTL_KERNEL_COMMON_H_
