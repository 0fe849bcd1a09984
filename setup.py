"""Builds the engine's CPU kernels into the package when it is installed, so that no process waits for
the compiler (``nctl.core.native``). Where the build fails the package installs without them, and the
first process that needs them builds them or runs the engine's XLA code."""

import importlib.util
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

NATIVE = Path(__file__).parent / "src" / "nctl" / "core" / "native"


class BuildWithKernels(build_py):
    def run(self):
        super().run()
        # an editable install runs the sources in place: the library goes beside them
        target = NATIVE if self.editable_mode else Path(self.build_lib) / "nctl" / "core" / "native"
        try:
            print(f"nctl: built the CPU kernels: {native_module().build(target)}")
        except Exception as error:  # no compiler, no jaxlib headers: the kernels are built or skipped at run time
            print(f"nctl: the CPU kernels were not built at install time ({error})")


def native_module():
    """``nctl.core.native`` loaded from its file, without importing the package it belongs to."""
    spec = importlib.util.spec_from_file_location("nctl_native_build", NATIVE / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WithKernels(Distribution):
    def has_ext_modules(self):  # a wheel that holds the library is for this platform only
        return True


setup(cmdclass={"build_py": BuildWithKernels}, distclass=WithKernels)
