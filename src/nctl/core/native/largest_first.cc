// The largest keys of rows, as XLA FFI handlers (docs/algorithm.md §6.11): a reservoir merge's weighted
// sample (§4.3, nctl_largest_first: one partial sort per row, where XLA:CPU sorts each row twice), and
// bounded mode's lanes (§5.3, nctl_assign_lanes: the live slots' nodes only, where XLA compares every
// member of every slot with every other, then matches the lanes in a dozen operations).

#include <algorithm>
#include <cmath>
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

// Bounded mode's lanes (§5.3) in every node of the live slots: the W most probable members of the node
// hold them, by log weight logprior + loglik (a member whose prior is -inf is absent), ranked as RanksOf
// ranks; a member that holds a lane and stays keeps it (and its lane_since), the newcomers take the
// lanes given up in rank order (lane_since = t). logprior and loglik [nets?, S, M, N] float64, held and
// since [nets?, S, N, W]; size and t [nets?]. The nodes of slots that are not live keep their lanes.
ffi::Error AssignLanes(ffi::Buffer<ffi::F64> logprior, ffi::Buffer<ffi::F64> loglik, ffi::Buffer<ffi::S32> held,
                       ffi::Buffer<ffi::S32> since, ffi::Buffer<ffi::S32> size, ffi::Buffer<ffi::S32> t,
                       ffi::ResultBuffer<ffi::S32> lanes, ffi::ResultBuffer<ffi::S32> lane_since) {
  auto dims = logprior.dimensions(), lane_dims = held.dimensions();
  if (dims.size() < 3 || lane_dims.size() < 3 || loglik.element_count() != logprior.element_count() ||
      since.element_count() != held.element_count())
    return ffi::Error::InvalidArgument("nctl assign lanes: bad shapes");
  const int64_t N = dims.back(), M = dims[dims.size() - 2], S = dims[dims.size() - 3], W = lane_dims.back();
  if (W > M || lane_dims[lane_dims.size() - 2] != N || lane_dims[lane_dims.size() - 3] != S)
    return ffi::Error::InvalidArgument("nctl assign lanes: the lanes do not match the nodes");
  const int64_t nets = std::max({nctl::NetAxis(logprior, 3), nctl::NetAxis(held, 3), nctl::NetAxis(size, 0)});
  const auto Prior = nctl::Resolve<double>(logprior, 3, nets);
  const auto Loglik = nctl::Resolve<double>(loglik, 3, nets);
  const auto Held = nctl::Resolve<int32_t>(held, 3, nets);
  const auto Since = nctl::Resolve<int32_t>(since, 3, nets);
  const auto Size = nctl::Resolve<int32_t>(size, 0, nets);
  const auto Now = nctl::Resolve<int32_t>(t, 0, nets);
  std::vector<double> weight(M);
  std::vector<int32_t> rank(M), desired(W), newcomer_rank(W);
  std::vector<char> placed(W), keep(W);
  for (int64_t g = 0; g < nets; ++g) {
    const int64_t live = *Size.at(g);
    const double *prior = Prior.at(g), *evidence = Loglik.at(g);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t node = (g * S + s) * N + n;  // [S, N, W] offsets of this node's lanes
        const int32_t* hold = Held.at(g) + (s * N + n) * W;
        const int32_t* held_since = Since.at(g) + (s * N + n) * W;
        int32_t* out = lanes->typed_data() + node * W;
        int32_t* out_since = lane_since->typed_data() + node * W;
        if (s >= live) {
          std::copy(hold, hold + W, out);
          std::copy(held_since, held_since + W, out_since);
          continue;
        }
        for (int64_t m = 0; m < M; ++m) {
          const int64_t at = (s * M + m) * N + n;
          weight[m] = prior[at] > -INFINITY ? prior[at] + evidence[at] : -INFINITY;
        }
        Ranks(weight.data(), M, rank.data());
        for (int64_t m = 0; m < M; ++m)
          if (rank[m] < W) desired[rank[m]] = prior[(s * M + m) * N + n] > -INFINITY ? static_cast<int32_t>(m) : -1;
        int32_t newcomers = 0;
        for (int64_t j = 0; j < W; ++j) {
          placed[j] = desired[j] < 0 || std::find(hold, hold + W, desired[j]) != hold + W;
          newcomer_rank[j] = placed[j] ? -1 : newcomers++;
        }
        int32_t open = 0;
        for (int64_t w = 0; w < W; ++w) {
          keep[w] = hold[w] >= 0 && std::find(desired.begin(), desired.end(), hold[w]) != desired.end();
          if (keep[w]) {
            out[w] = hold[w];
            out_since[w] = held_since[w];
            continue;
          }
          const auto taken = std::find(newcomer_rank.begin(), newcomer_rank.end(), open++);
          out[w] = taken == newcomer_rank.end() ? -1 : desired[taken - newcomer_rank.begin()];
          out_since[w] = *Now.at(g);
        }
      }
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlAssignLanes, AssignLanes,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlLargestFirst, LargestFirst,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F64>>().Ret<ffi::Buffer<ffi::S32>>());
