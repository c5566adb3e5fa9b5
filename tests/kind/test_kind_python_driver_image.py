"""The Python driver image for real: built, `docker load`ed, and run on a faked sysfs until it registers."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cci_conformance.drivers.manifest import load_manifest, substitute
from cci_conformance.kind.cluster import toolchain
from cci_conformance.kind.image import nodeimage
from cci_conformance.kind.image.python_driver import build_python_image
from cci_conformance.kind.runner import run
from cci_conformance.topology import library
from cci_conformance.topology.render import render
from cci_conformance.waiting import WaitTimeout, wait_for

pytestmark = pytest.mark.kind

REPO = Path(__file__).resolve().parents[2]
DRIVERS = [REPO / "drivers_under_test" / "reference", REPO / "drivers_under_test" / "mutants" / "off-by-one"]
TOPOLOGY = "server-2s8c-smt2-intel"
INSIDE = "/cci"  # where the run's directories are mounted in the container


@pytest.fixture(scope="module")
def docker_ready():
    problem = toolchain.docker_problem()
    if problem:
        pytest.skip(f"python driver image: {problem}")
    if shutil.which("debootstrap") is None:
        pytest.skip("python driver image: debootstrap is not installed, needed for its base layer")


def _gone(name: str) -> bool:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=^{name}$"], capture_output=True, text=True,
                         timeout=30, check=False).stdout
    return not out.strip()


@pytest.mark.parametrize("folder", DRIVERS, ids=lambda p: p.name)
def test_driver_registers_from_its_image(folder, tmp_path, docker_ready):
    manifest = load_manifest(folder)
    image = build_python_image(manifest)
    run(["docker", "load", "-i", image.archive], timeout=300)
    render(library.load(TOPOLOGY), tmp_path / "machine")
    for part in ("registry", "plugin", "state"):
        (tmp_path / part).mkdir()
    values = manifest.values(registry_dir=f"{INSIDE}/registry", plugin_dir=f"{INSIDE}/plugin",
                             sysfs_root=f"{INSIDE}/machine/sys", state_dir=f"{INSIDE}/state")
    values["python"] = image.python
    argv = [substitute(arg, values) for arg in manifest.command]
    env = {**image.env, **{k: substitute(v, values) for k, v in manifest.env.items()}}
    name = f"cci-pydriver-{os.getpid()}-{folder.name}"
    mounts = ["-v", f"{tmp_path / 'machine'}:{INSIDE}/machine:ro"]
    for part in ("registry", "plugin", "state"):
        mounts += ["-v", f"{tmp_path / part}:{INSIDE}/{part}"]
    socket = tmp_path / "registry" / f"{manifest.name}-reg.sock"
    try:
        run(["docker", "run", "-d", "--rm", "--name", name, "-w", image.working_dir, *mounts,
             *[arg for k, v in env.items() for arg in ("-e", f"{k}={v}")], image.reference, *argv], timeout=120)
        started = time.monotonic()
        try:
            wait_for(socket.is_socket, manifest.startup_timeout_s, interval=0.1,
                     what=f"{socket.name} from {manifest.name} in its image")
        except WaitTimeout as exc:
            logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True, timeout=30, check=False)
            pytest.fail(f"{exc}\ncontainer output:\n{logs.stdout}{logs.stderr}")
        print(f"{manifest.name}: registered {time.monotonic() - started:.1f} s after docker run; "
              f"image built in {image.seconds:.1f} s (reused: {image.reused})")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60, check=False)
        wait_for(lambda: _gone(name), 30, interval=0.2, what=f"container {name} removed")
        subprocess.run(["docker", "rmi", image.reference], capture_output=True, timeout=60, check=False)
    assert _gone(name)


def test_archive_imports_into_the_node_containerd(tmp_path, docker_ready):
    """`kind load image-archive` is `ctr images import` on each node: the same import by the node's containerd."""
    image = build_python_image(load_manifest(DRIVERS[1]))
    listed = nodeimage._import_store([image.archive], tmp_path / "store", tmp_path / "import.log")
    assert image.reference in listed
