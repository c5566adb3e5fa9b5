"""The recorder log of the dra-cpu scenarios: parsed by kind/cluster/cpuset_log.py (the node image records it)."""

from .cluster.cpuset_log import (
           EVERY_CPU,
           Grant,
           Record,
           Replay,
           Violation,
           creates_of,
           gone_from_checkpoints,
           last_cpus,
           parse,
)

__all__ = ["EVERY_CPU", "Grant", "Record", "Replay", "Violation", "creates_of", "gone_from_checkpoints", "last_cpus",
           "parse"]
