"""Deskewing of digit images: centre each image on its ink and shear its slant away.

The preprocessing behind the published GLN MNIST numbers (pygln's and DeepMind's examples load a
deskewed MNIST), used by the ``mnist-gln-deskewed`` substrate check. With the ink's centre of mass
``(r0, c0)``, row variance ``var_r`` and row-column covariance ``cov`` (pixel intensities as
weights), the slant is ``alpha = cov / var_r`` and output pixel ``(r, c)`` reads the input at

    (r - rc + r0,  c - cc + c0 + alpha (r - rc))

with ``(rc, cc)`` the image centre, by bilinear interpolation (zero outside the image).
"""

from __future__ import annotations

import numpy as np

DESKEW_CHUNK = 4096  # images per vectorised pass: bounded memory on 60,000 images


def deskew(images: np.ndarray) -> np.ndarray:
    """Deskewed copies of ``images`` [n, h, w] uint8 as uint8 [n, h, w] (rounded)."""
    images = np.asarray(images)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"deskew needs uint8 images [n, h, w], got {images.dtype} {images.shape}")
    out = np.empty_like(images)
    for start in range(0, len(images), DESKEW_CHUNK):
        chunk = images[start : start + DESKEW_CHUNK].astype(np.float32)
        out[start : start + DESKEW_CHUNK] = np.clip(np.rint(_deskew_float(chunk)), 0, 255).astype(np.uint8)
    return out


def _moments(x: np.ndarray, rows: np.ndarray, cols: np.ndarray):
    """Centre of mass (r0, c0) and slant cov/var_r of each image of ``x`` [n, h, w]."""
    mass = np.maximum(x.sum((1, 2)), 1e-6)
    r0 = (x * rows).sum((1, 2)) / mass
    c0 = (x * cols).sum((1, 2)) / mass
    dr = rows - r0[:, None, None]
    var_r = (x * dr**2).sum((1, 2)) / mass
    cov = (x * dr * (cols - c0[:, None, None])).sum((1, 2)) / mass
    slant = np.where(var_r > 1e-6, cov / np.maximum(var_r, 1e-6), 0.0)
    return r0, c0, slant


def _deskew_float(x: np.ndarray) -> np.ndarray:
    n, h, w = x.shape
    rows, cols = np.mgrid[0:h, 0:w].astype(np.float32)
    r0, c0, slant = _moments(x, rows, cols)
    rc, cc = (h - 1) / 2, (w - 1) / 2
    src_r = rows - rc + r0[:, None, None]
    src_c = cols - cc + c0[:, None, None] + slant[:, None, None] * (rows - rc)
    r_low, c_low = np.floor(src_r).astype(np.int64), np.floor(src_c).astype(np.int64)
    fr, fc = src_r - r_low, src_c - c_low
    image = np.arange(n)[:, None, None]
    out = np.zeros_like(x)
    for dr, wr in ((0, 1 - fr), (1, fr)):
        for dc, wc in ((0, 1 - fc), (1, fc)):
            r, c = r_low + dr, c_low + dc
            inside = (r >= 0) & (r < h) & (c >= 0) & (c < w)
            out += np.where(inside, x[image, np.clip(r, 0, h - 1), np.clip(c, 0, w - 1)], 0.0) * wr * wc
    return out
