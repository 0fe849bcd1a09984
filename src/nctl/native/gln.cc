// A Gated Linear Network of GGM neurons, one row at a time (docs/algorithm.md §1-§2): every class network
// gates the row, predicts layer by layer, and (when learning) every neuron takes its step on its own
// loss with the inputs it saw. The arrays are the learner's state, updated in place.
//
// The river path predicts a row and then learns the same row: a one-row prediction keeps its forward
// pass (every neuron's context, inputs and prediction), and learning that row next, with nothing learned
// in between, takes its steps from it instead of computing it again (the same numbers).

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "arithmetic.h"
#include "layer.h"

namespace {

using nctl::Layer;

// The forward pass of the last one-row prediction: its row [d], and per class network g every neuron's
// context and prediction (at g * neurons + the neuron's place in the network) and every layer's inputs
// (at g * inputs + the layer's place). `kept` says whether it is the state's forward pass of that row.
struct Forward {
  float* row;
  int64_t* contexts;
  float* predictions;
  float* inputs;
  int64_t neurons, width, kept;
};

struct Network {
  int64_t nets, n_layers, features, bits;
  const Layer* layers;
  nctl::Clips clips;
  float learning_rate;
  Forward* forward;
};

int64_t Widest(const Network& network) {
  int64_t widest = network.features + 1;
  for (int64_t i = 0; i < network.n_layers; ++i) widest = std::max(widest, network.layers[i].neurons + 1);
  return widest;
}

// A thread's scratch: a layer's inputs u and the next layer's, and its neurons' contexts and the weight
// rows they read. One per thread, kept between calls (a row's call allocates nothing).
struct Scratch {
  std::vector<float> u, next;
  std::vector<int64_t> contexts;
  std::vector<float*> rows;

  // At least the sizes of `network`'s layers.
  static Scratch& Of(const Network& network) {
    thread_local Scratch scratch;
    int64_t most = 0;
    for (int64_t i = 0; i < network.n_layers; ++i) most = std::max(most, network.layers[i].neurons);
    const size_t widest = Widest(network);
    if (scratch.u.size() < widest) scratch.u.resize(widest), scratch.next.resize(widest);
    if (scratch.rows.size() < static_cast<size_t>(most)) scratch.rows.resize(most), scratch.contexts.resize(most);
    return scratch;
  }
};

// The output neuron's prediction for row z of class network g. Where `keep`, the forward pass goes into
// network.forward; where `learn`, every neuron then learns the target x.
float Step(const Network& network, int64_t g, const float* z, bool keep, bool learn, float x, Scratch& scratch) {
  const int64_t d = network.features, s = network.bits, contexts = int64_t{1} << s;
  Forward& forward = *network.forward;
  std::vector<float>& u = scratch.u;
  std::vector<float>& next = scratch.next;
  nctl::FeatureLogits(z, d, network.clips, u.data());
  int64_t k = d + 1, place = g * forward.neurons, input_place = g * forward.width;
  float q = 0.5f;
  for (int64_t i = 0; i < network.n_layers; ++i) {
    const Layer& layer = network.layers[i];
    const int64_t n = layer.neurons;
    if (keep) std::memcpy(forward.inputs + input_place, u.data(), k * sizeof(float));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t neuron = g * n + j;
      scratch.contexts[j] = nctl::Context(layer.normals + neuron * s * d, layer.offsets + neuron * s, z, s, d);
      scratch.rows[j] = layer.weights + (neuron * contexts + scratch.contexts[j]) * k;
    }
    // the neurons' rows are distinct: predicting them all, then learning, is predicting and learning each in turn
    nctl::PredictMany(scratch.rows.data(), n, u.data(), k, network.clips, next.data());
    q = next[n - 1];
    if (keep) {
      std::copy_n(scratch.contexts.data(), n, forward.contexts + place);
      std::copy_n(next.data(), n, forward.predictions + place);
    }
    if (learn)
      for (int64_t j = 0; j < n; ++j)
        nctl::Learn(scratch.rows[j], u.data(), k, next[j], x, network.learning_rate, network.clips);
    nctl::InputLogits(next.data(), n, network.clips, u.data());
    place += n, input_place += k;
    k = n + 1;
  }
  return q;
}

// Learning the row of the kept forward pass for class network g: every neuron's step from it.
float LearnKept(const Network& network, int64_t g, float x) {
  const Forward& forward = *network.forward;
  const int64_t contexts = int64_t{1} << network.bits;
  int64_t k = network.features + 1, place = g * forward.neurons, input_place = g * forward.width;
  float q = 0.5f;
  for (int64_t i = 0; i < network.n_layers; ++i) {
    const Layer& layer = network.layers[i];
    for (int64_t j = 0; j < layer.neurons; ++j) {
      const int64_t neuron = g * layer.neurons + j;
      q = forward.predictions[place + j];
      float* w = layer.weights + (neuron * contexts + forward.contexts[place + j]) * k;
      nctl::Learn(w, forward.inputs + input_place, k, q, x, network.learning_rate, network.clips);
    }
    place += layer.neurons, input_place += k;
    k = layer.neurons + 1;
  }
  return q;
}

constexpr int64_t kThreadedProducts = 1 << 18;  // rows of less work run on the calling thread: a thread
// costs more to start than they take

// Every class network g of `network`, through `run(g, scratch)` (with scratch of its own), on both
// cores where n rows of work pay for a second thread: each thread takes a contiguous range of networks,
// which are independent, so the numbers do not depend on the threads.
template <typename Run>
void ForEachNetwork(const Network& network, int64_t n, Run run) {
  int64_t products = 0;
  for (int64_t i = 0, k = network.features + 1; i < network.n_layers; k = network.layers[i++].neurons + 1)
    products += network.layers[i].neurons * (k + network.bits * network.features);
  // (the processor count is asked for only then: it is a system call, which a single row would feel)
  const int64_t threads = products * n * network.nets < kThreadedProducts ? 1 : std::min<int64_t>(
      {network.nets, int64_t{2}, std::max<int64_t>(1, std::thread::hardware_concurrency())});
  auto range = [&](int64_t first, int64_t stop) {
    Scratch& scratch = Scratch::Of(network);
    for (int64_t g = first; g < stop; ++g) run(g, scratch);
  };
  std::vector<std::thread> helpers;
  for (int64_t t = 1; t < threads; ++t)
    helpers.emplace_back(range, network.nets * t / threads, network.nets * (t + 1) / threads);
  range(0, network.nets / threads);
  for (std::thread& helper : helpers) helper.join();
}

}  // namespace

extern "C" {

// Learn rows Z [n, d] with labels Y [n] in order: class network g learns the target [Y[r] == positive[g]].
// predictions [n, nets] receives each row's pre-update prediction.
void nctl_gln_learn(const Network* network, const float* Z, const int32_t* Y, int64_t n, const int32_t* positive,
                    float* predictions) {
  Forward& forward = *network->forward;
  const int64_t d = network->features, nets = network->nets;
  const bool kept = n > 0 && forward.kept && std::memcmp(Z, forward.row, d * sizeof(float)) == 0;
  forward.kept = 0;  // the weights change
  ForEachNetwork(*network, n, [&](int64_t g, Scratch& scratch) {
    for (int64_t r = 0; r < n; ++r) {
      const float x = Y[r] == positive[g] ? 1.0f : 0.0f;
      predictions[r * nets + g] =
          r == 0 && kept ? LearnKept(*network, g, x) : Step(*network, g, Z + r * d, false, true, x, scratch);
    }
  });
}

// Frozen predictions [n, nets] of rows Z [n, d]; the forward pass of a single row is kept.
void nctl_gln_predict(const Network* network, const float* Z, int64_t n, float* predictions) {
  Forward& forward = *network->forward;
  const bool keep = n == 1;
  ForEachNetwork(*network, n, [&](int64_t g, Scratch& scratch) {
    for (int64_t r = 0; r < n; ++r)
      predictions[r * network->nets + g] = Step(*network, g, Z + r * network->features, keep, false, 0.0f, scratch);
  });
  if (keep) std::memcpy(forward.row, Z, network->features * sizeof(float));
  forward.kept = keep;
}

}  // extern "C"
