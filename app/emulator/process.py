"""``kflare emulator`` as a child process: `kflare dev`, the tests and the benchmarks start it the same way.

The process prints JSON lines on stdout (see :mod:`app.emulator.serve`): first the account and token to use, then
where it listens. Output goes to files, not pipes, so that nobody has to drain them while the emulator runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from pydantic import JsonValue


class EmulatorError(RuntimeError):
    pass


def kflare_command() -> list[str]:
    script = Path(sys.executable).with_name("kflare")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


class EmulatorProcess:
    """One ``kflare emulator`` subprocess: started with a state file, ready once it says it listens."""

    def __init__(
        self,
        state: Mapping[str, JsonValue] | None = None,
        *,
        rate_limit: tuple[int, float] | None = None,
        lockout: float | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        workdir: Path | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.state = dict(state or {})
        self.rate_limit = rate_limit
        self.lockout = lockout
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="kflare-emulator-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = self.workdir / "emulator.out"
        self.stderr_path = self.workdir / "emulator.err"
        self._process: subprocess.Popen[bytes] | None = None
        self.bootstrap: dict[str, JsonValue] = {}
        self.url = ""

    # Lifecycle

    def start(self) -> Self:
        if self._process is not None:
            raise EmulatorError("already started")
        state_file = self.workdir / "state.json"
        state_file.write_text(json.dumps(self.state))
        command = [*kflare_command(), "emulator", "--host", self.host, "--port", str(self.port)]
        command += ["--state", str(state_file)]
        if self.rate_limit is not None:
            command += ["--rate-limit", f"{self.rate_limit[0]}/{self.rate_limit[1]}"]
        if self.lockout is not None:
            command += ["--lockout", str(self.lockout)]
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self._process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            self._wait_until_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def _lines(self) -> list[dict[str, JsonValue]]:
        lines: list[dict[str, JsonValue]] = []
        for raw in self.stdout_path.read_text(errors="replace").splitlines():
            if raw.startswith("{"):
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    continue
        return lines

    def _wait_until_listening(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            lines = self._lines()
            listening = next((line for line in lines if "listening" in line), None)
            if listening is not None:
                self.bootstrap = next(line for line in lines if "token" in line)
                self.url = f"http://{self.host}:{listening['port']}"
                return
            if self._process.poll() is not None:
                raise EmulatorError(f"the emulator exited with {self._process.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise EmulatorError(f"the emulator did not listen within {self.startup_timeout} s:\n{self.log()}")

    def stop(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log(self) -> str:
        """What the process wrote so far, for failure messages."""
        parts = []
        for path in (self.stdout_path, self.stderr_path):
            if path.exists():
                parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-8000:]}")
        return "\n".join(parts)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # Where and who

    @property
    def base_url(self) -> str:
        """What a Cloudflare client takes as its base URL."""
        return f"{self.url}/client/v4"

    @property
    def token(self) -> str:
        return self._announced("token")

    @property
    def token_id(self) -> str:
        return self._announced("token_id")

    @property
    def account_id(self) -> str:
        return self._announced("account_id")

    def _announced(self, name: str) -> str:
        """One of the starting objects the process printed; a state without accounts or tokens has none to give."""
        value = self.bootstrap[name]
        if not isinstance(value, str):
            raise EmulatorError(f"the emulator started without a {name.replace('_', ' ')}")
        return value
