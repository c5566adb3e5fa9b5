"""Node profile validation and the CCI manager's checks of CCIAdmit replies."""

from __future__ import annotations

import json

import pytest
import yaml

from cci_conformance.errors import ConfigError
from cci_conformance.node import cci
from cci_conformance.node.cci import Rejection
from cci_conformance.node.profile import load_config, parse_config
from cci_conformance.paths import PROFILES_DIR
from cci_conformance.protocol.claims import parse_claim
from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb
from cci_conformance.topology.model import CPU, NumaNode, Topology

# 4 cores x 2 threads: siblings (0,4) (1,5) (2,6) (3,7)
TOPO = Topology("t", tuple(CPU(i, 0, 0, i % 4, 0) for i in range(8)), (NumaNode(0, frozenset(range(8)), 1, (10,)),))


@pytest.mark.parametrize("path", sorted((PROFILES_DIR / "node").glob("*.yaml")))
def test_shipped_profiles_load(path):
    cfg = parse_config(yaml.safe_load(path.read_text()), str(path))
    assert cfg.mode in ("alpha", "coexistence")


@pytest.mark.parametrize("data, field", [
    ({"mode": "beta"}, "mode"),
    ({"mode": "alpha", "cpuManagerPolicy": "static"}, "cpuManagerPolicy"),
    ({"mode": "coexistence", "cpuManagerPolicy": "none"}, "cpuManagerPolicy"),
    ({"mode": "alpha", "reservedSystemCPUs": "0-"}, "reservedSystemCPUs"),
    ({"mode": "alpha", "reservedSystemCPUs": 0}, "reservedSystemCPUs"),
    ({"mode": "coexistence", "cpuManagerPolicyOptions": {"full-pcpus-only": True}}, "full-pcpus-only"),
    ({"mode": "coexistence", "cpuManagerPolicyOptions": {"align-by-socket": "true"}}, "align-by-socket"),
    ({"mode": "alpha", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}, "cpuManagerPolicyOptions"),
    ({"mode": "alpha", "rpcTimeoutSeconds": 0}, "rpcTimeoutSeconds"),
    ({"mode": "alpha", "cci": "yes"}, "cci"),
    ({"mode": "alpha", "surprise": 1}, "surprise"),
    ({"mode": "alpha", "kubeletRoot": "relative"}, "kubeletRoot"),
])
def test_bad_profiles_name_the_field(data, field):
    with pytest.raises(ConfigError) as info:
        parse_config(data, "p.yaml")
    assert field in str(info.value) and "fix:" in str(info.value) and "p.yaml" in str(info.value)


def test_missing_paths_and_bad_yaml(tmp_path):
    f = tmp_path / "n.yaml"
    f.write_text("mode: alpha\n")
    with pytest.raises(ConfigError, match="kubeletRoot: missing path"):
        load_config(f)
    f.write_text("mode: [alpha\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(f)


def test_a_json_config_loads_like_its_yaml_and_bad_json_names_the_file(tmp_path):
    data = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "kubeletRoot": str(tmp_path / "k"), "sysfsRoot": str(tmp_path / "s"), "runtimeRoot": str(tmp_path / "r")}
    as_yaml, as_json = tmp_path / "n.yaml", tmp_path / "n.json"
    as_yaml.write_text(yaml.safe_dump(data))
    as_json.write_text(json.dumps(data))
    assert load_config(as_json) == load_config(as_yaml)
    as_json.write_text('{"mode": "alpha",')
    with pytest.raises(ConfigError, match="not valid JSON") as info:
        load_config(as_json)
    assert str(as_json) in str(info.value) and "fix:" in str(info.value)


def reply(cpuset="", exclusive=True, err="", groups=(), no_rset=False):
    r = pb.AdmitResponse(err=err, groups=[pb.ResourceSet(cpuset=c, exclusive=e) for c, e in groups])
    if not no_rset:
        r.rSet.CopyFrom(pb.ResourceSet(cpuset=cpuset, exclusive=exclusive))
    return r


AVAIL = frozenset({1, 2, 3, 5, 6, 7})


@pytest.mark.parametrize("resp, reason, text", [
    (reply(err="no room"), cci.CCI_ADMIT_ERROR, "no room"),
    (reply("1-2", err="no room"), cci.CCI_ADMIT_ERROR, "no room"),
    (reply(no_rset=True), cci.INVALID_REPLY, "neither err nor rSet"),
    (reply("1-x"), cci.INVALID_REPLY, "not a cpulist"),
    (reply(""), cci.INVALID_REPLY, "empty"),
    (reply("0-1"), cci.INVALID_REPLY, "not within availableCpus"),
    (reply("1-3", groups=[("1-2", True)]), cci.INVALID_REPLY, "union of groups"),
    (reply("1-3", groups=[("1-2", True), ("2-3", False)]), cci.INVALID_REPLY, "overlap"),
])
def test_bad_replies_rejected(resp, reason, text):
    with pytest.raises(Rejection) as info:
        cci.validate(resp, AVAIL, None, TOPO)
    assert info.value.reason == reason and text in info.value.message
    assert info.value.driver_may_hold == (reason != cci.CCI_ADMIT_ERROR)


def test_groups_and_denied_siblings():
    claim = parse_claim({"cores": ["1", "2"], "cpu attributes": [["EXCLUSIVE", "CORE-SIBLING-DENIED"], ["SHARED"]]})
    g = cci.validate(reply("1,3,7", groups=[("1", True), ("3,7", False)]), AVAIL, claim, TOPO)
    assert g.exclusive == {1} and g.withheld == {5} and g.shared == {3, 7}
    with pytest.raises(Rejection, match="siblings '4' are not free"):  # 0's sibling 4 is held by someone
        cci.validate(reply("0,2", groups=[("0", True), ("2", False)]), AVAIL | {0}, claim, TOPO)
    with pytest.raises(Rejection, match="2 groups returned for a claim of 1"):
        cci.validate(reply("1-2", groups=[("1", True), ("2", True)]), AVAIL, parse_claim({"cores": ["2"]}), TOPO)
    one = cci.validate(reply("1,5"), AVAIL, parse_claim({"cores": ["2"], "cpu attributes": [["EXCLUSIVE"]]}), TOPO)
    assert one.groups == ((frozenset({1, 5}), True),) and not one.withheld
