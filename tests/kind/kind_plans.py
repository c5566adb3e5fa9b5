"""The faked workers of the kind e2e: topology names and node profiles (shared by its test files)."""

# The 2-socket SMT2 machine with reserved CPU 0, and a sub-NUMA-clustered machine with one reserved
# core and full-pcpus-only (the differential check covers two topologies).
INTEL = "server-2s8c-smt2-intel"
SNC4 = "server-2s-snc4"
INTEL_PROFILE = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "cci": False}
SNC4_PROFILE = {"mode": "coexistence", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,40", "cci": False,
                "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}
