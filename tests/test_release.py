"""What a release carries: one version everywhere, its own name on the package index, a licence, a
citation, and no document that installs someone else's package."""

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

import nctl

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_one_version_for_the_package_the_command_and_the_distribution():
    assert importlib.metadata.version("nctl-learn") == nctl.__version__
    shown = subprocess.run([sys.executable, "-m", "nctl.cli", "--version"], capture_output=True, text=True, timeout=120)
    assert shown.stdout.strip() == f"nctl {nctl.__version__}"
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["version"] == nctl.__version__ and citation["license"] == "Apache-2.0"
    assert f"## {nctl.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_the_distribution_is_ours_and_no_document_installs_the_index_s_nctl():
    """``nctl`` on the package index is an unrelated project: the distribution has its own name, and no
    document tells a user to ``pip install nctl`` (or ``nctl[extra]``) from the index."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "nctl-learn" and project["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    index_install = re.compile(r"pip install\s+(-U\s+)?[\"']?nctl(\[[^\]]*\])?[\"']?(\s|$|`)")
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            assert not index_install.search(line), f"{document.name}:{number} installs the index's nctl: {line}"
