// The largest keys of rows, as XLA FFI handlers (docs/algorithm.md §6.11): a reservoir merge's weighted
// sample (§4.3, nctl_largest_first: one partial sort per row, where XLA:CPU sorts each row twice), and
// bounded mode's lane ranking (§5.3, nctl_top_members: the live slots' nodes only, where XLA compares
// every member of every slot with every other).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernel_common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// The indices of the k largest scores of each row of `score` ([..., m] float64, no NaN), largest first,
// equal scores in index order (the order of jax.lax.top_k): a reservoir merge's weighted sample (§4.3),
// one partial sort per row where XLA:CPU sorts each row twice.
ffi::Error LargestFirst(ffi::Buffer<ffi::F64> score, ffi::ResultBuffer<ffi::S32> out) {
  const int64_t m = score.dimensions().back(), k = out->dimensions().back();
  if (m == 0 || k > m) return ffi::Error::InvalidArgument("nctl largest first: k exceeds the row");
  const int64_t rows = score.element_count() / m;
  std::vector<int32_t> order(m);
  for (int64_t i = 0; i < rows; ++i) {
    const double* s = score.typed_data() + i * m;
    for (int64_t j = 0; j < m; ++j) order[j] = static_cast<int32_t>(j);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    std::copy(order.begin(), order.begin() + k, out->typed_data() + i * k);
  }
  return ffi::Error::Success();
}

// Each member's rank in its node (`w` [M]): the members ahead of it, by larger weight or, equal, by lower
// index; without branches, so that the comparisons vectorise and no guess is ever taken back. A node of
// kM members (the pool's 15 and the fresh model) is counted with the loop's length known.
template <int64_t kM>
NCTL_INLINE void RanksOf(const double* w, int64_t M, int32_t* rank) {
  const int64_t n = kM > 0 ? kM : M;
  for (int64_t m = 0; m < n; ++m) {
    int32_t ahead = 0;
    for (int64_t j = 0; j < n; ++j) ahead += (w[j] > w[m]) | ((w[j] == w[m]) & (j < m));
    rank[m] = ahead;
  }
}

NCTL_CLONES void Ranks(const double* w, int64_t M, int32_t* rank) {
  if (M == 16) return RanksOf<16>(w, M, rank);
  RanksOf<0>(w, M, rank);
}

// The indices of the `count` largest weights of each node of the live slots (`weights` [nets?, S, N, M]
// float64, no NaN; a slot is live below size[net]), largest first, equal weights in member order: each
// member goes to the place of its rank, if that is among the first `count`. The nodes of slots that
// are not live get 0 .. count - 1 (the caller keeps their lanes as they were).
ffi::Error TopMembers(ffi::Buffer<ffi::F64> weights, ffi::Buffer<ffi::S32> size, ffi::ResultBuffer<ffi::S32> out) {
  auto dims = weights.dimensions();
  const int64_t count = out->dimensions().back();
  if (dims.size() < 3 || count > dims.back()) return ffi::Error::InvalidArgument("nctl top members: bad shapes");
  const int64_t M = dims.back(), N = dims[dims.size() - 2], S = dims[dims.size() - 3];
  const int64_t nets = dims.size() == 4 ? dims[0] : 1;
  const bool sizes = size.element_count() == nets && nets > 1;  // one live-slot count per network, or shared
  std::vector<int32_t> rank(M);
  for (int64_t g = 0; g < nets; ++g) {
    const int64_t live = size.typed_data()[sizes ? g : 0];
    for (int64_t node = 0; node < S * N; ++node) {
      int32_t* top = out->typed_data() + (g * S * N + node) * count;
      if (node / N >= live) {
        for (int64_t j = 0; j < count; ++j) top[j] = static_cast<int32_t>(j);
        continue;
      }
      Ranks(weights.typed_data() + (g * S * N + node) * M, M, rank.data());
      for (int64_t m = 0; m < M; ++m)
        if (rank[m] < count) top[rank[m]] = static_cast<int32_t>(m);
    }
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlTopMembers, TopMembers,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlLargestFirst, LargestFirst,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F64>>().Ret<ffi::Buffer<ffi::S32>>());
