"""tools/docker-setup/oci-capfilter: capabilities outside the bounding set are dropped before runc runs."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "docker-setup" / "oci-capfilter"


def _module():
    loader = importlib.machinery.SourceFileLoader("oci_capfilter", str(SCRIPT))
    spec = importlib.util.spec_from_loader("oci_capfilter", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_unavailable_caps_follow_the_bounding_set(monkeypatch):
    capfilter = _module()
    monkeypatch.setattr(capfilter, "bounding_set", lambda: (1 << 41) - 1 - (1 << 24))
    assert capfilter.unavailable_caps() == {"CAP_SYS_RESOURCE"}
    monkeypatch.setattr(capfilter, "bounding_set", lambda: (1 << 41) - 1)
    assert capfilter.unavailable_caps() == set()


def test_subcommand_skips_global_options():
    capfilter = _module()
    args = ["--root", "/run/x", "--log", "/l.json", "--systemd-cgroup", "exec", "--process", "/p.json", "id"]
    assert capfilter.subcommand(args) == ("exec", ["--process", "/p.json", "id"])


def test_create_rewrites_bundle_config_then_runs_the_real_runtime():
    capfilter = _module()
    missing = sorted(capfilter.unavailable_caps())
    work = Path(tempfile.mkdtemp(prefix="cci-capfilter-", dir="/tmp"))
    try:
        every = [f"CAP_{name}" for name in capfilter.CAP_NAMES]
        (work / "config.json").write_text(json.dumps({"process": {"capabilities": {"bounding": every,
                                                                                   "effective": every}}}))
        fake = work / "runc"
        fake.write_text(f"#!/bin/sh\necho \"$@\" > {work}/argv\n")
        fake.chmod(0o755)
        subprocess.run([sys.executable, SCRIPT, "--root", "/r", "create", "--bundle", str(work), "cid"],
                       env={"OCI_CAPFILTER_RUNTIME": str(fake)}, check=True, timeout=30)
        caps = json.loads((work / "config.json").read_text())["process"]["capabilities"]
        assert caps["bounding"] == [c for c in every if c not in missing]
        assert (work / "argv").read_text().split() == ["--root", "/r", "create", "--bundle", str(work), "cid"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
