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

// The weights w [k] a row predicts with, and their precision (§8.2): w = clip(row) moved along lambda onto
// the slab, w + (clip(s) - s) lambda / |lambda|^2 with s = w . lambda; returns clip(s).
inline float EffectiveWeights(const float* row, const float* lambda, int64_t k, const GaussianClips& clips, float* w) {
  for (int64_t i = 0; i < k; ++i) w[i] = std::min(std::max(row[i], -clips.max_weight), clips.max_weight);
  const float s = SumProducts(w, lambda, k);
  const float precision = std::min(std::max(s, clips.min_precision), clips.max_precision);
  const float shift = (precision - s) / SumProducts(lambda, lambda, k);
  for (int64_t i = 0; i < k; ++i) w[i] = w[i] + shift * lambda[i];
  return precision;
}

// (mu, lambda) of the row: lambda = w . lambda_in, mu = clip(w . (lambda_in mu_in) / lambda, +-max_mean).
inline void PredictGaussian(const float* row, const float* lambda, const float* lambda_mu, int64_t k,
                            const GaussianClips& clips, float* w, float* mean, float* precision) {
  *precision = EffectiveWeights(row, lambda, k, clips, w);
  *mean = std::min(std::max(SumProducts(w, lambda_mu, k) / *precision, -clips.max_mean), clips.max_mean);
}

// One projected gradient step on -log N(x; mu, 1/lambda) at the effective weights (§8.2):
// row <- clip(w - eta lambda_k ((x - mu_k)^2 - (mu - mu_k)^2 - 1/lambda) / 2, +-max_weight).
inline void LearnGaussian(float* row, const float* mu, const float* lambda, int64_t k, float mean, float precision,
                          float x, const GaussianClips& clips, float* w) {
  EffectiveWeights(row, lambda, k, clips, w);
  const float spread = 1.0f / precision;
  for (int64_t i = 0; i < k; ++i) {
    const float off = x - mu[i], miss = mean - mu[i];
    const float gradient = 0.5f * lambda[i] * (off * off - miss * miss - spread);
    row[i] = std::min(std::max(w[i] - clips.learning_rate * gradient, -clips.max_weight), clips.max_weight);
  }
}

}  // namespace nctl
