"""The documents link only to files that are in the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("document", ["README.md", "docs/RESULTS.md", "docs/performance.md", "docs/index.md"])
def test_every_local_link_points_to_a_file(document):
    path = ROOT / document
    targets = [t for t in LINK.findall(path.read_text()) if not t.startswith(("http://", "https://"))]
    assert targets, f"{document} links to nothing"
    missing = [t for t in targets if not (path.parent / t).exists()]
    assert not missing, f"{document} links to missing files: {missing}"
