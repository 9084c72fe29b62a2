"""`make chaos`: scenarios that break kflare on purpose (crashes, Cloudflare faults, Kubernetes faults, hostile
input) and check what a user would lose. They are not part of `make test`'s pytest run (see the Makefile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.figures import FIGURES, SCALE, Figures

REPORT = Path("build") / "chaos" / f"figures-{SCALE}.json"


@pytest.fixture(scope="session")
def figures() -> Figures:
    return FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES.rows:
        return
    terminalreporter.section(f"chaos figures ({SCALE} size)")
    terminalreporter.write_line(FIGURES.table())
    FIGURES.write(REPORT)
    terminalreporter.write_line(f"written to {REPORT}")
