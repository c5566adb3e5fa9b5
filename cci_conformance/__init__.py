"""cci-conformance: conformance and end-to-end test harness for KEP-3675 CCI compute-resource drivers."""

__version__ = "0.1.0"
