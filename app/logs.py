"""Log records as one JSON object per line, with the fields callers pass in `extra` (kind, namespace, name...)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import MutableMapping
from typing import Any

# LogRecord reserves `name` (the logger's); callers pass an object's name as `object_name`, shown as `name`.
RENAMED = {"object_name": "name"}
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and value is not None:
                entry[RENAMED.get(key, key)] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}
        fields = " ".join(f"{RENAMED.get(k, k)}={v}" for k, v in extras.items() if v is not None)
        return f"{base} {fields}".rstrip()


def configure(level: str = "info", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JSONFormatter() if fmt == "json" else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("apscheduler", "httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds its context (kind, namespace, name) to every line, keeping the call's own `extra`."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs
