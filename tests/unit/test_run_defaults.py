"""What a run does when not told: its workers, its scheduling scopes, ACCT-010's examples; bad counts refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cci_conformance.certify.cli import default_workers, pytest_command
from cci_conformance.certify.machine_scheduling import MachineScheduling
from cci_conformance.certify.settings import STATEFUL_EXAMPLES, RunSettings, check_stateful_examples
from cci_conformance.errors import ConfigError

MACHINES = ("server-2s8c-smt2-intel", "server-2s-snc4", "hybrid-8p8e")


def test_a_run_gets_a_worker_per_machine_up_to_the_cpus_and_kind_at_most_four():
    assert default_workers("embedded", 3, cpus=2) == 3  # one more than the CPUs: embedded workers mostly wait
    assert default_workers("embedded", 4, cpus=2) == 3
    assert default_workers("embedded", 2, cpus=2) == 2
    assert default_workers("embedded", 3, cpus=8) == 3
    assert default_workers("embedded", 1, cpus=8) == 0  # one machine: one process, no xdist
    assert default_workers("embedded", 3, cpus=1) == 0
    assert default_workers("kind", 2, cpus=8) == 2  # a machine per worker, each making its own clusters
    assert default_workers("kind", 2, cpus=1) == 0
    assert default_workers("kind", 3, cpus=2) == 2  # no extra worker on kind: a worker is a cluster
    assert default_workers("kind", 9, cpus=64) == 4  # a cluster each: memory, not CPUs, bounds them
    assert default_workers("cluster", 2, cpus=8) == 0  # an existing cluster's backend decides (its nodes)


def test_acct010_examples_are_the_backends_default_or_the_count_asked():
    settings = RunSettings()
    assert settings.stateful_examples_on("embedded") == STATEFUL_EXAMPLES["embedded"]
    assert settings.stateful_examples_on("kind") == STATEFUL_EXAMPLES["kind"] < STATEFUL_EXAMPLES["embedded"]
    assert settings.stateful_examples_on("another") == STATEFUL_EXAMPLES["embedded"]
    settings.stateful_examples = 500
    assert settings.stateful_examples_on("kind") == 500


@pytest.mark.parametrize("count", [0, -3, 10**9, 2.5, "many"])
def test_a_count_that_is_not_a_number_of_examples_is_a_config_error(count):
    with pytest.raises(ConfigError, match="--stateful-examples") as caught:
        check_stateful_examples(count, "--stateful-examples")
    assert "whole number" in str(caught.value)
    check_stateful_examples(None)
    check_stateful_examples(1)


def test_the_run_passes_the_count_and_its_workers_to_pytest(tmp_path):
    settings = RunSettings(stateful_examples=200, catalog_path=tmp_path / "requirements.yaml")
    args = argparse.Namespace(keyword=None, pytest_args=[])
    cmd = pytest_command(settings, Path("suites"), tmp_path, args, workers=2)
    assert cmd[cmd.index("--cci-stateful-examples") + 1] == "200"
    assert cmd[cmd.index("-n") + 1] == "2" and cmd[cmd.index("--dist") + 1] == "loadscope"
    plain = pytest_command(RunSettings(catalog_path=tmp_path / "r.yaml"), Path("suites"), tmp_path, args)
    assert "--cci-stateful-examples" not in plain and "-n" not in plain


def scheduler(by_module: bool) -> MachineScheduling:
    made = MachineScheduling.__new__(MachineScheduling)  # _split_scope reads only these two
    made.machines, made.by_module = MACHINES, by_module
    return made


def test_kind_scopes_a_machine_and_an_embedded_run_a_machine_in_one_module():
    one, two = "suites/test_a.py::test_x[server-2s-snc4]", "suites/test_b.py::test_y[server-2s-snc4-case]"
    kind = scheduler(by_module=False)
    assert kind._split_scope(one) == kind._split_scope(two) == "machine server-2s-snc4"
    embedded = scheduler(by_module=True)
    assert embedded._split_scope(one) == "machine server-2s-snc4 in suites/test_a.py"
    assert embedded._split_scope(two) == "machine server-2s-snc4 in suites/test_b.py"
    assert embedded._split_scope("suites/test_a.py::test_z[hybrid-8p8e]") != embedded._split_scope(one)
    # a test without a machine keeps loadscope's scope, its module
    assert embedded._split_scope("suites/test_a.py::test_plain") == "suites/test_a.py"


def _cli_args(**given) -> argparse.Namespace:
    fields = dict(workers=None, stateful_examples=None, profile="default", driver=None, suites=None, backend=None,
                  topology=None, node_profile=None, catalog=None, kubernetes=None, device_mode=None, keyword=None,
                  pytest_args=[])
    return argparse.Namespace(**{**fields, **given})


def test_a_dra_driver_runs_the_dra_suites_on_kind_on_the_release_asked(tmp_path):
    from cci_conformance.certify.cli import DRA_TOPOLOGIES, _settings
    from cci_conformance.paths import PROJECT_ROOT, SUITES_DIR

    args = _cli_args(driver=str(PROJECT_ROOT / "drivers_under_test" / "dra-driver-cpu"), kubernetes="1.37.2")
    settings, suites = _settings(args)
    assert suites == SUITES_DIR / "dra" and settings.backend == "kind" and settings.topologies == DRA_TOPOLOGIES
    assert Path(settings.node_profile) == SUITES_DIR / "dra" / "node-none.yaml"
    cmd = pytest_command(settings, suites, tmp_path, args)
    assert cmd[cmd.index("--dra-kubernetes") + 1] == "v1.37.2"
    assert "--dra-kubernetes" not in pytest_command(_settings(_cli_args(driver=args.driver))[0], suites, tmp_path,
                                                    args)  # the suites' own default then


def test_kubernetes_is_refused_for_a_cci_driver_and_an_unbuilt_release_named():
    from cci_conformance.certify.cli import _settings
    from cci_conformance.paths import PROJECT_ROOT

    with pytest.raises(ConfigError, match="--kubernetes") as cci:
        _settings(_cli_args(kubernetes="v1.37.2"))
    assert "CCI" in str(cci.value)
    with pytest.raises(ConfigError, match="--kubernetes") as unknown:
        _settings(_cli_args(driver=str(PROJECT_ROOT / "drivers_under_test" / "dra-driver-cpu"), kubernetes="v1.99.0"))
    assert "v1.37.2" in str(unknown.value)


def test_device_mode_reaches_the_dra_suites_and_is_refused_for_a_cci_driver(tmp_path):
    from cci_conformance.certify.cli import _settings
    from cci_conformance.paths import PROJECT_ROOT

    args = _cli_args(driver=str(PROJECT_ROOT / "drivers_under_test" / "dra-reference"), device_mode="grouped")
    settings, suites = _settings(args)
    cmd = pytest_command(settings, suites, tmp_path, args)
    assert cmd[cmd.index("--dra-device-mode") + 1] == "grouped"
    with pytest.raises(ConfigError, match="--device-mode") as cci:
        _settings(_cli_args(device_mode="grouped"))
    assert "dra/v1" in str(cci.value)
