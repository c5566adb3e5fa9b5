"""The harness's own session starts its longest tests first (tests/slowest_first.py) and keeps modules whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from slowest_first import KNOWN_S, order_slowest_first

TESTS = Path(__file__).resolve().parents[1]


@dataclass
class Item:
    nodeid: str
    slow: bool = False
    originalname: str = field(init=False)

    def __post_init__(self):
        self.originalname = self.nodeid.split("::")[-1].split("[")[0]

    def get_closest_marker(self, name):
        return name == "slow" and self.slow or None


def test_every_known_duration_names_a_test_that_exists():
    """A renamed test would silently lose its place at the front."""
    for module, function in KNOWN_S:
        (path,) = TESTS.rglob(module)
        assert f"def {function}(" in path.read_text(), f"{module} has no test {function}"


def test_the_longest_modules_go_first_whole_and_the_rest_keep_their_order():
    items = [Item("tests/unit/test_a.py::test_1"), Item("tests/selftest/test_mutants.py::test_m[x]", slow=True),
             Item("tests/unit/test_a.py::test_2"),
             Item("tests/selftest/test_reference_certifies.py::test_reference_driver_certifies_in_alpha_mode_with_"
                  "the_coexistence_requirements_out_of_scope"),
             Item("tests/selftest/test_reference_certifies.py::test_reference_driver_passes_every_requirement[g]"),
             Item("tests/selftest/test_mutants.py::test_every_mutant_folder_has_a_target_entry")]
    order_slowest_first(items)
    assert [i.nodeid.split("::")[0].rsplit("/", 1)[1] for i in items] == [
        "test_reference_certifies.py", "test_reference_certifies.py", "test_mutants.py", "test_mutants.py",
        "test_a.py", "test_a.py"]
    assert items[0].originalname.startswith("test_reference_driver_certifies_in_alpha")  # collection order kept
    assert [i.nodeid for i in items[-2:]] == ["tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2"]
