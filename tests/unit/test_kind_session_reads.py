"""What a kind session reads from the kubelet for the suites: the driver's time (CCIAdmit + Add) and its endpoint."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from cci_conformance.kind.cci import node_view
from cci_conformance.kind.cci import session as kind_session
from cci_conformance.node import watcher


def _metrics(admission: float, admit: float, add: float) -> str:
    # the kubelet's /metrics text: several series per histogram (one per driver and outcome)
    return (f'kubelet_cci_admission_duration_seconds_sum{{outcome="admitted"}} {admission}\n'
            'kubelet_cci_admission_duration_seconds_sum{outcome="CCIAdmitError"} 1.5\n'
            f'kubelet_cci_admit_duration_seconds_sum{{driver="d",outcome="admitted"}} {admit}\n'
            'kubelet_cci_admit_duration_seconds_sum{driver="d",outcome="CCIAdmitError"} 0.5\n'
            f'kubelet_cci_add_container_duration_seconds_sum{{driver="d",outcome="added"}} {add}\n'
            'kubelet_cci_add_container_duration_seconds_count{driver="d",outcome="added"} 9\n')


def _session(**attrs):
    session = kind_session.KindSession.__new__(kind_session.KindSession)
    for name, value in attrs.items():
        setattr(session, name, value)
    return session


def test_the_drivers_time_on_kind_is_admit_plus_add_as_on_the_embedded_node():
    """Issue 26: CCIAdmit alone let a driver whose Add is slow pass the latency budgets on kind."""
    pages = iter([_metrics(2.0, 1.0, 3.0), _metrics(2.004, 1.003, 3.030)])
    session = _session(node="w1", api=SimpleNamespace(node_proxy=lambda node, path: next(pages)))
    before = session._admission_sums()
    node_s, driver_s = session._admission_seconds(before)
    assert driver_s == pytest.approx(0.003 + 0.030)  # CCIAdmit 3 ms + Add 30 ms
    assert node_s == pytest.approx(0.004 + 0.030)  # the whole admission + Add
    assert driver_s <= node_s


JOURNAL = ('90.0 w kubelet[6]: I1202 registry.go:99] "CCI driver registered" driver="drv" '
           'endpoint="/var/lib/kubelet/plugins/old/cci.sock"\n'
           '100.5 w kubelet[7]: I1202 registry.go:99] "CCI driver registered" driver="drv" '
           'endpoint="/var/lib/kubelet/plugins/drv/cci.sock"\n'
           '101.0 w kubelet[7]: I1202 registry.go:99] "CCI driver registered" driver="other" '
           'endpoint="/var/lib/kubelet/plugins/other/cci.sock"\n'
           '102.0 w kubelet[7]: I1202 registry.go:99] "CCI driver registered" driver="drv" '
           'endpoint="/var/lib/kubelet/plugins/drv/driver.sock"\n')


def test_the_endpoint_is_the_one_the_kubelet_accepted_not_the_deployment_plans(monkeypatch):
    """REG-002 on kind judged cci_endpoint(), which was the plan's folder + cci.sock: true of any driver."""
    assert node_view.kubelet_endpoint(JOURNAL, 95.0, "drv") == "/var/lib/kubelet/plugins/drv/driver.sock"
    assert node_view.kubelet_endpoint(JOURNAL[:JOURNAL.index("102.0")], 95.0, "drv") == \
        "/var/lib/kubelet/plugins/drv/cci.sock"
    assert node_view.kubelet_endpoint(JOURNAL, 95.0, "nobody") is None
    read = SimpleNamespace(registry=JOURNAL, kubelet_since=95.0)
    session = _session(node="w1", driver="drv", plan=SimpleNamespace(plugin_dir="/var/lib/kubelet/plugins/drv"))
    monkeypatch.setattr(session, "_read", lambda: read)
    monkeypatch.setattr(session, "_node_pid", lambda: "4242")
    assert session.cci_endpoint() == Path("/proc/4242/root/var/lib/kubelet/plugins/drv/driver.sock")
    read.kubelet_since = 103.0  # a kubelet started since: no registration of this process yet
    with pytest.raises(LookupError, match="accepted no registration of drv"):
        session.cci_endpoint()


def test_the_embedded_node_log_names_the_endpoint_it_accepted(caplog):
    """The embedded node's watcher logs each accepted registration; the session reads the last one back."""
    with caplog.at_level(logging.INFO, logger=watcher.log.name):
        watcher.log.info(watcher.REGISTERED_LOG, "drv", "/k/plugins/drv/cci.sock")
        watcher.log.info(watcher.REGISTERED_LOG, "drv2", "/k/plugins/drv2/cci.sock")
        watcher.log.info(watcher.REGISTERED_LOG, "drv", "/k/plugins/drv/driver.sock")
    text = "\n".join(f"2026-12-04 01:00:00,000 INFO {r.name}: {r.getMessage()}" for r in caplog.records)
    assert watcher.registered_endpoint(text, "drv") == "/k/plugins/drv/driver.sock"
    assert watcher.registered_endpoint(text, "drv2") == "/k/plugins/drv2/cci.sock"
    assert watcher.registered_endpoint(text, "dr") is None
