"""The package as it ships: a wheel built from what the Docker build context holds, installed into a clean
virtualenv the way the Dockerfile installs it, runs; and the Dockerfile keeps the shape the deployment relies on.
The image itself is built and run beside it (test_image.py). Here rather than in tests/unit: building a wheel and a
virtualenv takes longer than all of `make check`'s unit tests together."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import marshal
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from app import __version__

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "webhooks", "reconcilers")
RUN_FLAGS = (
    "--kubeconfig",
    "--namespace",
    "--leader-elect",
    "--drift-check-interval",
    "--reconcile-timeout",
    "--default-deletion-policy",
    "--cloudflare-api-url",
    "--cloudflare-budget-share",
    "--health-probe-bind-address",
    "--metrics-bind-address",
    "--metrics-secure",
    "--metrics-cert-path",
    "--webhook-port",
    "--webhook-cert-dir",
    "--log-level",
    "--log-format",
)


def _run(*argv: str | Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert done.returncode == 0, (
        f"{shlex.join(str(a) for a in argv)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    )
    return done.stdout


def docker_context(destination: Path) -> list[str]:
    """Copy what `.dockerignore` lets into the build context (its `*` then `!path` allow-list) to `destination`."""
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    patterns = [p for p in patterns if p and not p.startswith("#")]
    assert patterns[0] == "*", ".dockerignore is an allow-list: it starts with `*`"
    allowed = [p[1:].rstrip("/") for p in patterns if p.startswith("!")]
    excluded = [p for p in patterns[1:] if not p.startswith("!")]

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(REPO)
        return {
            name
            for name in names
            if any(fnmatch.fnmatch(str(rel / name), p) or fnmatch.fnmatch(name, p.split("/")[-1]) for p in excluded)
        }

    for entry in allowed:
        source = REPO / entry
        if source.is_dir():
            shutil.copytree(source, destination / entry, ignore=ignore)
        else:
            (destination / entry).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / entry)
    return allowed


@dataclass
class Installed:
    wheel: Path
    venv: Path

    @property
    def kflare(self) -> Path:
        return self.venv / "bin" / "kflare"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the wheel from the Docker context with pip (no build isolation: this venv's setuptools and wheel are
    requirements/build.lock's, as in the image), then install the dependencies from requirements/run.lock (hashes
    checked) and the wheel into a virtualenv without pip of its own, through the outer pip's `--python` (as the
    Dockerfile does; pip's cache keeps repeated runs quick). Unlike the Dockerfile, which leaves compiling to
    hack/image-rootfs.py, it lets pip compile what it installs."""
    root = tmp_path_factory.mktemp("packaging")
    context, wheels, venv = root / "context", root / "wheels", root / "venv"
    context.mkdir()
    docker_context(context)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    pip = (sys.executable, "-m", "pip")
    _run(*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", wheels, context, env=env)
    (wheel,) = wheels.glob("kflare-*.whl")
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # as in the image: pip still compiles what it installs
    target = ("--python", venv / "bin" / "python", "install", "--quiet")
    _run(*pip, *target, "--require-hashes", "-r", context / "requirements" / "run.lock", env=env)
    _run(*pip, *target, "--no-deps", wheel, env=env)
    return Installed(wheel, venv)


def test_wheel_holds_the_packages_and_no_tests(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as archive:
        names = archive.namelist()
    for package in PACKAGES:
        assert f"{package}/__init__.py" in names
        assert f"{package}/py.typed" in names
    assert "app/cli.py" in names
    assert "app/emulator/__init__.py" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "hack/", "chart/", "examples/"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(installed.wheel) as archive:
        assert "kflare = app.cli:main" in archive.read(entry_points).decode()


def test_installed_kflare_runs(installed: Installed, tmp_path: Path) -> None:
    clean = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    assert _run(installed.kflare, "version", env=clean).strip() == __version__
    help_text = _run(installed.kflare, "run", "--help", env=clean)
    missing = [flag for flag in RUN_FLAGS if flag not in help_text]
    assert not missing, f"`kflare run --help` lacks {missing}"
    # Runs from anywhere, not only from this checkout, and reaches the apps' modules.
    out = tmp_path / "openapi"
    _run(installed.kflare, "openapi", "--out", out, env=clean)
    assert {p.name for p in out.glob("*.json")} >= {"probes.json", "metrics.json", "emulator.json"}


def test_installed_package_has_bytecode(installed: Installed) -> None:
    """pip compiles at install time, so a read-only root filesystem costs nothing at start."""
    (site,) = installed.venv.glob("lib/python3.*/site-packages")
    tag = sys.implementation.cache_tag
    for package in PACKAGES:
        assert (site / package / "__pycache__" / f"__init__.{tag}.pyc").is_file(), package
    assert (site / "app" / "__pycache__" / f"server.{tag}.pyc").is_file()


def image_rootfs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_rootfs", REPO / "hack" / "image-rootfs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_image_bytecode_is_unchecked_and_names_the_image_paths(installed: Installed, tmp_path: Path) -> None:
    """The image's build compiles the venv where it was gathered (under /rootfs) for where it runs: hash-based
    bytecode that Python never checks against the source (the copy between stages need not keep timestamps), whose
    code objects name the files' paths in the image, as tracebacks will."""
    (site,) = installed.venv.glob("lib/python3.*/site-packages")
    root = tmp_path / "rootfs"
    shutil.copytree(site / "app", root / "opt/kflare/app")
    image_rootfs().compile_bytecode(root, ["/opt/kflare"], workers=1)  # no fork of a process running gRPC's threads
    tag = sys.implementation.cache_tag
    pyc = (root / "opt/kflare/app/__pycache__" / f"server.{tag}.pyc").read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0b01  # hash-based, source unchecked
    code = marshal.loads(pyc[16:])  # noqa: S302 (bytecode this test just compiled)
    assert code.co_filename == "/opt/kflare/app/server.py"


# -- the Dockerfile, read ------------------------------------------------------------------------------------------


@dataclass
class Instruction:
    stage: int
    keyword: str
    args: str


def dockerfile() -> list[Instruction]:
    text = (REPO / "Dockerfile").read_text()
    logical = re.sub(r"\\\n\s*", " ", text)  # join continuation lines
    instructions, stage = [], -1
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        instructions.append(Instruction(stage, keyword.upper(), args.strip()))
    return instructions


def final_stage() -> list[Instruction]:
    steps = dockerfile()
    last = max(i.stage for i in steps)
    return [i for i in steps if i.stage == last]


def build_stage() -> list[Instruction]:
    """The stage that makes the venv and gathers the runtime's files: the one the runtime copies from."""
    steps = dockerfile()
    names = {i.stage: i.args.split()[-1] for i in steps if i.keyword == "FROM" and " AS " in i.args.upper()}
    (source,) = {i.args.split()[0].removeprefix("--from=") for i in final_stage() if i.keyword == "COPY"}
    (stage,) = [n for n, name in names.items() if name == source]
    return [i for i in steps if i.stage == stage]


def build_args() -> dict[str, str]:
    """The defaults of the Dockerfile's global ARGs (those before the first FROM)."""
    found = {}
    for i in dockerfile():
        if i.keyword == "FROM":
            break
        if i.keyword == "ARG" and "=" in i.args:
            name, _, value = i.args.partition("=")
            found[name] = value.strip('"')
    return found


def test_dockerfile_base_user_and_entrypoint() -> None:
    froms = [i.args.split() for i in dockerfile() if i.keyword == "FROM"]
    stages = {words[2] for words in froms if len(words) == 3 and words[1].upper() == "AS"}
    defaults = build_args()
    bases = {re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], words[0]) for words in froms} - stages
    # The official image by default; a build without a registry passes an equivalent one as BASE (hack/image.sh).
    # The runtime stage is built on nothing: no shell, no package manager, only the files the build gathered.
    assert bases == {"python:3.11-slim", "scratch"}
    assert froms[0][0] == "${BASE}"
    assert froms[-1] == ["scratch"]
    requires = re.search(r'requires-python = ">=3\.(\d+)"', (REPO / "pyproject.toml").read_text())
    assert requires is not None
    assert f"python:3.{requires.group(1)}-slim" == defaults["BASE"]
    final = final_stage()
    users = [i.args for i in final if i.keyword == "USER"]
    assert users, "the image must not run as root"
    uid = users[-1].split(":")[0]
    assert uid == "65532", "numeric, so that runAsNonRoot can check it"
    entrypoint = [i.args for i in final if i.keyword == "ENTRYPOINT"]
    assert [json.loads(e) for e in entrypoint] == [["kflare", "run"]]
    # Nothing after USER switches back to root.
    after_user = final[[i.keyword for i in final].index("USER") :]
    assert all(i.keyword != "RUN" for i in after_user)


def test_dockerfile_read_only_root_filesystem() -> None:
    final = final_stage()
    env = " ".join(i.args for i in final if i.keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PATH=/opt/kflare/bin" in env
    assert not [i for i in final if i.keyword == "RUN"], "nothing to run a command with"
    # Bytecode is compiled at build time, by what gathers the runtime's files.
    build = build_stage()
    assert any(i.keyword == "RUN" and "image-rootfs.py" in i.args for i in build)
    assert "UNCHECKED_HASH" in (REPO / "hack" / "image-rootfs.py").read_text()


def test_dockerfile_installs_dependencies_before_the_source() -> None:
    final = build_stage()
    copies = [(n, i.args) for n, i in enumerate(final) if i.keyword == "COPY"]
    installs = [n for n, i in enumerate(final) if i.keyword == "RUN" and "install" in i.args and " -r " in i.args]
    assert installs, "a layer that installs the dependencies alone"
    deps = installs[0]
    before = [args for n, args in copies if n < deps]
    assert before, "requirements/run.lock is copied in before the dependencies are installed"
    assert all("requirements/run.lock" in args and "app" not in args.split() for args in before), before
    source = [n for n, i in enumerate(final) if "/wheels" in i.args or any(p in i.args.split() for p in PACKAGES)]
    assert source, "the source (or its wheel) comes in after the dependencies"
    assert min(source) > deps


def test_dockerignore_keeps_the_context_small(tmp_path: Path) -> None:
    allowed = docker_context(tmp_path)
    locks = {"requirements/build.lock", "requirements/run.lock"}
    assert set(allowed) == {"pyproject.toml", *locks, "README.md", *PACKAGES, "hack/image-rootfs.py"}
    copied = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert "tests" not in copied
    assert ".venv" not in copied
    assert not list(tmp_path.rglob("__pycache__"))
