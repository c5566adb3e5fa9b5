"""What a kind run must not leave behind: node containers, networks, clusters or scratch dirs under its prefix."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from cci_conformance.kind.cluster import toolchain
from cci_conformance.kind.cluster.lifecycle import CLUSTER_MARKER, WORKDIR_PREFIX


def docker_words(*args: str) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=True, timeout=60).stdout
    return out.split()


def assert_nothing_left(prefix: str) -> None:
    assert docker_words("ps", "-aq", "--filter", f"name={prefix}") == [], "node containers left"
    assert [n for n in docker_words("network", "ls", "--format", "{{.Name}}") if n.startswith(prefix)] == []
    clusters = subprocess.run([str(toolchain.kind_binary()), "get", "clusters"], capture_output=True, text=True,
                              check=False, timeout=60).stdout.split()
    assert [c for c in clusters if c.startswith(prefix)] == []
    ours = [d for d in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*")
            if (d / CLUSTER_MARKER).is_file() and (d / CLUSTER_MARKER).read_text().startswith(prefix)]
    assert ours == [], f"scratch dirs left: {ours}"
