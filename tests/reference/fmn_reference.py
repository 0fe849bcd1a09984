"""A literal, slow Forget-Me-Not process, written from ``docs/algorithm.md`` §3-§4 and §5.3 only.

Only for tests. It shares nothing with the engine (``nctl`` is not imported) and is written to be
read against the document, not to be fast:

* one node object per tree level on the current root-to-leaf path (§3.2); levels that started at
  the same step simply hold equal copies (no slot sharing, §3.5 is deliberately not used);
* every node holds an explicit copy of the state of every member (a copy of each pool entry as it
  was at the node's start, in pool order, then a fresh model, §4.1);
* the PTW recursion over levels written out (``W_D = R_D``, ``W_j = lse(...)``, §3.2) and the level
  posterior of §3.3 with the deepest level keeping its full mass;
* the pool rules of §4.4-§4.8 as written: winner with the tie tolerance, refine on the parent's
  lineage, skip test per example (default) or joint, add, the pool as a Python list in pool order
  (a replace removes the parent and appends), capacity enforced once per step after every close;
* pool entries are objects; a member keeps a reference to the entry it was copied from (its parent,
  compared by identity) and a copy of that entry's lineage as it was when copied (§4.3);
* stored states live in ``k + X`` numbered cells (§6.3): the decisions of a boundary make *pending*
  entries, pruning follows, then the surviving pending entries are written into cells in close order
  by the target-cell rule of §6.3; a member remembers the cell it was copied from, and a write into a
  cell that a continuing node's member reads first detaches that member (§6.4: it stops counting as
  a reader; its lineage is already its own copy).

Exact mode: every member holds its own full copy (§4.1), so the cells are bookkeeping only and
nothing observable depends on them. Bounded mode (§5.3): a member holds only the rows it trained
since it last entered the top ``B`` (none while it is outside); every other row, and its whole state
while it holds none, is read from its cell *as the cell is now* (for the fresh model: the initial
state). So a member whose cell is reused while its node lives follows the new content (§5.3, §6.4).

Reservoirs are assumed at least as long as the stream, so no reservoir ever samples: a segment
reservoir is the whole segment and a stored lineage is the carried lineage followed by the
segment's examples (§4.3, "if both fit in R everything is kept").

The process is generic in its base model (an object with ``fresh``, ``copy``, ``p1``, ``logp`` and
``learn``; for bounded mode also ``row_key``, ``row`` and ``with_rows``: which row a step uses, one
row of a state, and a state with some rows replaced; optionally ``mix``: how the process's prediction
combines the members' ``p1``, by default ``mix_probabilities``, the mixture of P(x = 1)). ``KT`` below
is the Krichevsky-Trofimov row model of §6 in Python floats; ``tests/reference/nctl_literal.py`` plugs
in the GGM of §1 for every neuron of a network, ``tests/reference/nctl_gaussian_literal.py`` the
Gaussian neuron of §8 (with its own ``mix``).

Step order (§4.2): ``predict`` then ``learn`` for step t, then ``boundary(t + 1)``, which is the
boundary processing of step t + 1 done as soon as step t is learned (§4.2 last paragraph, §6.1:
the state is always prepared).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# ----------------------------------------------------------------------------- small helpers


def lse(values):
    """log-sum-exp of a list of floats; -inf entries are allowed."""
    finite = [v for v in values if v != -math.inf]
    if not finite:
        return -math.inf
    peak = max(finite)
    return peak + math.log(sum(math.exp(v - peak) for v in finite))


def softmax(values):
    total = lse(values)
    return [math.exp(v - total) if v != -math.inf else 0.0 for v in values]


def safe_log(p):
    return math.log(p) if p > 0.0 else -math.inf


def ctz(n):
    """number of trailing zero bits of n >= 1"""
    return (n & -n).bit_length() - 1


def mix_probabilities(weighted):
    """§3.3, §4.1: ``sum_j pi_j sum_m alpha_m q_m`` for ``weighted = [(pi_j, [(alpha_m, q_m), ...]), ...]``
    (per level, per member), the members' ``q_m`` as float."""
    total = 0.0
    for pi_j, members in weighted:
        nu = sum(a * float(q) for a, q in members)
        total += pi_j * nu
    return total


def exceeds(a, b, margin, tolerance):
    """§4.8: the comparison ``a - b > margin`` with differences that rounding can produce counted as
    ties: ``a - b - margin > tau``, ``tau = tolerance max(1, |a|, |b|)`` (the base model's own tolerance)."""
    return a - b - margin > tolerance * max(1.0, abs(a), abs(b))


# ----------------------------------------------------------------------------- the KT row model


class KT:
    """Krichevsky-Trofimov counts ``(n0, n1)``; ``P(1) = (n1 + 1/2) / (n0 + n1 + 1)`` (§6)."""

    tie_tolerance = 1e-9  # §4.8, for float64 predictions

    def fresh(self):
        return (0.0, 0.0)

    def copy(self, state):
        return tuple(state)

    def p1(self, state, inp):
        n0, n1 = state
        return (n1 + 0.5) / (n0 + n1 + 1.0)

    def logp(self, state, inp, x):
        p1 = self.p1(state, inp)
        return math.log(p1 if x else 1.0 - p1)

    def learn(self, state, inp, x):
        n0, n1 = state
        return (n0 + (1 - x), n1 + x)

    # one context: the state is its only row
    def row_key(self, inp):
        return 0

    def row(self, state, key):
        return tuple(state)

    def with_rows(self, state, rows):
        return tuple(rows[0]) if 0 in rows else tuple(state)


# ----------------------------------------------------------------------------- the process


@dataclass(eq=False)
class PoolEntry:
    """A remembered model state (§4.1). ``age``: the step of its add or replace (§4.5).
    ``lineage``: the record ids its lineage was trained on (§4.3). ``cell``: the cell it was written
    to (§6.3), None while it is pending. ``source_cell``: the cell the winning member that made it
    reads (None for the fresh model). The state and lineage are never modified once created."""

    state: object
    age: int
    lineage: list
    cell: int | None = None
    source_cell: int | None = None


@dataclass(eq=False)
class Member:
    """One member of a node mixture (§4.1).

    ``state``: exact mode only: the member's own full state (a copy made at the node's start).
    ``rows``: bounded mode only (§5.3): the rows it trained since it last entered the top B, as
    ``{row key: row}``; None while it is outside the top B. Every other row is read from its source.
    ``cell``: the cell it was copied from (§6.3; None for the fresh model). In bounded mode its
    source is whatever that cell holds now (the initial state for the fresh model).
    ``detached``: its cell was overwritten while its node continued (§6.4); it no longer counts as
    reading the cell (in bounded mode it still reads it).
    ``parent``: the pool entry it was copied from (None for the fresh model).
    ``lineage``: the lineage it carries: the parent's lineage as it was when copied, [] if fresh.
    """

    state: object
    rows: dict | None
    cell: int | None
    parent: PoolEntry | None
    lineage: list
    log_prior: float
    loglik: float = 0.0  # L_m: log likelihood of the node's segment so far
    detached: bool = False


@dataclass(eq=False)
class Node:
    """The node of one tree level on the current path (§3.2), with its mixture (§4.1)."""

    start: int
    members: list
    log_b: float = 0.0  # B_j
    segment: list = field(default_factory=list)  # record ids of the segment (its whole reservoir)

    def log_r(self):
        """R_j = lse_m(log lambda_m + L_m)"""
        return lse([m.log_prior + m.loglik for m in self.members])

    def posterior(self):
        """alpha_m = softmax_m(log lambda_m + L_m)"""
        return softmax([m.log_prior + m.loglik for m in self.members])


DEFAULT_MAX_DEPTH = 20  # D_max of a growing tree unless given: the learners' sizing for depth=None


class LiteralFMN:
    """One FMN process (a sequence predictor, or one neuron of a network) over ``base``.

    ``example(rid)`` returns ``(inp, x)`` for a stored record id: what the base model needs to
    recompute a prediction on that record, and its target.
    """

    def __init__(self, base, example, *, pool_size, min_segment, depth=None, split_prob=0.5,
                 refine_threshold=0.0, skip_threshold=0.0, joint_evidence=False, eviction="fifo",
                 trained_members=None, initial_pool=(), max_depth=None):
        if eviction not in ("fifo", "spacing"):
            raise ValueError(eviction)
        if trained_members is not None and not 1 <= trained_members <= pool_size + 1:
            raise ValueError("trained_members must be in 1..pool_size + 1 (pool_size + 1 is exact FMN)")
        self.base, self.example = base, example
        self.k, self.min_segment = pool_size, min_segment
        self.growing = depth is None
        self.D = 0 if depth is None else depth
        self.s = split_prob
        self.alpha, self.beta = refine_threshold, skip_threshold
        self.joint, self.eviction = joint_evidence, eviction
        self.bounded = trained_members
        # §6.3: k + X cells, X = D_max + 1 - log2 L_min (none below 0: then no segment is long enough
        # to update the pool). D_max: the largest depth the process is sized for, the fixed depth by
        # default; a growing tree needs it given (the learners use 20).
        if max_depth is None:
            max_depth = DEFAULT_MAX_DEPTH if depth is None else depth
        if min_segment < 1 or min_segment & (min_segment - 1):
            raise ValueError("min_segment must be a power of two")
        self.max_depth = max_depth
        self.cells = [None] * (pool_size + max(0, max_depth + 1 - (min_segment.bit_length() - 1)))
        # initial pool entries: age 0 and an empty lineage (they were trained on no stored example),
        # in cells 0, 1, ...
        self.pool = [PoolEntry(base.copy(c), 0, [], cell=i) for i, c in enumerate(initial_pool)]
        if len(self.pool) > len(self.cells):
            raise ValueError("the initial pool does not fit in the cells")
        for entry in self.pool:
            self.cells[entry.cell] = entry
        self.events = {"refine": 0, "skip": 0, "add": 0, "evict": 0}
        # writes (§6.3) into a cell that a continuing node read, each detaching its readers (§6.4)
        self.reuses_while_read = 0
        self.nodes = [self.new_node(1) for _ in range(self.D + 1)]

    # ------------------------------------------------------------------ tree (§3)

    def log_s(self):
        return safe_log(self.s)

    def log_1ms(self):
        return safe_log(1.0 - self.s)

    def log_weights(self):
        """[W_0, ..., W_D] from the current R and B: W_D = R_D, W_j = lse(log(1-s) + R_j, log s + B_j + W_{j+1})."""
        W = [0.0] * (self.D + 1)
        W[self.D] = self.nodes[self.D].log_r()
        for j in range(self.D - 1, -1, -1):
            node = self.nodes[j]
            W[j] = lse([self.log_1ms() + node.log_r(), self.log_s() + node.log_b + W[j + 1]])
        return W

    def evidence(self):
        """W_0 = log FMN of the tree as it is now."""
        return self.log_weights()[0]

    def level_posterior(self):
        """§3.3: pi_j = softmax_j(Lambda_j + R_j), Lambda_j = sum_{l<j} (log s + B_l) + [j < D] log(1 - s)."""
        scores = []
        for j, node in enumerate(self.nodes):
            lam = sum(self.log_s() + self.nodes[l].log_b for l in range(j))
            if j < self.D:
                lam += self.log_1ms()
            scores.append(lam + node.log_r())
        return softmax(scores)

    # ------------------------------------------------------------------ node mixtures (§4.1)

    def new_node(self, start):
        """A node started at ``start``: a copy of every pool entry as it is now, in pool order, then a
        fresh model. Priors: fresh 1/2 and each stored copy 1/(2|M|); with an empty pool fresh gets 1.
        In bounded mode no member holds rows yet: each reads its cell (the fresh model its initial
        state) until it enters the top B (§5.3)."""
        base = self.base
        members = []
        for entry in self.pool:
            own = None if self.bounded else base.copy(self.cells[entry.cell].state)
            members.append(Member(own, None, entry.cell, entry, list(entry.lineage),
                                  -math.log(2.0 * len(self.pool))))
        fresh_prior = math.log(0.5) if self.pool else 0.0
        members.append(Member(None if self.bounded else base.fresh(), None, None, None, [], fresh_prior))
        return Node(start, members)

    def copy_node(self, node):
        members = [Member(None if m.state is None else self.base.copy(m.state),
                          None if m.rows is None else {key: self.base.copy(row) for key, row in m.rows.items()},
                          m.cell, m.parent, list(m.lineage), m.log_prior, m.loglik, m.detached)
                   for m in node.members]
        return Node(node.start, members, node.log_b, list(node.segment))

    def source(self, member):
        """Bounded mode (§5.3): what the member's cell holds now, or the initial state if fresh."""
        if member.cell is None:
            return self.base.fresh()
        return self.cells[member.cell].state

    def current(self, member):
        """The member's state as it predicts now: its own copy (exact mode); in bounded mode its
        trained rows over its source."""
        if not self.bounded:
            return member.state
        if not member.rows:
            return self.source(member)
        return self.base.with_rows(self.source(member), member.rows)

    # ------------------------------------------------------------------ one step (§4.2)

    def choose_trained(self):
        """Bounded mode (§5.3): in every node only the B members with the largest posterior weight
        learn (ties: lower member index). A member that drops out loses its trained rows and returns
        to its source; one that (re)enters starts from its source again (it holds no rows yet)."""
        if not self.bounded:
            return
        for node in self.nodes:
            scores = [m.log_prior + m.loglik for m in node.members]
            ranked = sorted(range(len(scores)), key=lambda m: (-scores[m], m))
            top = set(ranked[: self.bounded])
            for m, member in enumerate(node.members):
                if m not in top:
                    member.rows = None
                elif member.rows is None:
                    member.rows = {}

    def predict(self, inp):
        """The base model's ``mix`` of ``[(pi_j, [(alpha_m, p1_m), ...]), ...]``: by default
        P(x_t = 1 | x_<t) = sum_j pi_j nu_j(1), nu_j(1) = sum_m alpha_m q_m (§3.3, §4.1)."""
        self.choose_trained()
        pi = self.level_posterior()
        weighted = [(pi_j, [(a, self.base.p1(self.current(m), inp)) for a, m in zip(node.posterior(), node.members)])
                    for pi_j, node in zip(pi, self.nodes)]
        return getattr(self.base, "mix", mix_probabilities)(weighted)

    def learn(self, inp, x, rid):
        """Every member adds log q_m(x) to L_m; members that learn update their state (exact mode) or
        the row this step uses, taken from their source if they do not hold it yet (bounded mode);
        the record joins every level's segment."""
        base = self.base
        for node in self.nodes:
            for m in node.members:
                state = self.current(m)
                m.loglik += base.logp(state, inp, x)
                if not self.bounded:
                    m.state = base.learn(m.state, inp, x)
                elif m.rows is not None:
                    key = base.row_key(inp)
                    m.rows[key] = base.row(base.learn(base.copy(state), inp, x), key)
            node.segment.append(rid)

    def boundary(self, t):
        """§4.2 step 1 for step t >= 2 (growth §3.4, closes §3.2, pool §4.4-§4.7, restarts)."""
        if self.growing and t == 2**self.D + 1:
            # the tree becomes the left child of a new root that starts at step 1 and shares the old
            # root's model; every level index shifts by one
            self.nodes.insert(0, self.copy_node(self.nodes[0]))
            self.D += 1
        if t - 1 >= 2**self.D:
            raise ValueError(f"step {t} is beyond the fixed tree of depth {self.D}")
        c = self.D - ctz(t - 1)
        W = self.log_weights()
        self.nodes[c - 1].log_b = W[c]  # the node at level c-1 has completed its left child
        pending = []  # winners stored at this boundary, in close order (§6.3)
        for j in range(c, self.D + 1):  # closing levels, longest segment first (§4.4)
            node = self.nodes[j]
            if self.k and node.segment and 2 ** (self.D - j) >= self.min_segment:  # k = 0: no decisions (§4.9)
                stored = self.update_pool(node, t)
                if stored is not None:
                    pending.append(stored)
        self.enforce_capacity(t)
        self.write_pending(pending, continuing=self.nodes[:c])
        for j in range(c, self.D + 1):
            self.nodes[j] = self.new_node(t)

    # ------------------------------------------------------------------ pool (§4.4-§4.7)

    def score(self, state, rids):
        """Total log likelihood of a frozen state on stored records."""
        total = 0.0
        for rid in rids:
            inp, x = self.example(rid)
            total += self.base.logp(state, inp, x)
        return total

    def in_pool(self, entry):
        return any(e is entry for e in self.pool)

    def update_pool(self, node, t):
        """UPDATEMODELPOOL (§4.5) for the node of one closing level. Returns the pool entry it
        stored (pending: not in a cell yet, §6.3), or None."""
        members = node.members
        # 1. winner: largest L_m, ties (§4.8) to the lowest member index
        best = max(m.loglik for m in members)
        win = next(i for i, m in enumerate(members) if not exceeds(best, m.loglik, 0.0, self.base.tie_tolerance))
        winner = members[win]
        if self.bounded and not winner.rows:  # §5.3: its state is its source, already stored
            self.events["skip"] += 1
            return None
        state = self.base.copy(self.current(winner))  # frozen: read before any write of this boundary
        stored_lineage = winner.lineage + node.segment  # §4.3 with R >= stream: keep everything
        # 2. refine: the winner is a stored copy whose parent is still in the pool
        parent = winner.parent
        if parent is not None and self.in_pool(parent):
            gain_new = self.score(state, parent.lineage)
            gain_old = self.score(parent.state, parent.lineage)
            if exceeds(gain_new, gain_old, self.alpha, self.base.tie_tolerance):
                self.pool.remove(parent)
                stored = PoolEntry(state, t, stored_lineage, source_cell=winner.cell)
                self.pool.append(stored)
                self.events["refine"] += 1
                return stored
        # 3. skip: does the current pool already explain the segment?
        if self.pool:
            e1 = self.score(state, node.segment)
            log_m = math.log(len(self.pool))
            if self.joint:
                e0 = lse([self.score(e.state, node.segment) for e in self.pool]) - log_m
            else:
                e0 = 0.0
                for rid in node.segment:
                    inp, x = self.example(rid)
                    e0 += lse([self.base.logp(e.state, inp, x) for e in self.pool]) - log_m
            if exceeds(e0, e1, self.beta, self.base.tie_tolerance):
                self.events["skip"] += 1
                return None
        # 4. add
        stored = PoolEntry(state, t, stored_lineage, source_cell=winner.cell)
        self.pool.append(stored)
        self.events["add"] += 1
        return stored

    def enforce_capacity(self, t):
        """§4.7, once per step after every close of the step."""
        k = self.k
        if self.eviction == "fifo":
            if len(self.pool) > k:
                ages = sorted((e.age for e in self.pool), reverse=True)  # youngest to oldest
                cutoff = ages[k]
                kept = [e for e in self.pool if e.age > cutoff]
                self.events["evict"] += len(self.pool) - len(kept)
                self.pool = kept
            return
        while len(self.pool) > k:  # spacing
            older = [e for e in self.pool if e.age < t]  # stored before this step
            # ages in increasing order; equal ages in pool order (earlier in the pool = older)
            older.sort(key=lambda e: (e.age, self.pool.index(e)))
            candidates = range(1, len(older))  # every one but the oldest
            if candidates:
                ages = [e.age for e in older] + [t]
                best = min(candidates, key=lambda i: (ages[i + 1] - ages[i - 1], i))
                victim = older[best]
            else:
                victim = next(e for e in self.pool if e.age == t)
            self.pool.remove(victim)
            self.events["evict"] += 1

    # ------------------------------------------------------------------ cells (§6.3, §6.4)

    def reads(self, nodes, cell):
        """§6.3: a node reads a cell when one of its stored members was copied from it and has not
        been detached."""
        return any(m.cell == cell and not m.detached for node in nodes for m in node.members)

    def write_pending(self, pending, continuing):
        """§6.3: after pruning, write the surviving pending winners in the order of their closes.
        Each goes into a cell that neither holds a state of the pool after pruning nor holds the
        source of a winner being written at this boundary; among those, first the cells no
        continuing node reads, then the others; lowest index first within each group. Before a cell
        that a continuing node reads is overwritten, the members reading it are detached (§6.4).

        The source of a winner is the cell its member reads: the cell it was copied from, even if that
        member was detached earlier (in bounded mode it still reads that cell, §5.3; in exact mode
        nothing observable depends on it). ``continuing``: the nodes of levels ``0..c-1``; the
        closing levels do not count as readers."""
        writes = [entry for entry in pending if self.in_pool(entry)]
        sources = {entry.source_cell for entry in writes if entry.source_cell is not None}
        for entry in writes:
            held = {e.cell for e in self.pool if e.cell is not None}  # includes this boundary's writes so far
            allowed = [i for i in range(len(self.cells)) if i not in held and i not in sources]
            if not allowed:
                raise RuntimeError("no cell left: the tree outgrew max_depth (§6.3)")
            cell = min(allowed, key=lambda i: (self.reads(continuing, i), i))
            if self.reads(continuing, cell):
                self.reuses_while_read += 1
                for node in continuing:
                    for m in node.members:
                        if m.cell == cell:
                            m.detached = True  # lineage: already the member's own copy (§4.3)
            entry.cell = cell
            self.cells[cell] = entry


EVENT_KINDS = ("refine", "skip", "add", "evict")


def event_row(events):
    return [events[kind] for kind in EVENT_KINDS]


# ----------------------------------------------------------------------------- the sequence predictor


@dataclass
class FMNRun:
    p1: list  # P(x_t = 1 | x_<t)
    log_px: list  # log P(x_t | x_<t)
    evidence: list  # W_0 after learning x_t (the tree as it is at step t)
    events: list  # cumulative [refine, skip, add, evict] after step t, boundary of t + 1 included
    events_unprepared: list  # the same, before the boundary of step t + 1
    pool: list  # final pool (after the boundary of step n + 1): KT counts in pool order


class ReferenceFMN:
    """The literal FMN over KT (§4, §6) with reservoirs at least as long as the stream."""

    def __init__(self, depth=None, pool_size=15, min_segment=32, refine_threshold=0.0, skip_threshold=0.0,
                 joint_evidence=False, eviction="fifo", initial_pool=(), split_prob=0.5, trained_members=None,
                 max_depth=None):
        self.kwargs = dict(depth=depth, pool_size=pool_size, min_segment=min_segment, split_prob=split_prob,
                           refine_threshold=refine_threshold, skip_threshold=skip_threshold,
                           joint_evidence=joint_evidence, eviction=eviction, trained_members=trained_members,
                           max_depth=max_depth, initial_pool=tuple(tuple(float(v) for v in c) for c in initial_pool))

    def run(self, bits):
        bits = [int(b) for b in bits]
        fmn = LiteralFMN(KT(), lambda rid: (None, bits[rid]), **self.kwargs)
        out = FMNRun([], [], [], [], [], [])
        for t, x in enumerate(bits, start=1):
            p1 = fmn.predict(None)
            out.p1.append(p1)
            out.log_px.append(math.log(p1 if x else 1.0 - p1))
            fmn.learn(None, x, t - 1)
            out.evidence.append(fmn.evidence())
            out.events_unprepared.append(event_row(fmn.events))
            if fmn.growing or t < 2**fmn.D:  # a fixed tree of 2^D steps has no step 2^D + 1
                fmn.boundary(t + 1)
            out.events.append(event_row(fmn.events))
        out.pool = [tuple(e.state) for e in fmn.pool]
        return out
