"""The objects that put a CCI driver under the patched kubelet on kind, and the readers of what it did."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pytest

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.errors import ConfigError
from cci_conformance.kind.cci import deploy, manifests
from cci_conformance.kind.cci.manifests import CCIDriverDeployment
from cci_conformance.kind.image import go_driver

GO_REFERENCE = Path(__file__).resolve().parents[2] / "drivers_under_test" / "go-reference"
NAME = "go-reference.cci-conformance.io"


@pytest.fixture
def plan():
    return CCIDriverDeployment(load_manifest(GO_REFERENCE), "localhost/cci-conformance/go-reference:abc",
                               "w-worker", NAME)


def test_argv_is_the_manifests_command_with_node_paths(plan):
    assert plan.argv() == [
        "/go-reference", "--registry-dir=/var/lib/kubelet/plugins_registry",
        f"--plugin-dir=/var/lib/kubelet/plugins/{NAME}", "--sysfs-root=/host/sys",
        f"--state-dir=/var/lib/cci-drivers/{NAME}", f"--name={NAME}"]
    assert plan.registration_socket == f"/var/lib/kubelet/plugins_registry/{NAME}-reg.sock"


def test_daemonset_shows_sockets_at_node_paths_and_the_faked_sysfs_read_only(plan):
    ds = manifests.daemonset(plan)
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "w-worker"}
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "Never" and container["command"] == plan.argv()
    volumes = {v["name"]: v["hostPath"] for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    # The kubelet dials the endpoint the driver reports: socket dirs are mounted at the node's own paths.
    for name in ("registry", "plugin", "state"):
        assert volumes[name]["path"] == mounts[name]["mountPath"]
        assert not mounts[name].get("readOnly")
    assert volumes["plugin"]["path"] == f"/var/lib/kubelet/plugins/{NAME}"
    assert volumes["sysfs-cpu"] == {"path": "/sys/devices/system/cpu", "type": "Directory"}
    assert mounts["sysfs-cpu"] == {"name": "sysfs-cpu", "mountPath": "/host/sys/devices/system/cpu", "readOnly": True}
    assert mounts["sysfs-node"]["mountPath"] == "/host/sys/devices/system/node" and mounts["sysfs-node"]["readOnly"]
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]


def test_class_slice_and_claim_fit_together(plan):
    params = {"cores": ["4"], "cpu attributes": [["EXCLUSIVE"]]}
    cls = manifests.device_class(NAME)
    assert cls["spec"]["selectors"][0]["cel"]["expression"] == f'device.driver == "{NAME}"'
    slice_ = manifests.resource_slice(NAME, "w-worker", 31)
    assert slice_["spec"]["driver"] == NAME and slice_["spec"]["nodeName"] == "w-worker"
    assert slice_["spec"]["pool"] == {"name": "w-worker", "generation": 1, "resourceSliceCount": 1}
    assert len({d["name"] for d in slice_["spec"]["devices"]}) == 31
    claim = manifests.resource_claim("c1", NAME, params)
    request = claim["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == cls["metadata"]["name"]
    config = claim["spec"]["devices"]["config"][0]
    # The kubelet keeps the opaque entry of the allocated driver that names the request (or none).
    assert config["requests"] == [request["name"]] and config["opaque"] == {"driver": NAME, "parameters": params}
    pod = manifests.claim_pod("p1", "c1", "w-worker", "pause:3")
    entry = pod["spec"]["resourceClaims"][0]
    assert entry["resourceClaimName"] == "c1"
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": entry["name"]}]}
    assert "nodeName" not in pod["spec"], "DRA allocates only for pods the scheduler places"
    assert [o["kind"] for o in manifests.objects(plan, 3)] == ["DeviceClass", "ResourceSlice", "DaemonSet"]
    assert manifests.handle_of(params) == '{"cores": ["4"], "cpu attributes": [["EXCLUSIVE"]]}'


@pytest.mark.parametrize("name", ["Go-Ref", "a/b", "-x", "x" * 64, "a..b"])
def test_bad_driver_names_are_refused(name):
    with pytest.raises(ConfigError):
        CCIDriverDeployment(load_manifest(GO_REFERENCE), "img:1", "w", name)


def test_untagged_image_and_empty_slice_are_refused():
    with pytest.raises(ConfigError):
        CCIDriverDeployment(load_manifest(GO_REFERENCE), "localhost/img", "w", NAME)
    with pytest.raises(ConfigError):
        manifests.resource_slice(NAME, "w", 0)


def _line(change: dict) -> str:
    body = json.dumps(change, separators=(",", ":"))
    return f"{zlib.crc32(body.encode()) & 0xFFFFFFFF:08x} {body}"


def test_driver_state_log_is_read_and_verified():
    lines = [_line({"set": [{"pod": "u", "container": "c0"}]}), _line({"del": [["u", "c0"]]})]
    assert deploy.driver_state_changes("\n".join(lines) + "\n") == [
        {"set": [{"pod": "u", "container": "c0"}]}, {"del": [["u", "c0"]]}]
    broken = lines[1].replace("c0", "c1")
    with pytest.raises(ValueError, match="line 2: CRC"):
        deploy.driver_state_changes(lines[0] + "\n" + broken)


def test_metric_samples_by_labels():
    text = (
        '# HELP kubelet_cci_admit_duration_seconds x\n'
        'kubelet_cci_admit_duration_seconds_count{driver="d",outcome="admitted"} 3\n'
        'kubelet_cci_admit_duration_seconds_sum{driver="d",outcome="admitted"} 0.012\n'
        'kubelet_cci_admission_duration_seconds_count{outcome="admitted"} 3\n'
        'up 1\n')
    assert deploy.metric_samples(text, "kubelet_cci_admit_duration_seconds_count") == {
        (("driver", "d"), ("outcome", "admitted")): 3.0}
    assert deploy.metric_samples(text, "up") == {(): 1.0}


def test_driver_image_is_the_static_binary_alone(tmp_path):
    binary = tmp_path / "go-reference"
    binary.write_bytes(b"\x7fELF")
    spec = go_driver.image_spec(binary, "k1")
    assert spec.reference == "localhost/cci-conformance/go-reference:k1"
    assert spec.files == {"/go-reference": binary} and spec.entrypoint == ["/go-reference"]
    assert CCIDriverDeployment(load_manifest(GO_REFERENCE), spec.reference, "w", NAME).binary == spec.entrypoint[0]


def test_driver_image_key_follows_the_driver_sources(tmp_path, monkeypatch):
    copy = tmp_path / "drivers_under_test" / "go-reference"  # its go.mod replaces the API with ../../api
    copy.mkdir(parents=True)
    for name in ("go.mod", "go.sum", "main.go"):
        (copy / name).write_text((GO_REFERENCE / name).read_text())
    shutil.copytree(GO_REFERENCE.parents[1] / "api", tmp_path / "api")
    monkeypatch.setattr(go_driver, "DRIVER_SOURCE", copy)
    monkeypatch.setattr(go_driver.gobuild, "go_version", lambda: "go1.99")
    first = go_driver._inputs()
    (copy / "main_test.go").write_text("package main\n")  # tests are not part of the binary
    assert go_driver._inputs() == first
    (copy / "main.go").write_text((copy / "main.go").read_text() + "\n// changed\n")
    assert go_driver._inputs() != first
    changed = go_driver._inputs()
    api_go = next((tmp_path / "api").rglob("*.go"))
    api_go.write_text(api_go.read_text() + "\n// changed\n")  # the replaced module is an input too
    assert go_driver._inputs() != changed
