"""Permuted MNIST: permutations, labels, task structure, the reduced variant."""

import numpy as np
import pytest

from nctl.data import load_mnist
from nctl.streams import feature_statistics, permuted_mnist, pixel_permutations, standardise


def test_permutations_are_bijections_and_task_0_is_the_identity():
    permutations = pixel_permutations(10, seed=3)
    assert permutations.shape == (10, 784)
    np.testing.assert_array_equal(permutations[0], np.arange(784))
    for permutation in permutations:
        np.testing.assert_array_equal(np.sort(permutation), np.arange(784))
    assert len({p.tobytes() for p in permutations}) == 10
    np.testing.assert_array_equal(pixel_permutations(10, seed=3), permutations)
    assert not np.array_equal(pixel_permutations(10, seed=4), permutations)
    np.testing.assert_array_equal(pixel_permutations(4, seed=3), permutations[:4])


def test_permutations_need_a_task():
    with pytest.raises(ValueError, match="n_tasks must be at least 1"):
        pixel_permutations(0, seed=0)


@pytest.fixture(scope="module")
def full(mnist_dir):
    return permuted_mnist(mnist_dir, seed=0)


@pytest.mark.data
def test_full_protocol_structure(full):
    assert full.name == "permuted-mnist" and full.n_classes == 10 and full.n_features == 784
    assert len(full) == 600_000 and len(full.tasks) == 10
    assert [(task, stop - start) for task, start, stop in full.segments()] == [(k, 60_000) for k in range(10)]
    for _, start, stop in full.segments():
        assert np.array_equal(np.sort(full.row_of_step[start:stop]), np.arange(60_000))
    assert not np.array_equal(full.row_of_step[:60_000], full.row_of_step[60_000:120_000])


@pytest.mark.data
def test_task_features_are_permuted_copies_of_task_0(full, mnist_dir):
    images, labels = load_mnist("train", mnist_dir)
    permutations = pixel_permutations(10, seed=0)
    idx = np.array([0, 7, 123, 59_999])
    X0, y0 = full.tasks[0].train_rows(idx)
    np.testing.assert_array_equal(y0, labels[idx])
    flat = images.reshape(len(images), -1)
    np.testing.assert_array_equal(X0, standardise(flat[idx], *feature_statistics(flat)))  # task 0: unpermuted
    for k in range(1, 10):
        Xk, yk = full.tasks[k].train_rows(idx)
        np.testing.assert_array_equal(Xk, X0[:, permutations[k]])
        np.testing.assert_array_equal(yk, y0)
    test_x0, test_y0 = full.tasks[0].test_set()
    test_x5, test_y5 = full.tasks[5].test_set()
    assert test_x0.shape == (10_000, 784) and np.bincount(test_y0).tolist()[:2] == [980, 1135]
    np.testing.assert_array_equal(test_x5, test_x0[:, permutations[5]])
    np.testing.assert_array_equal(test_y5, test_y0)


@pytest.mark.data
def test_reduced_variant_is_named_and_seeded(mnist_dir, full):
    reduced = permuted_mnist(mnist_dir, seed=0, n_tasks=3, examples_per_task=1000)
    assert reduced.name == "permuted-mnist-3-tasks-1000-per-task" and len(reduced) == 3000
    for _, start, stop in reduced.segments():
        assert len(np.unique(reduced.row_of_step[start:stop])) == 1000  # distinct examples within a task
    again = permuted_mnist(mnist_dir, seed=0, n_tasks=3, examples_per_task=1000)
    other = permuted_mnist(mnist_dir, seed=1, n_tasks=3, examples_per_task=1000)
    np.testing.assert_array_equal(again.row_of_step, reduced.row_of_step)
    assert not np.array_equal(other.row_of_step, reduced.row_of_step)
    X, y, tasks = next(reduced.chunks(size=3000))
    assert X.shape == (3000, 784) and X.dtype == np.float32 and set(np.unique(y)) == set(range(10))
    np.testing.assert_array_equal(np.bincount(tasks), [1000, 1000, 1000])


@pytest.mark.data
@pytest.mark.parametrize("bad", [0, 60_001])
def test_examples_per_task_is_checked(mnist_dir, bad):
    with pytest.raises(ValueError, match="examples_per_task must be in 1..60000"):
        permuted_mnist(mnist_dir, examples_per_task=bad)


@pytest.mark.data
def test_deskewed_variant_permutes_the_deskewed_clipped_digits(mnist_dir, full):
    from nctl.streams import mnist_classes

    deskewed = permuted_mnist(mnist_dir, seed=0, n_tasks=3, deskewed=True, z_clip=3.0)
    digits = mnist_classes(mnist_dir, deskewed=True, z_clip=3.0).tasks[0]
    assert deskewed.name == "permuted-mnist-3-tasks-deskewed"
    np.testing.assert_array_equal(deskewed.row_of_step[:60_000], full.row_of_step[:60_000])  # same order
    idx = np.array([0, 7, 59_999])
    X_digits, y_digits = digits.train_rows(idx)
    permutations = pixel_permutations(3, seed=0)
    for k in range(3):
        Xk, yk = deskewed.tasks[k].train_rows(idx)
        np.testing.assert_array_equal(Xk, X_digits[:, permutations[k]])
        np.testing.assert_array_equal(yk, y_digits)
    assert np.abs(deskewed.tasks[2].test_set()[0]).max() <= 3.0
    with pytest.raises(ValueError, match="z_clip"):
        permuted_mnist(mnist_dir, z_clip=-1.0)
