"""Results files -> PNG figures, one set per kind of experiment (``nctl plot``).

Every curve is the mean over seeds (task sequences for Free Split) with, when there are at least
two, the 95% Student-t band stored in the results' summary. Each learner keeps one colour in every
figure. Files are named ``{experiment}-{figure}.png``, each character of the experiment's name that is not a
letter, a digit, ``.``, ``-`` or ``_`` written ``_``: a results file cannot name a file outside the folder.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; chosen before pyplot is imported
import matplotlib.pyplot as plt
import numpy as np

from nctl import atomic
from nctl.experiments import configs
from nctl.experiments.report import LEARNER_NAMES

DPI = 100
CURVE_FIGSIZE = (8.0, 4.5)
TRANSFER_PANEL_INCHES = 4.5  # width of each learner's panel when Free Split transfer has several
PREQUENTIAL_FIGSIZE = (9.0, 6.5)
MATRIX_PANEL_INCHES = 3.2  # side of one heat map with up to 5 tasks; grows with more tasks
MATRIX_INCHES_PER_TASK = 0.4
GRID_WIDTH_INCHES = 13.0  # the per-task grid's width, whatever the number of tasks
GRID_MAX_PANEL_INCHES = 2.2
GRID_ACCURACY_TICKS = (0, 50, 100)
GRID_STEP_TICKS = 3
GRID_LEGEND_COLUMNS = 4
LINE_WIDTH = 1.4
BAND_ALPHA = 0.2
CURVE_ANTIALIASED = False  # jagged curves without antialiasing take half the PNG bytes and read the same
MARKER_MAX_POINTS = 12  # curves with this few points also get markers
SMALL_FONT = 7
HEATMAP_CMAP = "viridis"
HEATMAP_DARK_BELOW = 0.6  # cells darker than this (on a 0-1 scale) get white text
PERCENT = 100.0

LEARNER_COLOURS = {
    "nctl": "#d62728",
    "nctl-grid": "#ff9896",
    "gln": "#1f77b4",
    "ewc": "#2ca02c",
    "online-ewc": "#98df8a",
    "mlp": "#9467bd",
    "no-change": "#7f7f7f",
    "oracle-1": "#ff7f0e",
    "oracle-2": "#8c564b",
    "river:hoeffding_adaptive_tree": "#17becf",
    "river:adaptive_random_forest": "#bcbd22",
    "river:logistic_regression": "#e377c2",
    "river:alma": "#aec7e8",
    "river:leveraging_bagging": "#c5b0d5",
}
SPARE_COLOURS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354")
VARIANT_STYLES = {"adapt50": "-", "frozen": "--"}
SPARE_STYLES = (":", "-.")
CONDITION_CMAP = "viridis"
NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9._-]")  # "/" above all: a figure's name is one file name


def plot_results(results: dict, out_dir: str | Path) -> list[Path]:
    """Write the figures of one results file into ``out_dir`` and return their paths.

    ``results`` is a loaded ``results.json``; its ``kind`` picks the figures (the substrate check
    has scalars only and gives none). Raises ValueError for an unknown kind.
    """
    kind = results.get("kind")
    if kind not in FIGURES:
        raise ValueError(f"cannot plot results of kind {kind!r}; known kinds: {', '.join(FIGURES)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, figure in FIGURES[kind](results):
        path = out / f"{NOT_IN_FILE_NAMES.sub('_', results['experiment'])}-{name}.png"
        try:
            atomic.write_atomic(path, lambda file: figure.savefig(file, dpi=DPI, format="png"))
        finally:
            plt.close(figure)
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------- shared helpers


def learner_label(learner: str) -> str:
    """The learner's display name, as in the report tables."""
    return LEARNER_NAMES.get(learner, learner)


def learner_colour(learner: str) -> str:
    """The learner's colour, the same in every figure (a stable spare colour for unlisted ones)."""
    if learner in LEARNER_COLOURS:
        return LEARNER_COLOURS[learner]
    return SPARE_COLOURS[zlib.crc32(learner.encode()) % len(SPARE_COLOURS)]


def variant_style(variant: str, n_variants: int) -> str:
    """Line style of a task-matrix variant: adapt50 solid, frozen dashed; solid if it is the only one."""
    if n_variants == 1:
        return "-"
    if variant in VARIANT_STYLES:
        return VARIANT_STYLES[variant]
    return SPARE_STYLES[zlib.crc32(variant.encode()) % len(SPARE_STYLES)]


def mean_and_band(stat: dict, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray | None]:
    """(mean, 95% half-width) of a summarised curve, times ``scale``; no band with one seed."""
    mean = np.asarray(stat["mean"], dtype=float) * scale
    if stat["n"] < 2:
        return mean, None
    return mean, np.asarray(stat["half_width"], dtype=float) * scale


def plot_curve(ax, x, mean: np.ndarray, half_width: np.ndarray | None, colour: str, label: str | None,
               style: str = "-") -> None:
    """A mean curve as a line, with its 95% band shaded when there is one."""
    marker = "o" if len(mean) <= MARKER_MAX_POINTS else None
    ax.plot(x, mean, style, color=colour, label=label, linewidth=LINE_WIDTH, marker=marker, markersize=3,
            antialiased=CURVE_ANTIALIASED)
    if half_width is not None:
        ax.fill_between(x, mean - half_width, mean + half_width, color=colour, alpha=BAND_ALPHA, linewidth=0,
                        antialiased=CURVE_ANTIALIASED)


def summary_curve(entry: dict, key: str, where: str) -> dict:
    """``entry[key]``, a summarised curve; a clear error when the seeds' curves did not agree."""
    if key not in entry:
        raise ValueError(f"{where}: no summary of {key!r} (missing, or its length differs between seeds)")
    return entry[key]


def averaged_over(results: dict) -> str:
    """'mean of N seeds' (or sequences), and whether a 95% band is shown."""
    unit = "sequences" if results["kind"] in (configs.BACKWARD, configs.FORWARD, configs.ORACLES) else "seeds"
    n = results["n_seeds"]
    if n == 1:
        unit = unit[:-1]
    band = ", 95% band" if n > 1 else ""
    interrupted = ", interrupted run" if results.get("interrupted") else ""
    return f"mean of {n} {unit}{band}{interrupted}"


def set_title(fig: plt.Figure, results: dict, what: str) -> None:
    """Two-line title: the experiment and what is shown, then what it is averaged over."""
    fig.suptitle(f"{results['experiment']}: {what}\n{averaged_over(results)}", fontsize="medium")


def first_seed(results: dict) -> dict:
    """The first seed's raw numbers (curve steps, task names), which every seed shares."""
    if not results.get("seeds"):
        raise ValueError(f"{results['experiment']}: the results hold no seeds to plot")
    return results["seeds"][0]


# ----------------------------------------------------------------------------- task matrix


def task_matrix_figures(results: dict) -> Iterator[tuple[str, plt.Figure]]:
    """Heat maps of the accuracy matrix R, then the per-task accuracy grid (paper Figure 4)."""
    yield "matrix", matrix_figure(results)
    yield "grid", grid_figure(results)


def matrix_panels(results: dict) -> list[tuple[str, str, dict]]:
    """(learner, variant, summary of that variant) for every learner and variant."""
    return [(learner, variant, metrics)
            for learner, entry in results["summary"]["learners"].items()
            for variant, metrics in entry["variants"].items()]


def matrix_figure(results: dict) -> plt.Figure:
    """One annotated heat map of R[i, j] (%) per learner and variant, mean over seeds; task names
    on the outer panels only."""
    tasks = first_seed(results)["tasks"]
    panels = matrix_panels(results)
    n_cols = math.ceil(math.sqrt(len(panels)))
    n_rows = math.ceil(len(panels) / n_cols)
    side = max(MATRIX_PANEL_INCHES, MATRIX_INCHES_PER_TASK * len(tasks))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(side * n_cols, side * n_rows + 0.6), squeeze=False,
                             layout="constrained")
    for index, (ax, (learner, variant, metrics)) in enumerate(zip(axes.flat, panels)):
        matrix = np.asarray(summary_curve(metrics, "matrix", f"{learner} {variant}")["mean"], dtype=float)
        draw_heatmap(ax, matrix)
        ax.set_title(f"{learner_label(learner)}, {variant}", fontsize="medium")
        label_heatmap(ax, tasks, bottom=index + n_cols >= len(panels), left=index % n_cols == 0)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    set_title(fig, results, "accuracy (%) on task j after training task i")
    return fig


def draw_heatmap(ax, matrix: np.ndarray) -> None:
    """An accuracy matrix as coloured cells, each annotated with its value in %."""
    ax.imshow(matrix, cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0)
    digits = 1 if matrix.shape[1] <= 5 else 0
    for (i, j), value in np.ndenumerate(matrix):
        colour = "white" if value < HEATMAP_DARK_BELOW else "black"
        ax.text(j, i, f"{value * PERCENT:.{digits}f}", ha="center", va="center", color=colour, fontsize=SMALL_FONT)


def label_heatmap(ax, tasks: list[str], bottom: bool, left: bool) -> None:
    """Task names under the bottom panels and left of the left ones (every panel has the same tasks)."""
    positions = np.arange(len(tasks))
    ax.set_xticks(positions, tasks if bottom else [], rotation=45, ha="right", fontsize=SMALL_FONT)
    ax.set_yticks(positions, tasks if left else [], fontsize=SMALL_FONT)
    if bottom:
        ax.set_xlabel("tested on task j")
    if left:
        ax.set_ylabel("after training task i")


def segment_end_rows(curve: np.ndarray, matrix: np.ndarray) -> list[int]:
    """Rows of ``curve`` [..., evaluations, tasks] that are the rows of ``matrix`` [..., segments, tasks].

    R's row i is the evaluation at the end of segment i, so it equals one later row of the curve
    (leading axes, e.g. seeds and variants, must all agree). Row 0 is the untrained start.
    """
    rows, previous = [], 0
    for i in range(matrix.shape[-2]):
        found = next((r for r in range(previous + 1, curve.shape[-2])
                      if np.array_equal(curve[..., r, :], matrix[..., i, :], equal_nan=True)), None)
        if found is None:
            raise ValueError(f"row {i} of the accuracy matrix is no row of the curve after row {previous}")
        rows.append(found)
        previous = found
    return rows


def stacked_seeds(results: dict, learner: str, key: str) -> np.ndarray:
    """``key`` ("curve" or "matrix") of every seed and variant of ``learner``, stacked."""
    arrays = [np.asarray(metrics[key], dtype=float) for seed in results["seeds"]
              for metrics in seed["learners"][learner]["variants"].values()]
    if len({array.shape for array in arrays}) != 1:
        raise ValueError(f"{learner}: the seeds' {key} shapes differ, cannot align their evaluations")
    return np.stack(arrays)


def learner_segment_rows(results: dict, learner: str) -> list[int]:
    """The curve rows at the segment ends of ``learner``, matched over every seed and variant."""
    return segment_end_rows(stacked_seeds(results, learner, "curve"), stacked_seeds(results, learner, "matrix"))


def grid_figure(results: dict) -> plt.Figure:
    """Paper Figure 4: panel (i, j) is the accuracy on test task j while task i is trained, against
    the examples seen since task i began; one line per learner and variant."""
    seed = first_seed(results)
    tasks = seed["tasks"]
    n = len(tasks)
    panel = min(GRID_MAX_PANEL_INCHES, GRID_WIDTH_INCHES / n)
    fig, axes = plt.subplots(n, n, figsize=(panel * n, panel * n + 0.9), sharex=True, sharey=True,
                             squeeze=False, layout="constrained")
    for learner, entry in results["summary"]["learners"].items():
        steps = np.asarray(seed["learners"][learner]["curve_steps"])
        starts_and_ends = [0, *learner_segment_rows(results, learner)]
        for variant, metrics in entry["variants"].items():
            mean, half_width = mean_and_band(summary_curve(metrics, "curve", f"{learner} {variant}"), PERCENT)
            style = variant_style(variant, len(entry["variants"]))
            for i, (start, end) in enumerate(zip(starts_and_ends, starts_and_ends[1:])):
                span = slice(start, end + 1)
                for j in range(n):
                    band = None if half_width is None else half_width[span, j]
                    label = f"{learner_label(learner)}, {variant}" if i == j == 0 else None
                    plot_curve(axes[i, j], steps[span] - steps[start], mean[span, j], band,
                               learner_colour(learner), label, style)
    label_grid(axes, tasks)
    fig.legend(loc="outside lower center", ncols=min(GRID_LEGEND_COLUMNS, len(matrix_panels(results))),
               fontsize="small")
    set_title(fig, results, "accuracy (%) on each test task (column) while each task (row) is trained")
    return fig


def label_grid(axes: np.ndarray, tasks: list[str]) -> None:
    """Column titles (test task), row labels (trained task), a common accuracy range and few ticks."""
    for j, task in enumerate(tasks):
        axes[0, j].set_title(f"test {task}", fontsize=SMALL_FONT)
        axes[-1, j].set_xlabel("examples into task", fontsize=SMALL_FONT)
    for i, task in enumerate(tasks):
        axes[i, 0].set_ylabel(f"train {task}\naccuracy %", fontsize=SMALL_FONT)
    for ax in axes.flat:
        ax.set_ylim(0, PERCENT)
        ax.set_yticks(GRID_ACCURACY_TICKS)
        ax.locator_params(axis="x", nbins=GRID_STEP_TICKS)
        ax.tick_params(labelsize=SMALL_FONT - 1)


# ----------------------------------------------------------------------------- prequential


def prequential_figures(results: dict) -> Iterator[tuple[str, plt.Figure]]:
    """Windowed accuracy and windowed kappa-temporal over the stream (paper Figure 7)."""
    seed = first_seed(results)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=PREQUENTIAL_FIGSIZE, sharex=True, layout="constrained")
    window = next(iter(seed["learners"].values())).get("window")
    for learner, entry in results["summary"]["learners"].items():
        steps, colour = seed["learners"][learner]["curve_steps"], learner_colour(learner)
        accuracy = summary_curve(entry, "windowed_accuracy", learner)
        kappa = summary_curve(entry, "windowed_kappa_temporal", learner)
        plot_curve(top, steps, *mean_and_band(accuracy, PERCENT), colour, learner_label(learner))
        plot_curve(bottom, steps, *mean_and_band(kappa), colour, None)
    over = f"last {window} examples" if window else "a sliding window"
    top.set_ylabel(f"accuracy (%), {over}")
    bottom.set_ylabel(f"kappa-temporal, {over}")
    bottom.axhline(0.0, color="black", linewidth=0.8)
    bottom.set_xlabel("examples seen (test-then-train)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.legend(loc="outside right center", fontsize="small")
    set_title(fig, results, "prequential accuracy and kappa-temporal")
    yield "accuracy", fig


# ----------------------------------------------------------------------------- Free Split


def transfer_figures(results: dict) -> Iterator[tuple[str, plt.Figure]]:
    """Log-loss on the target's first steps, one line per number of distractors (backward, paper
    Figure 2) or source tasks (forward, paper Figure 3); one panel per learner."""
    backward = results["kind"] == configs.BACKWARD
    conditions = sorted(results["summary"]["conditions"], key=int)
    learners = list(results["summary"]["conditions"][conditions[0]]["learners"])
    width = max(CURVE_FIGSIZE[0], TRANSFER_PANEL_INCHES * len(learners))
    fig, axes = plt.subplots(1, len(learners), figsize=(width, CURVE_FIGSIZE[1]), sharey=True, squeeze=False,
                             layout="constrained")
    colours = plt.get_cmap(CONDITION_CMAP)(np.linspace(0.0, 0.9, len(conditions)))
    for ax, learner in zip(axes[0], learners):
        for condition, colour in zip(conditions, colours):
            entry = results["summary"]["conditions"][condition]["learners"][learner]
            stat = summary_curve(entry, "target_log_loss", f"{condition} / {learner}")
            label = condition_label(int(condition), backward)
            plot_curve(ax, np.arange(1, len(stat["mean"]) + 1), *mean_and_band(stat), colour, label)
        ax.set_title(learner_label(learner), fontsize="medium")
        ax.set_xlabel("steps since task A returned" if backward else "steps on the held-out target task")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", title="distractors" if backward else "source tasks")
    axes[0, 0].set_ylabel("log-loss (nats)")
    what = "log-loss when task A returns after N distractor tasks" if backward else \
        "log-loss on a held-out target after N source tasks"
    set_title(fig, results, what)
    yield "logloss", fig


def condition_label(n: int, backward: bool) -> str:
    """Legend entry of one condition; N = 0 is the reference without distractors or sources."""
    if n == 0:
        return "0 (no distractor)" if backward else "0 (learned from scratch)"
    return str(n)


def oracle_figures(results: dict) -> Iterator[tuple[str, plt.Figure]]:
    """Binned log-loss over the stream: NCTL against the GLN oracles and plain GLN (paper Figure 5)."""
    seed = first_seed(results)
    fig, ax = plt.subplots(figsize=CURVE_FIGSIZE, layout="constrained")
    for learner, entry in results["summary"]["learners"].items():
        stat = summary_curve(entry, "binned_log_loss", learner)
        plot_curve(ax, seed["learners"][learner]["curve_steps"], *mean_and_band(stat), learner_colour(learner),
                   learner_label(learner))
    ax.set_xlabel("examples seen (first step of each bin)")
    ax.set_ylabel("mean log-loss in the bin (nats)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    set_title(fig, results, "binned log-loss")
    yield "logloss", fig


def regression_figures(results: dict) -> Iterator[tuple[str, plt.Figure]]:
    """Binned MAE over the stream (progressive validation), a dotted line where the concept changes."""
    seed = first_seed(results)
    fig, ax = plt.subplots(figsize=CURVE_FIGSIZE, layout="constrained")
    for learner, entry in results["summary"]["learners"].items():
        stat = summary_curve(entry, "binned_mae", learner)
        plot_curve(ax, seed["learners"][learner]["curve_steps"], *mean_and_band(stat), learner_colour(learner),
                   learner_label(learner))
    for _, start, _ in seed.get("concept_segments", [])[1:]:
        ax.axvline(start, color="black", linestyle=":", linewidth=0.8)
    ax.set_xlabel("rows seen (first row of each bin; dotted: the concept changes)")
    ax.set_ylabel("MAE in the bin (target units)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    set_title(fig, results, "binned MAE, predicted before learned")
    yield "mae", fig


def substrate_figures(results: dict) -> Iterator[tuple[str, plt.Figure]]:
    """The substrate check reports scalars only (see ``nctl report``): no figure."""
    return iter(())


FIGURES = {
    configs.TASK_MATRIX: task_matrix_figures,
    configs.PREQUENTIAL: prequential_figures,
    configs.BACKWARD: transfer_figures,
    configs.FORWARD: transfer_figures,
    configs.ORACLES: oracle_figures,
    configs.SUBSTRATE: substrate_figures,
    configs.REGRESSION: regression_figures,
}
