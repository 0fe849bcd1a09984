"""The documentation site builds with ``mkdocs build --strict``: every page in the navigation exists,
every link and API object resolves, and docstring examples are rendered as code."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MISSING = [name for name in ("mkdocs", "material", "mkdocstrings") if importlib.util.find_spec(name) is None]


@pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed (pip install -e '.[docs]')")
def test_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    sklearn_page = (site / "api-sklearn" / "index.html").read_text()
    assert 'id="nctl.sklearn.NCTLClassifier.partial_fit"' in sklearn_page
    assert '<span class="gp">&gt;&gt;&gt; </span>' in sklearn_page and "<blockquote>" not in sklearn_page
    assert (site / "figures" / "boundaries.png").exists()
    for page in ("api-river", "api-sklearn"):  # the adapters' signatures show the values of their defaults
        text = re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text())
        assert "layer_sizes: tuple = (4, 1)" in text and "TABULAR[" not in text
    for page in site.glob("api-*/index.html"):  # mkdocs leaves the anchors of links in docstrings unchecked
        for target, anchor in re.findall(r'href="\.\./([\w-]+)/#([^"]+)"', page.read_text()):
            assert f'id="{anchor}"' in (site / target / "index.html").read_text(), (page.parent.name, target, anchor)
