"""JAX's default random numbers (threefry2x32) in numpy, without importing JAX.

A key is ``uint32[2]``. Everything is the Threefry-2x32 block cipher with 20 rounds (Salmon et al.,
*Parallel random numbers: as easy as 1, 2, 3*, SC 2011) applied to counters, as ``jax.random`` does with
``jax_threefry_partitionable`` on (its default since JAX 0.5):

    ``key(seed)        = (seed >> 32, seed mod 2^32)``             (seed as int64: nctl runs JAX in 64-bit mode)
    ``fold_in(k, data) = T_k(0, data)``
    ``split(k, n)[i]   = T_k(i >> 32, i mod 2^32)``
    ``bits(k, shape)[i] = x0 ^ x1`` with ``(x0, x1) = T_k(i >> 32, i mod 2^32)``, ``i`` the flat index

``normal`` maps bits to a uniform ``u`` in ``(-1, 1)`` and returns ``sqrt(2) erfinv(u)`` in float32 with
the operations XLA:CPU runs, in its order, flushing subnormals to zero as it does, and rounding ``a * b + c``
once where LLVM contracts it into a fused multiply-add. The key functions and bits are integer operations
and equal ``jax.random``'s everywhere; ``normal`` equals ``jax.random.normal`` bit for bit on every one of
its 2^23 possible inputs on an x86-64 CPU with FMA (measured with JAX 0.10.2). A CPU without FMA rounds
those products apart, and JAX's last bits there can differ from these.
"""

import numpy as np

_PARITY = np.uint32(0x1BD11BDA)  # Threefry's key-schedule constant: k2 = k0 ^ k1 ^ 0x1BD11BDA
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Threefry-2x32 rotation distances, alternating blocks
_CHUNK = 2**16  # values per block in normal(): the float64 temporaries (512 kB each) stay in the L2 cache

# Giles' erfinv coefficients, highest degree first: for w < 5 (central) and w >= 5 (tail)
_GILES_CENTRAL = np.float32([2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                             -0.00125372503, -0.00417768164, 0.246640727, 1.50140941])
_GILES_TAIL = np.float32([-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                          -0.0076224613, 0.00943887047, 1.00167406, 2.83297682])
# Cephes log1p: P and Q (monic) of y^3 P(y)/Q(y), highest degree first
_LOG1P_P = np.float32([4.5270000862445199635215e-5, 4.9854102823193375972212e-1, 6.5787325942061044846969e0,
                       2.9911919328553073277375e1, 6.0949667980987787057556e1, 5.7112963590585538103336e1,
                       2.0039553499201281259648e1])
_LOG1P_Q = np.float32([1, 1.5062909083469192043167e1, 8.3047565967967209469434e1, 2.2176239823732856465394e2,
                       3.0909872225312059774938e2, 2.1642788614495947685003e2, 6.0118660497603843919306e1])
_SQRT2_MINUS_1 = np.float32(0.41421356237309504880)  # log1p's switch from its rational form to log(1 + y)
# Cephes logf: R(x) coefficients p0..p8 and ln 2 split in a high part exact in float32 and the rest
_LOG_R = np.float32([7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                     -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
_LN2_HIGH = np.float32(0.693359375)
_LN2_LOW = np.float32(-2.12194440e-4)
_SQRT_HALF = np.float32(0.70710678118654752440)  # logf's mantissa range starts at sqrt(1/2)
# a float64 holding a normal float32 value has its low 29 mantissa bits zero; 1 followed by 28 zeros is a tie
_BELOW_FLOAT32 = np.uint64(2**29 - 1)
_FLOAT32_HALF_ULP = np.uint64(2**28)


def key(seed: int) -> np.ndarray:
    """``jax.random.PRNGKey(seed)`` with 64-bit mode on: the int64 seed's high and low words, uint32[2]."""
    seed = int(seed)
    if not -2**63 <= seed < 2**63:
        raise OverflowError(f"seed {seed} does not fit in int64")
    seed %= 2**64
    return np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)


def fold_in(key: np.ndarray, data: int) -> np.ndarray:
    """``jax.random.fold_in(key, data)``: the hash of the counter pair ``(0, data)``, uint32[2]."""
    data = int(data)
    if not 0 <= data < 2**32:
        raise OverflowError(f"fold_in data {data} is not a uint32")
    x0, x1 = threefry2x32(key, np.zeros(1, np.uint32), np.array([data], np.uint32))
    return np.concatenate([x0, x1])


def split(key: np.ndarray, n: int = 2) -> np.ndarray:
    """``jax.random.split(key, n)``: key ``i`` is the hash of counter ``i``, uint32[n, 2]."""
    return np.stack(_hash_counters(key, 0, n), axis=-1)


def random_bits(key: np.ndarray, shape: tuple) -> np.ndarray:
    """``jax.random.bits(key, shape, uint32)``: ``x0 ^ x1`` of the hash of each element's flat index."""
    return _bits(key, 0, _size(shape)).reshape(shape)


def uint64_bits(key: np.ndarray) -> np.uint64:
    """``jax.random.bits(key, (), uint64)``: the hash of counter 0, its first word the high half."""
    x0, x1 = _hash_counters(key, 0, 1)
    return (np.uint64(x0[0]) << np.uint64(32)) | np.uint64(x1[0])


def uniform(key: np.ndarray, shape: tuple, low: np.float32, high: np.float32) -> np.ndarray:
    """``jax.random.uniform(key, shape, float32, low, high)``."""
    return _uniform(random_bits(key, shape), low, high)


def normal(key: np.ndarray, shape: tuple) -> np.ndarray:
    """``jax.random.normal(key, shape, float32)``: ``sqrt(2) erfinv(u)`` with ``u`` uniform in
    ``[nextafter(-1, 0), 1)``, rounded as XLA:CPU rounds it."""
    low = np.nextafter(np.float32(-1), np.float32(0))
    z = np.empty(_size(shape), np.float32)
    for start in range(0, z.size, _CHUNK):  # chunks keep the temporaries in the cache: 4x faster
        stop = min(start + _CHUNK, z.size)
        z[start:stop] = erfinv(_uniform(_bits(key, start, stop), low, np.float32(1))) * np.float32(np.sqrt(2))
    return z.reshape(shape)


def erfinv(x: np.ndarray) -> np.ndarray:
    """Float32 ``erfinv`` for ``x`` in ``(-1, 1)`` as XLA:CPU computes it (its CHLO expansion): Giles'
    single-precision polynomials (M. Giles, *Approximating the erfinv function*, GPU Computing Gems, 2011)

        ``w = -log1p(-x^2)``;  ``erfinv(x) = x p(t)`` with ``t = w - 2.5`` if ``w < 5`` else ``sqrt(w) - 3``

    ``p`` of degree 8 evaluated by Horner's rule, each step one fused multiply-add."""
    w = -_log1p(x * -x)
    p = np.empty_like(w)
    central = w < np.float32(5)
    tail = ~central
    p[central] = _horner(w[central] - np.float32(2.5), _GILES_CENTRAL)
    p[tail] = _horner(np.sqrt(w[tail]) - np.float32(3), _GILES_TAIL)
    return p * x


def _log1p(y: np.ndarray) -> np.ndarray:
    """Float32 ``log(1 + y)`` for ``y`` in ``(-1, 0]`` as XLA:CPU computes it: Cephes' rational
    approximation ``log1p(y) = y - y^2/2 + y^3 P(y)/Q(y)`` for ``|y| < sqrt(2) - 1``, else Cephes'
    ``logf`` of ``1 + y`` (``_log``)."""
    out = np.empty_like(y)
    near = np.abs(y) < _SQRT2_MINUS_1
    far = ~near
    out[near] = _log1p_near_zero(y[near])
    out[far] = _log(np.float32(1) + y[far])
    return out


def _log1p_near_zero(y: np.ndarray) -> np.ndarray:
    """``y - y^2/2 + y^3 P(y)/Q(y)`` (Cephes ``log1p``), ``P`` and ``Q`` by fused Horner steps;
    subnormal products flush to zero, as XLA:CPU runs with FTZ/DAZ."""
    y2 = y * y
    ratio = _horner(y, _LOG1P_P) / _horner(y, _LOG1P_Q)
    cubic = _flush(_flush(y * y2) * ratio)
    return y + (cubic - np.float32(0.5) * y2)


def _log(v: np.ndarray) -> np.ndarray:
    """Cephes' float32 ``logf`` for positive normal ``v`` (the evaluation order of Eigen's ``plog``, which
    XLA:CPU uses): ``v = 2^e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``, ``x = m - 1``,

        ``log v = x - x^2/2 + x^3 R(x) + e (q1 + q2)``,  ``q2 = 0.693359375`` (exact), ``q1`` the rest of ``ln 2``

    ``R`` of degree 8 evaluated as three quadratics combined in ``x^3``, every ``a * b + c`` fused."""
    bits = v.view(np.uint32)
    e = ((bits >> np.uint32(23)).astype(np.int32) - np.int32(126)).astype(np.float32)
    m = ((bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)).view(np.float32)  # v = 2^e m, m in [1/2, 1)
    small = m < _SQRT_HALF  # then use 2m in [1, sqrt 2) and e - 1
    x = (m - np.float32(1)) + np.where(small, m, np.float32(0))
    e = e - np.where(small, np.float32(1), np.float32(0))
    p = _LOG_R
    x2 = x * x
    x3 = x2 * x
    a = _fma(_fma(x, p[0], p[1]), x, p[2])
    b = _fma(_fma(x, p[3], p[4]), x, p[5])
    c = _fma(_fma(x, p[6], p[7]), x, p[8])
    r = _fma(_fma(_fma(a, x3, b), x3, c), x3, e * _LN2_LOW)
    return _fma(e, _LN2_HIGH, (x - np.float32(0.5) * x2) + r)


def _horner(t: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """``sum_k c_k t^(n-k)`` (highest degree first) by Horner's rule, each step ``p t + c`` fused."""
    p = np.full_like(t, coefficients[0])
    for c in coefficients[1:]:
        p = _fma(p, t, c)
    return p


def _fma(a: np.ndarray, b, c) -> np.ndarray:
    """Float32 ``a * b + c`` rounded once, as an FMA instruction does, for normal float32 results. The
    product of two float32 is exact in float64, so the float64 sum is the exact value rounded once; its
    rounding to float32 can only err where it lies exactly halfway between two float32 (Figueroa, *When is
    double rounding innocuous?*, 1995); there the exact value's side of the tie, from Knuth's TwoSum error
    of the sum, decides."""
    product = a.astype(np.float64) * b
    total = product + c
    tie = (total.view(np.uint64) & _BELOW_FLOAT32) == _FLOAT32_HALF_ULP
    if tie.any():
        addend = np.broadcast_to(np.asarray(c, np.float64), total.shape)[tie]
        shifted = total[tie] - product[tie]
        error = (product[tie] - (total[tie] - shifted)) + (addend - shifted)
        total[tie] = np.nextafter(total[tie], np.where(error == 0, total[tie], np.copysign(np.inf, error)))
    return total.astype(np.float32)


def _flush(x: np.ndarray) -> np.ndarray:
    """Subnormal float32 values become zeros of the same sign (the CPU's flush-to-zero mode)."""
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x)


def threefry2x32(key: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32, 20 rounds: five blocks of four rounds ``x0 += x1; x1 = rotl(x1, r) ^ x0``, the key
    schedule ``(k0, k1, k0 ^ k1 ^ 0x1BD11BDA)`` injected before and after every block (after block ``b``:
    ``x0 += ks[b % 3], x1 += ks[(b + 1) % 3] + b``). ``x0, x1`` uint32[n] counters -> two uint32[n]."""
    k = np.asarray(key, np.uint32)
    schedule = (k[0], k[1], k[0] ^ k[1] ^ _PARITY)
    x0 = x0 + schedule[0]
    x1 = x1 + schedule[1]
    for block in range(1, 6):
        for r in _ROTATIONS[(block - 1) % 2]:
            x0 = x0 + x1
            x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
        x0 = x0 + schedule[block % 3]
        x1 = x1 + schedule[(block + 1) % 3] + np.uint32(block)
    return x0, x1


def _hash_counters(key: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """The hash of the 64-bit counters ``start .. stop-1`` given as their high and low words."""
    i = np.arange(start, stop, dtype=np.uint64)
    return threefry2x32(key, (i >> np.uint64(32)).astype(np.uint32), (i & np.uint64(0xFFFFFFFF)).astype(np.uint32))


def _bits(key: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Bits number ``start .. stop-1`` of ``key``'s stream, uint32[stop - start]: the two words of each
    counter's hash xor-ed."""
    x0, x1 = _hash_counters(key, start, stop)
    return x0 ^ x1


def _uniform(bits: np.ndarray, low: np.float32, high: np.float32) -> np.ndarray:
    """The top 23 bits as the mantissa of ``f`` in ``[1, 2)``, then ``max(low, (f - 1) (high - low) + low)``."""
    f = ((bits >> np.uint32(9)) | np.float32(1).view(np.uint32)).view(np.float32) - np.float32(1)
    return np.maximum(low, f * (high - low) + low)


def _size(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))
