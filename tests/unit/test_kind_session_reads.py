"""What a kind session reads from the kubelet for the suites: the driver's time (CCIAdmit + Add) and its endpoint."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from cci_conformance.kind.cci import call_log, node_view
from cci_conformance.kind.cci import session as kind_session
from cci_conformance.node import watcher


def _session(**attrs):
    session = kind_session.KindSession.__new__(kind_session.KindSession)
    for name, value in attrs.items():
        setattr(session, name, value)
    return session


def _entry(call: str, pod: str, seconds: float, container: str = "c0") -> str:
    return json.dumps({"call": call, "pod": pod, "container": container, "seconds": seconds, "outcome": "x",
                       "at": 1.0}) + "\n"


def test_the_drivers_time_on_kind_is_admit_plus_add_as_on_the_embedded_node(tmp_path):
    """Issue 26: CCIAdmit alone let a driver whose Add is slow pass the latency budgets on kind. Each pod's time is
    its own calls in the kubelet's per-call record, even where another pod's calls came between them."""
    record = tmp_path / call_log.CALL_LOG.lstrip("/")
    record.parent.mkdir(parents=True)
    record.write_text(_entry("CCIAdmit", "p1", 0.003) + _entry("admission", "p1", 0.004) +
                      _entry("CCIAdmit", "p2", 0.5) + _entry("admission", "p2", 0.6) +
                      _entry("CCIAddContainerResource", "p1", 0.030))
    log = call_log.CallLog(tmp_path)
    node_s, driver_s = log.seconds("p1")
    assert driver_s == pytest.approx(0.003 + 0.030)  # CCIAdmit 3 ms + Add 30 ms
    assert node_s == pytest.approx(0.004 + 0.030)  # the whole admission + Add
    assert log.seconds("p2") == (pytest.approx(0.6), pytest.approx(0.5))  # refused at admission: no Add
    with record.open("a") as f:  # read on from where it stopped; a half-written line waits for its end
        f.write(_entry("CCIAddContainerResource", "p2", 0.25) + '{"call": "CCIAdmit", "pod": "p3"')
    assert log.seconds("p2") == (pytest.approx(0.85), pytest.approx(0.75))
    assert log.seconds("p3")[1] == 0.0
    node_s, driver_s = log.seconds("never-admitted")
    assert node_s != node_s and driver_s == 0.0  # NaN: no figure passes a budget


def test_a_call_record_line_that_is_not_an_entry_names_the_file(tmp_path):
    record = tmp_path / call_log.CALL_LOG.lstrip("/")
    record.parent.mkdir(parents=True)
    record.write_text("not json\n")
    with pytest.raises(call_log.CallLogError, match="cci-calls.jsonl"):
        call_log.CallLog(tmp_path).seconds("p1")


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
    session._root = Path("/proc/4242/root")
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
