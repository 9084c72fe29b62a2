"""The hash-pinned locks of requirements/, made from pyproject.toml by hack/lock.sh, are what `make venv` and the image
install: each is fresh for pyproject.toml's dependencies, pins every package by version and hash, the image's at the
versions the tests run against, and the Makefile and the Dockerfile install nothing past them."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCKS = ("build.lock", "dev.lock", "run.lock")
REGENERATE = "run `bash hack/lock.sh` and commit requirements/"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def inputs_digest() -> str:
    """As hack/lock.sh computes it: the JSON of the inputs, keys sorted."""
    project = pyproject()
    inputs = {
        "build-system.requires": project["build-system"]["requires"],
        "project.dependencies": project["project"]["dependencies"],
        "project.optional-dependencies.dev": project["project"]["optional-dependencies"]["dev"],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_text(lock: str) -> str:
    return (REPO / "requirements" / lock).read_text(encoding="utf-8")


def entries(lock: str) -> list[str]:
    """The lock's requirements, one line each (continuation lines joined, comments left out)."""
    logical = re.sub(r"\\\n\s*", " ", lock_text(lock))
    return [line.strip() for line in logical.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def pins(lock: str) -> dict[str, set[str]]:
    """Package (normalized name) to the versions the lock pins it at (several only under exclusive markers)."""
    found: dict[str, set[str]] = {}
    for entry in entries(lock):
        match = PIN.match(entry)
        assert match, f"requirements/{lock}: not pinned with ==: {entry[:120]}"
        found.setdefault(normalized(match.group(1)), set()).add(match.group(2))
    return found


def names(requirements: list[str]) -> set[str]:
    found = set()
    for requirement in requirements:
        match = NAME.match(requirement)
        assert match, requirement
        found.add(normalized(match.group(1)))
    return found


@pytest.mark.parametrize("lock", LOCKS)
def test_lock_is_fresh_for_pyproject(lock: str) -> None:
    """A dependency changed in pyproject.toml without regenerating the locks fails here, before an install does."""
    header = lock_text(lock).splitlines()[:2]
    assert header, f"requirements/{lock} is empty: {REGENERATE}"
    assert header[0] == f"# inputs: {inputs_digest()}", (
        f"requirements/{lock} was made from other dependencies than pyproject.toml's: {REGENERATE}"
    )
    assert "bash hack/lock.sh" in header[1], f"requirements/{lock}'s header says how to regenerate it"


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_package_is_pinned_by_hash(lock: str) -> None:
    """`pip install --require-hashes` refuses a lock with any requirement that carries no hash, or no exact version."""
    locked = entries(lock)
    assert locked, f"requirements/{lock} pins nothing"
    unhashed = [entry.split()[0] for entry in locked if "--hash=sha256:" not in entry]
    assert not unhashed, f"requirements/{lock} pins without a hash: {unhashed}: {REGENERATE}"
    assert pins(lock)


def test_locks_hold_what_pyproject_asks_for() -> None:
    project = pyproject()
    build_requires: list[str] = project["build-system"]["requires"]
    dependencies: list[str] = project["project"]["dependencies"]
    dev: list[str] = project["project"]["optional-dependencies"]["dev"]
    assert names([*build_requires, "pip"]) <= pins("build.lock").keys()
    assert names([*dependencies, *dev]) <= pins("dev.lock").keys()
    assert names(dependencies) <= pins("run.lock").keys()
    assert not (names(dev) - names(dependencies)) & pins("run.lock").keys(), "the image holds no dev-only package"


def test_image_runs_the_versions_the_tests_ran_against() -> None:
    """run.lock (the image) pins every package at dev.lock's version (the venv the tests run in)."""
    dev = pins("dev.lock")
    differ = {
        name: (sorted(versions), sorted(dev.get(name, set())))
        for name, versions in pins("run.lock").items()
        if not versions <= dev.get(name, set())
    }
    assert not differ, f"run.lock and dev.lock disagree (run, dev): {differ}: {REGENERATE}"


def test_make_venv_installs_only_from_the_locks() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    lines = makefile.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("$(STAMP):"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    installs = [line for line in recipe if "pip install" in line]
    assert installs == [
        "$(BIN)/python -m pip install --quiet --require-hashes -r requirements/build.lock",
        "$(BIN)/python -m pip install --quiet --require-hashes -r requirements/dev.lock",
        "$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .",
    ], "pip, setuptools and wheel, then the dependencies, from the locks by hash; then kflare alone"
    # The venv is reinstalled when a lock changes, not only pyproject.toml.
    locks = re.search(r"^LOCKS := (.*)$", makefile, re.MULTILINE)
    assert locks, "the Makefile names the locks"
    assert locks.group(1).split() == [f"requirements/{lock}" for lock in LOCKS]
    assert re.search(r"^STAMP := .*\$\(shell cat pyproject\.toml \$\(LOCKS\) \|", makefile, re.MULTILINE)
    assert re.search(r"^\$\(STAMP\): pyproject\.toml \$\(LOCKS\)$", makefile, re.MULTILINE)


def test_image_installs_only_from_the_locks() -> None:
    dockerfile = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text(encoding="utf-8"))
    runs = [line.strip().removeprefix("RUN ") for line in dockerfile.splitlines() if line.startswith("RUN ")]
    commands = [command.strip() for run in runs for command in run.split("&&")]
    installs = [command for command in commands if re.match(r"pip\b.* install\b", command)]
    assert len(installs) == 3, installs
    build_lock, run_lock, kflare = installs
    assert "--require-hashes -r /tmp/build.lock" in build_lock
    assert "--require-hashes -r /tmp/kflare/run.lock" in run_lock
    assert "--no-deps" in kflare
    assert "--no-index" in kflare
    (wheel,) = [command for command in commands if command.startswith("pip wheel")]
    assert "--no-build-isolation" in wheel, "the wheel is built by build.lock's setuptools, not a fetched one"
    assert "COPY requirements/build.lock /tmp/build.lock" in dockerfile
    assert "COPY requirements/run.lock /tmp/kflare/run.lock" in dockerfile
    # The build context (an allow-list) lets the locks in, or the COPY fails.
    allowed = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert {"!requirements/build.lock", "!requirements/run.lock"} <= set(allowed)
