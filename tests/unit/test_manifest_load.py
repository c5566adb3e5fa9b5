"""Driver manifests: the reference manifest loads; every kind of mistake is a ConfigError naming file and key."""

from __future__ import annotations

import sys
import textwrap

import pytest

from cci_conformance.drivers.manifest import load_manifest
from cci_conformance.errors import ConfigError
from cci_conformance.paths import REFERENCE_DRIVER_DIR
from cci_conformance.protocol.capabilities import KNOWN_CAPABILITIES

GOOD = """\
name: demo
protocol: cci/v1alpha1
capabilities: [exclusive, shared]
local:
  command: ["{python}", "driver.py", "--registry-dir={registry_dir}", "--plugin-dir={plugin_dir}",
            "--sysfs-root={sysfs_root}", "--state-dir={state_dir}", "--driver-name={driver_name}"]
env:
  DEMO_STATE: "{state_dir}/x"
startup_timeout_s: 3
"""


def write(tmp_path, text, name="driver.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_reference_manifest_loads_and_declares_every_capability():
    m = load_manifest(REFERENCE_DRIVER_DIR)
    assert m.name == "reference" and m.protocol == "cci/v1alpha1"
    assert m.capabilities == frozenset(KNOWN_CAPABILITIES)
    assert m.folder == REFERENCE_DRIVER_DIR.resolve()


def test_placeholders_are_filled_in(tmp_path):
    m = load_manifest(write(tmp_path, GOOD))
    argv = m.argv(registry_dir="/r", plugin_dir="/p", sysfs_root="/s", state_dir="/st")
    assert argv == [sys.executable, "driver.py", "--registry-dir=/r", "--plugin-dir=/p", "--sysfs-root=/s",
                    "--state-dir=/st", "--driver-name=demo"]
    assert m.environment(registry_dir="/r", plugin_dir="/p", sysfs_root="/s", state_dir="/st",
                         driver_name="other") == {"DEMO_STATE": "/st/x"}
    assert m.startup_timeout_s == 3.0
    assert m.has("exclusive") and not m.has("groups")
    with pytest.raises(ValueError):
        m.has("warp-drive")


def test_directory_or_file(tmp_path):
    write(tmp_path, GOOD)
    assert load_manifest(tmp_path).name == load_manifest(tmp_path / "driver.yaml").name == "demo"


ERRORS = [
    ("unknown top key", GOOD + "colour: blue\n", "colour", "unknown key 'colour'"),
    ("unknown local key", GOOD.replace("local:\n", "local:\n  shell: true\n"), "local.shell", "unknown key 'shell'"),
    ("unknown placeholder", GOOD.replace("{sysfs_root}", "{sys_root}"), "local.command[4]",
     "unknown placeholder '{sys_root}'"),
    ("placeholder in env", GOOD.replace("{state_dir}/x", "{home}/x"), "env.DEMO_STATE", "'{home}'"),
    ("unbalanced brace", GOOD.replace('"driver.py"', '"driver{.py"'), "local.command[1]", "unbalanced brace"),
    ("unknown capability", GOOD.replace("[exclusive, shared]", "[exclusive, telepathy]"), "capabilities",
     "unknown capability 'telepathy'"),
    ("wrong protocol", GOOD.replace("cci/v1alpha1", "cci/v2"), "protocol", "is not one of"),
    ("dra with local", GOOD.replace("cci/v1alpha1", "dra/v1") + "dra: {module: example.com/d}\n", "local",
     "a dra/v1 driver has no local section"),
    ("dra without module", GOOD.split("local:")[0].replace("cci/v1alpha1", "dra/v1"), "(top level)",
     "'dra' is a required property"),
    ("missing name", GOOD.replace("name: demo\n", ""), "(top level)", "'name' is a required property"),
    ("missing command", GOOD.split("local:")[0] + "local: {}\n", "local", "'command' is a required property"),
    ("command is a string", GOOD.split("local:")[0] + "local:\n  command: run.sh --x\n", "local.command",
     "is not of type 'array'"),
    ("bad timeout", GOOD.replace("startup_timeout_s: 3", "startup_timeout_s: -1"), "startup_timeout_s",
     "less than or equal to the minimum"),
    ("bad name", GOOD.replace("name: demo", "name: Demo Driver"), "name", "does not match"),
    ("not a mapping", "- a\n- b\n", None, "must be a mapping"),
    ("bad yaml", "name: [demo\n", "line", "not valid YAML"),
]


@pytest.mark.parametrize("case, text, field, problem", ERRORS, ids=[e[0] for e in ERRORS])
def test_manifest_errors_name_file_and_key(tmp_path, case, text, field, problem):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert err.value.file == str(path) or err.value.file == str(path.resolve())
    if field:
        assert (err.value.field or "").startswith(field)
    assert problem in err.value.problem
    assert err.value.fix


def test_missing_manifest(tmp_path):
    with pytest.raises(ConfigError, match="no driver manifest"):
        load_manifest(tmp_path)


BUILD_ERRORS = [
    ("build placeholder known only at start", GOOD.replace("local:\n", "local:\n  build: [make, '{sysfs_root}']\n"),
     "local.build[1]", "not available here: placeholder '{sysfs_root}'"),
    ("build is a string", GOOD.replace("local:\n", "local:\n  build: make all\n"), "local.build",
     "is not of type 'array'"),
    ("empty build", GOOD.replace("local:\n", "local:\n  build: []\n"), "local.build", "should be non-empty"),
    ("bad build timeout", GOOD.replace("local:\n", "local:\n  build_timeout_s: 0\n"), "local.build_timeout_s",
     "less than or equal to the minimum"),
    ("empty version", GOOD + "version: ''\n", "version", "should be non-empty"),
    ("numeric version", GOOD + "version: 1.2\n", "version", "is not of type 'string'"),
]


@pytest.mark.parametrize("case, text, field, problem", BUILD_ERRORS, ids=[e[0] for e in BUILD_ERRORS])
def test_build_and_version_errors_name_the_field(tmp_path, case, text, field, problem):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert (err.value.field or "").startswith(field)
    assert problem in err.value.problem
    assert err.value.fix


def test_version_and_build_are_optional(tmp_path):
    m = load_manifest(write(tmp_path, GOOD))
    assert m.version is None and m.build == () and m.build_argv() == [] and m.build_timeout_s == 300.0


def test_version_and_build_are_read(tmp_path):
    text = GOOD.replace("local:\n", "local:\n  build: ['{python}', build.py, '--name={driver_name}']\n"
                                    "  build_timeout_s: 12.5\n") + "version: v1.4.0-rc1\n"
    m = load_manifest(write(tmp_path, text))
    assert m.version == "v1.4.0-rc1"
    assert m.build_argv() == [sys.executable, "build.py", "--name=demo"]
    assert m.build_timeout_s == 12.5


def test_proc_root_is_the_proc_folder_beside_sysfs_root(tmp_path):
    m = load_manifest(write(tmp_path, GOOD.replace('"--sysfs-root={sysfs_root}"', '"--proc={proc_root}"')))
    argv = m.argv(registry_dir="/r", plugin_dir="/p", sysfs_root="/machine/sys", state_dir="/st")
    assert "--proc=/machine/proc" in argv


def test_a_dra_manifest_names_its_module_and_has_no_command(tmp_path):
    from cci_conformance.paths import DRIVERS_DIR

    manifest = load_manifest(DRIVERS_DIR / "dra-driver-cpu")
    assert manifest.is_dra and manifest.command == () and manifest.version == "v0.2.0"
    assert manifest.dra_module == "github.com/kubernetes-sigs/dra-driver-cpu"
    with pytest.raises(ConfigError, match="no local command"):
        manifest.argv(registry_dir="r", plugin_dir="p", sysfs_root="s", state_dir="d")


def test_a_dra_manifest_names_its_driver_and_may_build_from_a_source_tree(tmp_path):
    from cci_conformance.paths import DRIVERS_DIR

    reference = load_manifest(DRIVERS_DIR / "dra-reference")
    assert reference.dra_driver == "dra-reference.cci-conformance.example"
    assert reference.dra_source == (DRIVERS_DIR / "dra-reference").resolve() and reference.dra_args == ()
    base = "name: d\nprotocol: dra/v1\ncapabilities: []\ndra:\n  module: example.com/d\n"
    with pytest.raises(ConfigError, match="device_class") as nameless:
        load_manifest(write(tmp_path, base))
    assert "required" in str(nameless.value)
    (tmp_path / "src").mkdir()
    with pytest.raises(ConfigError, match="dra.source") as not_go:
        load_manifest(write(tmp_path, base + "  device_class: d.example\n  source: src\n"))
    assert "go.mod" in str(not_go.value) and str(tmp_path / "src") in str(not_go.value)
    (tmp_path / "src" / "go.mod").write_text("module example.com/d\n")
    mutant = load_manifest(write(tmp_path, base + "  device_class: d.example\n  source: src\n"
                                 "  args: [--mutant=slow-prepare]\n"))
    assert mutant.dra_source == (tmp_path / "src").resolve() and mutant.dra_args == ("--mutant=slow-prepare",)
