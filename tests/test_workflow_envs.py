"""The workflow's conda envs (`snakemake --sdm conda`, workflow/envs/*.yaml) pin what the venv pins:
every package version in them equals requirements.txt's, and their Python satisfies pyproject's
requires-python. (No conda runs here: docs/workflow.md, "The conda route", says why.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
ENVS = sorted((REPO / "workflow/envs").glob("*.yaml"))
# conda packages that are tools, not Python distributions, and have no pin in requirements.txt
NOT_PYTHON = {"pip", "fio"}


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def env_entries(path: Path) -> tuple[list[str], list[str]]:
    """(conda dependencies, pip requirement lines) of one env file."""
    doc = yaml.safe_load(path.read_text())
    conda, pip = [], []
    for dep in doc["dependencies"]:
        if isinstance(dep, dict):
            pip += [x for x in dep.get("pip", []) if not x.startswith("-")]
        else:
            conda.append(dep)
    return conda, pip


def test_there_are_env_files_and_every_rule_names_one():
    assert ENVS, "workflow/envs/*.yaml: no env file"
    names = {p.name for p in ENVS}
    for smk in [REPO / "workflow/Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]:
        for env in re.findall(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()):
            assert Path(env).name in names, f"{smk.name}: conda env {env} is not in workflow/envs/"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_every_pip_pin_of_an_env_equals_requirements_txt(env):
    pins = requirement_pins()
    _, pip = env_entries(env)
    assert pip, f"{env.name}: no pip packages"
    for line in pip:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        assert m, f"{env.name}: {line!r} is not pinned as NAME==VERSION"
        name = canonicalize_name(m.group(1))
        assert name in pins, f"{env.name}: {m.group(1)} is not pinned in requirements.txt"
        assert m.group(2) == pins[name], (f"{env.name}: {m.group(1)}=={m.group(2)}, "
                                          f"requirements.txt pins {pins[name]}")


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_an_envs_conda_packages_are_python_within_requires_python_or_named_tools(env):
    requires = re.search(r'requires-python\s*=\s*"([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    conda, _ = env_entries(env)
    pythons = [d for d in conda if re.match(r"python\b", d)]
    assert len(pythons) == 1, f"{env.name}: expected one python pin, found {pythons}"
    version = pythons[0].split("=", 1)[1].lstrip("=")
    assert SpecifierSet(requires).contains(version + ".0"), (
        f"{env.name}: python={version} is outside pyproject's requires-python {requires}")
    others = {re.split(r"[=<> ]", d)[0] for d in conda if d not in pythons}
    assert others <= NOT_PYTHON, f"{env.name}: conda packages {sorted(others - NOT_PYTHON)} have no pin to check"
