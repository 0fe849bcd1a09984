// A layer of a network's state as the native engine reads it: the learner's arrays, in place.
#pragma once

#include <cstdint>

namespace nctl {

// One layer of every class network: normals [nets, N, s, d], offsets [nets, N, s], weights [nets, N, C, K].
struct Layer {
  const float* normals;
  const float* offsets;
  float* weights;
  int64_t neurons;
};

}  // namespace nctl
