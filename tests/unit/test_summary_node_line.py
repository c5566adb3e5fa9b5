"""The node line of the summary and the HTML page: what a DRA certificate names is the kubelet it ran on."""

from __future__ import annotations

from cci_conformance.certify.summary import node_line


def test_a_dra_run_names_its_kubernetes_release_and_node_image_not_a_cci_mode():
    run = {"node_profile": "suites/dra/node-none.yaml", "node_mode": "alpha",
           "backend_facts": {"kubernetes": "v1.37.2", "node_image": "cci-conformance/kind-node:v1.37.2"}}
    line = node_line(run)
    assert "Kubernetes v1.37.2 (vanilla kubelet, node image cci-conformance/kind-node:v1.37.2)" in line
    assert "alpha" not in line


def test_a_cci_run_names_its_node_profile_and_mode():
    assert node_line({"node_profile": "coexistence.yaml", "node_mode": "coexistence", "backend_facts": {}}) == \
        "node profile coexistence.yaml (coexistence mode)"


def test_a_cci_kind_run_names_the_patched_kubelet_not_a_vanilla_one():
    """Was: every kind run with a Kubernetes release in its facts read "vanilla kubelet", a CCI one included."""
    run = {"node_profile": "coexistence", "node_mode": "coexistence",
           "backend_facts": {"kubernetes": "v1.34.12", "node_image": "cci-conformance/kind-node:v1.34.12",
                             "kubelet_patch": "sha256:1695d8aadc66f3f08094b92dc61ac551229c09104bb2"}}
    line = node_line(run)
    assert line == ("Kubernetes v1.34.12 (kubelet with the CCI manager, patch 1695d8aadc66, node image "
                    "cci-conformance/kind-node:v1.34.12), node profile coexistence (coexistence mode)")
    assert "vanilla" not in line
