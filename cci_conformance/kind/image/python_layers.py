"""The shared layers of every Python driver image: a Debian minbase with python3, and the driver runtime's wheels."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

from ..runner import CommandFailed, run, say
from . import rootfs, versions
from .cache import Step
from .oci_archive import ImageSpec, layer_bytes
from .oci_layers import Layer, gzip_layer, gzip_layer_bytes

# python3 alone: Debian's stdlib split (python3.11, libpython3.11-stdlib) covers what the SDK imports
# (concurrent.futures, json, argparse, threading); debootstrap adds no Recommends.
BASE_PACKAGES = ("python3",)
BASE_RECIPE = 1  # bump when the base recipe below changes
# The distributions the driver runtime imports: grpc (driver_sdk.server, the generated stubs) and
# google.protobuf (the generated messages). Their own requirements follow from their metadata;
# tests/unit/test_python_driver_image.py checks this list against what the SDK really imports.
RUNTIME_DISTRIBUTIONS = ("grpcio", "protobuf")
DEPS_RECIPE = 1
DEPS_DIR = "/opt/python-deps"
# Debian bookworm's glibc is 2.36: every manylinux wheel built for 2.17..2.36 runs on it.
GLIBC_MINOR = 36
PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 16, -1)) + (
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")


def _python_version(root: Path) -> str:
    """``3.11`` from the rootfs's /usr/bin/python3 link (Debian points it at python3.X)."""
    link = root / "usr/bin/python3"
    target = os.readlink(link) if link.is_symlink() else ""
    match = re.fullmatch(r"(?:/usr/bin/)?python(\d+\.\d+)", target)
    if not match:
        raise CommandFailed(f"{link} is not a link to python3.X ({target!r}): the base rootfs has no python3")
    return match.group(1)


def _package_version(root: Path, package: str) -> str:
    status = (root / "var/lib/dpkg/status").read_text()
    match = re.search(rf"^Package: {re.escape(package)}\n(?:.+\n)*?Version: (\S+)", status, re.MULTILINE)
    return match.group(1) if match else "?"


def build_base() -> tuple[Step, Layer]:
    """Debootstrap (or reuse) the python3 minbase as a gzipped layer; its facts hold the Python version."""
    step = Step("python-base", versions.DEBIAN_SUITE, BASE_PACKAGES, rootfs.debian_mirror(), rootfs.TRIMMED_DIRS,
                BASE_RECIPE)
    layer_path = step.dir / "base.tar.gz"
    if step.done:
        return step, Layer.from_facts(layer_path, step.facts())
    work = step.prepare()
    root, log, plain = work / "root", work / "build.log", work / "base.tar"
    say(f"debootstrap {versions.DEBIAN_SUITE} python3 base for Python driver images (log: {log})")
    rootfs.debootstrap(root, BASE_PACKAGES, log)
    rootfs.trim_caches(root)
    python = _python_version(root)
    package = _package_version(root, f"python{python}-minimal")
    root_bytes = sum(f.lstat().st_size for f in root.rglob("*") if not f.is_dir())
    # /dev, /proc and /sys are the runtime's; debootstrap's device nodes would only shadow them.
    run(["tar", "--numeric-owner", "--sort=name", "--mtime=@0", "-C", str(root), "-cf", str(plain),
         "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "."], timeout=600, log=log)
    layer = gzip_layer(plain, layer_path)
    plain.unlink()
    shutil.rmtree(root)
    step.finish(python_version=python, python_package=package, root_bytes=root_bytes, **layer.facts())
    return step, layer


def _target_environment(python_version: str) -> dict[str, str]:
    env = default_environment()
    env.update(python_version=python_version, python_full_version=f"{python_version}.0", sys_platform="linux",
               platform_system="Linux", platform_machine="x86_64", os_name="posix", implementation_name="cpython",
               platform_python_implementation="CPython", extra="")
    return env


def pinned_requirements(python_version: str, roots: tuple[str, ...] = RUNTIME_DISTRIBUTIONS) -> tuple[str, ...]:
    """``name==version`` for ``roots`` and their requirements, at the versions installed in this environment."""
    environment = _target_environment(python_version)
    pins: dict[str, str] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        key = name.lower().replace("_", "-")
        if key in pins:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise CommandFailed(f"the driver runtime needs {name}, which is not installed in the harness's "
                                f"environment ({sys.prefix}); fix: pip install -e . there") from None
        pins[key] = dist.version
        for text in dist.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                pending.append(requirement.name)
    return tuple(f"{name}=={version}" for name, version in sorted(pins.items()))


def _pip_argv(python_version: str, pins: tuple[str, ...], target: Path) -> list[str]:
    abi = "cp" + python_version.replace(".", "")
    argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", python_version, "--abi", abi, "--abi", "abi3",
            "--abi", "none", "--target", str(target)]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    return argv + list(pins)


def build_deps(python_version: str) -> tuple[Step, Layer]:
    """Install (or reuse) the pinned runtime wheels for the image's CPython under DEPS_DIR, as a gzipped layer."""
    pins = pinned_requirements(python_version)
    step = Step("python-deps", python_version, pins, PLATFORMS, DEPS_DIR, DEPS_RECIPE)
    layer_path = step.dir / "deps.tar.gz"
    if step.done:
        return step, Layer.from_facts(layer_path, step.facts())
    work = step.prepare()
    target, log = work / "target", work / "build.log"
    if target.exists():
        shutil.rmtree(target)
    say(f"pip wheels for CPython {python_version} manylinux x86_64: {' '.join(pins)} (log: {log})")
    try:
        run(_pip_argv(python_version, pins, target), timeout=900, log=log, nice=True)
    except CommandFailed as exc:
        missing = re.findall(r"No matching distribution found for (\S+)", str(exc))
        if not missing:
            raise
        raise CommandFailed(
            f"no binary wheel of {', '.join(missing)} for CPython {python_version} manylinux x86_64, the Python "
            f"of the driver image (Debian {versions.DEBIAN_SUITE}); fix: install a version of it in the harness's "
            f"environment that publishes such wheels (log: {log})") from None
    files: dict[str, Path] = {}
    links: dict[str, str] = {}
    for path in sorted(target.rglob("*")):
        inside = f"{DEPS_DIR}/{path.relative_to(target).as_posix()}"
        if path.is_symlink():
            links[inside] = os.readlink(path)
        elif path.is_file() and "__pycache__" not in path.parts:
            files[inside] = path
    layer = gzip_layer_bytes(layer_bytes(ImageSpec(reference="deps:layer", files=files, symlinks=links)),
                             layer_path)
    shutil.rmtree(target)
    step.finish(pins=list(pins), **layer.facts())
    return step, layer
