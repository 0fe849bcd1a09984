// The NCTL engine on the CPU (docs/algorithm.md §3-§6): one step of every class network for one row
// (gating, the members' rows predicted and trained, the posteriors, the record), and the boundary that
// prepares the next step (the PTW weights, the pool updates of the segments that close, the restart of
// their slots, the records kept for the next P steps). The arrays are the JAX engine's state
// (nctl_state.h), updated in place; every step computes what nctl/core/engine/step.py computes, in the
// same order, each row's dot product in the order of §6.11's kernels. The step and the boundary are written
// once over the row model (nctl_rows.h: GGM rows, or the Gaussian rows of §8.6), chosen per state.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "arithmetic.h"
#include "nctl_rows.h"
#include "nctl_state.h"
#include "pool.h"
#include "posterior.h"
#include "reservoir.h"

namespace {

using nctl::GaussianModel;
using nctl::GgmModel;
using nctl::NctlEngine;
using nctl::NctlLayer;

// f(model) with the row model of engine e.
template <typename F>
auto WithModel(const NctlEngine& e, F&& f) {
  if (e.gaussian) return f(GaussianModel(e));
  return f(GgmModel(e));
}

// -- where a member's row lies (§6.2)

int32_t RecordContext(const NctlEngine& e, int64_t g, int64_t row, int64_t column) {
  const int64_t at = (g * e.record_rows + row) * e.neurons + column;
  return e.context_bytes == 2 ? static_cast<const int16_t*>(e.record_contexts)[at]
                              : static_cast<const int32_t*>(e.record_contexts)[at];
}

int32_t* BlockOf(const NctlEngine& e, int64_t g, int64_t slot, int64_t column) {
  return e.block_of + ((g * e.slots + slot) * e.neurons + column) * e.contexts;
}

// The pool entry member m of `slot` starts from, or -1 (the fresh model, absent members): source_entry.
int32_t SourceEntry(const NctlEngine& e, int64_t g, int64_t slot, int64_t m, int64_t column) {
  if (m >= e.capacity) return -1;
  return e.source[((g * e.slots + slot) * e.capacity + m) * e.neurons + column];
}

// A stored row: entry `entry` of neuron n (layer-local) at context c.
float* EntryRow(const NctlEngine& e, const NctlLayer& layer, int64_t g, int64_t n, int64_t c, int64_t entry) {
  return layer.pool_rows + (((g * layer.neurons + n) * e.contexts + c) * e.entries + entry) * layer.width;
}

float* BlockRow(const NctlEngine& e, const NctlLayer& layer, int64_t g, int64_t block, int64_t lane) {
  return layer.blocks_rows + ((g * layer.blocks + block) * e.lanes + lane) * layer.width;
}

// The row a member starts from (§4.1): its pool entry, else the fresh row `fresh`.
const float* SourceRow(const NctlEngine& e, const NctlLayer& layer, int64_t g, int64_t slot, int64_t m, int64_t n,
                       int64_t c, const float* fresh) {
  const int32_t entry = SourceEntry(e, g, slot, m, layer.offset + n);
  return entry >= 0 ? EntryRow(e, layer, g, n, c, entry) : fresh;
}

// The row member m of `slot` predicts with at context c: its trained row where its block exists, else its
// source row (member_weights).
const float* MemberRow(const NctlEngine& e, const NctlLayer& layer, int64_t g, int64_t slot, int64_t m, int64_t n,
                       int64_t c, const float* fresh) {
  const int32_t block = BlockOf(e, g, slot, layer.offset + n)[c];
  return block >= 0 ? BlockRow(e, layer, g, block, m) : SourceRow(e, layer, g, slot, m, n, c, fresh);
}

// A new block for (slot, neuron n, context c) of a layer: its fixed place, or the top of its free stack,
// popped (allocate, §6.2).
int32_t NewBlock(const NctlEngine& e, int64_t i, int64_t g, int64_t slot, int64_t n, int64_t c) {
  const NctlLayer& layer = e.layer[i];
  if (layer.fixed) return static_cast<int32_t>((slot * layer.neurons + n) * e.contexts + c);
  int32_t& top = e.n_free[g * e.n_layers + i];
  top -= 1;
  return layer.free[g * layer.blocks + std::clamp<int64_t>(top, 0, layer.blocks - 1)];
}

// -- one step (step.py): every network's forward pass, then when learning every trained row's update

// One network's forward pass of one row: what learning that row reads back (§4.2, §6.2).
struct Pass {
  std::vector<float> q;  // [S, M, N, kMember] every live member's prediction
  std::vector<float> inputs;  // every layer's inputs u, one after the other
  std::vector<float> hidden;  // [H] the inputs of layers 2..L as a record keeps them
  std::vector<int32_t> contexts;  // [N]
  double output[2];  // the output neuron's prediction (its kOut values, at most 2)
};

// What a call works in: the networks' passes, and scratch, sized once per state (kept between calls). The
// passes of the last one-row prediction are kept: learning that row next, with nothing learned in
// between, takes them instead of computing them again (the same numbers; `kept_row` says which row).
struct Work {
  std::vector<Pass> passes;
  std::vector<float> alpha, kept_row, q, scratch;
  std::vector<const float*> rows;  // a node's members' rows
  std::vector<std::vector<float>> fresh;  // per layer: a fresh row
  std::vector<double> log_r, mass, p;
  std::vector<int32_t> canon;
  std::vector<char> stale;
  bool kept = false;

  explicit Work(const NctlEngine& e) {
    WithModel(e, [&](auto model) { Size(e, model); });
  }

 private:
  template <typename Model>
  void Size(const NctlEngine& e, const Model&) {
    const int64_t S = e.slots, M = e.members, N = e.neurons, per_member = Model::kMember;
    int64_t inputs = 0, widest = 0;
    for (int64_t i = 0; i < e.n_layers; ++i) {
      inputs += Model::InputFloats(e.layer[i].width), widest = std::max(widest, e.layer[i].width);
      fresh.emplace_back(e.layer[i].width, static_cast<float>(e.layer[i].init_value));
    }
    passes.resize(e.nets);
    for (Pass& pass : passes) {
      pass.q.resize(S * M * N * per_member), pass.inputs.resize(inputs), pass.hidden.resize(e.hidden_width);
      pass.contexts.resize(N);
    }
    alpha.resize(S * M * N), kept_row.resize(e.features), q.resize(M * per_member), rows.resize(M);
    scratch.resize(Model::kScratch * widest);
    log_r.resize(S * N), mass.resize(S * N), p.resize(N * Model::kOut), canon.resize(S), stale.resize(S * N);
  }
};

// Network g's forward pass of row z into `pass` (the state unchanged): the posteriors, every layer's
// members' predictions from their rows (a block's, or the source's where the block is not there yet), the
// neurons' outputs mixed from them and the next layer's inputs (forward, learn=False).
template <typename Model>
void Predict(const NctlEngine& e, const Model& model, int64_t g, const float* z, Pass& pass, Work& w) {
  const int64_t M = e.members, N = e.neurons, d = e.features, s_bits = e.bits, out = Model::kOut;
  const int64_t per_member = Model::kMember;
  const int32_t size = *e.size;
  nctl::MemberPosteriors(e, g, size, w.alpha.data(), w.log_r.data());
  nctl::CanonicalSlots(e.level, size, e.slots, w.canon.data());
  nctl::SlotMass(e, g, w.log_r.data(), w.canon.data(), w.mass.data());
  for (int64_t n = 0; n < N; ++n)
    pass.contexts[n] = static_cast<int32_t>(
        nctl::Context(e.normals + (g * N + n) * s_bits * d, e.offsets + (g * N + n) * s_bits, z, s_bits, d));
  float* u = pass.inputs.data();
  model.BaseInputs(z, d, u);
  float* hidden = pass.hidden.data();
  for (int64_t i = 0; i < e.n_layers; ++i) {
    const NctlLayer& layer = e.layer[i];
    const int64_t K = layer.width;
    if (i > 0) hidden = Model::RecordValues(u, K, hidden);
    for (int64_t n = 0; n < layer.neurons; ++n) {
      const int64_t column = layer.offset + n, c = pass.contexts[column];
      for (int64_t s = 0; s < size; ++s) {
        const int32_t block = BlockOf(e, g, s, column)[c];
        for (int64_t m = 0; m < M; ++m)
          w.rows[m] = block < 0 ? SourceRow(e, layer, g, s, m, n, c, w.fresh[i].data()) : BlockRow(e, layer, g, block, m);
        model.PredictRows(w.rows.data(), M, u, K, w.q.data(), w.scratch.data());
        for (int64_t m = 0; m < M; ++m)
          std::copy_n(w.q.data() + m * per_member, per_member, pass.q.data() + ((s * M + m) * N + column) * per_member);
      }
      Model::Mix(pass.q.data(), w.alpha.data(), w.mass.data(), size, M, N, column, w.p.data() + n * out);
    }
    float* next = u + Model::InputFloats(K);
    if (i + 1 < e.n_layers) model.LayerInputs(w.p.data(), layer.neurons, next);
    u = next;
  }
  std::copy_n(w.p.data(), out, pass.output);  // the last layer's, the output neuron's
}

// Network g learns x from its forward pass `pass` of this step: every live (slot, neuron) gets its block at
// the step's context (allocate), every member's row its step (from its source where the block is new), and
// every member's log q(x) is added to its segment's (§1.3, §4.2, §6.2).
template <typename Model>
void Train(const NctlEngine& e, const Model& model, int64_t g, const Pass& pass, typename Model::Target x, Work& w) {
  const int64_t S = e.slots, M = e.members, N = e.neurons, per_member = Model::kMember;
  const int32_t size = *e.size;
  const float* u = pass.inputs.data();
  for (int64_t i = 0; i < e.n_layers; ++i) {
    const NctlLayer& layer = e.layer[i];
    const int64_t K = layer.width;
    for (int64_t s = 0; s < size; ++s)  // slot by slot, as allocate orders the new blocks
      for (int64_t n = 0; n < layer.neurons; ++n) {
        int32_t& block = BlockOf(e, g, s, layer.offset + n)[pass.contexts[layer.offset + n]];
        w.stale[s * N + n] = block < 0;
        if (block < 0) block = NewBlock(e, i, g, s, n, pass.contexts[layer.offset + n]);
      }
    for (int64_t n = 0; n < layer.neurons; ++n) {
      const int64_t column = layer.offset + n, c = pass.contexts[column];
      for (int64_t s = 0; s < size; ++s) {
        const int32_t block = BlockOf(e, g, s, column)[c];
        for (int64_t m = 0; m < M; ++m) {
          float* trained = BlockRow(e, layer, g, block, m);
          if (w.stale[s * N + n]) std::memcpy(trained, SourceRow(e, layer, g, s, m, n, c, w.fresh[i].data()), K * sizeof(float));
          const float* q = pass.q.data() + ((s * M + m) * N + column) * per_member;
          model.Learn(trained, u, K, q, x);
          e.loglik[((g * S + s) * M + m) * N + column] += Model::LogLikelihood(q, x);
        }
      }
    }
    u += Model::InputFloats(K);
  }
}

// Store step t's hidden inputs and contexts of network g (_record).
void Record(const NctlEngine& e, int64_t g, const Pass& pass) {
  const int32_t t = *e.t;
  const int32_t row = e.free_records[(t - 1) % e.chunk];
  std::copy(pass.hidden.begin(), pass.hidden.end(), e.hidden + (g * e.record_rows + row) * e.hidden_width);
  for (int64_t n = 0; n < e.neurons; ++n) {
    const int64_t at = (g * e.record_rows + row) * e.neurons + n;
    if (e.context_bytes == 2)
      static_cast<int16_t*>(e.record_contexts)[at] = static_cast<int16_t>(pass.contexts[n]);
    else
      static_cast<int32_t*>(e.record_contexts)[at] = pass.contexts[n];
  }
}

// Store step t's inputs and label, and offer it to every live slot's reservoir (_record).
template <typename Label>
void RecordShared(const NctlEngine& e, const float* z, Label label) {
  const int32_t t = *e.t;
  const int32_t row = e.free_records[(t - 1) % e.chunk];
  std::copy(z, z + e.features, e.z + row * e.features);
  static_cast<Label*>(e.y)[row] = label;
  for (int64_t s = 0; s < *e.size; ++s) {
    const uint64_t key = nctl::EventKey(*e.key, nctl::kSegmentTag, e.start[s], t);
    const int32_t position = nctl::Offer(e.segment_n + s, e.segment_seen + s, static_cast<int32_t>(e.reservoir), key);
    if (position >= 0) e.segment_ids[s * e.reservoir + position] = row;
  }
}

// -- the boundary (advance): pool updates (§4.4-§4.7, pool_update.py), the restart (§3.2)

struct Schedule {
  int32_t t, depth, size;
  std::vector<int32_t> level, start;
};

struct Advance {
  bool grow;
  int32_t completed, closing, kept;
};

int32_t TrailingZeros(int32_t n) { return __builtin_ctz(static_cast<uint32_t>(n)); }

// The record's layer-i inputs u (§4.3): from its features, or from its hidden inputs, then the bias.
template <typename Model>
void RecordInputs(const NctlEngine& e, const Model& model, int64_t g, int64_t i, int64_t id, float* u) {
  if (i == 0) return model.BaseInputs(e.z + id * e.features, e.features, u);
  const float* values = e.hidden + (g * e.record_rows + id) * e.hidden_width + Model::kValues * e.layer[i - 1].offset;
  Model::RecordInputs(values, e.layer[i].width, u);
}

// What one close's decisions read (decisions.Close) and the states stored at the boundary so far.
struct Pending {
  std::vector<char> valid;  // [X, N]
  std::vector<int32_t> slot, winner, source, ids, n, seen, born, order;  // slot [X]; ids [X, N, R]; others [X, N]
  Pending(int64_t X, int64_t N, int64_t R)
      : valid(X * N, 0), slot(X, 0), winner(X * N, 0), source(X * N, -1), ids(X * N * R, -1),
        n(X * N, 0), seen(X * N, 0), born(X * N, 0), order(X * N, 0) {}
};

template <typename Model>
class Boundary {
 public:
  Boundary(const NctlEngine& e, const Model& model, int64_t g, const Schedule& old, const Advance& adv, int32_t now)
      : e_(e), model_(model), g_(g), old_(old), adv_(adv), now_(now) {
    int64_t widest = 0;
    for (int64_t i = 0; i < e.n_layers; ++i) {
      widest = std::max(widest, e.layer[i].width);
      fresh_.emplace_back(e.layer[i].width, static_cast<float>(e.layer[i].init_value));
    }
    u_.resize(Model::InputFloats(widest)), scratch_.resize(Model::kScratch * widest);
  }

  // update_pool for network g: every close's decisions, longest segment first, then pruning and writes.
  void UpdatePool() {
    const int64_t X = e_.max_closes, N = e_.neurons, E = e_.entries;
    const int32_t n_closes = std::clamp<int32_t>(*e_.depth - static_cast<int32_t>(e_.chunk_log2) - adv_.closing + 1, 0,
                                                 static_cast<int32_t>(X));
    in_pool_.assign(e_.in_pool + g_ * E * N, e_.in_pool + (g_ + 1) * E * N);
    Pending pending(X, N, e_.reservoir);
    for (int32_t q = 0; q < n_closes; ++q) Close(adv_.kept - 1 + q, q, pending);
    for (int64_t n = 0; n < N; ++n) e_.next_order[g_ * N + n] += static_cast<int32_t>(X);
    PruneAndWrite(pending, n_closes);
  }

  // _restart: the completed node's PTW weight, the popped slots' blocks freed, the new slot pushed.
  void Restart() {
    const int64_t S = e_.slots, M = e_.members, N = e_.neurons, A = e_.grid, k = e_.capacity;
    std::vector<double> logits(M), log_r(S * N, 0.0), per_level(S), w_c(A);
    std::vector<int32_t> canon(S);
    std::vector<char> needed(S, 0);  // the slots of the levels completed .. depth, which W_c reads
    nctl::CanonicalSlots(old_.level.data(), old_.size, S, canon.data());
    for (int64_t j = adv_.completed; j <= old_.depth && j < S; ++j) needed[canon[j]] = 1;
    for (int64_t s = 0; s < old_.size; ++s)
      for (int64_t n = 0; n < N && needed[s]; ++n) {
        const int64_t at = (g_ * S + s) * M * N + n;
        for (int64_t m = 0; m < M; ++m) logits[m] = e_.logprior[at + m * N] + e_.loglik[at + m * N];
        log_r[s * N + n] = nctl::NodeLogEvidence(logits.data(), M, 1);
      }
    const int32_t i = adv_.closing - 1;
    for (int64_t n = 0; n < N; ++n) {
      double* log_b = e_.log_b + g_ * S * A * N + n;
      for (int64_t l = 0; l < S; ++l) per_level[l] = log_r[canon[l] * N + n];
      for (int64_t a = 0; a < A; ++a)
        w_c[a] = nctl::NodeLogWeight(e_, log_b, N, per_level.data(), old_.depth, adv_.completed, a);
      if (adv_.grow)
        for (int64_t l = S - 1; l >= 1; --l)
          for (int64_t a = 0; a < A; ++a) log_b[(l * A + a) * N] = log_b[((l - 1) * A + a) * N];
      for (int64_t l = i + 1; l < S; ++l)
        for (int64_t a = 0; a < A; ++a) log_b[(l * A + a) * N] = 0.0;
      for (int64_t a = 0; a < A; ++a) log_b[(i * A + a) * N] = w_c[a];
    }
    // the popped slots' blocks back onto their layers' free stacks (free_blocks), slot kept's table emptied
    for (int64_t layer_index = 0; layer_index < e_.n_layers; ++layer_index) {
      const NctlLayer& layer = e_.layer[layer_index];
      if (layer.fixed) continue;
      int32_t& top = e_.n_free[g_ * e_.n_layers + layer_index];
      for (int64_t p = adv_.kept; p < old_.size; ++p) {
        const int32_t* row = BlockOf(e_, g_, p, layer.offset);
        for (int64_t j = 0; j < layer.neurons * e_.contexts; ++j) {
          if (row[j] < 0) continue;
          if (top >= 0 && top < layer.blocks) layer.free[g_ * layer.blocks + top] = row[j];
          ++top;
        }
      }
    }
    const int64_t pushed = adv_.kept;
    std::fill_n(BlockOf(e_, g_, pushed, 0), N * e_.contexts, -1);
    for (int64_t n = 0; n < N; ++n) {
      int32_t count = 0;
      for (int64_t m = 0; m < k; ++m) count += e_.roster[(g_ * k + m) * N + n] >= 0;
      const int64_t at = (g_ * S + pushed) * M * N + n;
      for (int64_t m = 0; m < M; ++m) e_.loglik[at + m * N] = 0.0;
      nctl::MemberLogPrior(count, k, e_.logprior + at, N);
      for (int64_t m = 0; m < k; ++m) {
        const int64_t cell = ((g_ * S + pushed) * k + m) * N + n;
        e_.source[cell] = e_.roster[(g_ * k + m) * N + n];
        e_.detached[cell] = false;
      }
    }
  }

 private:
  int64_t LayerOf(int64_t column) const {
    int64_t i = 0;
    while (i + 1 < e_.n_layers && column >= e_.layer[i + 1].offset) ++i;
    return i;
  }

  typename Model::Target Target(int64_t id) const {
    return Model::TargetOf(static_cast<const typename Model::Label*>(e_.y)[id], e_.positive[g_]);
  }

  // §4.5 for the segment of `slot`, the q-th close of this boundary, every neuron.
  void Close(int64_t slot, int32_t q, Pending& pending) {
    const int64_t S = e_.slots, M = e_.members, N = e_.neurons, E = e_.entries, k = e_.capacity, R = e_.reservoir;
    const int64_t nodes = (g_ * S + slot) * M * N;
    const int32_t* segment = e_.segment_ids + slot * R;
    const int32_t segment_n = e_.segment_n[slot], segment_seen = e_.segment_seen[slot];
    const uint64_t key = nctl::EventKey(*e_.key, nctl::kMergeTag, old_.start[slot], now_);
    std::vector<int32_t> carried(R);
    // a merge's positions depend only on the carried reservoir's n and seen (the segment's reservoir and the
    // key are the close's): neurons whose lineages were stored together share them, drawn once
    std::vector<std::pair<int32_t, int32_t>> merged_from;  // (n, seen) of each merge drawn
    std::vector<int32_t> merged_positions, merged_count;  // its positions [R] and n
    for (int64_t n = 0; n < N; ++n) {
      const int32_t winner = nctl::SelectWinner(e_.loglik + nodes + n, e_.logprior + nodes + n, M, N, e_.tie_tolerance);
      const bool stored = winner < k;
      const int64_t member = std::min<int64_t>(winner, k - 1);
      const int64_t cell = ((g_ * S + slot) * k + member) * N + n;
      const int32_t source = e_.source[cell];
      const bool attached = stored && source >= 0 && !e_.detached[cell];
      const bool parent_in_pool = attached && in_pool_[source * N + n];
      // the lineage the winner carries (§4.3): its source entry's, as copied into the slot, or none
      int32_t carried_n = 0, carried_seen = 0;
      std::fill(carried.begin(), carried.end(), -1);
      if (attached) {
        const int64_t at = (g_ * E + source) * N + n;
        std::copy(e_.entry_ids + at * R, e_.entry_ids + (at + 1) * R, carried.begin());
        carried_n = e_.entry_n[at], carried_seen = e_.entry_seen[at];
      } else if (stored) {
        std::copy(e_.slot_ids + cell * R, e_.slot_ids + (cell + 1) * R, carried.begin());
        carried_n = e_.slot_n[cell], carried_seen = e_.slot_seen[cell];
      }
      bool nonempty = false;
      for (int64_t entry = 0; entry < E; ++entry) nonempty = nonempty || in_pool_[entry * N + n];
      for (int32_t j = 0; j < q; ++j) nonempty = nonempty || pending.valid[j * N + n];
      const bool refined = parent_in_pool && Refines(n, slot, winner, source, carried.data(), carried_n);
      const bool skipped = nonempty && !refined && Skips(n, slot, winner, q, pending);
      const int action = refined ? nctl::kRefine : (skipped ? nctl::kSkip : nctl::kAdd);
      // the stored state's lineage: the carried one merged with the segment's reservoir
      const auto drawn = std::find(merged_from.begin(), merged_from.end(), std::make_pair(carried_n, carried_seen));
      const int64_t j = drawn - merged_from.begin();
      if (drawn == merged_from.end()) {
        merged_from.emplace_back(carried_n, carried_seen);
        merged_positions.resize((j + 1) * R);
        merged_count.push_back(nctl::Merge(carried_n, carried_seen, segment_n, segment_seen, static_cast<int32_t>(R), key,
                                           merged_positions.data() + j * R));
      }
      const int32_t merged_n = merged_count[j], *positions = merged_positions.data() + j * R;
      int32_t* merged = pending.ids.data() + (q * N + n) * R;
      for (int64_t r = 0; r < R; ++r) {
        const int32_t at = positions[r];
        merged[r] = at < 0 ? -1 : (at < R ? carried[at] : segment[at - R]);
      }
      if (refined) in_pool_[source * N + n] = false;
      pending.valid[q * N + n] = action != nctl::kSkip;
      pending.slot[q] = static_cast<int32_t>(slot);
      pending.winner[q * N + n] = winner;
      pending.source[q * N + n] = stored ? source : -1;
      pending.n[q * N + n] = merged_n;
      pending.seen[q * N + n] = carried_seen + segment_seen;
      pending.born[q * N + n] = refined ? e_.born[(g_ * E + source) * N + n] : now_;
      pending.order[q * N + n] = e_.next_order[g_ * N + n] + q;
      e_.events[(g_ * N + n) * 4 + action] += 1;
    }
  }

  // The winner beats its parent, both frozen, on the parent's lineage (§4.5 step 2).
  bool Refines(int64_t column, int64_t slot, int32_t winner, int32_t parent, const int32_t* carried, int32_t carried_n) {
    const int64_t i = LayerOf(column), n = column - e_.layer[i].offset, K = e_.layer[i].width;
    const NctlLayer& layer = e_.layer[i];
    double new_ll = 0.0, old_ll = 0.0;
    for (int64_t r = 0; r < carried_n; ++r) {
      const int64_t id = std::max(carried[r], 0);
      const int32_t c = RecordContext(e_, g_, id, column);
      RecordInputs(e_, model_, g_, i, id, u_.data());
      const float* rows[2] = {MemberRow(e_, layer, g_, slot, winner, n, c, fresh_[i].data()),
                              EntryRow(e_, layer, g_, n, c, parent)};
      float q[2 * Model::kMember];
      model_.PredictRows(rows, 2, u_.data(), K, q, scratch_.data());
      new_ll += std::log(Model::Likelihood(q, Target(id)));
      old_ll += std::log(Model::Likelihood(q + Model::kMember, Target(id)));
    }
    return nctl::Beats(new_ll, old_ll, e_.refine_threshold, e_.tie_tolerance);
  }

  // The pool explains the segment better than the winner (§4.5 step 3): the pool at the boundary's start
  // (as far as it is still in the pool) and the states stored by the longer segments closing here.
  bool Skips(int64_t column, int64_t slot, int32_t winner, int32_t q, const Pending& pending) {
    const int64_t i = LayerOf(column), n = column - e_.layer[i].offset, K = e_.layer[i].width;
    const NctlLayer& layer = e_.layer[i];
    const int64_t N = e_.neurons, k = e_.capacity, R = e_.reservoir;
    const int32_t* segment = e_.segment_ids + slot * R;
    std::unique_ptr<bool[]> used(new bool[R]);
    for (int64_t r = 0; r < R; ++r) used[r] = r < e_.segment_n[slot];
    std::vector<int32_t> roster(k);
    std::unique_ptr<bool[]> alive(new bool[k]);
    for (int64_t j = 0; j < k; ++j) {
      roster[j] = e_.roster[(g_ * k + j) * N + column];
      alive[j] = roster[j] >= 0 && in_pool_[roster[j] * N + column];
    }
    const int64_t members = 1 + q;  // the winner, then the pending states
    // the entries in the pool and the members that hold a state, on the records the segment used (the others
    // count for nothing: not computed), all of a record's rows predicted together
    std::vector<double> stored(R * k, 0.5), scored(R * members, 0.5);
    std::vector<const float*> rows(k + members);
    std::vector<double*> into(k + members);
    std::vector<float> predicted((k + members) * Model::kMember);
    for (int64_t r = 0; r < R; ++r) {
      if (!used[r]) continue;
      const int64_t id = std::max(segment[r], 0);
      const int32_t c = RecordContext(e_, g_, id, column);
      RecordInputs(e_, model_, g_, i, id, u_.data());
      int64_t count = 0;
      for (int64_t j = 0; j < k; ++j)
        if (alive[j]) rows[count] = EntryRow(e_, layer, g_, n, c, roster[j]), into[count++] = &stored[r * k + j];
      for (int64_t m = 0; m < members; ++m) {
        if (m > 0 && !pending.valid[(m - 1) * N + column]) continue;
        const int64_t from_slot = m == 0 ? slot : pending.slot[m - 1];
        const int32_t member = m == 0 ? winner : pending.winner[(m - 1) * N + column];
        rows[count] = MemberRow(e_, layer, g_, from_slot, member, n, c, fresh_[i].data());
        into[count++] = &scored[r * members + m];
      }
      model_.PredictRows(rows.data(), count, u_.data(), K, predicted.data(), scratch_.data());
      for (int64_t j = 0; j < count; ++j) *into[j] = Model::Likelihood(predicted.data() + j * Model::kMember, Target(id));
    }
    nctl::Evidence evidence(used.get(), R, e_.joint_evidence);
    evidence.Add(stored.data(), k, alive.get(), k);
    for (int32_t j = 0; j < q; ++j) {
      const bool on = pending.valid[j * N + column];
      evidence.Add(scored.data() + 1 + j, members, &on, 1);
    }
    double e1 = 0.0;
    for (int64_t r = 0; r < R; ++r) e1 += used[r] ? std::log(scored[r * members]) : 0.0;
    return nctl::Beats(evidence.Value(), e1, e_.skip_threshold, e_.tie_tolerance);
  }

  // _prune_and_write: the pool cut back to capacity, then each surviving pending state written.
  void PruneAndWrite(const Pending& pending, int32_t n_closes) {
    const int64_t S = e_.slots, N = e_.neurons, E = e_.entries, X = e_.max_closes, k = e_.capacity;
    const int64_t all = E + X;
    std::unique_ptr<bool[]> alive(new bool[all]), removed(new bool[all]);
    std::vector<int32_t> age(all), order(all);
    std::vector<char> writes(X * N, 0);
    std::vector<int32_t> target(X * N, 0);
    std::vector<int64_t> rank(E);
    std::vector<int32_t> key(E);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t entry = 0; entry < E; ++entry) {
        const int64_t at = (g_ * E + entry) * N + n;
        alive[entry] = in_pool_[entry * N + n], age[entry] = e_.age[at], order[entry] = e_.order[at];
      }
      for (int64_t q = 0; q < X; ++q)
        alive[E + q] = pending.valid[q * N + n], age[E + q] = now_, order[E + q] = pending.order[q * N + n];
      nctl::Prune(alive.get(), age.data(), order.data(), all, k, now_, e_.spacing, removed.get());
      for (int64_t j = 0; j < all; ++j) e_.events[(g_ * N + n) * 4 + nctl::kEvict] += removed[j];
      for (int64_t entry = 0; entry < E; ++entry) in_pool_[entry * N + n] = in_pool_[entry * N + n] && !removed[entry];
      // targets: out of the pool, not read by a state being written; entries no continuing slot reads first
      std::vector<char> read_by_write(E, 0), pinned(E, 0);
      for (int64_t q = 0; q < X; ++q) {
        writes[q * N + n] = pending.valid[q * N + n] && !removed[E + q];
        if (writes[q * N + n] && pending.source[q * N + n] >= 0) read_by_write[pending.source[q * N + n]] = 1;
      }
      for (int64_t s = 0; s < adv_.kept; ++s)
        for (int64_t m = 0; m < k; ++m) {
          const int64_t cell = ((g_ * S + s) * k + m) * N + n;
          if (e_.source[cell] >= 0 && !e_.detached[cell]) pinned[e_.source[cell]] = 1;
        }
      for (int64_t entry = 0; entry < E; ++entry) {
        const bool usable = !in_pool_[entry * N + n] && !read_by_write[entry];
        key[entry] = static_cast<int32_t>((usable ? pinned[entry] : 2) * E + entry);
        rank[entry] = entry;
      }
      std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t b) { return key[a] < key[b]; });
      int64_t nth = -1;
      for (int64_t q = 0; q < X; ++q) {
        nth += writes[q * N + n];
        target[q * N + n] = static_cast<int32_t>(rank[std::max<int64_t>(nth, 0)]);
      }
    }
    std::copy(in_pool_.begin(), in_pool_.end(), e_.in_pool + g_ * E * N);
    for (int32_t q = 0; q < n_closes; ++q) {
      bool any = false;
      for (int64_t n = 0; n < N; ++n) any = any || writes[q * N + n];
      if (any) Write(pending, q, writes.data() + q * N, target.data() + q * N);
    }
    for (int64_t n = 0; n < N; ++n)
      nctl::Roster(e_.in_pool + g_ * E * N + n, e_.order + g_ * E * N + n, E, N, k, e_.roster + g_ * k * N + n, N);
  }

  // Store pending state q in entry target[n] of the neurons where writes[n] (_write).
  void Write(const Pending& pending, int32_t q, const char* writes, const int32_t* target) {
    const int64_t N = e_.neurons, E = e_.entries, R = e_.reservoir, C = e_.contexts;
    Detach(writes, target);
    const int64_t slot = pending.slot[q];
    for (int64_t i = 0; i < e_.n_layers; ++i) {
      const NctlLayer& layer = e_.layer[i];
      for (int64_t n = 0; n < layer.neurons; ++n) {
        const int64_t column = layer.offset + n;
        if (!writes[column]) continue;
        for (int64_t c = 0; c < C; ++c) {
          const float* row = MemberRow(e_, layer, g_, slot, pending.winner[q * N + column], n, c, fresh_[i].data());
          std::memcpy(EntryRow(e_, layer, g_, n, c, target[column]), row, layer.width * sizeof(float));
        }
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      if (!writes[n]) continue;
      const int64_t at = (g_ * E + target[n]) * N + n;
      e_.in_pool[at] = true, e_.age[at] = now_, e_.order[at] = pending.order[q * N + n];
      e_.born[at] = pending.born[q * N + n];
      std::copy_n(pending.ids.data() + (q * N + n) * R, R, e_.entry_ids + at * R);
      e_.entry_n[at] = pending.n[q * N + n], e_.entry_seen[at] = pending.seen[q * N + n];
    }
  }

  // Before entry target[n] is overwritten: continuing slots whose members still read it keep its lineage
  // (copied into the slot) and get every remaining block of those neurons created and filled from the
  // current sources (detach, §6.4).
  void Detach(const char* writes, const int32_t* target) {
    const int64_t S = e_.slots, N = e_.neurons, E = e_.entries, k = e_.capacity, R = e_.reservoir, C = e_.contexts;
    std::vector<char> affected(S * N, 0);
    for (int64_t s = 0; s < adv_.kept; ++s)
      for (int64_t m = 0; m < k; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const int64_t cell = ((g_ * S + s) * k + m) * N + n;
          if (!writes[n] || e_.source[cell] != target[n] || e_.detached[cell]) continue;
          const int64_t at = (g_ * E + target[n]) * N + n;
          std::copy_n(e_.entry_ids + at * R, R, e_.slot_ids + cell * R);
          e_.slot_n[cell] = e_.entry_n[at], e_.slot_seen[cell] = e_.entry_seen[at];
          e_.detached[cell] = true;
          affected[s * N + n] = 1;
        }
    for (int64_t s = 0; s < adv_.kept; ++s)
      for (int64_t i = 0; i < e_.n_layers; ++i) {
        const NctlLayer& layer = e_.layer[i];
        for (int64_t n = 0; n < layer.neurons; ++n) {
          if (!affected[s * N + layer.offset + n]) continue;
          int32_t* blocks = BlockOf(e_, g_, s, layer.offset + n);
          for (int64_t c = 0; c < C; ++c) {
            if (blocks[c] >= 0) continue;
            blocks[c] = NewBlock(e_, i, g_, s, n, c);
            for (int64_t m = 0; m < e_.lanes; ++m)
              std::memcpy(BlockRow(e_, layer, g_, blocks[c], m), SourceRow(e_, layer, g_, s, m, n, c, fresh_[i].data()),
                          layer.width * sizeof(float));
          }
        }
      }
  }

  const NctlEngine& e_;
  const Model& model_;
  int64_t g_;
  const Schedule& old_;
  const Advance& adv_;
  int32_t now_;
  std::vector<std::vector<float>> fresh_;  // per layer: a fresh row
  std::vector<float> u_, scratch_;
  std::vector<char> in_pool_;
};

// The record rows no reservoir holds (the mark of §6.5): held [A_r].
void HeldRecords(const NctlEngine& e, std::vector<char>& held) {
  const int64_t S = e.slots, N = e.neurons, E = e.entries, k = e.capacity, R = e.reservoir, rows = e.record_rows;
  held.assign(rows, 0);
  auto mark = [&](const int32_t* ids, int32_t n) {
    for (int32_t r = 0; r < n; ++r)
      if (ids[r] >= 0 && ids[r] < rows) held[ids[r]] = 1;
  };
  const int32_t size = *e.size;
  for (int64_t s = 0; s < size; ++s) mark(e.segment_ids + s * R, e.segment_n[s]);
  std::vector<char> keep(E * N);
  for (int64_t g = 0; g < e.nets; ++g) {
    for (int64_t j = 0; j < E * N; ++j) keep[j] = e.in_pool[g * E * N + j];
    for (int64_t s = 0; s < size; ++s)
      for (int64_t m = 0; m < k; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const int64_t cell = ((g * S + s) * k + m) * N + n;
          if (e.detached[cell]) mark(e.slot_ids + cell * R, e.slot_n[cell]);
          else if (e.source[cell] >= 0) keep[e.source[cell] * N + n] = 1;
        }
    for (int64_t j = 0; j < E * N; ++j)
      if (keep[j]) mark(e.entry_ids + (g * E * N + j) * R, e.entry_n[g * E * N + j]);
  }
}

// Reserve the record rows of the next P steps: the first rows no reservoir holds (reserve_records).
// Returns the count of rows no reservoir holds.
int64_t ReserveRecords(const NctlEngine& e) {
  std::vector<char> held;
  HeldRecords(e, held);
  int64_t found = 0, unheld = 0;
  for (int64_t row = 0; row < e.record_rows; ++row) {
    if (held[row]) continue;
    if (found < e.chunk) e.free_records[found++] = static_cast<int32_t>(row);
    ++unheld;
  }
  for (int64_t j = found; j < e.chunk; ++j) e.free_records[j] = -1;
  *e.records_ok = found == e.chunk;
  return unheld;
}

// Process the boundary of the next step (advance): the tree's weights, the pool updates of the segments
// that close (where `pool_update`), the closed slots popped and the new one pushed.
template <typename Model>
void AdvanceState(const NctlEngine& e, const Model& model, bool pool_update) {
  const int64_t S = e.slots;
  Schedule old{*e.t, *e.depth, *e.size, std::vector<int32_t>(e.level, e.level + S),
               std::vector<int32_t>(e.start, e.start + S)};
  const int32_t t = old.t + 1;
  Advance adv;
  adv.completed = old.depth - TrailingZeros(t - 1);
  adv.grow = adv.completed == 0;
  adv.closing = adv.completed + adv.grow;
  for (int64_t p = 1; p < S; ++p) e.level[p] += adv.grow;
  adv.kept = 0;
  for (int64_t p = 0; p < old.size; ++p) adv.kept += e.level[p] < adv.closing;
  // the new schedule first: the pool update reads the new depth; the closing slots keep their places
  *e.t = t, *e.depth = old.depth + adv.grow, *e.size = adv.kept + 1;
  e.level[adv.kept] = adv.closing;
  e.start[adv.kept] = t;
  for (int64_t g = 0; g < e.nets; ++g) {
    Boundary<Model> boundary(e, model, g, old, adv, t);
    if (pool_update && e.max_closes) boundary.UpdatePool();
    boundary.Restart();
  }
  e.segment_n[adv.kept] = 0, e.segment_seen[adv.kept] = 0;
}

// One row's step of every network (from the kept passes where `kept`) and its record, its boundary not
// processed: predictions [nets, kOut] receives the pre-update predictions.
template <typename Model>
void StepRow(const NctlEngine& e, const Model& model, Work& w, const float* z, typename Model::Label label, bool kept,
             double* predictions) {
  for (int64_t g = 0; g < e.nets; ++g) {
    Pass& pass = w.passes[g];
    if (!kept) Predict(e, model, g, z, pass, w);
    std::copy_n(pass.output, Model::kOut, predictions + g * Model::kOut);
    Train(e, model, g, pass, Model::TargetOf(label, e.positive[g]), w);
    Record(e, g, pass);
  }
  RecordShared(e, z, label);
}

// The boundary of the next step; where it updates the pool (t = 0 mod P), the record rows of the next P
// steps are reserved then, status[0] = 1 and status[1] = the record rows no reservoir holds.
template <typename Model>
void ProcessBoundary(const NctlEngine& e, const Model& model, int64_t* status) {
  const bool due = *e.t % e.chunk == 0;
  AdvanceState(e, model, due);
  status[0] = due, status[1] = due ? ReserveRecords(e) : 0;
}

// Whether the first row z of a call is the last one-row prediction's, whose passes are kept (then used up).
bool TakeKept(const NctlEngine& e, Work& w, const float* z) {
  const bool kept = w.kept && std::memcmp(z, w.kept_row.data(), e.features * sizeof(float)) == 0;
  w.kept = false;
  return kept;
}

}  // namespace

extern "C" {

// The work of calls on a state of engine `engine` (its sizes): made once per state, freed with it.
void* nctl_nctl_work(const NctlEngine* engine) { return new Work(*engine); }

void nctl_nctl_free_work(void* work) { delete static_cast<Work*>(work); }

// Learn rows Z [n, d] with labels Y [n] (the row model's Label: int32 classes, or float32 targets) in order,
// each step followed by its boundary, until a boundary that updates the pool is processed (status as
// ProcessBoundary's) or the tree would outgrow max_depth. predictions [n, nets, kOut] (float64) receives each
// row's pre-update prediction. Returns the rows learned.
int64_t nctl_nctl_learn(const NctlEngine* engine, void* work, const float* Z, const void* Y, int64_t n,
                        double* predictions, int64_t* status) {
  const NctlEngine& e = *engine;
  Work& w = *static_cast<Work*>(work);
  const bool kept = n > 0 && TakeKept(e, w, Z);
  status[0] = 0, status[1] = 0;
  return WithModel(e, [&](auto model) -> int64_t {
    using Model = decltype(model);
    const auto* labels = static_cast<const typename Model::Label*>(Y);
    for (int64_t r = 0; r < n; ++r) {
      if (*e.t >= (int64_t{1} << e.max_depth)) return r;
      StepRow(e, model, w, Z + r * e.features, labels[r], kept && r == 0, predictions + r * e.nets * Model::kOut);
      ProcessBoundary(e, model, status);
      if (status[0]) return r + 1;
    }
    return n;
  });
}

// One row's step (z [d], the label at y) with its boundary left unprocessed, for a caller that looks at the
// state in between (nctl_nctl_boundary processes it); predictions [nets, kOut]. The tree must have room for
// the step.
void nctl_nctl_step(const NctlEngine* engine, void* work, const float* z, const void* y, double* predictions) {
  const NctlEngine& e = *engine;
  Work& w = *static_cast<Work*>(work);
  const bool kept = TakeKept(e, w, z);
  WithModel(e, [&](auto model) {
    using Model = decltype(model);
    StepRow(e, model, w, z, *static_cast<const typename Model::Label*>(y), kept, predictions);
  });
}

// The boundary after nctl_nctl_step (status as ProcessBoundary's).
void nctl_nctl_boundary(const NctlEngine* engine, int64_t* status) {
  WithModel(*engine, [&](auto model) { ProcessBoundary(*engine, model, status); });
}

// Frozen predictions [n, nets, kOut] (float64) of the next step for rows Z [n, d]; the state does not change.
// The passes of a single row are kept.
void nctl_nctl_predict(const NctlEngine* engine, void* work, const float* Z, int64_t n, double* predictions) {
  const NctlEngine& e = *engine;
  Work& w = *static_cast<Work*>(work);
  WithModel(e, [&](auto model) {
    using Model = decltype(model);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < e.nets; ++g) {
        Predict(e, model, g, Z + r * e.features, w.passes[g], w);
        std::copy_n(w.passes[g].output, Model::kOut, predictions + (r * e.nets + g) * Model::kOut);
      }
  });
  w.kept = n == 1;
  if (w.kept) std::copy(Z, Z + e.features, w.kept_row.begin());
}

}  // extern "C"
