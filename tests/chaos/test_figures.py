"""The table itself: a failed invariant shows as FAILED beside its target."""

from __future__ import annotations

from tests.chaos.figures import Figures


def test_the_table_lines_up_and_marks_failures() -> None:
    figures = Figures()
    figures.record("crashes", "kill points", 200, target=">= 200")
    figures.record("crashes", "duplicates", 1, target="0", ok=False)
    figures.record("faults", "retry rate", 0.123456)
    lines = figures.table().splitlines()
    assert [cell.strip() for cell in lines[0].split("|")][:4] == ["scenario", "figure", "value", "target"]
    assert lines[3].endswith("FAILED")
    assert "0.123" in lines[4]
    assert "0.1234" not in lines[4]
    columns = {tuple(i for i, char in enumerate(line) if char == "|") for line in lines if "|" in line}
    assert len(columns) == 1, "every row's columns start where the header's do"
