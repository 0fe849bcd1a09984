"""Brute-force PTW and fixed-pool FMN by enumerating every segmentation (and member choice).

Only for tests: exponential time, obvious code, float64 Python arithmetic.
"""

import functools
import itertools
import math


def kt_log_prob(bits, counts=(0.0, 0.0)):
    """log of the KT estimator's sequential probability of ``bits`` started from ``counts``."""
    zeros, ones = counts
    total = 0.0
    for x in bits:
        p1 = (ones + 0.5) / (zeros + ones + 1.0)
        total += math.log(p1 if x else 1.0 - p1)
        ones, zeros = ones + x, zeros + (1 - x)
    return total


def partitions(start, stop, depth_left):
    """Every binary temporal partition of ``[start, stop)`` with its code length Gamma in bits."""
    yield [(start, stop)], (1 if depth_left > 0 else 0)
    if depth_left > 0:
        mid = (start + stop) // 2
        for left, cost_l in partitions(start, mid, depth_left - 1):
            for right, cost_r in partitions(mid, stop, depth_left - 1):
                yield left + right, 1 + cost_l + cost_r


def anytime_depth(n, depth=0):
    return max(depth, math.ceil(math.log2(n)) if n > 1 else 0)


def ptw_log_prob(bits, depth):
    """``log PTW_D(x_{1:n})`` (segments beyond ``n`` contribute 1)."""
    n = len(bits)
    terms = []
    for parts, cost in partitions(0, 2**depth, depth):
        log_p = -cost * math.log(2.0)
        for a, b in parts:
            if a < n:
                log_p += kt_log_prob(bits[a:min(b, n)])
        terms.append(log_p)
    return _logsumexp(terms)


def fmn_fixed_pool_log_prob(bits, depth, pool):
    """``log FMN_D(x_{1:n})`` with a fixed pool of KT counts and no pool updates.

    Each segment picks one member: the fresh KT (prior 1/2, or 1 if the pool is empty) or a stored
    state (prior 1/(2|pool|)); the sum runs over partitions and every choice of member per segment.
    """
    n = len(bits)
    members = [((0.0, 0.0), math.log(0.5) if pool else 0.0)]
    members += [(tuple(c), -math.log(2.0 * len(pool))) for c in pool]
    segment_log_prob = functools.cache(lambda a, b, counts: kt_log_prob(bits[a:b], counts))
    terms = []
    for parts, cost in partitions(0, 2**depth, depth):
        live = [(a, min(b, n)) for a, b in parts if a < n]
        for choice in itertools.product(members, repeat=len(live)):
            log_p = -cost * math.log(2.0)
            for (a, b), (counts, log_prior) in zip(live, choice):
                log_p += log_prior + segment_log_prob(a, b, counts)
            terms.append(log_p)
    return _logsumexp(terms)


def _logsumexp(values):
    peak = max(values)
    return peak + math.log(sum(math.exp(v - peak) for v in values))
