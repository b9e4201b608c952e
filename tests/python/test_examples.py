"""The Python examples under examples/python run and write what they say.

Skipped where matplotlib (Debian python3-matplotlib, needed by the examples only) is absent.
"""

import os
import subprocess
import sys

import pytest

from conftest import REPO


def test_sweep_seeds_writes_a_png(package_dir, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep.png"
    env = dict(os.environ, PYTHONPATH=str(package_dir.parent), MPLCONFIGDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "sweep_seeds.py"), "--seeds", "2",
         "--max-total-tokens", "65536", "131072", "--arms", "baseline", "all", "--sessions",
         "4", "--metric", "ttft_p95", "--out", str(out)],
        capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out}"
    assert done.stderr.count(": done") == 4, done.stderr  # 2 sizes x 2 seeds.
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert out.stat().st_size > 10_000
