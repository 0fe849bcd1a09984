// The arithmetic every row of the native engine shares (docs/algorithm.md §1-§2), written once so that
// each place that predicts, learns or gates rounds the same way. Built with -ffp-contract=off: no
// multiply-add is fused, so each expression rounds as written.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace nctl {

constexpr int kAccumulators = 16;  // independent partial sums of a dot product: the compiler vectorises them

// sum_i a[i] b[i] in a fixed order: kAccumulators strided partial sums, added in turn, then the tail one
// by one (the order of the engine's CPU kernels, so that both compute the same bits).
inline float SumProducts(const float* a, const float* b, int64_t k) {
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

// The probability constants of a GGM: predictions clipped to [low, high], weights to [-max_weight,
// max_weight], the features to [-feature_bound, feature_bound] (logit(1 - eps)).
struct Clips {
  float low, high, max_weight, feature_bound;
};

// q = clip(sigma(w . u), low, high) (§1.3).
inline float Predict(const float* w, const float* u, int64_t k, const Clips& clips) {
  const float sigma = 1.0f / (1.0f + std::exp(-SumProducts(w, u, k)));
  return std::min(std::max(sigma, clips.low), clips.high);
}

// SumProducts of n rows with the same b at once: each row summed in SumProducts' order (the same bits), the
// n independent chains of additions overlapping where one chain would wait on each addition.
template <int n>
inline void SumTogether(const float* const* rows, const float* b, int64_t k, float* total) {
  for (int r = 0; r < n; ++r) total[r] = 0.0f;
  int64_t i = 0;
  if (k >= kAccumulators) {
    float partial[n][kAccumulators] = {};
    for (; i + kAccumulators <= k; i += kAccumulators)
      for (int r = 0; r < n; ++r)
        for (int j = 0; j < kAccumulators; ++j) partial[r][j] += rows[r][i + j] * b[i + j];
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < kAccumulators; ++j) total[r] += partial[r][j];
  }
  for (; i < k; ++i)
    for (int r = 0; r < n; ++r) total[r] += rows[r][i] * b[i];
}

// total[r] = SumProducts(rows[r], b, k) for r < count: four rows at a time where k is short, else one by one
// (four rows' partial sums would not fit the registers: measured slower).
inline void SumMany(const float* const* rows, int64_t count, const float* b, int64_t k, float* total) {
  int64_t r = 0;
  if (k < kAccumulators)
    for (; r + 4 <= count; r += 4) SumTogether<4>(rows + r, b, k, total + r);
  for (; r < count; ++r) SumTogether<1>(rows + r, b, k, total + r);
}

// Predict of n rows on the same u at once (the same bits).
template <int n>
inline void PredictTogether(const float* const* rows, const float* u, int64_t k, const Clips& clips, float* q) {
  float total[n];
  SumTogether<n>(rows, u, k, total);
  for (int r = 0; r < n; ++r) q[r] = std::min(std::max(1.0f / (1.0f + std::exp(-total[r])), clips.low), clips.high);
}

// q[r] = Predict(rows[r], u, k, clips) for r < count (SumMany's groups).
inline void PredictMany(const float* const* rows, int64_t count, const float* u, int64_t k, const Clips& clips,
                        float* q) {
  SumMany(rows, count, u, k, q);
  for (int64_t r = 0; r < count; ++r) q[r] = std::min(std::max(1.0f / (1.0f + std::exp(-q[r])), clips.low), clips.high);
}

// w <- clip(w - lr (q - x) u, -max_weight, max_weight), with the clipped q (§1.3).
inline void Learn(float* w, const float* u, int64_t k, float q, float x, float learning_rate, const Clips& clips) {
  const float step = learning_rate * (q - x);
  for (int64_t i = 0; i < k; ++i) w[i] = std::min(std::max(w[i] - step * u[i], -clips.max_weight), clips.max_weight);
}

// The context of a neuron with s hyperplanes (normals [s, d], offsets [s]): sum_h [v_h . z > o_h] 2^h (§1.2).
// The hyperplanes are summed four at a time where d is short (SumMany's groups, the same bits), and each
// bit is set without a branch: the side of a hyperplane a row falls on is a coin toss that a branch
// predictor misses half the time.
inline int64_t Context(const float* normals, const float* offsets, const float* z, int64_t s, int64_t d) {
  int64_t context = 0, h = 0;
  if (d < kAccumulators)
    for (; h + 4 <= s; h += 4) {
      const float* rows[4] = {normals + h * d, normals + (h + 1) * d, normals + (h + 2) * d, normals + (h + 3) * d};
      float total[4];
      SumTogether<4>(rows, z, d, total);
      for (int r = 0; r < 4; ++r) context |= static_cast<int64_t>(total[r] > offsets[h + r]) << (h + r);
    }
  for (; h < s; ++h) context |= static_cast<int64_t>(SumProducts(normals + h * d, z, d) > offsets[h]) << h;
  return context;
}

// Layer 1's inputs: the features clipped to +-logit(1 - eps), then the bias logit 1 (§2); u has d + 1 places.
inline void FeatureLogits(const float* z, int64_t d, const Clips& clips, float* u) {
  for (int64_t i = 0; i < d; ++i) u[i] = std::min(std::max(z[i], -clips.feature_bound), clips.feature_bound);
  u[d] = 1.0f;
}

// A layer's inputs from the predictions p [n] below it: logit(clip(p)) = log p - log(1 - p), then the bias.
inline void InputLogits(const float* p, int64_t n, const Clips& clips, float* u) {
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::min(std::max(p[i], clips.low), clips.high);
    u[i] = std::log(q) - std::log1p(-q);
  }
  u[n] = 1.0f;
}

}  // namespace nctl
