// The Gaussian neuron (docs/algorithm.md §8): a gated product of Gaussians N(mu_k, 1/lambda_k) with the
// weights of its context's row, kept in a box and moved onto the slab of positive, bounded precisions.
// Built with -ffp-contract=off, as arithmetic.h: each expression rounds as written.
#pragma once

#include <algorithm>
#include <cstdint>

#include "arithmetic.h"

namespace nctl {

// A Gaussian row's constants: precisions in [min_precision, max_precision] (1/var_max, 1/var_min), weights in
// [-max_weight, max_weight], means in [-max_mean, max_mean], features' means in [-feature_bound,
// feature_bound].
struct GaussianClips {
  float min_precision, max_precision, max_weight, max_mean, feature_bound, learning_rate;
};

// Every layer's inputs end with the bias Gaussians N(-1, 1), N(0, 1), N(1, 1) (§8.3).
constexpr int64_t kBiasGaussians = 3;
constexpr float kBiasMeans[kBiasGaussians] = {-1.0f, 0.0f, 1.0f};

// A layer's inputs whose first n Gaussians (mu, lambda) are set, completed: the bias Gaussians after them,
// lambda_mu = lambda mu for all n + kBiasGaussians; returns |lambda|^2 (what EffectiveWeights divides by).
inline float FinishInputs(int64_t n, float* mu, float* lambda, float* lambda_mu) {
  const int64_t k = n + kBiasGaussians;
  for (int64_t b = 0; b < kBiasGaussians; ++b) mu[n + b] = kBiasMeans[b], lambda[n + b] = 1.0f;
  for (int64_t i = 0; i < k; ++i) lambda_mu[i] = lambda[i] * mu[i];
  return SumProducts(lambda, lambda, k);
}

// The weights w [k] a row predicts with, and their precision (§8.2): w = clip(row) moved along lambda onto
// the slab, w + shift lambda with shift = (clip(s) - s) / |lambda|^2, s = w . lambda (lambda_norm: |lambda|^2,
// the same for every row on these inputs); returns clip(s), and the shift into *shift.
inline float EffectiveWeights(const float* row, const float* lambda, float lambda_norm, int64_t k,
                              const GaussianClips& clips, float* w, float* shift) {
  for (int64_t i = 0; i < k; ++i) w[i] = std::min(std::max(row[i], -clips.max_weight), clips.max_weight);
  const float s = SumProducts(w, lambda, k);
  const float precision = std::min(std::max(s, clips.min_precision), clips.max_precision);
  *shift = (precision - s) / lambda_norm;
  for (int64_t i = 0; i < k; ++i) w[i] = w[i] + *shift * lambda[i];
  return precision;
}

// (mu, lambda) of the row: lambda = w . lambda_in, mu = clip(w . (lambda_in mu_in) / lambda, +-max_mean); the
// shift of its effective weights into *shift, for LearnGaussian.
inline void PredictGaussian(const float* row, const float* lambda, const float* lambda_mu, float lambda_norm, int64_t k,
                            const GaussianClips& clips, float* w, float* mean, float* precision, float* shift) {
  *precision = EffectiveWeights(row, lambda, lambda_norm, k, clips, w, shift);
  *mean = std::min(std::max(SumProducts(w, lambda_mu, k) / *precision, -clips.max_mean), clips.max_mean);
}

// PredictGaussian of n rows on the same inputs at once (the same bits: each row's sums in SumProducts' order),
// their chains of additions overlapping; w [n, k] is scratch. mean, precision and shift [n].
template <int n>
inline void PredictGaussianTogether(const float* const* rows, const float* lambda, const float* lambda_mu,
                                    float lambda_norm, int64_t k, const GaussianClips& clips, float* w, float* mean,
                                    float* precision, float* shift) {
  const float* clipped[n];
  float s[n], total[n];
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) w[r * k + i] = std::min(std::max(rows[r][i], -clips.max_weight), clips.max_weight);
    clipped[r] = w + r * k;
  }
  SumTogether<n>(clipped, lambda, k, s);
  for (int r = 0; r < n; ++r) {
    precision[r] = std::min(std::max(s[r], clips.min_precision), clips.max_precision);
    shift[r] = (precision[r] - s[r]) / lambda_norm;
    for (int64_t i = 0; i < k; ++i) w[r * k + i] = w[r * k + i] + shift[r] * lambda[i];
  }
  SumTogether<n>(clipped, lambda_mu, k, total);
  for (int r = 0; r < n; ++r) mean[r] = std::min(std::max(total[r] / precision[r], -clips.max_mean), clips.max_mean);
}

// One projected gradient step on -log N(x; mu, 1/lambda) at the effective weights w = clip(row) + shift lambda
// that predicted (mean, precision) (§8.2):
// row <- clip(w - eta lambda_k ((x - mu_k)^2 - (mu - mu_k)^2 - 1/lambda) / 2, +-max_weight).
inline void LearnGaussian(float* row, const float* mu, const float* lambda, int64_t k, float mean, float precision,
                          float shift, float x, const GaussianClips& clips) {
  const float spread = 1.0f / precision;
  for (int64_t i = 0; i < k; ++i) {
    const float w = std::min(std::max(row[i], -clips.max_weight), clips.max_weight) + shift * lambda[i];
    const float off = x - mu[i], miss = mean - mu[i];
    const float gradient = 0.5f * lambda[i] * (off * off - miss * miss - spread);
    row[i] = std::min(std::max(w - clips.learning_rate * gradient, -clips.max_weight), clips.max_weight);
  }
}

}  // namespace nctl
