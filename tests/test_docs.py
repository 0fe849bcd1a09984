"""The documents keep to their files: every relative link resolves (to a file, and to a heading where it
names one), every table row has its header's number of cells, and every number in README's tables
equals the results file its row links, rounded as printed."""

import json
import math
import re
from pathlib import Path

import pytest

from nctl.experiments import report

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
CODE = re.compile(r"`[^`]*`")


def prose(text: str) -> list[str]:
    """The lines of a Markdown document outside fenced code blocks (blank lines in their place)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return lines


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs (the toc extension) and GitHub make it."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in prose(path.read_text()) if re.match(r"#{1,6} ", line)}


def local_links(path: Path) -> list[str]:
    text = "\n".join(CODE.sub("", line) for line in prose(path.read_text()))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_local_link_points_to_a_file_and_heading(document):
    path = ROOT / document
    missing = []
    for target in local_links(path):
        name, _, anchor = target.partition("#")
        file = (path.parent / name) if name else path
        if not file.exists():
            missing.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            missing.append(target)
    assert not missing, f"{document} links to missing files or headings: {missing}"


def cells(row: str) -> list[str]:
    """A table row's cells: pipes inside code spans and escaped pipes do not separate cells."""
    row = CODE.sub(lambda m: m.group(0).replace("|", "x"), row.strip()).replace("\\|", "x")
    return [c.strip() for c in row.strip("|").split("|")]


def tables(path: Path) -> list[list[list[str]]]:
    """Each Markdown table of a document as rows of cells, its header first (the delimiter row dropped)."""
    found, current = [], None
    for line in prose(path.read_text()) + [""]:
        if line.lstrip().startswith("|"):
            if current is None:
                current = []
                found.append(current)
            current.append(cells(line))
        else:
            current = None
    return [[table[0]] + table[2:] for table in found if len(table) > 1]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_table_row_has_its_headers_cells(document):
    bad = [(table[0][0], row[0][:60], len(table[0]), len(row))
           for table in tables(ROOT / document) for row in table[1:] if len(row) != len(table[0])]
    assert not bad, f"{document}: rows whose cell count differs from their header's: {bad}"


def test_tables_are_found_and_checked():
    """The table checks read tables: a Markdown change that hid them would fail here."""
    readme = tables(ROOT / "README.md")
    assert [t[0][0] for t in readme] == ["experiment", "what"]
    assert cells("| a | `b | c` | d \\| e |") == ["a", "`b x c`", "d x e"]
    assert slug("8.4 Defaults") == "84-defaults" and slug("Deskewed digits (a named variant)") == \
        "deskewed-digits-a-named-variant"


# README's tables: the columns whose numbers come from the linked results files
CHECKED = {"paper's NCTL", "nctl", "best anchors", "result", "measured"}
NUMBER = re.compile(r"(?<![\w.^=])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?!\d|\.\d|\^)(x\b)?")


def numbers(cell: str) -> list[tuple[str, bool]]:
    """The numbers printed in a cell (code spans and links' targets left out), as printed, less commas;
    each with whether it is a ratio ("1.8x", both ends of "1.02-1.16x")."""
    text = re.sub(r"\]\([^)]*\)", "]", CODE.sub("", cell))
    text = re.sub(r"(\d)-(\d[\d.,]*x\b)", r"\1x-\2", text)
    return [(whole.replace(",", "") + (f".{frac}" if frac else ""), bool(ratio))
            for whole, frac, ratio in NUMBER.findall(text)]


def leaves(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return [float(value)]
    return []


def experiment_values(path: Path) -> tuple[list[float], list[float]]:
    """A results file's (or seed store's) numbers as the tables print them: each learner's means and
    interval ends (accuracies in %), the anchors, the ratios of the learners' speeds, and each seed's
    wall time in minutes and peak memory in GB; and apart, the ratios."""
    values, ratios = [], []
    for _, results in report.load_all([path]):
        speeds = []
        for row in report.rows(results):
            stat = row["stat"]
            if not stat:
                continue
            scale = 100.0 if row["metric"] in report.PERCENT_METRICS else 1.0
            values += [report._number(stat[k]) * scale for k in ("mean", "ci_low", "ci_high")]
            if row["metric"] == "examples_per_s":
                speeds.append(report._number(stat["mean"]))
        values += leaves(results["config"].get("anchors", {}))
        ratios += [a / b for a in speeds for b in speeds if b]
        costs = [s.get(k) for s in results["seeds"] for k in ("wall_s", "peak_rss_bytes")]
        values += [x * k for x in costs if x for k in (1 / 60, 1e-9)]  # minutes, GB
    return values, ratios


def file_values(path: Path) -> tuple[list[float], list[float]]:
    """A benchmark's results file (or a folder of them): every number it holds, and each in the units
    a document prints it in (seconds as minutes, bytes and MB as GB, fractions as %); its ratios are
    among its numbers (``step_time_over_floor``, ``over_arf``)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    raw = [x for f in files for x in leaves(json.loads(f.read_text()))]
    return [x * k for x in raw for k in (1.0, 1 / 60, 1e-9, 1e-3, 100.0)], raw


def linked_values(row: list[str]) -> tuple[list[float], list[float]]:
    values, ratios = [], []
    for target in {t for cell in row for t in LINK.findall(cell)}:
        target = target.partition("#")[0]
        path = ROOT / target
        if not target.startswith("docs/results/") or not path.exists():
            continue
        is_experiment = path.is_dir() and any(path.glob("*-seed-*.json")) or (
            path.is_file() and "summary" in json.loads(path.read_text()))
        found = experiment_values(path) if is_experiment else file_values(path)
        values, ratios = values + found[0], ratios + found[1]
    return values, ratios


def printed(value: float, like: str) -> str:
    digits = len(like.partition(".")[2])
    return f"{value:.{digits}f}"


README_ROWS = [(t[0], row) for t in tables(ROOT / "README.md") for row in t[1:]
               if any(LINK.findall(c) and "docs/results/" in c for c in row)]


def test_readme_tables_link_results_files():
    assert len(README_ROWS) >= 15, "README's result and speed tables link their results files"


@pytest.mark.parametrize("header,row", README_ROWS, ids=[re.sub(r"\W+", "-", r[0][:40]) for _, r in README_ROWS])
def test_readme_numbers_equal_their_results_files(header, row):
    values, ratios = linked_values(row)
    assert values, f"{row[0]}: no results file read"
    wrong = []
    for name, cell in zip(header, row):
        if name not in CHECKED:
            continue
        shown = re.sub(r"missed by [\d.]+", "", cell)
        for number, ratio in numbers(shown):
            if not any(printed(v, number) == number for v in (ratios if ratio else values)):
                wrong.append((name, number))
    assert not wrong, f"{row[0]}: numbers not in the linked results files (as printed): {wrong}"
    by = dict(zip(header, row))
    missed = re.search(r"missed by ([\d.]+)", by.get("result", ""))
    if missed:  # the shortfall is the distance from NCTL's number to the first number it is compared to
        ours = numbers(by["nctl"])[0][0]
        theirs = (numbers(by["paper's NCTL"]) or numbers(by["best anchors"]))[0][0]
        ours_v = [v for v in values if printed(v, ours) == ours]
        theirs_v = [v for v in values if printed(v, theirs) == theirs] or [float(theirs)]
        gaps = {printed(abs(a - b), missed.group(1)) for a in ours_v for b in theirs_v}
        assert missed.group(1) in gaps, f"{row[0]}: missed by {missed.group(1)}, the files give {sorted(gaps)}"
