"""``kflare emulator`` as a command: its machine-readable lines, its default state, its refusals."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import cloudflare

from app.emulator.process import kflare_command


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_without_state_prints_its_account_and_token(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with out.open("wb") as stdout:
        process = subprocess.Popen(
            [*kflare_command(), "emulator", "--port", "0"], stdout=stdout, stderr=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + 30
        while not any("listening" in line for line in _json_lines(out)):
            assert process.poll() is None, "the emulator exited"
            assert time.monotonic() < deadline, "the emulator did not listen in time"
            time.sleep(0.02)
        started, listening = _json_lines(out)[:2]
        assert set(started) >= {"account_id", "token", "token_id"}
        cf = cloudflare.Cloudflare(
            api_token=started["token"], base_url=f"{listening['listening']}/client/v4", max_retries=0
        )
        verified = cf.user.tokens.verify()
        assert verified is not None
        assert verified.id == started["token_id"]
        account = cf.accounts.get(account_id=started["account_id"])
        assert account is not None
    finally:
        process.terminate()
        process.wait(10)
    assert process.returncode == 0


def test_invalid_state_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"tokens": [{"name": "t", "permissions": ["nope:read"]}]}))
    done = subprocess.run(
        [*kflare_command(), "emulator", "--port", "0", "--state", str(state)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert b"unknown resource" in done.stderr
