"""Deskewing: slanted strokes come out upright and centred; upright centred images are unchanged."""

import numpy as np
import pytest

from nctl.streams.deskew import deskew


def _ink_columns(image: np.ndarray) -> np.ndarray:
    """Intensity-weighted mean column of every row that has ink."""
    cols = np.arange(image.shape[1])
    weights = image.astype(float)
    inked = weights.sum(1) > 0
    return (weights[inked] * cols).sum(1) / weights[inked].sum(1)


def test_a_slanted_stroke_becomes_upright_and_centred():
    image = np.zeros((28, 28), np.uint8)
    for r in range(4, 24):
        c = 6 + (r - 4) * 0.6  # leans right by 12 columns over 20 rows
        image[r, int(c) : int(c) + 3] = 255
    assert np.ptp(_ink_columns(image)) > 10
    out = deskew(image[None])[0]
    centres = _ink_columns(out)
    assert np.ptp(centres) < 1.5
    assert abs(centres.mean() - 13.5) < 1.0
    assert abs(out.sum() / 255 - image.sum() / 255) / (image.sum() / 255) < 0.1  # ink is kept


def test_an_upright_centred_image_is_unchanged():
    image = np.zeros((28, 28), np.uint8)
    image[4:24, 13:15] = 200  # centre of mass exactly (13.5, 13.5), no slant
    np.testing.assert_array_equal(deskew(image[None])[0], image)


def test_a_blank_image_stays_blank():
    np.testing.assert_array_equal(deskew(np.zeros((1, 28, 28), np.uint8)), 0)


def test_each_image_is_deskewed_on_its_own():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    together = deskew(images)
    for i in range(3):
        np.testing.assert_array_equal(together[i], deskew(images[i : i + 1])[0])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="uint8 images"):
        deskew(np.zeros((2, 28, 28), np.float32))
    with pytest.raises(ValueError, match="uint8 images"):
        deskew(np.zeros((28, 28), np.uint8))


@pytest.mark.data
def test_deskewed_mnist_stream_is_upright_and_clipped(mnist_dir):
    from nctl.data import load_mnist
    from nctl.streams import mnist_classes

    plain = mnist_classes(mnist_dir, seed=0)
    stream = mnist_classes(mnist_dir, seed=0, deskewed=True, z_clip=3.0)
    assert stream.name == "mnist-deskewed" and np.array_equal(stream.row_of_step, plain.row_of_step)
    X, y = stream.tasks[0].train_rows(np.arange(500))
    assert X.shape == (500, 784) and np.abs(X).max() <= 3.0
    assert np.array_equal(y, plain.tasks[0].train_rows(np.arange(500))[1])
    images = load_mnist("train", mnist_dir)[0][:500]
    slant = [np.polyfit(np.arange(len(c)), c, 1)[0] for c in map(_ink_columns, images)]
    upright = [np.polyfit(np.arange(len(c)), c, 1)[0] for c in map(_ink_columns, deskew(images))]
    assert np.mean(np.abs(upright)) < 0.5 * np.mean(np.abs(slant))
    with pytest.raises(ValueError, match="z_clip"):
        mnist_classes(mnist_dir, z_clip=0.0)
