"""Log lines are JSON objects naming the resource a reconcile works on."""

from __future__ import annotations

import json
import logging

from app.logs import ContextLogger, JSONFormatter


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
