"""The faked workers of the kind e2e: topology names, node profiles and the CCI driver (shared by its test files)."""

from pathlib import Path

from cci_conformance.cpuset import parse_cpulist
from cci_conformance.topology import library

# The 2-socket SMT2 machine with reserved CPU 0, and a sub-NUMA-clustered machine with one reserved
# core and full-pcpus-only (the differential check covers two topologies).
INTEL = "server-2s8c-smt2-intel"
SNC4 = "server-2s-snc4"
INTEL_PROFILE = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "cci": False}
SNC4_PROFILE = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,40", "cci": False,
                "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}

# The CCI driver of the CCI tests: the Go reference, registered under a DRA-valid name, on the INTEL worker
# with one admission slot per allocatable CPU (docs/spec.md S3.9).
GO_REFERENCE = Path(__file__).resolve().parents[2] / "drivers_under_test" / "go-reference"
DRIVER = "go-reference.cci-conformance.io"
SLOTS = len(library.load(INTEL).online_cpus) - len(parse_cpulist(INTEL_PROFILE["reservedSystemCPUs"]))
