"""The replay's sections of scripts/perf-report.py: `agentkv replay`, end to end (issue 34, item
3), timed here as whole processes."""

import os
import re
import shlex
import subprocess
import sys

from perfreport.stats import ReportError, Runs, Spread, spread_cell, verdict


REPLAY_ARGS = ["replay", "--quiet", "--json", "", "--html", ""]
# (run name, extra arguments, wall-clock target in seconds).
REPLAY_RUNS = [("Replay/jobs:2", ["--jobs", "2"], 2.5), ("Replay/jobs:1", ["--jobs", "1"], 5.0)]
REPLAY_SCALE_SESSIONS = 4800
REPLAY_SCALE_LIMIT_S = 1800
REPLAY_SCALE_WALL_TARGET_S = 600.0
REPLAY_SCALE_MEMORY_TARGET_GB = 4.0
# The arms the scale target counts: the default set but the two references, whose cost is not a
# policy's (the oracle knows the whole run's future; infinite-cache sizes its pool to it).
REPLAY_SCALE_REFERENCE_ARMS = ("oracle", "infinite-cache")


def run_timed(args, stderr=subprocess.DEVNULL, timeout_s=None, on_poll=None):
    """Runs `args` to its end (or kills it at `timeout_s`): (wall s, CPU s, peak RSS MB, exit
    status, stopped). CPU and peak RSS are the process's own (wait4), not its siblings'.
    `on_poll(pid, elapsed)` is called about once a second while it runs."""
    import time
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
    stopped = False
    if timeout_s is None and on_poll is None:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # Reaped here, not by Popen.
        return (time.monotonic() - start, usage.ru_utime + usage.ru_stime,
                usage.ru_maxrss / 1024.0, proc.returncode, False)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid != 0:
            break
        elapsed = time.monotonic() - start
        if timeout_s is not None and elapsed > timeout_s:
            proc.kill()
            stopped = True
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        if on_poll is not None:
            on_poll(proc.pid, elapsed)
        time.sleep(1.0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (time.monotonic() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0,
            proc.returncode, stopped)


def collect_replay(binary, repetitions):
    """The default replay with two arms at a time and on one core, alternated."""
    entries = []
    for index in range(repetitions):
        for name, extra, _ in REPLAY_RUNS:
            print("perf-report: replay %s, repetition %d of %d" % (name, index + 1, repetitions),
                  file=sys.stderr)
            wall, cpu, peak, status, _ = run_timed([binary] + REPLAY_ARGS + extra)
            if status != 0:
                raise ReportError("replay: `%s` exited with status %d; nothing is reported" %
                                  (" ".join([binary] + REPLAY_ARGS + extra), status))
            entries.append({"run_name": name, "run_type": "iteration", "repetition_index": index,
                            "wall_s": wall, "cpu_s": cpu, "peak_mb": peak})
    command = "; ".join(" ".join(shlex.quote(a) for a in [binary] + REPLAY_ARGS + extra)
                        for _, extra, _ in REPLAY_RUNS)
    return "%s (alternated, x%d)" % (command, repetitions), {"benchmarks": entries}


def render_replay(run):
    runs = Runs(run.benchmark)
    rows = [
        "The default replay (48 synthetic sessions, the default 16 arms), whole process: wall "
        "clock from start to exit, CPU (user + system) and peak RSS of the process (wait4), "
        "median (min-max) over the repetitions, the two commands alternated.",
        "",
        "| command | wall s | CPU s | peak RSS MB | target (wall) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for name, extra, target in REPLAY_RUNS:
        wall = Spread.of(runs.field(name, "wall_s").values())
        rows.append("| `agentkv replay %s` | %s | %s | %s | <= %.1f s | %s |" % (
            " ".join(extra), spread_cell(wall),
            spread_cell(Spread.of(runs.field(name, "cpu_s").values())),
            spread_cell(Spread.of(runs.field(name, "peak_mb").values())), target,
            verdict(wall, target, at_most=True)))
    return "\n".join(rows)


FINISHED_LINE = re.compile(r"arm (\d+)/(\d+) (\S+)\s+finished\s+(\d+) s")


def collect_replay_scale(binary, repetitions):
    """One run of `agentkv replay --sessions 4800` (the default arms, two at a time): its wall
    clock, CPU, peak RSS, each arm's finish time (from the progress lines) and the peak RSS
    sampled as it ran. Once, whatever --repetitions says: it takes tens of minutes."""
    import tempfile
    del repetitions
    args = [binary, "replay", "--sessions", str(REPLAY_SCALE_SESSIONS), "--json", "",
            "--html", ""]
    samples = []

    def sample(pid, elapsed):
        if samples and elapsed - samples[-1][0] < 30:
            return
        try:
            with open("/proc/%d/status" % pid) as f:
                hwm = [line for line in f if line.startswith("VmHWM:")]
        except OSError:
            return
        if hwm:
            samples.append((elapsed, int(hwm[0].split()[1]) / 1024.0))

    print("perf-report: running %s (one run, stopped at %d s)" %
          (" ".join(args), REPLAY_SCALE_LIMIT_S), file=sys.stderr)
    with tempfile.TemporaryFile(mode="w+") as err:
        wall, cpu, peak, status, stopped = run_timed(args, stderr=err,
                                                     timeout_s=REPLAY_SCALE_LIMIT_S,
                                                     on_poll=sample)
        err.seek(0)
        progress = err.read()
    if status != 0 and not stopped:
        raise ReportError("replay-scale: `%s` exited with status %d; nothing is reported" %
                          (" ".join(args), status))
    arms = []
    for match in FINISHED_LINE.finditer(progress):
        arms.append({"index": int(match.group(1)), "of": int(match.group(2)),
                     "arm": match.group(3), "finished_s": float(match.group(4))})
    entry = {"run_name": "ReplayScale", "run_type": "iteration", "repetition_index": 0,
             "sessions": REPLAY_SCALE_SESSIONS, "wall_s": wall, "cpu_s": cpu, "peak_mb": peak,
             "stopped_at_limit": stopped, "limit_s": REPLAY_SCALE_LIMIT_S, "arms": arms,
             "peak_samples": samples}
    return " ".join(shlex.quote(a) for a in args), {"benchmarks": [entry]}


def gigabytes(mib):
    """MiB (what wait4 and /proc give, in KiB / 1024) as GB of 10^9 bytes, as targets say."""
    return mib * 1024.0 * 1024.0 / 1e9


def render_replay_scale(run):
    e = next(iter(Runs(run.benchmark).get("ReplayScale").values()))
    arms = sorted(e["arms"], key=lambda a: a["index"])
    total = arms[0]["of"] if arms else 0
    policy = [a for a in arms if a["arm"] not in REPLAY_SCALE_REFERENCE_ARMS]
    policy_total = total - len(REPLAY_SCALE_REFERENCE_ARMS) if total else 0
    policy_done = max((a["finished_s"] for a in policy), default=None)
    peak_gb = gigabytes(e["peak_mb"])
    rows = [
        "One run of `agentkv replay --sessions %d` (the default %d arms, two at a time), whole "
        "process, %s. Wall clock, CPU (user + system) and peak RSS of the process (wait4); each "
        "arm's finish time is read from the progress lines (seconds from the start)." % (
            e["sessions"], total,
            "**stopped at the %d s limit**" % e["limit_s"] if e["stopped_at_limit"] else
            "run to its end"),
        "",
        "| figure | value | target | verdict |",
        "|---|---|---|---|",
    ]
    if len(policy) == policy_total and policy_done is not None:
        rows.append("| the %d policy arms (all but %s) finished by | %.0f s | <= %.0f s | %s |" % (
            policy_total, " and ".join(REPLAY_SCALE_REFERENCE_ARMS), policy_done,
            REPLAY_SCALE_WALL_TARGET_S,
            "met" if policy_done <= REPLAY_SCALE_WALL_TARGET_S else "**missed**"))
    else:
        rows.append("| the %d policy arms finished by | %d of %d finished | <= %.0f s | "
                    "**missed** |" % (policy_total, len(policy), policy_total,
                                      REPLAY_SCALE_WALL_TARGET_S))
    rows.append("| whole run, wall | %.0f s%s | | |" % (
        e["wall_s"], " (stopped)" if e["stopped_at_limit"] else ""))
    rows.append("| whole run, CPU | %.0f s | | |" % e["cpu_s"])
    rows.append("| peak RSS (GB of 10^9 bytes) | %.2f GB | <= %.1f GB | %s |" % (
        peak_gb, REPLAY_SCALE_MEMORY_TARGET_GB,
        "met" if peak_gb <= REPLAY_SCALE_MEMORY_TARGET_GB else "**missed**"))
    if arms:
        rows += ["", "Arms in the order they finished: %s." % ", ".join(
            "%s %.0f s" % (a["arm"], a["finished_s"])
            for a in sorted(arms, key=lambda a: a["finished_s"]))]
    samples = [(t, mb) for t, mb in e["peak_samples"] if t >= 1.0]
    if samples:
        rows += ["", "Peak RSS so far (VmHWM) as the run went, every 2 minutes: %s." % ", ".join(
            "%.2f GB at %.0f s" % (gigabytes(mb), t) for t, mb in samples[3::4])]
    return "\n".join(rows)
