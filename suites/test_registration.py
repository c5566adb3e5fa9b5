"""Registration through the kubelet plugin watcher: identity, versions, endpoint and re-registration."""

from __future__ import annotations

from pathlib import PurePath

import pytest
from claimkit import claim_pod, exclusive

from cci_conformance.certify.outcomes import require_feature


@pytest.mark.requirement("REG-001")
def test_driver_registers_as_a_cci_plugin(node, driver_manifest):
    """The driver MUST register as type CCIPlugin, by its manifest name, with v1alpha1 among its versions."""
    snap = node.snapshot()
    assert driver_manifest.name in snap.drivers, f"not registered; the node refused: {snap.refused or 'nothing'}"
    own = {sock: why for sock, why in snap.refused.items() if driver_manifest.name in PurePath(sock).name}
    assert not own, f"the node refused a registration of {driver_manifest.name}: {own}"


@pytest.mark.requirement("REG-002")
def test_endpoint_is_the_plugin_socket_and_serves_cci(node, pods, driver_manifest):
    """The advertised endpoint MUST be <kubelet-root>/plugins/<name>/cci.sock and serve CCIDriver there."""
    require_feature(node, "cci-endpoint")
    endpoint = node.cci_endpoint()
    assert endpoint.parts[-3:] == ("plugins", driver_manifest.name, "cci.sock") and endpoint.is_socket(), endpoint
    result = pods.create(claim_pod(exclusive(1)))
    assert result.admitted, f"the node could not reach the driver at its endpoint: {result.reason}: {result.message}"


@pytest.mark.requirement("REG-003")
@pytest.mark.fresh_node  # restarts, kills or pauses: a node of its own (docs/certification.md)
def test_restarted_driver_registers_again(node, pods, driver_manifest):
    """A restarted driver MUST register again within startup_timeout_s and serve claims."""
    for hard in (True, False):
        node.restart_driver(hard=hard)  # returns once the node lists the driver again
        assert driver_manifest.name in node.snapshot().drivers
        result = pods.create(claim_pod(exclusive(1)))
        assert result.admitted, f"after a {'kill' if hard else 'SIGTERM'} restart: {result.reason}: {result.message}"
