// The pool's rules for one neuron (docs/algorithm.md §4.5-§4.8), as nctl/core/pool.py states them: the
// winner of a closing segment, the tie-tolerant comparison, the skip test's pool evidence, pruning back
// to capacity (FIFO or spacing) and the pool order.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "posterior.h"

namespace nctl {

constexpr int kRefine = 0, kSkip = 1, kAdd = 2, kEvict = 3;

// a - b > margin + tolerance max(1, |a|, |b|): differences within rounding of the magnitudes are ties (§4.8).
inline bool Beats(double a, double b, double margin, double tolerance) {
  return a - b > margin + tolerance * std::max(1.0, std::max(std::abs(a), std::abs(b)));
}

// The member of largest segment log likelihood (loglik [M] at `stride`; valid: logprior > -inf), ties to
// the lowest index.
inline int32_t SelectWinner(const double* loglik, const double* logprior, int64_t M, int64_t stride, double tolerance) {
  double best = -INFINITY;
  for (int64_t m = 0; m < M; ++m)
    if (logprior[m * stride] > -INFINITY) best = std::max(best, loglik[m * stride]);
  for (int64_t m = 0; m < M; ++m)
    if (logprior[m * stride] > -INFINITY && !Beats(best, loglik[m * stride], 0.0, tolerance)) return static_cast<int32_t>(m);
  return 0;
}

// The mixture prior of a node over `count` stored members and the fresh one (last): [k + 1] at `stride`.
inline void MemberLogPrior(int32_t count, int64_t k, double* prior, int64_t stride) {
  const double stored = -std::log(2.0 * std::max(count, 1));
  for (int64_t m = 0; m < k; ++m) prior[m * stride] = m < count ? stored : -INFINITY;
  prior[k * stride] = count > 0 ? std::log(0.5) : 0.0;
}

// The skip test's pool evidence E0 over the records `used` [R] (§4.5 step 3): per example sum_r log
// (sum_e P_e(x_r) / |M|), or joint log (sum_e prod_r P_e(x_r) / |M|); members added in groups as
// pool.evidence_add adds them.
struct Evidence {
  std::vector<double> sums;
  double lse = -INFINITY, count = 0.0;
  const bool* used;
  bool joint;

  Evidence(const bool* used, int64_t R, bool joint) : sums(R, 0.0), used(used), joint(joint) {}

  // Add the members j < m where on[j], with probabilities probs[r * stride + j].
  void Add(const double* probs, int64_t stride, const bool* on, int64_t m) {
    const int64_t R = static_cast<int64_t>(sums.size());
    if (joint) {
      std::vector<double> totals(m);
      for (int64_t j = 0; j < m; ++j) {
        double total = 0.0;
        for (int64_t r = 0; r < R; ++r) total += used[r] ? std::log(probs[r * stride + j]) : 0.0;
        totals[j] = on[j] ? total : -INFINITY;
      }
      const double group = LogSumExp(totals.data(), m);
      const double pair[2] = {lse, group};
      lse = std::max(lse, group) == -INFINITY ? -INFINITY : LogAddExp(pair);
    } else {
      for (int64_t r = 0; r < R; ++r) {
        double total = 0.0;
        for (int64_t j = 0; j < m; ++j) total += on[j] ? probs[r * stride + j] : 0.0;
        sums[r] = sums[r] + total;
      }
    }
    for (int64_t j = 0; j < m; ++j) count += on[j];
  }

  double Value() const {
    if (joint) return lse - std::log(count);
    const double log_count = std::log(count);
    double total = 0.0;
    for (size_t r = 0; r < sums.size(); ++r) total += used[r] ? std::log(sums[r]) - log_count : 0.0;
    return total;
  }

  // jnp.logaddexp: the larger plus log1p(exp(-|difference|)).
  static double LogAddExp(const double* pair) {
    const double top = std::max(pair[0], pair[1]), delta = pair[0] - pair[1];
    return top + std::log1p(std::exp(-std::abs(delta)));
  }
};

// The states removed to bring a pool back to capacity k once a boundary's closes are done (§4.7): alive,
// age, order [n] (the entries, then the states stored at this boundary, whose age is `now`).
inline void Prune(const bool* alive, const int32_t* age, const int32_t* order, int64_t n, int64_t k, int32_t now,
                  bool spacing, bool* removed) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += alive[i], removed[i] = false;
  if (count <= k) return;
  if (!spacing) {  // FIFO: the k youngest stay, and every state as old as the (k + 1)-th youngest goes
    std::vector<int32_t> youngest(n);
    for (int64_t i = 0; i < n; ++i) youngest[i] = alive[i] ? age[i] : -1;
    std::sort(youngest.begin(), youngest.end(), std::greater<int32_t>());
    for (int64_t i = 0; i < n; ++i) removed[i] = alive[i] && age[i] <= youngest[k];
    return;
  }
  // spacing: one state per round; the oldest stays, and of the other old states the one whose neighbours
  // in age are closest goes; without one, the first in pool order of the states stored now
  std::vector<int64_t> key(n), rank(n);
  std::vector<int32_t> ages(n);
  for (int64_t round = 0; round < count - k; ++round) {
    int64_t live = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool on = alive[i] && !removed[i];
      live += on;
      key[i] = static_cast<int64_t>(on ? age[i] : INT32_MAX) * (int64_t{1} << 32) + order[i];
    }
    std::iota(rank.begin(), rank.end(), 0);
    std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return key[a] < key[b]; });
    for (int64_t i = 0; i < n; ++i) ages[i] = alive[rank[i]] && !removed[rank[i]] ? age[rank[i]] : now;
    int64_t victim = -1;
    int32_t best = INT32_MAX;
    for (int64_t i = 1; i < n; ++i) {
      const int64_t e = rank[i];
      if (!(alive[e] && !removed[e] && age[e] < now)) continue;
      const int32_t gap = (i + 1 < n ? ages[i + 1] : now) - ages[i - 1];
      if (victim < 0 || gap < best) victim = e, best = gap;
    }
    if (victim < 0) {
      int32_t first = INT32_MAX;
      victim = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int32_t o = alive[i] && !removed[i] && age[i] == now ? order[i] : INT32_MAX;
        if (o < first) first = o, victim = i;
      }
    }
    removed[victim] = removed[victim] || live > k;
  }
}

// The entries in the pool in pool order, padded with -1: roster [k] at `stride`.
inline void Roster(const bool* in_pool, const int32_t* order, int64_t E, int64_t stride, int64_t k, int32_t* roster,
                   int64_t roster_stride) {
  std::vector<int64_t> rank(E);
  std::iota(rank.begin(), rank.end(), 0);
  auto key = [&](int64_t e) { return in_pool[e * stride] ? order[e * stride] : INT32_MAX; };
  std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
  for (int64_t i = 0; i < k; ++i)
    roster[i * roster_stride] = i < E && in_pool[rank[i] * stride] ? static_cast<int32_t>(rank[i]) : -1;
}

}  // namespace nctl
