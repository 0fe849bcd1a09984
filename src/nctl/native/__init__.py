"""The native engine: the learners' arithmetic in C++ for the CPU (docs/algorithm.md says which file
implements each part), on the same state layout as the JAX engine (``nctl.core``), called through
``ctypes``. ``library`` builds and loads the shared library; ``gln`` runs the Gated Linear Network,
``gaussian_gln`` the Gaussian one, ``nctl`` NCTL (exact mode, GGM rows).
``nctl.engines`` decides which engine a learner runs on."""
