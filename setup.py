"""Build hook: a wheel carries the data folders (suites, fixtures, topologies, ...) inside the package."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# The folder list lives in cci_conformance/paths.py (stdlib only), so the runtime and the build agree.
_PATHS = runpy.run_path(str(ROOT / "cci_conformance" / "paths.py"))
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "bin", "*.sock")


class BuildPyWithData(build_py):
    """build_py, then copy the data folders under cci_conformance/_bundled/ (paths.py prefers that copy)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the source tree itself
            return
        dest = Path(self.build_lib) / "cci_conformance" / "_bundled"
        shutil.rmtree(dest, ignore_errors=True)
        for folder in _PATHS["BUNDLED_FOLDERS"]:
            source = ROOT / folder
            if not source.is_dir():
                raise SystemExit(f"setup.py: data folder {source} is missing; build from a full source tree")
            shutil.copytree(source, dest / folder, ignore=IGNORE)
        for name in _PATHS["BUNDLED_FILES"]:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


setup(cmdclass={"build_py": BuildPyWithData})
