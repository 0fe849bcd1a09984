// A Gaussian Gated Linear Network (docs/algorithm.md §8), one row at a time: every neuron gates the row,
// predicts a Gaussian from the layer below's (and the bias Gaussians), and, when learning, takes its step
// on its own log likelihood of the target. The arrays are the learner's state, updated in place.

#include <cstdint>
#include <vector>

#include "gaussian.h"
#include "layer.h"

namespace {

using nctl::Layer;

struct GaussianNetwork {
  int64_t nets, n_layers, features, bits;
  const Layer* layers;
  nctl::GaussianClips clips;
};

// A layer's inputs: means, precisions and their products, the bias Gaussians last, and |lambda|^2.
struct Inputs {
  std::vector<float> mu, lambda, lambda_mu;
  float lambda_norm = 0.0f;
  explicit Inputs(int64_t widest) : mu(widest), lambda(widest), lambda_mu(widest) {}

  // The first n inputs set by set(i) -> (mean, precision), then the bias.
  template <typename Set>
  int64_t Fill(int64_t n, Set set) {
    for (int64_t i = 0; i < n; ++i) set(i, &mu[i], &lambda[i]);
    lambda_norm = nctl::FinishInputs(n, mu.data(), lambda.data(), lambda_mu.data());
    return n + nctl::kBiasGaussians;
  }
};

// The output neuron's (mean, precision) for row z of network g; where `learn`, every neuron then learns x.
void Step(const GaussianNetwork& network, int64_t g, const float* z, bool learn, float x, Inputs& u,
          std::vector<float>& means, std::vector<float>& precisions, std::vector<float>& w, float* out) {
  const int64_t d = network.features, s = network.bits, contexts = int64_t{1} << s;
  const float bound = network.clips.feature_bound;
  int64_t k = u.Fill(d, [&](int64_t i, float* mu, float* lambda) {
    *mu = std::min(std::max(z[i], -bound), bound), *lambda = 1.0f;
  });
  for (int64_t i = 0; i < network.n_layers; ++i) {
    const Layer& layer = network.layers[i];
    for (int64_t j = 0; j < layer.neurons; ++j) {
      const int64_t neuron = g * layer.neurons + j;
      const int64_t c = nctl::Context(layer.normals + neuron * s * d, layer.offsets + neuron * s, z, s, d);
      float* row = layer.weights + (neuron * contexts + c) * k;
      float shift;
      nctl::PredictGaussian(row, u.lambda.data(), u.lambda_mu.data(), u.lambda_norm, k, network.clips, w.data(),
                            &means[j], &precisions[j], &shift);
      if (learn) nctl::LearnGaussian(row, u.mu.data(), u.lambda.data(), k, means[j], precisions[j], shift, x, network.clips);
    }
    k = u.Fill(layer.neurons, [&](int64_t j, float* mu, float* lambda) { *mu = means[j], *lambda = precisions[j]; });
  }
  out[0] = means[0], out[1] = precisions[0];
}

// Every row of Z [n, d] through every network: out [n, nets, 2] (mean, precision) before learning.
void Run(const GaussianNetwork& network, const float* Z, const float* X, int64_t n, bool learn, float* out) {
  int64_t widest = network.features;
  for (int64_t i = 0; i < network.n_layers; ++i) widest = std::max(widest, network.layers[i].neurons);
  Inputs u(widest + nctl::kBiasGaussians);
  std::vector<float> means(widest), precisions(widest), w(widest + nctl::kBiasGaussians);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < network.nets; ++g)
      Step(network, g, Z + r * network.features, learn, learn ? X[r] : 0.0f, u, means, precisions, w,
           out + (r * network.nets + g) * 2);
}

}  // namespace

extern "C" {

// Learn rows Z [n, d] with real targets X [n] in order; out [n, nets, 2] receives each row's pre-update
// (mean, precision).
void nctl_gaussian_gln_learn(const GaussianNetwork* network, const float* Z, const float* X, int64_t n, float* out) {
  Run(*network, Z, X, n, true, out);
}

// Frozen (mean, precision) [n, nets, 2] of rows Z [n, d].
void nctl_gaussian_gln_predict(const GaussianNetwork* network, const float* Z, int64_t n, float* out) {
  Run(*network, Z, nullptr, n, false, out);
}

}  // extern "C"
