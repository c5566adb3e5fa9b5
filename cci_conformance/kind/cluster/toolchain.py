"""Where the kind and kubectl binaries come from (the build cache) and whether this host can run kind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..image import components, gobuild, versions


def kind_binary(release: versions.Release = versions.CCI) -> Path:
    """The kind that creates this release's clusters (it writes the kubeadm config that release reads)."""
    return gobuild.build(components.for_release(release).kind) / "kind"


def built_kind_binary(release: versions.Release = versions.CCI) -> Path | None:
    """The kind binary when it was built before, else None (no build, no Go needed: None without one)."""
    try:
        found = gobuild.built(components.for_release(release).kind)
    except (OSError, RuntimeError):  # no go toolchain to ask its version: nothing of ours was built here
        return None
    return found / "kind" if found else None


def kubectl_binary(release: versions.Release = versions.CCI) -> Path:
    return gobuild.build(components.for_release(release).kubernetes) / "kubectl"


def docker_problem() -> str | None:
    """Why docker cannot run kind nodes here, or None when it can."""
    if shutil.which("docker") is None:
        return "docker is not installed (see tools/docker-setup)"
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "docker info did not answer within 20 s"
    if proc.returncode != 0:
        return "dockerd is not running (start it with tools/docker-setup/setup.sh)"
    return None


def build_problem() -> str | None:
    """Why the node image cannot be built here, or None."""
    for tool in ("go", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed, needed to build the node image"
    return None
