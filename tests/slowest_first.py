"""The harness's test session runs its longest tests first and lets idle xdist workers steal queued ones.

xdist's default (``--dist load``) hands each worker a fixed run of consecutive tests up front and never moves
them: a certification of several minutes queued last on one worker left the other idle for its whole length
(the mutant self-test ended the run alone). Ordering only reorders, and work stealing only moves queued tests
between workers: every test still runs, once, with the same fixtures.
"""

from __future__ import annotations

# Seconds a test took in the idle README test command (`pytest -n 2 --durations`), by module and function,
# rounded: a priority, not a check; a test not listed counts SLOW_S when marked slow, else nothing.
KNOWN_S = {
    ("test_reference_certifies.py", "test_reference_driver_passes_every_requirement"): 130,
    ("test_reference_certifies.py", "test_reference_driver_certifies_in_alpha_mode_with_the_coexistence_"
                                    "requirements_out_of_scope"): 80,
    ("test_installed_wheel.py", "test_wheel_installs_outside_the_tree_and_certifies_the_reference_driver"): 70,
    ("test_installed_wheel.py", "test_go_driver_certifies_from_the_installed_wheel"): 60,
    ("test_authors_guide.py", "test_guide_commands_run_in_order_in_an_empty_folder"): 55,
    ("test_minimal_certifies.py", "test_minimal_driver_certifies_with_exactly_the_capability_requirements_"
                                  "not_applicable"): 35,
    ("test_minimal_certifies.py", "test_a_driver_declaring_one_capability_certifies"): 35,
}
SLOW_S = 15


def expected_s(item) -> float:
    module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    name = getattr(item, "originalname", None) or item.name
    known = KNOWN_S.get((module, name))
    if known is not None:
        return known
    return SLOW_S if item.get_closest_marker("slow") else 0


def order_slowest_first(items: list) -> None:
    """Modules by their longest expected test, longest first; ties, and the tests of a module, keep collection
    order, so a module's tests stay together (its module-scoped fixtures are set up once, as before)."""
    longest: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        longest[module] = max(longest.get(module, 0), expected_s(item))
    items.sort(key=lambda item: -longest[item.nodeid.split("::", 1)[0]])


def steal_work(config) -> None:
    """``pytest -n N`` with no --dist of the caller's: work stealing instead of xdist's fixed chunks."""
    if not config.pluginmanager.hasplugin("xdist") or not config.getoption("numprocesses", None):
        return
    if any(arg.startswith("--dist") for arg in config.invocation_params.args):
        return
    if config.getoption("dist", None) == "load":
        config.option.dist = "worksteal"
