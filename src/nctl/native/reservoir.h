// Reservoir samples of record ids (docs/algorithm.md §4.3), as nctl/core/reservoir.py draws them: every
// random number is the SplitMix64 finaliser chained over (seed, tag, segment start, step), so the native
// engine draws the JAX engine's numbers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace nctl {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kSegmentTag = 0, kMergeTag = 1;

inline uint64_t Mix(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The word of one random event (tag, segment start, step) of a learner with `seed`.
inline uint64_t EventKey(uint64_t seed, uint64_t tag, int32_t start, int32_t t) {
  const uint64_t h = Mix(seed ^ tag);
  return Mix(Mix(h ^ static_cast<uint64_t>(static_cast<int64_t>(start))) ^ static_cast<uint64_t>(static_cast<int64_t>(t)));
}

// A double in (0, 1) from the top 53 bits of a word.
inline double Uniform(uint64_t word) { return (static_cast<double>(word >> 11) + 0.5) * 0x1p-53; }

// Algorithm R: the position an offered item takes (-1: not kept); n and seen updated.
inline int32_t Offer(int32_t* n, int32_t* seen, int32_t capacity, uint64_t key) {
  *seen += 1;
  const int32_t j = static_cast<int32_t>(Uniform(key) * *seen);
  const int32_t position = *n < capacity ? *n : (j < capacity ? j : -1);
  *n = std::min(*n + 1, capacity);
  return position;
}

// A merged reservoir's positions [R] in the concatenation a[:R] ++ b[:R] (-1 past n): everything when it
// fits, else R items by weighted sampling without replacement (the R largest log(u) / weight, ties to the
// lower index), each stored item standing for seen / n stream items (that ratio in float32, as JAX divides
// two int32). Returns n; seen is seen_a + seen_b.
inline int32_t Merge(int32_t n_a, int32_t seen_a, int32_t n_b, int32_t seen_b, int32_t R, uint64_t key,
                     int32_t* positions) {
  const int32_t n = std::min(n_a + n_b, R);
  if (n_a + n_b <= R) {
    for (int32_t i = 0; i < R; ++i) positions[i] = i < n_a ? i : (i < n_a + n_b ? R + i - n_a : -1);
    return n;
  }
  const double weight_a = static_cast<float>(seen_a) / static_cast<float>(std::max(n_a, 1));
  const double weight_b = static_cast<float>(seen_b) / static_cast<float>(std::max(n_b, 1));
  // (-score, i) in increasing order is the largest score first, ties to the lower index: a total order, so
  // the R first are the same however they are found (the R least picked, then sorted: faster than a
  // partial sort)
  std::vector<std::pair<double, int32_t>> ranked(2 * R);
  for (int32_t i = 0; i < 2 * R; ++i) {
    const bool valid = i < R ? i < n_a : i - R < n_b;
    const double u = Uniform(Mix(key + static_cast<uint64_t>(i + 1) * kGolden));
    ranked[i] = {valid ? -(std::log(u) / (i < R ? weight_a : weight_b)) : INFINITY, i};
  }
  std::nth_element(ranked.begin(), ranked.begin() + R, ranked.end());
  std::sort(ranked.begin(), ranked.begin() + R);
  for (int32_t i = 0; i < R; ++i) positions[i] = i < n ? ranked[i].second : -1;
  return n;
}

}  // namespace nctl
