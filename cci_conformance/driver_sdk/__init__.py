"""The driver SDK: a CCI driver author writes a Policy subclass and calls run_driver."""

from .log import StructuredLog
from .policy import Admission, AdmitCall, Grant, Policy, PolicyError
from .runner import DriverRuntime, main, run_driver
from .server import PLUGIN_TYPE, SUPPORTED_VERSIONS
from .state import StateError, StateStore

__all__ = [
    "PLUGIN_TYPE", "SUPPORTED_VERSIONS", "Admission", "AdmitCall", "DriverRuntime", "Grant", "Policy",
    "PolicyError", "StateError", "StateStore", "StructuredLog", "main", "run_driver",
]
