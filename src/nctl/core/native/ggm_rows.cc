// A layer's GGM rows on the CPU, as XLA FFI handlers (docs/algorithm.md §6.11): trained in place
// (nctl_train_rows), predicted (nctl_predict_rows, nctl_row_predictions), and a pool decision's stored
// states scored where they are stored (nctl_pool_predictions); all with one dot product.
//
// For every live slot p and neuron n, each of the W lanes reads its row (its block's, or its source's
// where the lane is new to the block), predicts q = clip(sigma(w . u), eps, 1 - eps) and writes
// w <- clip(w - lr (q - x) u, -w_max, w_max) into its block: one pass over each row, where XLA gathers,
// updates and scatters (three). The (slot, neuron) items write distinct blocks and run on XLA's
// intra-op threads (a small layer's on the calling thread); each row's arithmetic is fixed, so results
// do not depend on the thread count.
//
// Under jax.vmap (vmap_method="expand_dims") every argument may carry a leading axis of the class
// networks, of their count or of size 1 (shared by all): `Resolve` tells which.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int kAccumulators = 16;  // independent partial sums of a dot product: the compiler vectorises them
constexpr int64_t kThreadedProducts = 1 << 18;  // fewer multiply-adds than this run on the calling thread

#if defined(__x86_64__) && defined(__GNUC__)
#define NCTL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NCTL_CLONES
#endif

#define NCTL_INLINE inline __attribute__((always_inline))

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

// The W lanes of one (net, slot, neuron) item, each row W x K apart from `block`'s first, or where
// `stale`, its source: pool entry `entry` of `pool` (the neuron's entries at its context), else `fresh`.
// q of each row into `q`, and where `out` is given the updated row out[i] = clip(row[i] - step u[i],
// -bound, bound), step = rate (q - x). One call per item: the products and updates inline.
NCTL_CLONES void TrainLanes(const float* block, const bool* stale, const int32_t* entry, const float* pool,
                            int64_t E, const float* fresh, const float* u, int64_t W, int64_t K, float eps,
                            float rate, float x, float bound, float* out, float* q) {
  for (int64_t w = 0; w < W; ++w) {
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

// One argument: its data and the stride of its optional leading network axis (0 where it is shared).
template <typename T>
struct Arg {
  const T* data;
  int64_t net_stride;
  const T* at(int64_t g) const { return data + g * net_stride; }
};

template <typename T, ffi::DataType D>
Arg<T> Resolve(const ffi::Buffer<D>& buffer, size_t rank, int64_t nets) {
  auto dims = buffer.dimensions();
  int64_t per_net = 1;
  for (size_t d = dims.size() - rank; d < dims.size(); ++d) per_net *= dims[d];
  bool batched = dims.size() == rank + 1 && dims[0] == nets && nets > 1;
  return {reinterpret_cast<const T*>(buffer.untyped_data()), batched ? per_net : 0};
}

// Run work(item) for item in [0, count) on the caller and up to threads - 1 pool threads; returns when
// every item is done. Late pool tasks find no item left and return (the state they share outlives them).
// Work of fewer than kThreadedProducts multiply-adds in all runs on the caller alone: handing it out
// would cost more than it does.
template <typename Work>
void ParallelFor(ffi::ThreadPool& pool, int64_t count, int64_t products, Work work) {
  if (products < kThreadedProducts) {
    for (int64_t item = 0; item < count; ++item) work(item);
    return;
  }
  struct Shared {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto shared = std::make_shared<Shared>();
  auto drain = [shared, count, work]() {
    for (int64_t item; (item = shared->next.fetch_add(1)) < count;) {
      work(item);
      shared->done.fetch_add(1, std::memory_order_release);
    }
  };
  int64_t helpers = std::min<int64_t>(pool.num_threads(), count) - 1;
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([drain] { drain(); });
  drain();
  while (shared->done.load(std::memory_order_acquire) < count) std::this_thread::yield();
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

  auto one_item = [&](int64_t item) {  // item = (net, slot, neuron)
    const int64_t g = item / (S * N), p = item / N % S, n = item % N;
    float* q_row = q_out + item * W;
    if (p >= *Size.at(g)) {
      std::fill(q_row, q_row + W, 0.5f);
      return;
    }
    int64_t from = Read.at(g)[p * N + n];
    from = std::clamp<int64_t>(from < 0 ? from + B : from, 0, B - 1);  // as XLA's gather reads it
    const int64_t to = Write.at(g)[p * N + n];
    const bool learn = arena_out && 0 <= to && to < B;
    const int64_t lanes = (p * N + n) * W;
    TrainLanes(arena_in + (g * B + from) * W * K, Stale.at(g) + lanes, Entry.at(g) + lanes,
               Pool.at(g) + (n * C + Context.at(g)[n]) * E * K, E, fresh.data(), U.at(g), W, K, prob_eps,
               learning_rate, *X.at(g), max_weight, learn ? arena_out + (g * B + to) * W * K : nullptr, q_row);
  };
  ParallelFor(threads, nets * S * N, nets * S * N * W * K, one_item);
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

// q[r, j] of the stored row pool[neuron, contexts[r], entries[j]] on u[r]: a pool decision's scores of
// the stored states on a segment's records (§4.5), read where they are stored instead of gathered.
// pool [nets?, N, C, E, K], neuron [nets?], contexts [nets?, R], entries [nets?, J], u [nets?, R, K].
ffi::Error PoolPredictions(ffi::ThreadPool threads, ffi::Buffer<ffi::F32> pool_rows, ffi::Buffer<ffi::S32> neuron,
                           ffi::Buffer<ffi::S32> contexts, ffi::Buffer<ffi::S32> entries, ffi::Buffer<ffi::F32> u,
                           float prob_eps, ffi::ResultBuffer<ffi::F32> q) {
  auto pool_dims = pool_rows.dimensions();
  auto u_dims = u.dimensions();
  if (pool_dims.size() < 4 || u_dims.size() < 2)
    return ffi::Error::InvalidArgument("nctl pool predictions: arguments of unexpected rank");
  const int64_t nets = std::max<int64_t>(pool_dims.size() == 5 ? pool_dims[0] : 1, u_dims.size() == 3 ? u_dims[0] : 1);
  const int64_t N = pool_dims[pool_dims.size() - 4], C = pool_dims[pool_dims.size() - 3],
                E = pool_dims[pool_dims.size() - 2], K = pool_dims.back();
  const int64_t R = u_dims[u_dims.size() - 2];
  const int64_t J = entries.dimensions().back();
  const auto Pool = Resolve<float>(pool_rows, 4, nets);
  const auto Neuron = Resolve<int32_t>(neuron, 0, nets);
  const auto Context = Resolve<int32_t>(contexts, 1, nets);
  const auto Entry = Resolve<int32_t>(entries, 1, nets);
  const auto U = Resolve<float>(u, 2, nets);
  float* out = q->typed_data();
  auto one_record = [&](int64_t item) {  // item = (net, record)
    const int64_t g = item / R, r = item % R;
    const int64_t n = std::clamp<int64_t>(*Neuron.at(g), 0, N - 1);
    const int64_t c = std::clamp<int64_t>(Context.at(g)[r], 0, C - 1);
    const float* stored = Pool.at(g) + (n * C + c) * E * K;
    for (int64_t j = 0; j < J; ++j)
      out[item * J + j] = Predict(stored + std::clamp<int64_t>(Entry.at(g)[j], 0, E - 1) * K, U.at(g) + r * K, K,
                                  prob_eps);
  };
  ParallelFor(threads, nets * R, nets * R * J * K, one_record);  // a refine test's single state: on the caller
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
XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlPoolPredictions, PoolPredictions,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("prob_eps")
                                  .Ret<ffi::Buffer<ffi::F32>>());
