// A stored state's rows copied into its pool entry at a pool boundary, as an XLA FFI handler
// (nctl_store_rows, docs/algorithm.md §6.3, §6.11): for each neuron of a layer that stores a state, the
// winning member's row at every context (its trained row where it has a current one, else the row it
// started from) copied into the entry, in place. XLA gathered a layer's rows for every class network,
// then wrote them network by network, a few hundred kilobytes at a time, at a small part of the copy
// bandwidth.

#include <algorithm>
#include <cstdint>
#include <cstring>

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

int64_t Clamp(int64_t i, int64_t size) { return std::min<int64_t>(std::max<int64_t>(i, 0), size - 1); }

}  // namespace

// For each network and each neuron n of the layer (columns offset .. offset + N - 1) whose entry[n] is in
// [0, E): member m = winner[n] of slot `slot`, at every context c, is copied into pool_rows[n, c, entry[n]]:
//   - its trained row blocks[b, lane] where b = block_of[slot, offset + n, c] >= 0 and the row is current:
//     exact mode (`bounded` false): lane m, always current; bounded mode: the first lane w with
//     lanes[slot, offset + n, w] == m, current where some lane holds m and stamps[b, w] >=
//     lane_since[slot, offset + n, w];
//   - else its source row pool_rows[n, c, e], e = source[slot, m, offset + n], where 0 <= m < k and e >= 0;
//   - else the fresh row, every weight `init_value`.
// Shapes: pool_rows [nets?, N, C, E, K], blocks [nets?, A, W, K], stamps [nets?, A, W], block_of [nets?, S,
// columns, C], lanes and lane_since [nets?, S, columns, W], source [nets?, S, k, columns], slot [nets?],
// winner and entry [nets?, N]; in exact mode stamps, lanes and lane_since are not read. Indices are clamped
// to their arrays as XLA's gathers clamp them. A source entry is never one being written (the pool update
// chooses targets that no stored state reads), so the rows read are those before the call, and the
// (network, neuron) items, which write apart, are spread over XLA's intra-op threads.
ffi::Error StoreRows(ffi::ThreadPool threads, Rows pool_rows, Rows blocks, Ids stamps, Ids block_of, Ids lanes,
                     Ids lane_since, Ids source, Ids slot, Ids winner, Ids entry, int64_t offset, bool bounded,
                     float init_value, ffi::ResultBuffer<ffi::F32> out) {
  auto pool_dims = pool_rows.dimensions(), block_dims = blocks.dimensions(), table_dims = block_of.dimensions(),
       source_dims = source.dimensions();
  if (pool_dims.size() < 4 || block_dims.size() < 3 || table_dims.size() < 3 || source_dims.size() < 3 ||
      stamps.dimensions().size() < 2 || lanes.dimensions().size() < 3 || lane_since.dimensions().size() < 3 ||
      winner.dimensions().size() < 1 || entry.dimensions().size() < 1)
    return ffi::Error::InvalidArgument("nctl store rows: arguments of unexpected rank");
  const int64_t N = pool_dims[pool_dims.size() - 4], C = pool_dims[pool_dims.size() - 3],
                E = pool_dims[pool_dims.size() - 2], K = pool_dims.back();
  const int64_t A = block_dims[block_dims.size() - 3], W = block_dims[block_dims.size() - 2];
  const int64_t S = table_dims[table_dims.size() - 3], columns = table_dims[table_dims.size() - 2];
  const int64_t k = source_dims[source_dims.size() - 2];
  if (block_dims.back() != K || table_dims.back() != C || offset < 0 || offset + N > columns || E == 0 || S == 0)
    return ffi::Error::InvalidArgument("nctl store rows: the layer's rows, blocks and columns do not agree");
  if (bounded && (lanes.dimensions().back() != W || stamps.dimensions().back() != W))
    return ffi::Error::InvalidArgument("nctl store rows: lanes and blocks do not agree");
  const int64_t nets = std::max({NetAxis(pool_rows, 4), NetAxis(blocks, 3), NetAxis(stamps, 2), NetAxis(block_of, 3),
                                 NetAxis(lanes, 3), NetAxis(lane_since, 3), NetAxis(source, 3), NetAxis(slot, 0),
                                 NetAxis(winner, 1), NetAxis(entry, 1)});
  const auto Pool = Resolve<float>(pool_rows, 4, nets);
  const auto Block = Resolve<float>(blocks, 3, nets);
  const auto Stamp = Resolve<int32_t>(stamps, 2, nets);
  const auto Table = Resolve<int32_t>(block_of, 3, nets);
  const auto Lane = Resolve<int32_t>(lanes, 3, nets);
  const auto Since = Resolve<int32_t>(lane_since, 3, nets);
  const auto Source = Resolve<int32_t>(source, 3, nets);
  const auto Slot = Resolve<int32_t>(slot, 0, nets);
  const auto Winner = Resolve<int32_t>(winner, 1, nets);
  const auto Entry = Resolve<int32_t>(entry, 1, nets);
  const int64_t pool_size = N * C * E * K;
  float* written = out->typed_data();
  for (int64_t g = 0; g < nets; ++g)  // the output starts as the input (the same buffer where aliased)
    if (written + g * pool_size != Pool.at(g))
      std::memcpy(written + g * pool_size, Pool.at(g), pool_size * sizeof(float));

  // One (network, neuron) item: its C rows, each asked for kRowsAhead rows before it is copied (the rows
  // lie kilobytes apart, where the processor's prefetcher stops).
  auto one_neuron = [&](int64_t item) {
    const int64_t g = item / N, n = item % N;
    const int64_t target = Entry.at(g)[n];
    if (target < 0 || target >= E) return;
    float* rows = written + g * pool_size;
    const int64_t p = Clamp(*Slot.at(g), S);
    const int64_t m = Winner.at(g)[n], col = offset + n;
    int64_t lane = m;  // exact mode: the member's own lane
    bool has_lane = true;
    if (bounded) {
      const int32_t* held = Lane.at(g) + (p * columns + col) * W;
      const int32_t* found = std::find(held, held + W, static_cast<int32_t>(m));
      has_lane = found != held + W;
      lane = has_lane ? found - held : 0;
    }
    lane = Clamp(lane, W);
    const int64_t from = (k > 0 && m >= 0 && m < k) ? Source.at(g)[(p * k + m) * columns + col] : -1;
    const int32_t* block_ids = Table.at(g) + (p * columns + col) * C;
    const int32_t since = bounded ? Since.at(g)[(p * columns + col) * W + lane] : 0;
    auto source_row = [&](int64_t c) -> const float* {  // the row stored at context c (nullptr: the fresh row)
      const int64_t b = block_ids[c];
      if (b >= 0 && has_lane && (!bounded || Stamp.at(g)[Clamp(b, A) * W + lane] >= since))
        return Block.at(g) + (Clamp(b, A) * W + lane) * K;
      return from >= 0 ? rows + ((n * C + c) * E + Clamp(from, E)) * K : nullptr;
    };
    auto target_row = [&](int64_t c) { return rows + ((n * C + c) * E + target) * K; };
    for (int64_t c = 0; c < C; ++c) {
      if (c + kRowsAhead < C) {
        const float* next = source_row(c + kRowsAhead);
        float* next_target = target_row(c + kRowsAhead);
        for (int64_t i = 0; i < K; i += kFloatsPerLine) {
          if (next) __builtin_prefetch(next + i, 0);
          __builtin_prefetch(next_target + i, 1);
        }
      }
      const float* row = source_row(c);
      if (row) {
        std::memcpy(target_row(c), row, K * sizeof(float));
      } else {
        std::fill_n(target_row(c), K, init_value);
      }
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
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Attr<int64_t>("offset")
                                  .Attr<bool>("bounded")
                                  .Attr<float>("init_value")
                                  .Ret<Rows>());
