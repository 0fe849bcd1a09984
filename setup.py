"""Builds the native CPU engine (``nctl.native``) and the JAX engine's CPU kernels (``nctl.core.native``)
into the package when it is installed, so that no process waits for the compiler. Where a build fails the
package installs without that library, and the first process that needs it builds it, or runs on JAX."""

import importlib.util
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

SRC = Path(__file__).parent / "src"
LIBRARIES = {"the native engine": "nctl/native/library.py", "the CPU kernels": "nctl/core/native/__init__.py"}


class BuildWithLibraries(build_py):
    def run(self):
        super().run()
        for what, module in LIBRARIES.items():
            # an editable install runs the sources in place: the library goes beside them
            target = (SRC if self.editable_mode else Path(self.build_lib)) / Path(module).parent
            try:
                print(f"nctl: built {what}: {load_alone(SRC / module).build(target)}")
            except Exception as error:  # no compiler, no jaxlib headers: built or skipped at run time
                print(f"nctl: {what} was not built at install time ({error})")


def load_alone(path: Path):
    """The module at ``path`` loaded from its file, without importing the package it belongs to."""
    spec = importlib.util.spec_from_file_location(f"nctl_build_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WithLibraries(Distribution):
    def has_ext_modules(self):  # a wheel that holds the libraries is for this platform only
        return True


setup(cmdclass={"build_py": BuildWithLibraries}, distclass=WithLibraries)
