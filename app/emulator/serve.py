"""``kflare emulator``: serve the emulator with uvicorn until interrupted.

On stdout, one JSON line each, so callers can parse them:

1. at start, the account and token to use: ``{"account_id", "token", "token_id", "accounts", "tokens"}``
   (the default account and all-powerful token, or the first ones of ``--state``);
2. once the socket listens: ``{"listening": "http://HOST:PORT", "host", "port"}`` (``--port 0`` picks a free port,
   reported here).

uvicorn's own log (access log included) follows as usual.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType

import uvicorn

from app.emulator.app import EmulatorApp, create_app
from app.emulator.seed import SeedError

# Hung requests (the `hang` fault) would otherwise hold a graceful shutdown forever.
_GRACEFUL_SHUTDOWN_SECONDS = 1


def _emit(line: Mapping[str, object]) -> None:
    print(json.dumps(line), flush=True)


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.started or self.should_exit:
            return
        host, port = self.config.host, self.config.port
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                break
        _emit({"listening": f"http://{host}:{port}", "host": host, "port": port})


def serve(host: str, port: int, state: Path | None, rate_limit: tuple[int, float], lockout: float) -> int:
    try:
        seed = json.loads(state.read_text()) if state is not None else None
        app = create_app(seed, rate_limit=rate_limit, lockout=lockout)
    except (OSError, ValueError, SeedError) as exc:
        print(f"kflare emulator: cannot load state: {exc}", file=sys.stderr)
        return 2
    assert isinstance(app, EmulatorApp)
    _emit(app.emulator.bootstrap)
    server = _Server(uvicorn.Config(app, host=host, port=port, timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS))
    try:
        with _stop_signals_end_cleanly():
            server.run()
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        return exc.code if isinstance(exc.code, int) else 1
    except _Stopped:
        pass
    return 0 if server.started else 1


class _Stopped(Exception):
    pass


def _raise_stopped(_signum: int, _frame: FrameType | None) -> None:
    raise _Stopped


@contextlib.contextmanager
def _stop_signals_end_cleanly() -> Iterator[None]:
    """After a graceful shutdown uvicorn raises the stop signal again, which would kill the process with it. Being
    stopped is how an emulator normally ends, so turn that signal into a clean return (exit code 0)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
