"""Seeing inside NCTL: saliency maps of MAP and pseudo-task networks, detected task boundaries, and
the history of every neuron's model pool. Figures and the ``nctl saliency / boundaries /
pool-history`` commands live in ``nctl.inspect.figures`` and ``nctl.inspect.cli`` (matplotlib)."""
