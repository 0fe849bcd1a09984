// The mixtures of a step (docs/algorithm.md §3.3, §3.6, §4.1), as nctl/core/engine/posterior.py and
// nctl/core/tree.py compute them: the member posterior of each live slot, the posterior of the tree
// levels, and the PTW weight of a node that completes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nctl_state.h"

namespace nctl {

// A scratch vector of at least n items, one per type and thread, kept between calls (no allocation per step).
template <typename T>
std::vector<T>& Buffer(size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer;
}

constexpr int64_t kMaxSlots = 64;  // tree levels a state may have (a stream of 2^63 steps)

// log sum exp as jax.nn.logsumexp takes it: the largest term (0 where it is not finite) taken out. A term
// of -inf adds exp(-inf) = 0, and one term is itself: neither is computed.
inline double LogSumExp(const double* x, int64_t n, int64_t stride = 1) {
  if (n == 1) return x[0];
  double top = -INFINITY;
  for (int64_t i = 0; i < n; ++i) top = std::max(top, x[i * stride]);
  if (!std::isfinite(top)) top = 0.0;
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i * stride] != -INFINITY) total += std::exp(x[i * stride] - top);
  return std::log(total) + top;
}

// Member posterior of one node (logits [M] at stride `stride`, float64): alpha [M] = softmax in float32 from
// one exponential pass of the float32 differences to the largest; returns log sum exp (the node's log
// evidence R), the float32 total's log added to the float64 largest (mixture_posterior).
inline double NodePosterior(const double* logits, int64_t M, int64_t stride, float* alpha) {
  double top = -INFINITY;
  for (int64_t m = 0; m < M; ++m) top = std::max(top, logits[m * stride]);
  float total = 0.0f;
  for (int64_t m = 0; m < M; ++m) total += (alpha[m] = std::exp(static_cast<float>(logits[m * stride] - top)));
  for (int64_t m = 0; m < M; ++m) alpha[m] = alpha[m] / total;
  return top + static_cast<double>(std::log(total));
}

// NodePosterior's log R alone, without the posterior (the same bits, and no division).
inline double NodeLogEvidence(const double* logits, int64_t M, int64_t stride) {
  double top = -INFINITY;
  for (int64_t m = 0; m < M; ++m) top = std::max(top, logits[m * stride]);
  float total = 0.0f;
  for (int64_t m = 0; m < M; ++m) total += std::exp(static_cast<float>(logits[m * stride] - top));
  return top + static_cast<double>(std::log(total));
}

// The canonical slot of each of the S tree levels: the deepest of the `size` live slots (levels `level`)
// whose level is at most it.
inline void CanonicalSlots(const int32_t* level, int32_t size, int64_t S, int32_t* canon) {
  for (int64_t j = 0; j < S; ++j) {
    int32_t count = 0;
    for (int64_t p = 0; p < size; ++p) count += level[p] <= j;
    canon[j] = count - 1;
  }
}

// The member posteriors of the live slots of network g: alpha [S, M, N] (float32) and log R [S, N].
inline void MemberPosteriors(const NctlEngine& e, int64_t g, int32_t size, float* alpha, double* log_r) {
  const int64_t S = e.slots, M = e.members, N = e.neurons;
  std::vector<double>& logits = Buffer<double>(M);
  std::vector<float>& a = Buffer<float>(M);
  for (int64_t s = 0; s < size; ++s)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (g * S + s) * M * N + n;
      for (int64_t m = 0; m < M; ++m) logits[m] = e.logprior[at + m * N] + e.loglik[at + m * N];
      log_r[s * N + n] = NodePosterior(logits.data(), M, 1, a.data());
      for (int64_t m = 0; m < M; ++m) alpha[(s * M + m) * N + n] = a[m];
    }
}

// The level prior Lambda_j with the split probability mixed over the grid (§3.3, §3.6), for the levels
// j <= depth (j < S) of one neuron, the ones that have a prior (the deeper ones' is -inf): log_b at stride
// A N (level) and N (grid point).
inline void LevelPrior(const NctlEngine& e, const double* log_b, int64_t N, int32_t depth, double* prior) {
  const int64_t A = e.grid, levels = std::min<int64_t>(e.slots, depth + 1);
  double lam[kMaxGrid], before[kMaxGrid];
  std::fill_n(before, A, 0.0);
  const double log_grid = std::log(static_cast<double>(A));
  for (int64_t j = 0; j < levels; ++j) {
    for (int64_t a = 0; a < A; ++a) {
      lam[a] = before[a] + (j < depth ? e.log_stop[a] : 0.0);
      before[a] += e.log_split[a] + log_b[(j * A + a) * N];
    }
    prior[j] = LogSumExp(lam, A) - log_grid;
  }
}

// The posterior mass of each live slot (§3.3): pi_j = softmax_j(Lambda_j + R_canon(j)) summed per slot;
// mass [S, N] (zero beyond the live slots).
inline void SlotMass(const NctlEngine& e, int64_t g, const double* log_r, const int32_t* canon, double* mass) {
  const int64_t S = e.slots, N = e.neurons, A = e.grid;
  const int32_t depth = *e.depth;
  double prior[kMaxSlots], logits[kMaxSlots];
  std::fill(mass, mass + S * N, 0.0);
  // levels below the depth have prior -inf: their exp(-inf) = 0 adds nothing
  const int64_t levels = std::min<int64_t>(S, depth + 1);
  for (int64_t n = 0; n < N; ++n) {
    LevelPrior(e, e.log_b + g * S * A * N + n, N, depth, prior);
    double top = -INFINITY;
    for (int64_t j = 0; j < levels; ++j) top = std::max(top, logits[j] = prior[j] + log_r[canon[j] * N + n]);
    double total = 0.0;
    for (int64_t j = 0; j < levels; ++j) total += (logits[j] = std::exp(logits[j] - top));
    for (int64_t j = 0; j < levels; ++j) mass[canon[j] * N + n] += logits[j] / total;
  }
}

// W_c of the node at level c that completes, per grid point (tree.node_log_weight): log_b at stride A N
// (level) of one neuron and grid point a, log_r [S] per level.
inline double NodeLogWeight(const NctlEngine& e, const double* log_b, int64_t N, const double* log_r, int32_t depth,
                            int32_t c, int64_t a) {
  const int64_t S = e.slots, A = e.grid;
  double value[kMaxSlots];
  double path = 0.0;
  for (int64_t l = 0; l < S; ++l) {
    const bool inside = l >= c && l <= depth;
    const double own = l < depth ? e.log_stop[a] + log_r[l] : log_r[l];
    value[l] = inside ? path + own : -INFINITY;
    path += inside && l < depth ? e.log_split[a] + log_b[(l * A + a) * N] : 0.0;
  }
  return LogSumExp(value, S);
}

}  // namespace nctl
