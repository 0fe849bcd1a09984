// The row models of the native NCTL (docs/algorithm.md §1.3, §8.6): everything nctl.cc's step and boundary
// read of a neuron's model, as nctl/core/rows.py's GGMRows and nctl/core/gaussian.py's GaussianRows state
// it. nctl.cc is written once over a model: a type with these members.
//
// * kOut: the values of one prediction (a probability; a Gaussian's mean and precision), float64 for a
//   neuron's output; kMember: what a member's prediction keeps for its learning (float32: the prediction, then
//   what learning would otherwise compute again); kScratch: the floats per input its predictions work in.
// * kBias: the bias inputs that end every layer's inputs; kValues: what a record keeps per hidden input.
// * Label: how a record keeps y; Target: what a network learns from it.
// * InputFloats(K): the floats of a layer's K inputs as Predict and Learn read them.
//
// Built with -ffp-contract=off, as arithmetic.h: each expression rounds as written.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "arithmetic.h"
#include "gaussian.h"
#include "nctl_state.h"

namespace nctl {

// GGM rows (§1.3): a layer's inputs are logits u [K]; a prediction is q = P(x = 1).
struct GgmModel {
  static constexpr int kOut = 1, kMember = 1, kBias = 1, kValues = 1, kScratch = 0;
  using Label = int32_t;
  using Target = bool;

  Clips clips;
  float learning_rate;
  double prob_eps;

  explicit GgmModel(const NctlEngine& e)
      : clips{e.low, e.high, e.max_weight, e.feature_bound}, learning_rate(e.learning_rate), prob_eps(e.prob_eps) {}

  static int64_t InputFloats(int64_t K) { return K; }
  static Target TargetOf(Label y, int32_t positive) { return y == positive; }

  // Layer 1's inputs: the features clipped to +-logit(1 - eps), then the bias logit 1.
  void BaseInputs(const float* z, int64_t d, float* u) const { FeatureLogits(z, d, clips, u); }

  // A layer's inputs from the outputs p [n] below it: logit(clip(p)) in float64, rounded to float32, then the
  // bias (input_logits).
  void LayerInputs(const double* p, int64_t n, float* u) const {
    for (int64_t i = 0; i < n; ++i) {
      const double q = std::min(std::max(p[i], prob_eps), 1.0 - prob_eps);
      u[i] = static_cast<float>(std::log(q) - std::log1p(-q));
    }
    u[n] = 1.0f;
  }

  // What a record keeps of a hidden layer's inputs u [K]: u without the bias; returns the end of what it wrote.
  static float* RecordValues(const float* u, int64_t K, float* out) { return std::copy(u, u + K - 1, out); }

  // A hidden layer's inputs u [K] from a record's values (RecordValues' output).
  static void RecordInputs(const float* values, int64_t K, float* u) {
    std::copy(values, values + K - 1, u);
    u[K - 1] = 1.0f;
  }

  // q[r] of rows[r] on the inputs u, r < count.
  void PredictRows(const float* const* rows, int64_t count, const float* u, int64_t K, float* q, float*) const {
    PredictMany(rows, count, u, K, clips, q);
  }

  // A neuron's output from its members' predictions q [S, M, N] (at `column`), mixed by alpha [S, M, N] and
  // the slots' mass [S, N] over the `size` live slots: p = sum_s mass_s sum_m alpha_sm q_sm (§4.2), the inner
  // sum in float32 (mix_probabilities).
  static void Mix(const float* q, const float* alpha, const double* mass, int32_t size, int64_t M, int64_t N,
                  int64_t column, double* p) {
    double total = 0.0;
    for (int64_t s = 0; s < size; ++s) {
      float nu = 0.0f;
      for (int64_t m = 0; m < M; ++m) nu += alpha[(s * M + m) * N + column] * q[(s * M + m) * N + column];
      total += mass[s * N + column] * static_cast<double>(nu);
    }
    *p = total;
  }

  // One step of a row that predicted q on u, towards x (§1.3).
  void Learn(float* row, const float* u, int64_t K, const float* q, Target x) const {
    nctl::Learn(row, u, K, *q, x ? 1.0f : 0.0f, learning_rate, clips);
  }

  // q(x) and log q(x) in float64.
  static double Likelihood(const float* q, Target x) {
    return x ? static_cast<double>(*q) : 1.0 - static_cast<double>(*q);
  }
  static double LogLikelihood(const float* q, Target x) { return std::log(Likelihood(q, x)); }
};

// Gaussian rows (§8): a layer's inputs are K Gaussians, held as their means, precisions and the products of
// the two, then |precisions|^2 [3 K + 1]; a prediction is (mean, precision), and a member keeps the shift of
// its effective weights (gaussian.h) with it.
struct GaussianModel {
  static constexpr int kOut = 2, kMember = 3, kBias = kBiasGaussians, kValues = 2, kTogether = 4, kScratch = kTogether;
  using Label = float;
  using Target = float;
  static constexpr double kTwoPi = 2.0 * 3.141592653589793;  // Python's 2.0 * math.pi, to the bit

  GaussianClips clips;

  explicit GaussianModel(const NctlEngine& e)
      : clips{e.min_precision, e.max_precision, e.max_weight, e.max_mean, e.feature_bound, e.learning_rate} {}

  static int64_t InputFloats(int64_t K) { return 3 * K + 1; }
  static Target TargetOf(Label y, int32_t) { return y; }

  // The inputs u [3 K + 1] whose first n Gaussians are set, completed (gaussian.h's FinishInputs).
  static void Finish(int64_t n, float* u) {
    const int64_t K = n + kBias;
    u[3 * K] = FinishInputs(n, u, u + K, u + 2 * K);
  }

  // Layer 1's inputs: N(clip(z_j, +-feature_bound), 1) per feature, then the bias.
  void BaseInputs(const float* z, int64_t d, float* u) const {
    const int64_t K = d + kBias;
    for (int64_t j = 0; j < d; ++j)
      u[j] = std::min(std::max(z[j], -clips.feature_bound), clips.feature_bound), u[K + j] = 1.0f;
    Finish(d, u);
  }

  // A layer's inputs from the outputs p [n, 2] (mean, precision) below it, each rounded to float32.
  static void LayerInputs(const double* p, int64_t n, float* u) {
    const int64_t K = n + kBias;
    for (int64_t i = 0; i < n; ++i) u[i] = static_cast<float>(p[2 * i]), u[K + i] = static_cast<float>(p[2 * i + 1]);
    Finish(n, u);
  }

  // What a record keeps of a hidden layer's inputs: each (mean, precision) pair without the bias.
  static float* RecordValues(const float* u, int64_t K, float* out) {
    for (int64_t i = 0; i + kBias < K; ++i) *out++ = u[i], *out++ = u[K + i];
    return out;
  }

  static void RecordInputs(const float* values, int64_t K, float* u) {
    for (int64_t i = 0; i + kBias < K; ++i) u[i] = values[2 * i], u[K + i] = values[2 * i + 1];
    Finish(K - kBias, u);
  }

  // (mean, precision, shift) of rows[r] on the inputs u, r < count, into q [count, 3], kTogether rows at a time;
  // w [kScratch K] is scratch (a row's effective weights each).
  void PredictRows(const float* const* rows, int64_t count, const float* u, int64_t K, float* q, float* w) const {
    const float *lambda = u + K, *lambda_mu = u + 2 * K, lambda_norm = u[3 * K];
    float out[3][kTogether];  // mean, precision, shift
    int64_t r = 0;
    for (; r + kTogether <= count; r += kTogether) {
      PredictGaussianTogether<kTogether>(rows + r, lambda, lambda_mu, lambda_norm, K, clips, w, out[0], out[1], out[2]);
      for (int64_t j = 0; j < kTogether; ++j)
        for (int v = 0; v < 3; ++v) q[3 * (r + j) + v] = out[v][j];
    }
    for (; r < count; ++r)
      PredictGaussianTogether<1>(rows + r, lambda, lambda_mu, lambda_norm, K, clips, w, q + 3 * r, q + 3 * r + 1,
                                 q + 3 * r + 2);
  }

  // The members' Gaussians q [S, M, N, kMember] mixed with the weights w_sm = mass_s alpha_sm and moment matched
  // (§8.6): mu = sum w mu_sm, var = sum w (1/lambda_sm + (mu_sm - mu)^2); p = (mu, 1/var) in float64.
  static void Mix(const float* q, const float* alpha, const double* mass, int32_t size, int64_t M, int64_t N,
                  int64_t column, double* p) {
    double mean = 0.0, variance = 0.0;
    for (int64_t s = 0; s < size; ++s)
      for (int64_t m = 0; m < M; ++m) {
        const int64_t at = (s * M + m) * N + column;
        mean += static_cast<double>(alpha[at]) * mass[s * N + column] * static_cast<double>(q[kMember * at]);
      }
    for (int64_t s = 0; s < size; ++s)
      for (int64_t m = 0; m < M; ++m) {
        const int64_t at = (s * M + m) * N + column;
        const double off = static_cast<double>(q[kMember * at]) - mean;
        variance += static_cast<double>(alpha[at]) * mass[s * N + column] *
                    (static_cast<double>(1.0f / q[kMember * at + 1]) + off * off);
      }
    p[0] = mean, p[1] = 1.0 / variance;
  }

  void Learn(float* row, const float* u, int64_t K, const float* q, Target x) const {
    LearnGaussian(row, u, u + K, K, q[0], q[1], q[2], x, clips);
  }

  // log N(x; mu, 1/lambda) = (log(lambda / 2 pi) - lambda (x - mu)^2) / 2 in float64, and its exponential.
  static double LogLikelihood(const float* q, Target x) {
    const double mu = q[0], lambda = q[1], off = static_cast<double>(x) - mu;
    return 0.5 * (std::log(lambda / kTwoPi) - lambda * (off * off));
  }
  static double Likelihood(const float* q, Target x) { return std::exp(LogLikelihood(q, x)); }
};

}  // namespace nctl
