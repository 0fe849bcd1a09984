"""Results files -> markdown tables: our numbers (mean, std, 95% CI, seeds) beside the anchors.

Results files store an undefined number as null; files of earlier versions hold bare ``NaN`` tokens
instead. Both read the same: as NaN wherever a number is expected.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from nctl.evaluate import summarize_seeds
from nctl.experiments import configs, schema
from nctl.experiments.run import RESULTS, STORED_SEED, stored_results

PERCENT_METRICS = {"acc", "bwt", "fwt", "forgetting", "aia", "learning_acc", "accuracy", "test_accuracy",
                   "recurring_accuracy"}
LEARNER_NAMES = {"nctl": "NCTL", "nctl-grid": "NCTL (split grid)", "gln": "GLN", "ewc": "EWC", "online-ewc": "Online EWC", "mlp": "MLP",
                 "no-change": "No-change", "oracle-1": "Oracle 1 (boundaries)",
                 "oracle-2": "Oracle 2 (boundaries + identities)"}
HEADLINE_METRICS = {configs.TASK_MATRIX: ("acc", "bwt"), configs.PREQUENTIAL: ("accuracy", "log_loss"),
                    configs.ORACLES: ("log_loss",), configs.SUBSTRATE: ("test_accuracy",),
                    configs.REGRESSION: ("mae", "log_likelihood")}
RATE_METRICS = {"examples_per_s"}  # shown as whole numbers
# a regression row of every learner, "-" where the learner has none (a river model's log-likelihood: it
# gives no predictive distribution); recurring_mae only on streams whose concepts are known to recur
REGRESSION_METRICS = ("mae", "rmse", "log_likelihood", "examples_per_s")
ANCHOR_FOR = {"NCTL": "NCTL (paper", "EWC": "EWC", "Online EWC": "Online EWC", "No-change": "No-change",
              "river:alma": "river ALMA", "river:leveraging_bagging": "river Leveraging",
              "river:adaptive_random_forest": "river Adaptive Random", "river:hoeffding_adaptive_tree": "river Hoeffding",
              "river:logistic_regression": "river logistic"}


def load(path: str | Path) -> dict:
    """A results file, or the ``results.json`` in a folder; ValueError naming a file that is not one,
    and the first field that is missing or of the wrong type (``nctl.experiments.schema``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}")
    try:
        results = schema.read_json(path)
        schema.check(results)
    except ValueError as error:
        raise ValueError(f"{path} is unreadable ({error}); run its experiment again to rebuild it") from error
    return results


def load_all(paths: Iterable[str | Path]) -> list[tuple[str, dict]]:
    """(where from, results) of each results file in ``paths`` (or folder holding one), then of each
    configuration of the seed files in ``paths`` (seed stores' files, or folders of them), merged
    (``run.stored_results``): the seeds of separate runs in one table."""
    loaded, seed_files = [], []
    for path in map(Path, paths):
        if path.is_dir() and not (path / RESULTS).exists():
            found = sorted(p for p in path.glob("*-seed-*.json") if STORED_SEED.fullmatch(p.name))
            if not found:
                raise FileNotFoundError(f"no results file or seed files in {path}")
            seed_files += found
        elif path.is_file() and STORED_SEED.fullmatch(path.name):
            seed_files.append(path)
        else:
            loaded.append((str(path), load(path)))
    for results in stored_results(dict.fromkeys(p.resolve() for p in seed_files)):
        loaded.append((f"the seed files of {results['experiment']} ({results['config_hash']})", results))
    return loaded


def _number(value) -> float:
    """A stored number as a float: null (an undefined number) is NaN."""
    return math.nan if value is None else float(value)


def _fmt(stat: dict | None, metric: str) -> tuple[str, str, str]:
    """(mean, std, 95% CI) as text; accuracies in percent."""
    if not stat:
        return "-", "-", "-"
    scale = 100.0 if metric in PERCENT_METRICS else 1.0
    digits = 2 if scale == 100.0 else 0 if metric in RATE_METRICS else 4
    mean, std, low, high = (_number(stat[key]) * scale for key in ("mean", "std", "ci_low", "ci_high"))
    if stat["n"] < 2:
        return f"{mean:.{digits}f}", "-", "-"
    return f"{mean:.{digits}f}", f"{std:.{digits}f}", f"[{low:.{digits}f}, {high:.{digits}f}]"


def _anchor(results: dict, metric: str, learner: str) -> str:
    anchors = results["config"].get("anchors", {}).get(metric, {})
    name = LEARNER_NAMES.get(learner, learner)
    prefix = ANCHOR_FOR.get(learner, ANCHOR_FOR.get(name))
    hits = [f"{k}: {v}" for k, v in anchors.items() if prefix and k.startswith(prefix)]
    return "; ".join(hits) or "-"


def rows(results: dict) -> list[dict[str, Any]]:
    """One row per (learner, variant or condition, metric) of a results file: its numbers as text
    (``mean``, ``std``, ``ci95``) and as stored (``stat``: mean, std, ci_low, ci_high, n; or None)."""
    kind, summary, out = results["kind"], results["summary"], []

    def add(learner, variant, metric, stat):
        mean, std, ci = _fmt(stat, metric)
        out.append({"experiment": results["experiment"], "learner": LEARNER_NAMES.get(learner, learner),
                    "variant": variant, "metric": metric, "mean": mean, "std": std, "ci95": ci,
                    "seeds": results["n_seeds"], "anchor": _anchor(results, metric, learner), "stat": stat})

    if kind == configs.TASK_MATRIX:
        for learner, entry in summary.get("learners", {}).items():
            for variant, metrics in entry["variants"].items():
                for metric in ("acc", "bwt", "forgetting"):
                    add(learner, variant, metric, metrics.get(metric))
                add(learner, variant, "learning_acc", _learning_accuracy(results["seeds"], learner, variant))
    elif kind in (configs.PREQUENTIAL, configs.ORACLES, configs.SUBSTRATE):
        metrics = {configs.PREQUENTIAL: ("accuracy", "log_loss", "kappa_temporal", "recurring_log_loss"),
                   configs.ORACLES: ("log_loss", "accuracy"), configs.SUBSTRATE: ("test_accuracy",)}[kind]
        for learner, entry in summary.get("learners", {}).items():
            for metric in metrics:
                if metric in entry:
                    add(learner, "prequential" if kind != configs.SUBSTRATE else "test set", metric, entry[metric])
        if kind == configs.ORACLES:  # the claim is per sequence: each rival's log loss minus NCTL's
            for learner in summary.get("learners", {}):
                if learner != "nctl":
                    gaps = [_number(seed["learners"][learner]["log_loss"])
                            - _number(seed["learners"]["nctl"]["log_loss"]) for seed in results["seeds"]]
                    add(learner, "paired, minus NCTL", "log_loss_gap", _over_sequences(gaps))
    elif kind == configs.REGRESSION:
        for learner, entry in summary.get("learners", {}).items():
            for metric in REGRESSION_METRICS + (("recurring_mae",) if "recurring_mae" in entry else ()):
                add(learner, "progressive", metric, entry.get(metric))
    else:  # transfer curves: mean log-loss over the first steps of the target, per condition
        for condition, entry in summary.get("conditions", {}).items():
            label = "distractors" if kind == configs.BACKWARD else "sources"
            for learner, curves in entry["learners"].items():
                window = len(curves["target_log_loss"]["mean"])
                for first in sorted({n for n in (10, 30) if n < window} | {window}):
                    add(learner, f"{condition} {label}", f"log_loss_first_{first}",
                        _early_loss(results["seeds"], condition, learner, first))
    return out


def headline_rows(results: dict) -> list[dict[str, Any]]:
    """The rows of each kind's headline metrics (``HEADLINE_METRICS``); for the transfer kinds, the
    mean log loss over each curve's whole window (the last row of each learner and condition)."""
    if results["kind"] in HEADLINE_METRICS:
        return [row for row in rows(results) if row["metric"] in HEADLINE_METRICS[results["kind"]]]
    return list({(row["learner"], row["variant"]): row for row in rows(results)}.values())


def _early_loss(seed_results: list[dict], condition: str, learner: str, first: int) -> dict | None:
    """Per sequence, the mean target log-loss over its first ``first`` steps, (1/first) sum_{t<first} l_t;
    then mean, std and 95% CI of that number over sequences."""
    return _over_sequences([np.mean(np.asarray(curve[:first], dtype=float)) for seed in seed_results
                            if len(curve := seed["conditions"][condition]["learners"][learner]["target_log_loss"])
                            >= first])


def _learning_accuracy(seed_results: list[dict], learner: str, variant: str) -> dict | None:
    """Per seed, (1/T) sum_i R[i, i]: each task's accuracy right after its own segment, averaged (the
    ACC that no forgetting would give); then mean, std and 95% CI over seeds."""
    return _over_sequences([np.mean(np.diag(np.asarray(seed["learners"][learner]["variants"][variant]["matrix"],
                                                       dtype=float))) for seed in seed_results])


def per_task_lines(results: dict) -> list[str]:
    """For a task-matrix results file, a markdown table per learner and variant of each task's accuracy
    (%) after the last segment (the last row of R) and right after its own segment (the diagonal),
    mean over seeds."""
    if results["kind"] != configs.TASK_MATRIX or not results["summary"]:
        return []
    learners = results["summary"]["learners"]
    n_tasks = len(results["seeds"][0]["tasks"])
    lines = ["| experiment | learner | variant | accuracy on each task | "
             + " | ".join(f"task {j + 1}" for j in range(n_tasks)) + " |", "|" + "---|" * (n_tasks + 4)]
    for learner, entry in learners.items():
        for variant, metrics in entry["variants"].items():
            if "matrix" not in metrics:  # the seeds' matrices differ in shape
                continue
            R = np.asarray(metrics["matrix"]["mean"], dtype=float) * 100.0
            for label, values in (("after the last task", R[-1]), ("right after its own", np.diag(R))):
                lines.append(f"| {results['experiment']} | {LEARNER_NAMES.get(learner, learner)} | {variant} | "
                             f"{label} | " + " | ".join(f"{v:.1f}" for v in values) + " |")
    return lines


def cost_line(results: dict) -> str:
    """One markdown row: seeds, wall time per seed (mean, min-max) and the largest peak resident
    memory over the seeds (results files from before it was recorded show -)."""
    walls = [seed["wall_s"] for seed in results["seeds"] if seed.get("wall_s") is not None]
    peaks = [seed["peak_rss_bytes"] for seed in results["seeds"] if seed.get("peak_rss_bytes")]
    wall = f"{np.mean(walls):,.0f} | {min(walls):,.0f}-{max(walls):,.0f}" if walls else "- | -"
    peak = f"{max(peaks) / 1e9:.1f}" if peaks else "-"
    return f"| {results['experiment']} | {len(results['seeds'])} | {wall} | {peak} |"


def cost_total(results_list: list[dict]) -> str:
    """The cost table's last row: every seed's wall time summed (one core per seed, as the runs were
    made), so the whole set reruns in about that divided by the workers running side by side."""
    walls = [seed["wall_s"] for results in results_list for seed in results["seeds"] if seed.get("wall_s") is not None]
    peaks = [seed["peak_rss_bytes"] for results in results_list for seed in results["seeds"] if seed.get("peak_rss_bytes")]
    peak = f"{max(peaks) / 1e9:.1f}" if peaks else "-"
    return f"| all | {len(walls)} | {sum(walls):,.0f} in all ({sum(walls) / 3600:.1f} h) | - | {peak} |"


def _over_sequences(values: list[float]) -> dict | None:
    """Mean, std and 95% CI of one number per sequence (seed)."""
    if not values:
        return None
    stats = summarize_seeds(np.asarray(values))
    return {"mean": float(stats.mean), "std": float(stats.std), "ci_low": float(stats.low),
            "ci_high": float(stats.high), "n": len(values)}


def markdown(results_list: Iterable[dict]) -> str:
    """A markdown table of every results file, the per-task accuracies of task-matrix files, then the
    anchors each experiment is compared with."""
    results_list = list(results_list)
    header = "| experiment | learner | variant | metric | mean | std | 95% CI | seeds | anchor |"
    lines = [header, "|" + "---|" * 9]
    anchors = []
    for results in results_list:
        for row in rows(results):
            lines.append("| " + " | ".join(str(row[k]) for k in
                                           ("experiment", "learner", "variant", "metric", "mean", "std", "ci95",
                                            "seeds", "anchor")) + " |")
        for metric, table in results["config"].get("anchors", {}).items():
            listed = ", ".join(f"{k} {v}" for k, v in table.items())
            line = f"- {results['experiment']} {metric}: {listed}"
            if line not in anchors:
                anchors.append(line)
    for results in results_list:
        per_task = per_task_lines(results)
        if per_task:
            lines += ["", *per_task]
    lines += ["", "| experiment | seeds | wall s per seed | min-max | peak memory GB |", "|---|---|---|---|---|",
              *(cost_line(results) for results in results_list), cost_total(results_list)]
    if anchors:
        lines += ["", "Anchors (docs/protocols.md; accuracies in %):", *anchors]
    return "\n".join(lines) + "\n"
