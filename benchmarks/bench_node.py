"""Node admission overhead: the node's own time per admission (wall time minus driver RPC time), p50/p99.

Run: python benchmarks/bench_node.py [--admissions 400] [--base /tmp] [--base /dev/shm]
A no-op in-process CCI driver answers every CCIAdmit; 100 containers stay live on the 128-CPU
server-4s16c-smt2 machine. A bare gRPC unary round trip over a unix socket is measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import grpc
import yaml

from cci_conformance.backends.base import SessionConfig
from cci_conformance.backends.embedded import EmbeddedSession
from cci_conformance.node.api import ClaimRef, ContainerSpec, PodSpec
from cci_conformance.node.fakedriver import FakeDriver
from cci_conformance.paths import PROFILES_DIR
from cci_conformance.protocol.protos import cci_v1alpha1_pb2 as pb
from cci_conformance.protocol.protos import cci_v1alpha1_pb2_grpc as cci_grpc
from cci_conformance.topology import library
from cci_conformance.waiting import wait_for

LIVE = 100
TARGET_P50_S = 0.0005  # the node's own time per CCI admission, p50 (docs/node.md)
CLAIM = {"cores": ["2"], "cpu attributes": [["SHARED"]]}


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def ms(x: float) -> str:
    return f"{x * 1e3:7.3f} ms"


def claim_pod(uid: str) -> PodSpec:
    return PodSpec("bench", f"p-{uid}", uid, (ContainerSpec("c", claim="cl"),), (ClaimRef("cl", f"cl-{uid}", CLAIM),))


def static_pod(uid: str) -> PodSpec:
    return PodSpec("bench", f"p-{uid}", uid, (ContainerSpec("c", "1", "1", "1Gi", "1Gi"),))


def run(base: str, admissions: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="cci-", dir=base))
    profile = yaml.safe_load((PROFILES_DIR / "node" / "coexistence.yaml").read_text())
    session = EmbeddedSession(SessionConfig(library.load("server-4s16c-smt2"), profile, None, workdir))
    driver = FakeDriver(session.kubelet, record=False).start()
    try:
        wait_for(lambda: "fake" in session.client.ping().drivers, 10, what="fake driver registration")
        for i in range(LIVE):  # 30 static (exclusive) + 70 CCI containers stay live
            pod = static_pod(f"live{i}") if i < 30 else claim_pod(f"live{i}")
            assert session.create_pod(pod).admitted
        own, wall, drv = [], [], []
        own_static = []
        rtt = []
        channel = grpc.insecure_channel(f"unix:{driver.cci_socket}")
        stub = cci_grpc.CCIDriverStub(channel)
        req = pb.AdmitRequest(availableCpus="1-127")
        for i in range(admissions):
            t = time.perf_counter()  # a bare round trip next to each admission: both see the same machine load
            stub.CCIAdmit(req, timeout=5)
            rtt.append(time.perf_counter() - t)
            r = session.create_pod(claim_pod(f"b{i}"))
            assert r.admitted, r
            own.append(r.node_seconds - r.driver_seconds)
            wall.append(r.node_seconds)
            drv.append(r.driver_seconds)
            session.delete_pod(f"b{i}")
            if i % 4 == 0:
                r = session.create_pod(static_pod(f"s{i}"))
                assert r.admitted, r
                own_static.append(r.node_seconds)
                session.delete_pod(f"s{i}")
        channel.close()
        fs = "tmpfs" if base.startswith("/dev/shm") else "disk"
        print(f"--- workdir on {base} ({fs}); {LIVE} live containers, {admissions} admissions, 128 CPUs")
        print(f"node own time per CCI admission  p50 {ms(pct(own, 50))}  p99 {ms(pct(own, 99))}"
              f"  (mean {ms(statistics.mean(own))})")
        print(f"  whole admission in the node    p50 {ms(pct(wall, 50))}  p99 {ms(pct(wall, 99))}")
        print(f"  waiting on the driver          p50 {ms(pct(drv, 50))}  p99 {ms(pct(drv, 99))}")
        print(f"static-pod admission (no driver) p50 {ms(pct(own_static, 50))}  p99 {ms(pct(own_static, 99))}")
        print(f"bare gRPC unary round trip       p50 {ms(pct(rtt, 50))}  p99 {ms(pct(rtt, 99))}")
        print(f"node own time / bare round trip  p50 {pct(own, 50) / pct(rtt, 50):.2f}")
        verdict = "met" if pct(own, 50) <= TARGET_P50_S else "MISSED"
        print(f"target: node own time p50 <= {ms(TARGET_P50_S).strip()}: {verdict}")
        print(f"load average during the run      {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        driver.stop()
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admissions", type=int, default=400)
    parser.add_argument("--base", action="append", help="directory for the workdir (repeatable)")
    args = parser.parse_args()
    bases = args.base or ["/tmp"] + (["/dev/shm"] if Path("/dev/shm").is_dir() else [])
    for base in bases:
        run(base, args.admissions)


if __name__ == "__main__":
    main()
