"""A literal, slow FMN over KT with pool updates, written from ALGORITHMS.md 4.2-4.4.

One node object per tree level (no slot sharing), the top-down level posterior with ``s_D = 1``
(3.3), Python floats. Reservoirs must be large enough to keep every example, so no randomness is
involved: a segment reservoir is the whole segment and a lineage is its parent's followed by the
segment.
"""

import math
from dataclasses import dataclass, field

LOG_HALF = math.log(0.5)


def kt_p1(counts):
    zeros, ones = counts
    return (ones + 0.5) / (zeros + ones + 1.0)


def kt_logp(counts, x):
    p1 = kt_p1(counts)
    return math.log(p1 if x else 1.0 - p1)


def kt_learn(counts, x):
    return (counts[0] + (1 - x), counts[1] + x)


@dataclass
class Entry:
    counts: tuple
    time: int
    version: int
    lineage: list


@dataclass
class Member:
    counts: tuple
    log_prior: float
    source: int | None  # pool slot it was copied from
    source_version: int | None
    loglik: float = 0.0


@dataclass
class Node:
    start: int
    members: list
    log_b: float = 0.0
    segment: list = field(default_factory=list)

    def log_r(self):
        return _logsumexp([m.log_prior + m.loglik for m in self.members])


def _logsumexp(values):
    values = [v for v in values if v != -math.inf]
    if not values:
        return -math.inf
    peak = max(values)
    return peak + math.log(sum(math.exp(v - peak) for v in values))


class ReferenceFMN:
    def __init__(self, capacity, min_segment, joint=True, depth=0, eviction="fifo"):
        self.k, self.min_segment, self.joint, self.depth = capacity, min_segment, joint, depth
        self.eviction = eviction
        self.pool = [None] * capacity
        self.t = 0
        self.nodes = [self._new_node(1) for _ in range(depth + 1)]

    def _new_node(self, start):
        stored = [(i, e) for i, e in enumerate(self.pool) if e is not None]
        members = [Member(e.counts, -math.log(2 * len(stored)), i, e.version) for i, e in stored]
        members.append(Member((0.0, 0.0), LOG_HALF if stored else 0.0, None, None))
        return Node(start, members)

    def _weight(self, j):
        """W_j from the current state, bottom-up."""
        w = self.nodes[self.depth].log_r()
        for level in range(self.depth - 1, j - 1, -1):
            node = self.nodes[level]
            w = _logsumexp([LOG_HALF + node.log_r(), LOG_HALF + node.log_b + w])
        return w

    def _pool_update(self, node, t):
        winner = max(range(len(node.members)), key=lambda m: (node.members[m].loglik, -m))
        member = node.members[winner]
        slot = member.source
        parent = self.pool[slot] if slot is not None else None
        current = parent is not None and parent.version == member.source_version
        if current:
            gain = sum(kt_logp(member.counts, x) - kt_logp(parent.counts, x) for x in parent.lineage)
            if gain > 0:
                self.pool[slot] = Entry(member.counts, t, parent.version + 1, parent.lineage + node.segment)
                return
        valid = [e for e in self.pool if e is not None]
        if valid:
            e1 = sum(kt_logp(member.counts, x) for x in node.segment)
            if self.joint:
                e0 = _logsumexp([sum(kt_logp(e.counts, x) for x in node.segment) for e in valid])
                e0 -= math.log(len(valid))
            else:
                e0 = sum(_logsumexp([kt_logp(e.counts, x) for e in valid]) - math.log(len(valid))
                         for x in node.segment)
            if e0 > e1:
                return
        lineage = (parent.lineage if current else []) + node.segment
        if None in self.pool:
            target = self.pool.index(None)
        elif self.eviction == "fifo":
            target = min(range(self.k), key=lambda i: (self.pool[i].time, i))
        else:  # spacing: drop the entry whose neighbours in time (the new state at t) are closest
            order = sorted(range(self.k), key=lambda i: (self.pool[i].time, i))
            times = [self.pool[i].time for i in order] + [t]
            gaps = [(times[j + 1] - times[j - 1], j) for j in range(1, self.k)]
            target = order[min(gaps)[1]] if gaps else order[0]
        old = self.pool[target]
        self.pool[target] = Entry(member.counts, t, (old.version if old else 0) + 1, lineage)

    def step(self, x):
        """Process one bit; return P(x_t = 1 | x_<t) and log FMN(x_{1:t})."""
        self.t += 1
        t = self.t
        if t >= 2:
            ctz = ((t - 1) & -(t - 1)).bit_length() - 1
            i = self.depth - 1 - ctz
            w_c = self._weight(i + 1)
            closing = list(range(i + 1, self.depth + 1))
            for j in closing:
                if self.k and 2 ** (self.depth - j) >= self.min_segment:
                    self._pool_update(self.nodes[j], t)
            if i < 0:  # grow: the old tree becomes the left child of a new root
                root = self.nodes[0]
                copy = Node(root.start, [Member(m.counts, m.log_prior, m.source, m.source_version, m.loglik)
                                         for m in root.members], root.log_b, list(root.segment))
                self.nodes.insert(0, copy)
                self.depth += 1
                i = 0
            self.nodes[i].log_b = w_c
            for j in range(i + 1, self.depth + 1):
                self.nodes[j] = self._new_node(t)
        # top-down level posterior with s_D = 1
        p1, remaining = 0.0, 1.0
        for j, node in enumerate(self.nodes):
            stop = 1.0 if j == self.depth else math.exp(LOG_HALF + node.log_r() - self._weight(j))
            pi = remaining * stop
            remaining *= 1.0 - stop
            alphas = [math.exp(m.log_prior + m.loglik - node.log_r()) for m in node.members]
            p1 += pi * sum(a * kt_p1(m.counts) for a, m in zip(alphas, node.members))
        for node in self.nodes:
            for m in node.members:
                m.loglik += kt_logp(m.counts, x)
                m.counts = kt_learn(m.counts, x)
            node.segment.append(x)
        return p1, self._weight(0)
