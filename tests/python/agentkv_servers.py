"""The agentkv serving commands the Python tests start: on 127.0.0.1, an ephemeral port
(``--port 0``), the URL read from the command's ``serving http://...`` line, stopped at the
end. ``AGENTKV_BIN`` names the binary (default build/release/tools/agentkv/agentkv)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import time
from typing import Callable, List

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("AGENTKV_BIN", REPO / "build/release/tools/agentkv/agentkv"))
if not BIN.is_absolute():
    BIN = REPO / BIN


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


class Server:
    """One agentkv serving command, its base URL read from its `serving http://...` line."""

    def __init__(self, args: List[str], log_dir: pathlib.Path, name: str) -> None:
        self.stdout_path = log_dir / f"{name}.out"
        self.stderr_path = log_dir / f"{name}.err"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen([str(BIN), *args], stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL)
        self.url = ""
        found = wait_until(self._read_url, timeout=10.0)
        if not found:
            self.stop()
            raise RuntimeError(f"{name} printed no URL; stderr: {self.stderr_path.read_text()}")

    def _read_url(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"exited {self.process.returncode}: "
                               f"{self.stderr_path.read_text()}")
        match = re.search(r"serving (http://127\.0\.0\.1:\d+)", self.stdout_path.read_text())
        if match:
            self.url = match.group(1)
        return bool(match)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
