"""nctl: Neural Combinatorial Transfer Learning for online continual learning.

Importing nctl turns on JAX's 64-bit mode: the log-domain accumulators of PTW and FMN are kept in
float64 ([algorithm §6](algorithm.md#6-the-engine-how-the-computation-is-laid-out)); every learner keeps
its weights in float32 explicitly.
"""

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"

from nctl.compilation import enable_compilation_cache  # noqa: E402
from nctl.learners import GLN, NCTL, GLNRegressor, NCTLRegressor, load  # noqa: E402

__all__ = ["GLN", "GLNRegressor", "NCTL", "NCTLRegressor", "enable_compilation_cache", "load"]
