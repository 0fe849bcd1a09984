"""PNG figures of the inspection tools: saliency grids, change probability over time, pool history."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; chosen before pyplot is imported
import matplotlib.pyplot as plt
import numpy as np

from nctl import atomic
from nctl.core.pool import EVENTS as POOL_EVENTS

DPI = 100
PANEL_INCHES = 1.6
SALIENCY_CMAP = "RdBu_r"  # red: pixel pushes towards label 1 (the larger digit), blue: towards 0
SMALL_FONT = 7
IMAGE_SIDE = 28
BOUNDARY_STYLE = dict(color="black", linestyle=":", linewidth=0.8)


def _save(figure: plt.Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        atomic.write_atomic(path, lambda file: figure.savefig(file, dpi=DPI, format=path.suffix[1:] or "png"))
    finally:
        plt.close(figure)
    return path


def saliency_grid(maps: np.ndarray, titles, row_labels, path, suptitle: str = "") -> Path:
    """Maps [rows, cols, 784] as 28 x 28 images, each on its own symmetric colour scale; NaN maps are
    left blank."""
    rows, cols = maps.shape[:2]
    figure, axes = plt.subplots(rows, cols, figsize=(cols * PANEL_INCHES, rows * PANEL_INCHES + 0.4), squeeze=False)
    for r in range(rows):
        for c in range(cols):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            image = maps[r, c]
            if np.all(np.isfinite(image)):
                scale = float(np.max(np.abs(image))) or 1.0
                ax.imshow(image.reshape(IMAGE_SIDE, IMAGE_SIDE), cmap=SALIENCY_CMAP, vmin=-scale, vmax=scale)
                ax.set_title(titles[r][c], fontsize=SMALL_FONT)
            else:
                ax.axis("off")
        axes[r, 0].set_ylabel(row_labels[r], fontsize=SMALL_FONT + 1)
    if suptitle:
        figure.suptitle(suptitle, fontsize=SMALL_FONT + 2)
    figure.tight_layout()
    return _save(figure, path)


def change_probability(curves, boundaries, detections, window: int, threshold: float, path, title: str = "") -> Path:
    """One panel per sequence: ``c_t(window)`` over the stream, true boundaries dotted, detections marked."""
    figure, axes = plt.subplots(len(curves), 1, figsize=(10, 2.2 * len(curves) + 0.3), squeeze=False)
    for ax, curve, bounds, found in zip(axes[:, 0], curves, boundaries, detections):
        ax.plot(np.arange(len(curve)), curve, linewidth=0.8, color="#d62728", label=f"P(boundary in last {window} steps)")
        for b in bounds:
            ax.axvline(b, **BOUNDARY_STYLE)
        ax.plot(found, np.full(len(found), threshold), "v", color="#1f77b4", markersize=4, label="detection")
        ax.axhline(threshold, color="grey", linewidth=0.5)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlim(0, len(curve))
        ax.set_ylabel("probability", fontsize=SMALL_FONT + 1)
    axes[0, 0].legend(fontsize=SMALL_FONT, loc="upper right")
    axes[-1, 0].set_xlabel("step (dotted: true task boundaries)")
    if title:
        figure.suptitle(title, fontsize=SMALL_FONT + 2)
    figure.tight_layout()
    return _save(figure, path)


def pool_history(steps, shares: dict, events: dict, task_names, boundaries, path) -> Path:
    """Stacked areas of pool entries per origin task over time (one panel per entry of ``shares``:
    name -> [r, tasks]) and bars of the pool events per neuron, stacked by task (``events``: name ->
    [tasks, events])."""
    names = list(shares)
    figure, axes = plt.subplots(1, len(names) + 1, figsize=(4.5 * (len(names) + 1), 3.6))
    colours = plt.get_cmap("tab10")(np.arange(len(task_names)) % 10)
    for ax, name in zip(axes, names):
        ax.stackplot(steps, shares[name].T, labels=task_names, colors=colours, linewidth=0)
        for b in boundaries:
            ax.axvline(b, **BOUNDARY_STYLE)
        ax.set_ylim(0, 1)
        ax.set_xlim(steps[0], steps[-1])
        ax.set_title(f"{name}: pool entries by origin task", fontsize=SMALL_FONT + 2)
        ax.set_xlabel("step")
        ax.set_ylabel("share of pool capacity")
    axes[0].legend(fontsize=SMALL_FONT, loc="upper left")
    ax = axes[-1]
    width = 0.8 / len(names)
    x = np.arange(len(POOL_EVENTS))
    for i, name in enumerate(names):
        bottom = np.zeros(len(POOL_EVENTS))
        for task, colour in enumerate(colours):
            ax.bar(x + i * width, events[name][task], width, bottom=bottom, color=colour, edgecolor="white",
                   linewidth=0.3)
            bottom += events[name][task]
    ax.set_xticks(x + width * (len(names) - 1) / 2, POOL_EVENTS)
    ax.set_title("pool updates by task (bars: " + ", ".join(names) + ")", fontsize=SMALL_FONT + 2)
    ax.set_ylabel("events per neuron")
    figure.tight_layout()
    return _save(figure, path)
