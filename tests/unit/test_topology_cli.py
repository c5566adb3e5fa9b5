"""``cci-conformance topology ...`` through the real dispatcher: exit codes, stdout and one-line errors."""

from __future__ import annotations

import json

import pytest

from cci_conformance.cli import main
from cci_conformance.topology import library
from cci_conformance.topology.scratch import scratch_dir
from cci_conformance.topology.sysfs_reader import read_sysfs

INVALID = {
    "typo": ("packages:\n  - nodes:\n      - cors: 4\n", "packages[0].nodes[0].cors", "did you mean 'cores'"),
    "not-dividing": ("packages:\n  - dies: 3\n    nodes: [{count: 2, cores: 4}]\n", "packages[0].dies", "divide"),
    "overlap": ("numbering: explicit\npackages:\n  - nodes:\n      - {cores: 2, cpus: '0-1'}\n"
                "      - {cores: 2, cpus: '1-2'}\n", "packages[0].nodes[1].cpus", "overlap"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_validate_rejects_with_exit_2_and_one_line(tmp_path, capsys, case):
    text, field, hint = INVALID[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    assert main(["topology", "validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert str(path) in lines[0] and field in lines[0] and "fix:" in lines[0] and hint in lines[0]


def test_validate_accepts_every_library_file(capsys):
    for name in library.names():
        assert main(["topology", "validate", str(library.path(name))]) == 0
    assert capsys.readouterr().out.count("valid:") == len(library.names())


def test_list_names_every_machine(capsys):
    assert main(["topology", "list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == library.names()


def test_show_text_and_json(capsys):
    assert main(["topology", "show", "server-2s8c-smt2-intel"]) == 0
    out = capsys.readouterr().out
    assert "socket 1" in out and "NUMA node 1" in out and "core 0: 0,16" in out and "0000:b1:00.0" in out
    assert main(["topology", "show", "server-2s8c-smt2-intel", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["online_cpus"] == "0-31" and len(data["cpus"]) == 32 and data["cores"][0] == "0,16"


def test_show_a_file(tmp_path, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text("packages: [{nodes: [{cores: 2}]}]\n")
    assert main(["topology", "show", str(path)]) == 0
    assert capsys.readouterr().out.startswith("tiny: 1 socket, 1 NUMA node, 2 cores")


def test_unknown_name_exits_2(capsys):
    assert main(["topology", "show", "no-such-machine"]) == 2
    assert "use one of" in capsys.readouterr().err


def test_render_writes_a_readable_root(capsys):
    with scratch_dir() as out:
        assert main(["topology", "render", "laptop-1s4c-smt2", "--out", str(out)]) == 0
        assert read_sysfs(out / "sys", "laptop-1s4c-smt2") == library.load("laptop-1s4c-smt2")
        assert (out / "proc" / "cpuinfo").read_text().count("processor\t:") == 8
    assert "rendered laptop-1s4c-smt2" in capsys.readouterr().out
