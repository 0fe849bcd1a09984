// A layer's GGM rows on the CPU, as XLA FFI handlers (docs/algorithm.md §6.11): trained in place
// (nctl_train_rows), predicted (nctl_predict_rows, nctl_row_predictions, a neuron's pool entries by
// nctl_entry_predictions), and a pool decision's states
// scored where they are stored (nctl_pool_predictions); all with one dot product.
//
// For every live slot p and neuron n, each of the W lanes reads its row (its block's, or its source's
// where the lane is new to the block), predicts q = clip(sigma(w . u), eps, 1 - eps) and writes
// w <- clip(w - lr (q - x) u, -w_max, w_max) into its block: one pass over each row, where XLA gathers,
// updates and scatters (three). The (slot, neuron) items write distinct blocks and run on XLA's
// intra-op threads (a small layer's on the calling thread); each row's arithmetic is fixed, so results
// do not depend on the thread count.
//
// Under jax.vmap every argument may carry a leading axis of the class networks (kernel_common.h).

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "kernel_common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using nctl::Arg;
using nctl::NetAxis;
using nctl::ParallelFor;
using nctl::Resolve;

namespace {

constexpr int kAccumulators = 16;  // independent partial sums of a dot product: the compiler vectorises them
constexpr int64_t kItemsPerRun = 8;  // (slot, neuron) items a thread takes at once when training rows
constexpr int64_t kRowsAhead = 2;  // a row's lines are asked for while the row this many before it is trained
constexpr int64_t kSmallBlock = 1024;  // a block of fewer floats is asked for kSmallAhead items before its turn:
constexpr int64_t kSmallAhead = 8;  // its rows are too short to hide the wait for the next one behind

// sum_i a[i] b[i], summed in a fixed order: kAccumulators strided partial sums, then the tail. A row
// shorter than kAccumulators has no partial sums (they would all add +0 to +0: the same bits).
NCTL_INLINE float SumProducts(const float* a, const float* b, int64_t k) {
  float total = 0.0f;
  int64_t i = 0;
  if (k >= kAccumulators) {
    float partial[kAccumulators] = {0.0f};
    for (; i + kAccumulators <= k; i += kAccumulators)
      for (int j = 0; j < kAccumulators; ++j) partial[j] += a[i + j] * b[i + j];
    for (int j = 0; j < kAccumulators; ++j) total += partial[j];
  }
  for (; i < k; ++i) total += a[i] * b[i];
  return total;
}

// clip(sigma(a), eps, 1 - eps)
NCTL_INLINE float Squash(float a, float eps) {
  const float sigma = 1.0f / (1.0f + std::exp(-a));
  return std::min(std::max(sigma, eps), 1.0f - eps);
}

// q = clip(sigma(row . u), eps, 1 - eps): every prediction of a row in these kernels.
NCTL_CLONES float Predict(const float* row, const float* u, int64_t k, float eps) {
  return Squash(SumProducts(row, u, k), eps);
}

// Half of a row's kAccumulators partial sums as one value (one register with AVX2). Halves, not one
// value of all sixteen: GCC moves a value wider than the target's registers through memory at every
// addition.
typedef float Half __attribute__((vector_size(kAccumulators / 2 * sizeof(float))));

// Predict of `n` rows on the same u at once: their partial sums are n independent chains of additions,
// which the processor overlaps where one row's chain waits on each addition; each row is summed in
// SumProducts' order (the same bits).
// Where `ahead` is given, the cache lines of its n rows of k floats (the rows predicted next; null: none)
// are asked for along the way.
template <int n>
NCTL_INLINE void PredictTogether(const float* const* rows, const float* u, int64_t k, float eps, float* q,
                                 const float* const* ahead = nullptr) {
  constexpr int64_t kHalf = kAccumulators / 2;
  float total[n] = {};
  int64_t i = 0;
  if (k >= kAccumulators) {
    Half low[n] = {}, high[n] = {};  // partial sums 0 .. 7 and 8 .. 15
    for (; i + kAccumulators <= k; i += kAccumulators) {
      if (ahead)
        for (int r = 0; r < n; ++r)
          if (ahead[r]) __builtin_prefetch(ahead[r] + i, 0, 3);
      Half x_low, x_high;
      std::memcpy(&x_low, u + i, sizeof x_low);
      std::memcpy(&x_high, u + i + kHalf, sizeof x_high);
      for (int r = 0; r < n; ++r) {
        Half a_low, a_high;
        std::memcpy(&a_low, rows[r] + i, sizeof a_low);
        std::memcpy(&a_high, rows[r] + i + kHalf, sizeof a_high);
        low[r] += a_low * x_low;
        high[r] += a_high * x_high;
      }
    }
    for (int r = 0; r < n; ++r) {
      for (int j = 0; j < kHalf; ++j) total[r] += low[r][j];
      for (int j = 0; j < kHalf; ++j) total[r] += high[r][j];
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int64_t t = i; t < k; ++t) total[r] += rows[r][t] * u[t];
    q[r] = Squash(total[r], eps);
  }
}

// q[r] = Predict(rows[r], u, k, eps) for r < count, four rows at a time. Where `end` is given, the row
// pointers run on past `count` up to it (the rows predicted next), and each four rows ask for the four
// that follow them as they go.
NCTL_CLONES void PredictMany(const float* const* rows, int64_t count, const float* u, int64_t k, float eps, float* q,
                             const float* const* end = nullptr) {
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    const float* ahead[4] = {};
    for (int64_t j = 0; j < 4 && rows + r + 4 + j < end; ++j) ahead[j] = rows[r + 4 + j];
    PredictTogether<4>(rows + r, u, k, eps, q + r, end ? ahead : nullptr);
  }
  switch (count - r) {
    case 3: PredictTogether<3>(rows + r, u, k, eps, q + r); break;
    case 2: PredictTogether<2>(rows + r, u, k, eps, q + r); break;
    case 1: PredictTogether<1>(rows + r, u, k, eps, q + r); break;
  }
}

// Ask for the cache lines of the row of `k` floats at `row` (none where null): blocks lie anywhere in
// their arena, and the processor's own prefetcher does not cross into a row's next page.
NCTL_INLINE void Prefetch(const float* row, int64_t k) {
  if (!row) return;
  constexpr int64_t kLine = 64 / sizeof(float);
  for (int64_t i = 0; i < k; i += kLine) __builtin_prefetch(row + i, 1, 3);
}

// The W lanes of one (net, slot, neuron) item, each row W x K apart from `block`'s first, or where
// `stale`, its source: pool entry `entry` of `pool` (the neuron's entries at its context), else `fresh`.
// q of each row into `q`, and where `out` is given the updated row out[i] = clip(row[i] - step u[i],
// -bound, bound), step = rate (q - x). One call per item: the products and updates inline.
NCTL_CLONES void TrainLanes(const float* block, const bool* stale, const int32_t* entry, const float* pool,
                            int64_t E, const float* fresh, const float* u, int64_t W, int64_t K, float eps,
                            float rate, float x, float bound, float* out, float* q, const float* next) {
  for (int64_t w = 0; w < W; ++w) {
    const int64_t ahead = w + kRowsAhead;
    Prefetch(ahead < W ? block + ahead * K : (next && ahead < 2 * W ? next + (ahead - W) * K : nullptr), K);
    const float* row = block + w * K;
    if (stale[w]) row = entry[w] >= 0 ? pool + std::min<int64_t>(entry[w], E - 1) * K : fresh;
    const float qv = Squash(SumProducts(row, u, K), eps);
    q[w] = qv;
    if (!out) continue;
    const float step = rate * (qv - x);
    float* target = out + w * K;
    for (int64_t i = 0; i < K; ++i) {
      const float value = row[i] - step * u[i];
      target[i] = value < -bound ? -bound : (value > bound ? bound : value);
    }
  }
}

// The rows of every live (net, slot, neuron) item: predictions into `q`, and where `arena` is writable
// (training) the updated rows into their blocks. Slots beyond the live ones predict 1/2.
ffi::Error RunRows(ffi::ThreadPool& threads, const ffi::Buffer<ffi::F32>& blocks, float* arena_out,
                   const ffi::Buffer<ffi::F32>& pool_rows, const ffi::Buffer<ffi::S32>& read,
                   const ffi::Buffer<ffi::S32>& write, const ffi::Buffer<ffi::S32>& entry,
                   const ffi::Buffer<ffi::PRED>& stale, const ffi::Buffer<ffi::S32>& contexts,
                   const ffi::Buffer<ffi::F32>& u, const ffi::Buffer<ffi::F32>& x,
                   const ffi::Buffer<ffi::S32>& size, float learning_rate, float prob_eps, float max_weight,
                   float init_value, float* q_out) {
  auto block_dims = blocks.dimensions();  // [nets?, B, W, K]
  auto pool_dims = pool_rows.dimensions();  // [nets?, N, C, E, K]
  auto read_dims = read.dimensions();  // [nets?, S, N]
  if (block_dims.size() < 3 || pool_dims.size() < 4 || read_dims.size() < 2)
    return ffi::Error::InvalidArgument("nctl GGM rows: arguments of unexpected rank");
  const int64_t nets = block_dims.size() == 4 ? block_dims[0] : 1;
  const int64_t B = block_dims[block_dims.size() - 3], W = block_dims[block_dims.size() - 2],
                K = block_dims.back();
  const int64_t C = pool_dims[pool_dims.size() - 3], E = pool_dims[pool_dims.size() - 2];
  const int64_t S = read_dims[read_dims.size() - 2], N = read_dims.back();
  if (arena_out && arena_out != blocks.typed_data())  // XLA aliases them; copy if it ever does not
    std::copy(blocks.typed_data(), blocks.typed_data() + blocks.element_count(), arena_out);
  const float* arena_in = arena_out ? arena_out : blocks.typed_data();

  const auto Pool = Resolve<float>(pool_rows, 4, nets);
  const auto Read = Resolve<int32_t>(read, 2, nets);
  const auto Write = Resolve<int32_t>(write, 2, nets);
  const auto Entry = Resolve<int32_t>(entry, 3, nets);
  const auto Stale = Resolve<bool>(stale, 3, nets);
  const auto Context = Resolve<int32_t>(contexts, 1, nets);
  const auto U = Resolve<float>(u, 1, nets);
  const auto X = Resolve<float>(x, 0, nets);
  const auto Size = Resolve<int32_t>(size, 0, nets);
  const std::vector<float> fresh(K, init_value);

  auto first_row = [&](int64_t item) -> const float* {  // item's block, null past the live slots
    const int64_t g = item / (S * N), p = item / N % S, n = item % N;
    if (item >= nets * S * N || p >= *Size.at(g)) return nullptr;
    const int64_t from = Read.at(g)[p * N + n];
    return arena_in + (g * B + std::clamp<int64_t>(from < 0 ? from + B : from, 0, B - 1)) * W * K;  // as XLA's gather reads it
  };
  auto one_item = [&](int64_t item) {  // item = (net, slot, neuron)
    const int64_t g = item / (S * N), p = item / N % S, n = item % N;
    float* q_row = q_out + item * W;
    const float* block = first_row(item);
    const bool small = W * K < kSmallBlock;  // then its next blocks were asked for kSmallAhead items ago
    if (small) Prefetch(first_row(item + kSmallAhead), W * K);
    if (!block) {
      std::fill(q_row, q_row + W, 0.5f);
      return;
    }
    const int64_t to = Write.at(g)[p * N + n];
    const bool learn = arena_out && 0 <= to && to < B;
    const int64_t lanes = (p * N + n) * W;
    TrainLanes(block, Stale.at(g) + lanes, Entry.at(g) + lanes,
               Pool.at(g) + (n * C + Context.at(g)[n]) * E * K, E, fresh.data(), U.at(g), W, K, prob_eps,
               learning_rate, *X.at(g), max_weight, learn ? arena_out + (g * B + to) * W * K : nullptr, q_row,
               small ? nullptr : first_row(item + 1));
  };
  ParallelFor(threads, nets * S * N, nets * S * N * W * K, one_item, kItemsPerRun);
  return ffi::Error::Success();
}

ffi::Error TrainRows(ffi::ThreadPool threads, ffi::Buffer<ffi::F32> blocks, ffi::Buffer<ffi::F32> pool_rows,
                     ffi::Buffer<ffi::S32> read, ffi::Buffer<ffi::S32> write, ffi::Buffer<ffi::S32> entry,
                     ffi::Buffer<ffi::PRED> stale, ffi::Buffer<ffi::S32> contexts, ffi::Buffer<ffi::F32> u,
                     ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S32> size, float learning_rate, float prob_eps,
                     float max_weight, float init_value, ffi::ResultBuffer<ffi::F32> blocks_out,
                     ffi::ResultBuffer<ffi::F32> q) {
  return RunRows(threads, blocks, blocks_out->typed_data(), pool_rows, read, write, entry, stale, contexts, u, x,
                 size, learning_rate, prob_eps, max_weight, init_value, q->typed_data());
}

ffi::Error PredictRows(ffi::ThreadPool threads, ffi::Buffer<ffi::F32> blocks, ffi::Buffer<ffi::F32> pool_rows,
                       ffi::Buffer<ffi::S32> read, ffi::Buffer<ffi::S32> write, ffi::Buffer<ffi::S32> entry,
                       ffi::Buffer<ffi::PRED> stale, ffi::Buffer<ffi::S32> contexts, ffi::Buffer<ffi::F32> u,
                       ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S32> size, float learning_rate, float prob_eps,
                       float max_weight, float init_value, ffi::ResultBuffer<ffi::F32> q) {
  return RunRows(threads, blocks, nullptr, pool_rows, read, write, entry, stale, contexts, u, x, size,
                 learning_rate, prob_eps, max_weight, init_value, q->typed_data());
}

}  // namespace

// q of every row of `rows` [nets?, ..., K] on u: one u [nets?, K] for all rows (u_rank 1), or one per row
// (u [nets?, ..., K], u_rank = rows_rank). The predictions of rows outside the blocks (pool entries, the
// fresh row, a pool decision's states), rounded as the blocks' are.
ffi::Error RowPredictions(ffi::Buffer<ffi::F32> rows, ffi::Buffer<ffi::F32> u, int64_t rows_rank, int64_t u_rank,
                          float prob_eps, ffi::ResultBuffer<ffi::F32> q) {
  auto dims = rows.dimensions();
  auto u_dims = u.dimensions();
  const int64_t K = dims.back();
  const int64_t row_nets = static_cast<int64_t>(dims.size()) == rows_rank + 1 ? dims[0] : 1;
  const int64_t u_nets = static_cast<int64_t>(u_dims.size()) == u_rank + 1 ? u_dims[0] : 1;
  const int64_t nets = std::max(row_nets, u_nets);
  const int64_t per_net = rows.element_count() / row_nets / K;
  const int64_t u_per_net = u.element_count() / u_nets / K;  // 1 or per_net
  float* out = q->typed_data();
  for (int64_t g = 0; g < nets; ++g)
    for (int64_t r = 0; r < per_net; ++r) {
      const float* row = rows.typed_data() + ((row_nets > 1 ? g : 0) * per_net + r) * K;
      const float* uu = u.typed_data() + ((u_nets > 1 ? g : 0) * u_per_net + (u_per_net > 1 ? r : 0)) * K;
      out[g * per_net + r] = Predict(row, uu, K, prob_eps);
    }
  return ffi::Error::Success();
}

// q [nets?, N, E] of the pool entries of each neuron n at its context contexts[n] (pool [nets?, N, C, E,
// K], contexts [nets?, N], u [nets?, K]) that a member of a live slot starts from (source [nets?, S, k,
// columns], the layer's columns offset .. offset + N - 1; live [nets?, S]), read where they are stored,
// rounded as row_predictions rounds; the other entries are not read (their q are 1/2). Neurons are
// shared out among the intra-op threads (each row's sum is fixed, so the bits do not depend on the
// threads).
ffi::Error EntryPredictions(ffi::ThreadPool threads, ffi::Buffer<ffi::F32> pool_rows, ffi::Buffer<ffi::S32> contexts,
                            ffi::Buffer<ffi::F32> u, ffi::Buffer<ffi::S32> source, ffi::Buffer<ffi::PRED> live,
                            int64_t offset, float prob_eps, ffi::ResultBuffer<ffi::F32> q) {
  auto pool_dims = pool_rows.dimensions(), source_dims = source.dimensions();
  if (pool_dims.size() < 4 || contexts.dimensions().size() < 1 || u.dimensions().size() < 1 ||
      source_dims.size() < 3 || live.dimensions().size() < 1)
    return ffi::Error::InvalidArgument("nctl entry predictions: arguments of unexpected rank");
  const int64_t N = pool_dims[pool_dims.size() - 4], C = pool_dims[pool_dims.size() - 3],
                E = pool_dims[pool_dims.size() - 2], K = pool_dims.back();
  const int64_t S = source_dims[source_dims.size() - 3], k = source_dims[source_dims.size() - 2],
                columns = source_dims.back();
  if (offset < 0 || offset + N > columns || live.dimensions().back() != S)
    return ffi::Error::InvalidArgument("nctl entry predictions: the sources do not match the layer");
  const int64_t nets = std::max({NetAxis(pool_rows, 4), NetAxis(contexts, 1), NetAxis(u, 1), NetAxis(source, 3),
                                 NetAxis(live, 1)});
  const auto Pool = Resolve<float>(pool_rows, 4, nets);
  const auto Context = Resolve<int32_t>(contexts, 1, nets);
  const auto U = Resolve<float>(u, 1, nets);
  const auto Source = Resolve<int32_t>(source, 3, nets);
  const auto Live = Resolve<bool>(live, 1, nets);
  // each neuron's entries read, in entry order, one list of rows for all (item = g N + n)
  std::vector<char> read(nets * N * E, 0);
  for (int64_t g = 0; g < nets; ++g)
    for (int64_t s = 0; s < S; ++s) {
      if (!Live.at(g)[s]) continue;
      for (int64_t m = 0; m < k; ++m) {
        const int32_t* from = Source.at(g) + (s * k + m) * columns + offset;
        for (int64_t n = 0; n < N; ++n)
          if (from[n] >= 0) read[(g * N + n) * E + std::min<int64_t>(from[n], E - 1)] = 1;
      }
    }
  std::vector<const float*> rows;
  std::vector<int64_t> first(nets * N + 1, 0);
  for (int64_t item = 0; item < nets * N; ++item) {
    const int64_t g = item / N, n = item % N;
    const float* stored = Pool.at(g) + (n * C + std::clamp<int64_t>(Context.at(g)[n], 0, C - 1)) * E * K;
    for (int64_t e = 0; e < E; ++e)
      if (read[item * E + e]) rows.push_back(stored + e * K);
    first[item + 1] = static_cast<int64_t>(rows.size());
  }
  float* out = q->typed_data();
  auto one_neuron = [&](int64_t item) {
    const int64_t count = first[item + 1] - first[item];
    std::vector<float> values(count);
    PredictMany(rows.data() + first[item], count, U.at(item / N), K, prob_eps, values.data(),
                rows.data() + rows.size());
    for (int64_t e = 0, j = 0; e < E; ++e) out[item * E + e] = read[item * E + e] ? values[j++] : 0.5f;
  };
  ParallelFor(threads, nets * N, static_cast<int64_t>(rows.size()) * K, one_neuron, kItemsPerRun);
  return ffi::Error::Success();
}

// A pool decision's scores (§4.5) of B neurons at once, every row and record read where it is stored
// (nothing gathered). For neuron b and record r, whose inputs are u = (clip(table[id, offset : offset +
// K - 1], -bound, bound), bias), id = ids[b, r] (ids [nets?, B, R]) or ids[r] (ids [nets?, R]: the same
// records for every neuron), and whose context is c = contexts[b, r]:
//   q[b, r, j]     the pool entry entries[b, j] of neuron[b] at c, for j < J;
//   q[b, r, J + m] slot member m's row at c, where rows[m, b, r] says where it lies: a block row
//                  (block x W + lane of `blocks`) if >= 0, the fresh row if -1, else pool entry -2 - code.
// pool [nets?, N, C, E, K], blocks [nets?, A, W, K], neuron [nets?, B], contexts [nets?, B, R], entries
// [nets?, B, J], rows [nets?, M, B, R], scored [nets?, M, B]. A neuron outside [0, N) or a member not
// scored is not computed (its q are 1/2): the work is that of the tests the decisions need. Each
// record's inputs are built once, next to the rows it is scored with.
ffi::Error PoolPredictions(ffi::ThreadPool threads, ffi::Buffer<ffi::F32> pool_rows, ffi::Buffer<ffi::F32> blocks,
                           ffi::Buffer<ffi::S32> neuron, ffi::Buffer<ffi::S32> contexts, ffi::Buffer<ffi::S32> entries,
                           ffi::Buffer<ffi::S32> rows, ffi::Buffer<ffi::PRED> scored, ffi::Buffer<ffi::F32> table,
                           ffi::Buffer<ffi::S32> ids, int64_t ids_rank, int64_t offset, float bound, float bias,
                           float init_value, float prob_eps, ffi::ResultBuffer<ffi::F32> q) {
  auto pool_dims = pool_rows.dimensions();
  auto block_dims = blocks.dimensions();
  auto row_dims = rows.dimensions();
  auto table_dims = table.dimensions();
  if (pool_dims.size() < 4 || block_dims.size() < 3 || neuron.dimensions().size() < 1 ||
      contexts.dimensions().size() < 2 || entries.dimensions().size() < 2 || row_dims.size() < 3 ||
      scored.dimensions().size() < 2 || table_dims.size() < 2 || (ids_rank != 1 && ids_rank != 2) ||
      ids.dimensions().size() < static_cast<size_t>(ids_rank))
    return ffi::Error::InvalidArgument("nctl pool predictions: arguments of unexpected rank");
  const int64_t nets = std::max({NetAxis(pool_rows, 4), NetAxis(blocks, 3), NetAxis(neuron, 1), NetAxis(contexts, 2),
                                 NetAxis(entries, 2), NetAxis(rows, 3), NetAxis(scored, 2), NetAxis(table, 2),
                                 NetAxis(ids, ids_rank)});
  const int64_t N = pool_dims[pool_dims.size() - 4], C = pool_dims[pool_dims.size() - 3],
                E = pool_dims[pool_dims.size() - 2], K = pool_dims.back();
  const int64_t A = block_dims[block_dims.size() - 3] * block_dims[block_dims.size() - 2];  // block rows
  const int64_t T = table_dims[table_dims.size() - 2], D = table_dims.back();
  const int64_t B = neuron.dimensions().back(), R = contexts.dimensions().back(), J = entries.dimensions().back();
  const int64_t M = row_dims[row_dims.size() - 3];
  if (offset < 0 || offset + K - 1 > D || block_dims.back() != K)
    return ffi::Error::InvalidArgument("nctl pool predictions: rows and inputs of different lengths");
  const auto Pool = Resolve<float>(pool_rows, 4, nets);
  const auto Blocks = Resolve<float>(blocks, 3, nets);
  const auto Neuron = Resolve<int32_t>(neuron, 1, nets);
  const auto Context = Resolve<int32_t>(contexts, 2, nets);
  const auto Entry = Resolve<int32_t>(entries, 2, nets);
  const auto Row = Resolve<int32_t>(rows, 3, nets);
  const auto Scored = Resolve<bool>(scored, 2, nets);
  const auto Table = Resolve<float>(table, 2, nets);
  const auto Id = Resolve<int32_t>(ids, ids_rank, nets);
  const std::vector<float> fresh(K, init_value);
  float* out = q->typed_data();
  std::fill(out, out + nets * B * R * (J + M), 0.5f);
  int64_t products = 0;  // of the neurons and members scored, for the threading threshold
  for (int64_t g = 0; g < nets; ++g)
    for (int64_t b = 0; b < B; ++b) {
      if (Neuron.at(g)[b] < 0 || Neuron.at(g)[b] >= N) continue;
      products += J * R * K;
      for (int64_t m = 0; m < M; ++m) products += Scored.at(g)[m * B + b] ? R * K : 0;
    }
  auto inputs = [&](int64_t g, int64_t id, float* u) {  // a record's inputs: its clipped logits, then the bias
    const float* logits = Table.at(g) + std::clamp<int64_t>(id, 0, T - 1) * D + offset;
    for (int64_t i = 0; i + 1 < K; ++i) u[i] = std::min(std::max(logits[i], -bound), bound);
    u[K - 1] = bias;
  };
  std::vector<float> shared;  // the records' inputs, built once where every neuron reads the same records
  if (ids_rank == 1) {
    shared.resize(nets * R * K);
    for (int64_t g = 0; g < nets; ++g)
      for (int64_t r = 0; r < R; ++r) inputs(g, Id.at(g)[r], shared.data() + (g * R + r) * K);
  }
  // item = (net, neuron): its records taken in the order of their contexts, so that the records at one
  // context read the same rows, which stay in cache from one record to the next
  auto one_neuron = [&](int64_t item) {
    const int64_t g = item / B, b = item % B;
    const int64_t n = Neuron.at(g)[b];
    if (n < 0 || n >= N) return;
    const int32_t* entry = Entry.at(g) + b * J;
    std::vector<int64_t> context(R), order(R);
    for (int64_t r = 0; r < R; ++r) context[r] = std::clamp<int64_t>(Context.at(g)[b * R + r], 0, C - 1);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t r, int64_t s) { return context[r] < context[s]; });
    std::vector<float> own(ids_rank == 2 ? K : 0), computed(J + M);
    std::vector<const float*> row(J + M);  // the pool entries first, then the members
    std::vector<int64_t> column(J + M);  // where each computed row's q goes
    std::iota(column.begin(), column.begin() + J, 0);
    for (int64_t r : order) {
      const float* stored = Pool.at(g) + (n * C + context[r]) * E * K;  // the neuron's entries at this context
      for (int64_t j = 0; j < J; ++j) row[j] = stored + std::clamp<int64_t>(entry[j], 0, E - 1) * K;
      int64_t count = J;
      for (int64_t m = 0; m < M; ++m) {
        if (!Scored.at(g)[m * B + b]) continue;
        const int64_t code = Row.at(g)[(m * B + b) * R + r];
        row[count] = code >= 0    ? Blocks.at(g) + std::min<int64_t>(code, A - 1) * K
                     : code == -1 ? fresh.data()
                                  : stored + std::min<int64_t>(-2 - code, E - 1) * K;
        column[count++] = J + m;
      }
      const float* u = shared.data() + (g * R + r) * K;
      if (ids_rank == 2) {
        inputs(g, Id.at(g)[b * R + r], own.data());
        u = own.data();
      }
      PredictMany(row.data(), count, u, K, prob_eps, computed.data());
      float* q_out = out + ((g * B + b) * R + r) * (J + M);
      for (int64_t j = 0; j < count; ++j) q_out[column[j]] = computed[j];
    }
  };
  ParallelFor(threads, nets * B, products, one_neuron);  // a refine test's few rows: on the caller
  return ffi::Error::Success();
}

#define NCTL_ROWS_BINDING                      \
  ffi::Ffi::Bind()                             \
      .Ctx<ffi::ThreadPool>()                  \
      .Arg<ffi::Buffer<ffi::F32>>()            \
      .Arg<ffi::Buffer<ffi::F32>>()            \
      .Arg<ffi::Buffer<ffi::S32>>()            \
      .Arg<ffi::Buffer<ffi::S32>>()            \
      .Arg<ffi::Buffer<ffi::S32>>()            \
      .Arg<ffi::Buffer<ffi::PRED>>()           \
      .Arg<ffi::Buffer<ffi::S32>>()            \
      .Arg<ffi::Buffer<ffi::F32>>()            \
      .Arg<ffi::Buffer<ffi::F32>>()            \
      .Arg<ffi::Buffer<ffi::S32>>()            \
      .Attr<float>("learning_rate")            \
      .Attr<float>("prob_eps")                 \
      .Attr<float>("max_weight")               \
      .Attr<float>("init_value")

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlTrainRows, TrainRows,
                              NCTL_ROWS_BINDING.Ret<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlPredictRows, PredictRows, NCTL_ROWS_BINDING.Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlRowPredictions, RowPredictions,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("rows_rank")
                                  .Attr<int64_t>("u_rank")
                                  .Attr<float>("prob_eps")
                                  .Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlEntryPredictions, EntryPredictions,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Attr<int64_t>("offset")
                                  .Attr<float>("prob_eps")
                                  .Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlPoolPredictions, PoolPredictions,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Attr<int64_t>("ids_rank")
                                  .Attr<int64_t>("offset")
                                  .Attr<float>("bound")
                                  .Attr<float>("bias")
                                  .Attr<float>("init_value")
                                  .Attr<float>("prob_eps")
                                  .Ret<ffi::Buffer<ffi::F32>>());
