"""The certification bundle directory: its layout, the environment record and the driver manifest copy."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
from importlib import metadata
from pathlib import Path

from .. import __version__

# Layout of a report directory (docs/certification.md "Bundle layout").
REPORT_JSON = "report.json"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"
ENVIRONMENT_JSON = "environment.json"
PYTEST_LOG = "pytest.log"
DRIVER_DIR = "driver"
SESSIONS_DIR = "sessions"  # one folder per node session: logs and state files at the end of its life
EVIDENCE_DIR = "evidence"  # one folder per failed test: what the sessions held when it failed
MEASUREMENTS_DIR = "measurements"  # a latency measurement per machine: its samples, shared by the run's workers
PACKAGES = ("cci-conformance", "pytest", "pytest-xdist", "grpcio", "protobuf", "hypothesis", "jsonschema", "PyYAML")


def slug(text: str, limit: int = 80) -> str:
    """A file-name-safe, readable, bounded form of a test id or label."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.")
    if len(cleaned) <= limit:
        return cleaned or "_"
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{cleaned[: limit - 9]}-{digest}"


def evidence_dir(report_dir: Path, nodeid: str) -> Path:
    return Path(report_dir) / EVIDENCE_DIR / slug(nodeid)


def sessions_dir(report_dir: Path, label: str) -> Path:
    return Path(report_dir) / SESSIONS_DIR / slug(label)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """Where the run happened: interpreter, platform, kernel, CPUs, package versions."""
    uname = platform.uname()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "kernel": f"{uname.system} {uname.release} {uname.version}",
        "machine": uname.machine,
        "cpu_count": os.cpu_count(),
        "packages": {name: _version(name) for name in PACKAGES},
        "harness_version": __version__,
    }


def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


# Never part of what a driver is: interpreter and tool caches the run itself may write into the folder.
DIGEST_SKIP_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})
DIGEST_SKIP_SUFFIXES = (".pyc", ".pyo")


def folder_digest(folder: Path) -> dict | None:
    """sha256 over the folder's files in sorted relative-path order, each as ``path NUL size NUL content``.

    The driver's command runs in its manifest's folder, so this identifies what ran on the embedded
    backend (a certificate naming only the YAML would also fit a changed driver). None when unreadable.
    """
    folder = Path(folder)
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in DIGEST_SKIP_DIRS)
        files += [Path(root) / n for n in names if not n.endswith(DIGEST_SKIP_SUFFIXES)]
    digest = hashlib.sha256()
    try:
        for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()):
            digest.update(f"{path.relative_to(folder).as_posix()}\0{path.stat().st_size}\0".encode())
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
    except OSError:
        return None
    return {"algorithm": "sha256", "of": "folder", "value": digest.hexdigest(), "files": len(files)}


def copy_manifest(report_dir: Path, manifest_path: Path) -> Path | None:
    """Copy the driver manifest into the bundle (the certified driver is identified by it and its hash)."""
    source = Path(manifest_path)
    if source.is_dir():
        source = source / "driver.yaml"
    if not source.is_file():
        return None
    dest = Path(report_dir) / DRIVER_DIR / source.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, dest)
    return dest


def relative(path: Path, report_dir: Path) -> str:
    """A path as report.json stores it: relative to the report directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path(report_dir).resolve()))
    except ValueError:
        return str(path)
