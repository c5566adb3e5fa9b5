"""When a kind e2e may run: opted in where it is long, Docker up, and the node image it needs already built."""

from __future__ import annotations

import os

import pytest

from cci_conformance.kind.cluster import toolchain
from cci_conformance.kind.image import nodeimage


def skip_unless_opted_in(variable: str, what: str, cost: str) -> None:
    """Skip ``what`` unless ``variable`` is set to something other than 0 (the long runs are opt-in)."""
    if os.environ.get(variable, "") in ("", "0"):
        pytest.skip(f"{what}: {cost}; set {variable}=1 to run it")


def skip_unless_kind_ready(what: str, image: str | None = None) -> None:
    """Skip ``what`` when Docker cannot run kind or the node image (default: the CCI one) is not built yet."""
    problem = toolchain.docker_problem()
    image = image or nodeimage.default_image()
    if problem or not nodeimage.image_exists(image):
        pytest.skip(f"{what}: {problem or f'no node image {image} (cci-conformance kind build-node-image)'}")
