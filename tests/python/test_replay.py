"""agentkv.replay: the replay of `agentkv replay` from Python.

Its report equals the JSON the command line writes for the same flags (byte for byte when it
writes the file), its errors are the command line's, progress reaches Python from every arm,
an exception raised there stops the replay, and the GIL is released while it runs.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import agentkv
import pytest
from agentkv.sim import replay_args

# Small and fast: a few arms on a short synthetic workload.
SMALL = dict(sessions=4, num_engines=2, max_total_tokens=65536)
ARMS = ["baseline", "+lifecycle", "all"]


def run_cli(binary, args):
    """Runs `agentkv replay ARGS --quiet`; returns the completed process."""
    return subprocess.run([str(binary), "replay", *args, "--quiet"], capture_output=True,
                          text=True, timeout=120)


def cli_error(binary, args):
    """The message of the one error line `agentkv replay ARGS` prints, and its exit code 2."""
    done = run_cli(binary, args)
    assert done.returncode == 2, done
    prefix = "agentkv replay: error: "
    assert done.stderr.startswith(prefix) and done.stderr.count("\n") == 1, done.stderr
    return done.stderr[len(prefix):].rstrip("\n")


def test_flags_are_the_command_lines():
    assert replay_args(arms=["baseline", "all"], seed=3, max_total_tokens=65536,
                       continuum_program_fcfs=False, hicache_ratio=2.5, trace=None,
                       router=None) == [
        "--workload=synthetic", "--seed=3", "--arms=baseline,all", "--html", "", "--json", "",
        "--max-total-tokens=65536", "--continuum-program-fcfs=false", "--hicache-ratio=2.5"]
    assert replay_args(workload="weka", trace=["a", "b"], json="out.json") == [
        "--workload=weka", "--seed=1", "--trace=a", "--trace=b", "--html", "",
        "--json=out.json"]


def test_result_equals_the_command_lines_report(agentkv_bin, tmp_path):
    cli_json, cli_html = tmp_path / "cli.json", tmp_path / "cli.html"
    done = run_cli(agentkv_bin, ["--sessions", "4", "--num-engines", "2",
                                 "--max-total-tokens", "65536", "--arms", ",".join(ARMS),
                                 "--json", str(cli_json), "--html", str(cli_html)])
    assert done.returncode == 0, done.stderr

    py_json, py_html = tmp_path / "py.json", tmp_path / "py.html"
    result = agentkv.replay(arms=ARMS, html=py_html, json=str(py_json), **SMALL)

    assert result == json.loads(cli_json.read_text())
    assert [arm["arm"] for arm in result["arms"]] == ARMS
    assert "synthetic: 4 sessions" in result["setup"]["workload"]
    assert py_json.read_bytes() == cli_json.read_bytes()
    assert py_html.read_bytes() == cli_html.read_bytes()


def test_options_change_the_result():
    small = agentkv.replay(arms=["baseline"], **SMALL)
    other_seed = agentkv.replay(arms=["baseline"], **{**SMALL, "seed": 2})
    larger = agentkv.replay(arms=["baseline"], **{**SMALL, "max_total_tokens": 131072})
    assert small["setup"]["seed"] == 1 and other_seed["setup"]["seed"] == 2
    assert other_seed["arms"] != small["arms"]
    assert (larger["setup"]["device_tokens_per_engine"]
            > small["setup"]["device_tokens_per_engine"])


@pytest.mark.parametrize("options, message", [
    (dict(num_engines=0), "--num-engines must be in [1, 1024], got 0"),
    (dict(workload="nope"), "--workload"),
    (dict(workload="rollout", sessions=4), "do not apply to --workload rollout"),
    (dict(trace="t.json"), "--trace needs --workload weka, mooncake or bailian"),
    (dict(sessions="many"), "--sessions"),
    (dict(no_such_flag=1), "--no-such-flag"),
    (dict(arms=["baseline", "no-such-arm"]), "no-such-arm"),
    (dict(html="no-such-dir/r.html"), 'directory "no-such-dir" does not exist'),
])
def test_bad_options_raise_the_command_lines_error(agentkv_bin, options, message):
    with pytest.raises(agentkv.InvalidArgumentError) as raised:
        agentkv.replay(**options)
    assert message in str(raised.value)
    assert str(raised.value) == cli_error(agentkv_bin, replay_args(**options))


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_reaches_every_arm_from_0_to_1(jobs):
    calls = []
    agentkv.replay(arms=ARMS, jobs=jobs, progress=lambda arm, f: calls.append((arm, f)),
                   **SMALL)
    assert {arm for arm, _ in calls} == set(ARMS)
    for name in ARMS:
        fractions = [f for arm, f in calls if arm == name]
        assert fractions[0] == 0.0 and fractions[-1] == 1.0, (name, fractions)
        assert fractions == sorted(fractions), (name, fractions)
        assert len(fractions) > 2, (name, fractions)
    if jobs == 1:  # One arm after the other.
        assert [arm for arm, _ in calls] == sorted((arm for arm, _ in calls), key=ARMS.index)


class Stop(Exception):
    pass


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_in_progress_stops_the_replay(jobs):
    calls = []
    stop = Stop("enough")

    def progress(arm, fraction):
        calls.append((arm, fraction))
        if fraction > 0:
            raise stop

    with pytest.raises(Stop) as raised:
        agentkv.replay(arms=ARMS, jobs=jobs, progress=progress, **SMALL)
    assert raised.value is stop
    # Stopped at the first report after the start: no arm ran to its end.
    assert all(fraction < 1.0 for _, fraction in calls), calls
    assert len([f for _, f in calls if f > 0]) <= jobs, calls
    # The next replay runs normally.
    assert [arm["arm"] for arm in agentkv.replay(arms=["baseline"], **SMALL)["arms"]] == [
        "baseline"]


def test_the_gil_is_released_while_it_runs():
    # With a long switch interval a thread holding the GIL keeps it: the counting thread runs
    # during the replay only if the replay lets go of the GIL.
    counter = 0
    stop = threading.Event()

    def count():
        nonlocal counter
        while not stop.is_set():
            counter += 1
            stop.wait(0.0005)  # Releases the GIL.

    seen = {}

    def progress(arm, fraction):
        seen.setdefault(arm, []).append(counter)

    interval = sys.getswitchinterval()
    counting = threading.Thread(target=count)
    sys.setswitchinterval(10.0)
    try:
        counting.start()
        # A few tens of milliseconds per arm: time enough for the counter to move.
        agentkv.replay(arms=["baseline", "all"], jobs=1, progress=progress,
                       **{**SMALL, "sessions": 8})
    finally:
        stop.set()
        counting.join()
        sys.setswitchinterval(interval)
    for arm, counts in seen.items():
        assert counts[-1] > counts[0], (arm, counts)


def test_html_report_is_written_and_self_contained(tmp_path):
    path = tmp_path / "report.html"
    result = agentkv.replay(arms=["baseline", "all"], html=path, **SMALL)
    html = path.read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "<svg" in html and "baseline" in html
    assert result["setup"]["workload"] in html
    for external in ("src=\"http", "<script src", "<link", "@import"):
        assert external not in html, external
    assert not list(tmp_path.glob("*.tmp-*"))


def test_ctrl_c_stops_the_replay():
    # No callback: the replay itself checks for signals at each progress report. Run whole,
    # these four arms of 48 sessions take seconds; SIGINT 0.2 s in stops them at once.
    interrupter = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            agentkv.replay(arms=["baseline", "+lifecycle", "all", "continuum"], sessions=48,
                           jobs=1)
    finally:
        interrupter.join()
    assert time.monotonic() - start < 1.5
