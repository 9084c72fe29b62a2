"""Log records as one JSON object per line, with the fields callers pass in `extra` (kind, namespace, name...)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, MutableMapping
from typing import Any

# LogRecord reserves `name` (the logger's); callers pass an object's name as `object_name`, shown as `name`.
RENAMED = {"object_name": "name"}
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


def _utc(created: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(created, dt.UTC)


TIME_ENCODINGS: dict[str | None, Callable[[float], float | str]] = {
    None: lambda t: _utc(t).isoformat(timespec="milliseconds"),
    # zap's encoders, as the Go controller's --zap-time-encoding names them.
    "epoch": lambda t: t,
    "millis": lambda t: t * 1e3,
    "nano": lambda t: int(t * 1e9),
    "iso8601": lambda t: _utc(t).strftime("%Y-%m-%dT%H:%M:%S.") + f"{_utc(t).microsecond // 1000:03d}+0000",
    "rfc3339": lambda t: _utc(t).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "rfc3339nano": lambda t: _utc(t).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
}


_LOGGING_DIR = os.path.dirname(logging.__file__)


class StackFrom(logging.Filter):
    """Gives lines at `level` or above the stack of the call that logged them (zap's stacktrace level)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.level and not record.stack_info and not record.exc_info:
            # The frames of logging itself say nothing: the stack ends at the caller.
            frames = [
                f
                for f in traceback.extract_stack()
                if not f.filename.startswith(_LOGGING_DIR) and f.filename != __file__
            ]
            record.stack_info = "".join(traceback.format_list(frames)).rstrip()
        return True


class JSONFormatter(logging.Formatter):
    def __init__(self, time_encoding: str | None = None) -> None:
        super().__init__()
        self.stamp = TIME_ENCODINGS[time_encoding]

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": self.stamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and value is not None:
                entry[RENAMED.get(key, key)] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stacktrace"] = record.stack_info
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self, time_encoding: str | None = None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.stamp = None if time_encoding is None else TIME_ENCODINGS[time_encoding]

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return super().formatTime(record, datefmt) if self.stamp is None else str(self.stamp(record.created))

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}
        fields = " ".join(f"{RENAMED.get(k, k)}={v}" for k, v in extras.items() if v is not None)
        return f"{base} {fields}".rstrip()


def configure(
    level: str = "info", fmt: str = "json", *, time_encoding: str | None = None, stacktrace_level: str | None = None
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter(time_encoding) if fmt == "json" else TextFormatter(time_encoding))
    if stacktrace_level is not None:
        handler.addFilter(StackFrom(logging.getLevelNamesMapping()[stacktrace_level.upper()]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("apscheduler", "httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds its context (kind, namespace, name) to every line, keeping the call's own `extra`."""

    def process(self, msg: object, kwargs: MutableMapping[str, Any]) -> tuple[object, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs
