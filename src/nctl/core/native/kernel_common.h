// What the kernel files share (docs/algorithm.md §6.11): the instruction sets a hot function is compiled
// for, and how an FFI argument's optional leading axis of class networks is read.

#ifndef NCTL_KERNEL_COMMON_H_
#define NCTL_KERNEL_COMMON_H_

#include <cstdint>

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

}  // namespace nctl

#endif  // NCTL_KERNEL_COMMON_H_
