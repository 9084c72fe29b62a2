"""Log lines are JSON objects naming the resource a reconcile works on."""

from __future__ import annotations

import json
import logging

import pytest

from app.logs import ContextLogger, JSONFormatter, configure


def test_reconcile_lines_carry_kind_namespace_and_name() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    base = logging.getLogger("test.reconcile")
    base.addHandler(Keep())
    base.setLevel(logging.INFO)
    logger = ContextLogger(base, {"kind": "DNSRecord", "namespace": "demo", "object_name": "www"})
    logger.info("created %s", "x", extra={"id": "abc"})
    line = json.loads(JSONFormatter().format(records[0]))
    assert line["msg"] == "created x"
    assert (line["kind"], line["namespace"], line["name"], line["id"]) == ("DNSRecord", "demo", "www", "abc")
    assert line["logger"] == "test.reconcile"
    assert line["level"] == "info"


def _record(level: int = logging.INFO) -> logging.LogRecord:
    record = logging.LogRecord("test", level, __file__, 1, "hello", None, None)
    record.created = 1764626300.5  # 2025-12-01T21:58:20.5Z
    return record


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        ("epoch", 1764626300.5),
        ("millis", 1764626300500.0),
        ("nano", 1764626300500000000),
        ("iso8601", "2025-12-01T21:58:20.500+0000"),
        ("rfc3339", "2025-12-01T21:58:20Z"),
        ("rfc3339nano", "2025-12-01T21:58:20.500000Z"),
    ],
)
def test_the_go_controllers_time_encodings(encoding: str, expected: object) -> None:
    assert json.loads(JSONFormatter(encoding).format(_record()))["ts"] == expected


def test_lines_from_the_stacktrace_level_on_carry_the_callers_stack(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure("info", "json", stacktrace_level="error")
        logging.getLogger("test.stack").info("fine")
        logging.getLogger("test.stack").error("broken")
    finally:
        root.handlers[:], root.level = handlers, level
    fine, broken = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert "stacktrace" not in fine
    assert "test_lines_from_the_stacktrace_level_on_carry_the_callers_stack" in broken["stacktrace"]
    assert "logging/__init__.py" not in broken["stacktrace"]


def test_no_log_call_passes_an_extra_field_a_log_record_already_has() -> None:
    """`extra={"name": ...}` raises KeyError inside `log.info` (after the write it reports): the reconcile fails and
    is retried. Every log call's literal `extra` (or the dict variable it names) is checked."""
    import ast
    import logging
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    reserved = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
    found = []
    for path in sorted(p for d in ("app", "reconcilers", "webhooks") for p in (root / d).rglob("*.py")):
        text = path.read_text()
        if "extra=" not in text:
            continue  # no log call of the file passes any: not worth its parse
        tree = ast.parse(text)
        named = {
            node.targets[0].id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        }
        for node in ast.walk(tree):
            for keyword in node.keywords if isinstance(node, ast.Call) else []:
                value = named.get(keyword.value.id) if isinstance(keyword.value, ast.Name) else keyword.value
                if keyword.arg == "extra" and isinstance(value, ast.Dict):
                    keys = {k.value for k in value.keys if isinstance(k, ast.Constant)}
                    found += [f"{path.relative_to(root)}:{node.lineno} {key}" for key in sorted(keys & reserved)]
    assert found == []
