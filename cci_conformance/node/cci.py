"""CCI manager calls: CCIAdmit under a deadline and the validation of its reply; Add and Remove with their errors."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass

import grpc

from ..cpuset import CPUListError, CPUs, format_cpulist, parse_cpulist
from ..protocol.claims import ClaimError, ClaimRequest, parse_claim
from ..protocol.protos import cci_v1alpha1_pb2 as pb
from ..topology.model import Topology
from .store import cpulist
from .watcher import DriverConn

# Rejection reasons (AdmissionResult.reason; docs/spec.md S3.4)
DRIVER_NOT_REGISTERED = "DriverNotRegistered"
DRIVER_TIMEOUT = "DriverTimeout"
DRIVER_UNAVAILABLE = "DriverUnavailable"
CCI_ADMIT_ERROR = "CCIAdmitError"
INVALID_REPLY = "InvalidDriverReply"
ADD_ERROR = "CCIAddContainerResourceError"


class Rejection(Exception):
    """An admission refused with a machine-readable reason; ``driver_may_hold`` = the driver may think it granted."""

    def __init__(self, reason: str, message: str, driver_may_hold: bool = False):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.driver_may_hold = driver_may_hold


@dataclass(frozen=True)
class Grant:
    """A validated CCIAdmit reply."""

    groups: tuple[tuple[CPUs, bool], ...]
    exclusive: CPUs
    shared: CPUs
    withheld: CPUs


class Timer:
    """Accumulates the time spent waiting on driver RPCs (AdmissionResult.driver_seconds)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def call(self, fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def _rpc_failure(exc: grpc.RpcError, rpc: str, driver: str, timeout: float) -> Rejection:
    code = exc.code() if hasattr(exc, "code") else None
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Rejection(DRIVER_TIMEOUT, f"{rpc} to driver {driver!r} did not answer within {timeout:g}s", True)
    detail = exc.details() if hasattr(exc, "details") else str(exc)
    return Rejection(DRIVER_UNAVAILABLE, f"{rpc} to driver {driver!r} failed: {code}: {detail}", True)


def admit(conn: DriverConn, req: pb.AdmitRequest, timeout: float, timer: Timer) -> pb.AdmitResponse:
    try:
        return timer.call(conn.stub.CCIAdmit, req, timeout=timeout)
    except grpc.RpcError as exc:
        raise _rpc_failure(exc, "CCIAdmit", conn.name, timeout) from None


def add(conn: DriverConn, req: pb.AddResourceRequest, timeout: float, timer: Timer) -> None:
    try:
        resp = timer.call(conn.stub.CCIAddContainerResource, req, timeout=timeout)
    except grpc.RpcError as exc:
        raise _rpc_failure(exc, "CCIAddContainerResource", conn.name, timeout) from None
    if resp.err:
        raise Rejection(ADD_ERROR, f"driver {conn.name!r}: {resp.err}", True)


def remove(conn: DriverConn, req: pb.RemoveResourceRequest, timeout: float, timer: Timer | None = None) -> str:
    """CCIRemoveContainerResource; returns "" on success, else what went wrong (the caller retries later)."""
    try:
        call = conn.stub.CCIRemoveContainerResource
        resp = timer.call(call, req, timeout=timeout) if timer else call(req, timeout=timeout)
    except grpc.RpcError as exc:
        return f"{exc.code()}"
    return resp.err


@functools.lru_cache(maxsize=512)
def parse_handle(resource_handle: str) -> ClaimRequest | None:
    """``parse_parameters`` of the JSON text sent as resource_handle (cached: suites reuse claim shapes)."""
    try:
        return parse_claim(resource_handle, None, capabilities=("core-ranges",))
    except (ClaimError, TypeError, ValueError):
        return None


def parse_parameters(parameters: dict, topology: Topology) -> ClaimRequest | None:
    """The claim as the node reads it (only to learn each group's sibling rule); None if it does not parse.

    The node forwards unparsable parameters to the driver unchanged: refusing them is the driver's job
    and a conformance requirement of its own.
    """
    try:
        return parse_claim(parameters, None, capabilities=("core-ranges",))
    except (ClaimError, TypeError, ValueError):
        return None


_parse = functools.lru_cache(maxsize=1024)(parse_cpulist)  # drivers answer with the same few cpulists


def _cpus(text: str, what: str) -> CPUs:
    try:
        return _parse(text)
    except CPUListError as exc:
        raise Rejection(INVALID_REPLY, f"{what} is not a cpulist: {exc}", True) from None


def validate(resp: pb.AdmitResponse, available: CPUs, claim: ClaimRequest | None, topology: Topology) -> Grant:
    """Check a CCIAdmit reply against availableCpus and the claim; Rejection with the reason if it is wrong."""
    if resp.err:
        raise Rejection(CCI_ADMIT_ERROR, resp.err)
    if not resp.HasField("rSet"):
        raise Rejection(INVALID_REPLY, "reply has neither err nor rSet", True)
    rset = _cpus(resp.rSet.cpuset, "rSet.cpuset")
    if not rset:
        raise Rejection(INVALID_REPLY, "rSet.cpuset is empty", True)
    if resp.groups:
        groups = tuple((_cpus(g.cpuset, f"groups[{i}].cpuset"), g.exclusive) for i, g in enumerate(resp.groups))
    else:  # a driver that omits groups is read as one group (DESIGN §2.1)
        groups = ((rset, resp.rSet.exclusive),)
    union: set[int] = set()
    for i, (cpus, _) in enumerate(groups):
        if not cpus:
            raise Rejection(INVALID_REPLY, f"groups[{i}] is empty", True)
        if union & cpus:
            raise Rejection(INVALID_REPLY, f"groups overlap on {format_cpulist(union & cpus)}", True)
        union |= cpus
    if frozenset(union) != rset:
        raise Rejection(INVALID_REPLY, f"union of groups {format_cpulist(union)!r} != rSet.cpuset "
                                       f"{format_cpulist(rset)!r}", True)
    if not rset <= available:
        raise Rejection(INVALID_REPLY, f"cpuset {format_cpulist(rset)!r} is not within availableCpus: "
                                       f"{format_cpulist(rset - available)!r} are reserved or held by others", True)
    if claim is not None and resp.groups and len(groups) != len(claim.groups):
        raise Rejection(INVALID_REPLY, f"{len(groups)} groups returned for a claim of {len(claim.groups)}", True)
    exclusive: set[int] = set()
    shared: set[int] = set()
    withheld: set[int] = set()
    for i, (cpus, is_exclusive) in enumerate(groups):
        (exclusive if is_exclusive else shared).update(cpus)
        if is_exclusive and claim is not None and _denies_siblings(claim, i, len(groups)):
            idle = {s for c in cpus for s in topology.core_of.get(c, (c,))} - cpus
            if not idle <= available - rset:
                raise Rejection(INVALID_REPLY, f"CORE-SIBLING-DENIED group {i} uses cores whose siblings "
                                               f"{format_cpulist(idle - (available - rset))!r} are not free", True)
            withheld |= idle
    return Grant(groups, frozenset(exclusive), frozenset(shared), frozenset(withheld))


def _denies_siblings(claim: ClaimRequest, index: int, returned: int) -> bool:
    if returned == len(claim.groups):
        return claim.groups[index].siblings == "denied"
    # one group returned for a claim of several: withhold only when every exclusive group denies siblings
    excl = [g for g in claim.groups if g.exclusive]
    return bool(excl) and all(g.siblings == "denied" for g in excl)


def admit_request(namespace: str, claim_uid: str, claim_name: str, available: CPUs, pod_uid: str,
                  container: str, parameters: dict) -> pb.AdmitRequest:
    return pb.AdmitRequest(namespace=namespace, claim_uid=claim_uid, claim_name=claim_name,
                           availableCpus=cpulist(available), pod=pod_uid, container=container,
                           resource_handle=json.dumps(parameters, sort_keys=True))
