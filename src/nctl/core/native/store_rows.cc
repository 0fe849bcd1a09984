// A stored state's rows copied into its pool entry at a pool boundary, as an XLA FFI handler
// (nctl_store_rows, docs/algorithm.md §6.3, §6.11): for each neuron of a layer that stores a state, the
// winning member's row at every context (its trained row where it has a current one, else the row it
// started from; the engine says which by a row code, as for the pool decisions) copied into the entry, in
// place. XLA gathered a layer's rows for every class network, then wrote them network by network, a few
// hundred kilobytes at a time, at a small part of the copy bandwidth.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernel_common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using nctl::NetAxis;
using nctl::Resolve;
using Ids = ffi::Buffer<ffi::S32>;
using Rows = ffi::Buffer<ffi::F32>;

namespace {

constexpr int64_t kRowsAhead = 2;  // a row's lines are asked for while the row this many before it is copied
constexpr int64_t kFloatsPerLine = 16;  // a 64-byte cache line

}  // namespace

// For each network and each neuron n of the layer whose entry[n] is in [0, E), at every context c, the row
// that rows[n, c] names (`nctl::CodedRow`: a row of `blocks`, the fresh row of `init_value`, or one of the
// neuron's pool entries at c) is copied into pool_rows[n, c, entry[n]]. Shapes: pool_rows [nets?, N, C, E,
// K], blocks [nets?, A, W, K], rows [nets?, N, C], entry [nets?, N]. No code names an entry being written
// (the pool update chooses targets that no stored state reads), so the rows read are those before the call,
// and the (network, neuron) items, which write apart, are spread over XLA's intra-op threads.
ffi::Error StoreRows(ffi::ThreadPool threads, Rows pool_rows, Rows blocks, Ids rows, Ids entry, float init_value,
                     ffi::ResultBuffer<ffi::F32> out) {
  auto pool_dims = pool_rows.dimensions(), block_dims = blocks.dimensions(), row_dims = rows.dimensions();
  if (pool_dims.size() < 4 || block_dims.size() < 3 || row_dims.size() < 2 || entry.dimensions().size() < 1)
    return ffi::Error::InvalidArgument("nctl store rows: arguments of unexpected rank");
  const int64_t N = pool_dims[pool_dims.size() - 4], C = pool_dims[pool_dims.size() - 3],
                E = pool_dims[pool_dims.size() - 2], K = pool_dims.back();
  const int64_t A = block_dims[block_dims.size() - 3] * block_dims[block_dims.size() - 2];  // block rows
  if (block_dims.back() != K || row_dims[row_dims.size() - 2] != N || row_dims.back() != C ||
      entry.dimensions().back() != N || E == 0)
    return ffi::Error::InvalidArgument("nctl store rows: the layer's rows, blocks and codes do not agree");
  const int64_t nets = std::max({NetAxis(pool_rows, 4), NetAxis(blocks, 3), NetAxis(rows, 2), NetAxis(entry, 1)});
  const auto Pool = Resolve<float>(pool_rows, 4, nets);
  const auto Block = Resolve<float>(blocks, 3, nets);
  const auto Code = Resolve<int32_t>(rows, 2, nets);
  const auto Entry = Resolve<int32_t>(entry, 1, nets);
  const int64_t pool_size = N * C * E * K;
  float* written = out->typed_data();
  for (int64_t g = 0; g < nets; ++g)  // the output starts as the input (the same buffer where aliased)
    if (written + g * pool_size != Pool.at(g))
      std::memcpy(written + g * pool_size, Pool.at(g), pool_size * sizeof(float));
  const std::vector<float> fresh(K, init_value);

  // One (network, neuron) item: its C rows, each asked for kRowsAhead rows before it is copied (the rows
  // lie kilobytes apart, where the processor's prefetcher stops).
  auto one_neuron = [&](int64_t item) {
    const int64_t g = item / N, n = item % N;
    const int64_t target = Entry.at(g)[n];
    if (target < 0 || target >= E) return;
    float* neuron_rows = written + g * pool_size + n * C * E * K;
    const int32_t* codes = Code.at(g) + n * C;
    auto row_at = [&](int64_t c) {
      return nctl::CodedRow(codes[c], Block.at(g), A, fresh.data(), neuron_rows + c * E * K, E, K);
    };
    for (int64_t c = 0; c < C; ++c) {
      if (c + kRowsAhead < C) {
        const float* next = row_at(c + kRowsAhead);
        const float* next_target = neuron_rows + ((c + kRowsAhead) * E + target) * K;
        for (int64_t i = 0; i < K; i += kFloatsPerLine) {
          __builtin_prefetch(next + i, 0);
          __builtin_prefetch(next_target + i, 1);
        }
      }
      std::memcpy(neuron_rows + (c * E + target) * K, row_at(c), K * sizeof(float));
    }
  };
  nctl::ParallelFor(threads, nets * N, nets * N * C * K, one_neuron);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlStoreRows, StoreRows,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<Rows>()
                                  .Arg<Rows>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Attr<float>("init_value")
                                  .Ret<Rows>());
