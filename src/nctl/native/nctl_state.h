// The NCTL engine's state as the native engine reads it (docs/algorithm.md §6.1): the JAX engine's arrays
// (nctl/core/engine/state.py), in place, every per-network array with its leading class-network axis.
#pragma once

#include <cstdint>

namespace nctl {

constexpr int kMaxLayers = 8;
constexpr int kMaxGrid = 64;

// One layer's sizes and arrays (its neurons sit at columns offset .. offset + neurons - 1).
struct NctlLayer {
  int64_t neurons, offset, width, blocks, fixed;
  double init_value;  // every weight of a fresh row (§1.3)
  float* pool_rows;  // [nets, N_i, C, E, width]
  float* blocks_rows;  // [nets, A_i, W, width]
  int32_t* free;  // [nets, A_i] (A_i = 0 where fixed)
};

// Sizes and settings (nctl/core/engine/config.py) and every array of the state (state.py).
struct NctlEngine {
  // sizes
  int64_t nets, n_layers, features, bits, contexts, slots, capacity, members, entries, max_closes, lanes,
      reservoir, record_rows, hidden_width, chunk, chunk_log2, grid, neurons, max_depth, context_bytes;
  // the row model (nctl_rows.h): Gaussian rows (GaussianRows) where `gaussian`, else GGM rows (GGMRows); the
  // pool's rules (PoolConfig)
  int64_t gaussian;
  float learning_rate, low, high, max_weight, feature_bound, min_precision, max_precision, max_mean;
  double prob_eps, refine_threshold, skip_threshold, tie_tolerance;
  int64_t joint_evidence, spacing;
  double log_stop[kMaxGrid], log_split[kMaxGrid];  // the split-probability grid (§3.6)
  NctlLayer layer[kMaxLayers];
  // schedule
  int32_t *t, *depth, *size, *level, *start;
  // per network
  const float *normals, *offsets;  // [nets, N, s, d], [nets, N, s]
  double *loglik, *logprior;  // [nets, S, M, N]
  int32_t* source;  // [nets, S, k, N]
  bool* detached;  // [nets, S, k, N]
  int32_t *slot_ids, *slot_n, *slot_seen;  // lineage [nets, S, k, N, R], [nets, S, k, N]
  double* log_b;  // [nets, S, A, N]
  int32_t* block_of;  // [nets, S, N, C]
  int32_t* n_free;  // [nets, layers]
  bool* in_pool;  // [nets, E, N]
  int32_t *age, *order, *born;  // [nets, E, N]
  int32_t *entry_ids, *entry_n, *entry_seen;  // lineage [nets, E, N, R], [nets, E, N]
  int32_t *roster, *next_order, *events;  // [nets, k, N], [nets, N], [nets, N, 4]
  float* hidden;  // [nets, A_r, H]
  void* record_contexts;  // [nets, A_r, N] int16 (context_bytes 2) or int32
  // records
  float* z;  // [A_r, d]
  void* y;  // [A_r] the row model's Label: int32 classes, or float32 targets
  int32_t *segment_ids, *segment_n, *segment_seen;  // [S, R], [S], [S]
  int32_t* free_records;  // [P]
  bool* records_ok;
  const uint64_t* key;
  const int32_t* positive;  // [nets] the label each network learns as 1
};

}  // namespace nctl
