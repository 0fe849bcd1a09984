"""nctl: Neural Combinatorial Transfer Learning for online continual learning.

Importing nctl does not import JAX (a learner on the native engine never needs it), and turns on JAX's
64-bit mode for when it is: the log-domain accumulators of PTW and FMN are kept in float64
([algorithm §6](algorithm.md#6-the-engine-how-the-computation-is-laid-out)); every learner keeps its
weights in float32 explicitly. The mode is set in JAX's configuration where JAX is imported already, else
by ``$JAX_ENABLE_X64``, which JAX reads when it is imported.
"""

import os
import sys

if "jax" in sys.modules:
    sys.modules["jax"].config.update("jax_enable_x64", True)
else:
    os.environ["JAX_ENABLE_X64"] = "1"

__version__ = "0.1.0"

from nctl.compilation import enable_compilation_cache  # noqa: E402
from nctl.learners import GLN, NCTL, GLNRegressor, NCTLRegressor, load  # noqa: E402
from nctl.pool import Pool  # noqa: E402

__all__ = ["GLN", "GLNRegressor", "NCTL", "NCTLRegressor", "Pool", "enable_compilation_cache", "load"]
