"""The test harness itself: the command line installs, and a test that leaks an asyncio task fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import app

pytest_plugins = ["pytester"]


def test_version_command_prints_the_package_version() -> None:
    kflare = Path(sys.executable).with_name("kflare")
    done = subprocess.run([str(kflare), "version"], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == app.__version__


def test_a_leaked_task_fails_the_test(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    # The one plugin the run needs, not every installed one (their imports take longer than the run).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest("from tests.conftest import _no_leaked_tasks  # noqa: F401\n")
    pytester.makepyfile(
        """
        import asyncio

        async def test_leaks():
            asyncio.get_running_loop().create_task(asyncio.sleep(3600), name="forgotten-timer")

        async def test_tidy():
            task = asyncio.get_running_loop().create_task(asyncio.sleep(3600))
            task.cancel()
        """
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "pytest_asyncio.plugin",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*leaked 1 asyncio task(s)*forgotten-timer*"])
