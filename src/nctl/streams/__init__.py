"""Arrays to seeded, reproducible task streams (see ``base`` for the Task / TaskStream contract)."""

from nctl.streams.base import Task, TaskStream
from nctl.streams.electricity import PAPER_FEATURES, electricity
from nctl.streams.free_split import (
    FREE_SPLIT_PAIRS,
    BackwardTransferStream,
    ForwardTransferStream,
    free_split_backward,
    free_split_forward,
    free_split_mnist,
    free_split_schedule,
    segment_durations,
)
from nctl.streams.mnist import mnist_classes
from nctl.streams.permuted import permuted_mnist, pixel_permutations
from nctl.streams.split import SPLIT_PAIRS, split_fashion_mnist, split_mnist
from nctl.streams.standardisation import feature_statistics, running_standardise, standardise
from nctl.streams.regression import RegressionStream, chick_weights, friedman_gra, trump_approval
from nctl.streams.synthetic import synthetic, synthetic_regression

__all__ = [
    "FREE_SPLIT_PAIRS",
    "PAPER_FEATURES",
    "SPLIT_PAIRS",
    "BackwardTransferStream",
    "ForwardTransferStream",
    "RegressionStream",
    "Task",
    "TaskStream",
    "chick_weights",
    "electricity",
    "feature_statistics",
    "free_split_backward",
    "free_split_forward",
    "free_split_mnist",
    "free_split_schedule",
    "friedman_gra",
    "mnist_classes",
    "permuted_mnist",
    "pixel_permutations",
    "running_standardise",
    "segment_durations",
    "split_fashion_mnist",
    "split_mnist",
    "standardise",
    "synthetic",
    "synthetic_regression",
    "trump_approval",
]
