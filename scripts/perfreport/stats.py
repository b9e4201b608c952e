"""What every section of scripts/perf-report.py shares: its error, statistics over repetitions,
the cells of its tables, Google Benchmark's JSON read per repetition, and a section's run."""

import dataclasses
import statistics


class ReportError(Exception):
    """A failure with a message for the user (missing binary, missing marker, bad JSON)."""


# ---------------------------------------------------------------------------------------------
# Statistics over repetitions.


@dataclasses.dataclass(frozen=True)
class Spread:
    """Median and range of one figure over the repetitions of a run."""
    median: float
    low: float
    high: float
    count: int

    @staticmethod
    def of(values):
        values = list(values)
        if not values:
            raise ReportError("no repetitions to summarise")
        return Spread(statistics.median(values), min(values), max(values), len(values))


def paired_ratios(numerators, denominators):
    """Ratios of repetition i of `numerators` to repetition i of `denominators`.

    Both are {repetition_index: value}; only indices present in both are paired."""
    common = sorted(set(numerators) & set(denominators))
    if not common:
        raise ReportError("no repetition pairs to compare")
    return [numerators[i] / denominators[i] for i in common]


def number(value):
    """A figure with three significant digits at most (two decimals below 10)."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude < 10:
        return "%.2f" % value
    if magnitude < 100:
        return "%.1f" % value
    return "{:,.0f}".format(value)


def spread_cell(spread, fmt=number, suffix=""):
    """`median (min-max)`, or just the value when every repetition gave the same."""
    if spread.low == spread.high:
        return fmt(spread.median) + suffix
    return "%s%s (%s-%s)" % (fmt(spread.median), suffix, fmt(spread.low), fmt(spread.high))


def ratio_cell(ratios):
    return spread_cell(Spread.of(ratios), fmt=lambda v: "%.2f" % v, suffix="x")


# ---------------------------------------------------------------------------------------------
# Google Benchmark JSON.

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class Runs:
    """The per-repetition entries of one Google Benchmark JSON output, by run name."""

    def __init__(self, benchmark_json):
        self.by_name = {}
        for entry in benchmark_json.get("benchmarks", []):
            if entry.get("run_type", "iteration") != "iteration":
                continue  # Aggregates are recomputed here from the repetitions.
            if entry.get("error_occurred"):
                raise ReportError("%s failed: %s" % (entry["run_name"],
                                                     entry.get("error_message", "")))
            reps = self.by_name.setdefault(entry["run_name"], {})
            reps[int(entry.get("repetition_index", 0))] = entry

    def get(self, run_name):
        """{repetition_index: entry} of `run_name`; a missing run is an error naming it."""
        if run_name not in self.by_name:
            raise ReportError("no results for %s (have: %s)" %
                              (run_name, ", ".join(sorted(self.by_name)) or "none"))
        return self.by_name[run_name]

    def has(self, run_name):
        return run_name in self.by_name

    def field(self, run_name, key):
        """{repetition_index: entry[key]}."""
        return {i: float(e[key]) for i, e in self.get(run_name).items()}

    def ns_per_item(self, run_name):
        """{repetition_index: wall-clock ns per item}, from items_per_second (which Google
        Benchmark computes over manual or real time when the benchmark uses it)."""
        return {i: 1e9 / float(e["items_per_second"]) for i, e in self.get(run_name).items()}

    def cpu_ns_per_item(self, run_name):
        """{repetition_index: CPU ns per item}: the iteration's CPU time over the items of an
        iteration. Meaningful only where the whole iteration is the timed region."""
        out = {}
        for i, e in self.get(run_name).items():
            unit = TIME_UNIT_NS[e.get("time_unit", "ns")]
            items_per_iteration = float(e["items_per_second"]) * float(e["real_time"]) * unit / 1e9
            out[i] = float(e["cpu_time"]) * unit / items_per_iteration
        return out


@dataclasses.dataclass
class SectionRun:
    """What one section's program produced, with the conditions it ran under."""
    name: str
    command: str
    date: str
    load_before: str
    load_after: str
    benchmark: dict


def verdict(spread, target, at_most):
    """Whether a target holds in every repetition, at the median only, or not."""
    def ok(v):
        return v <= target if at_most else v >= target
    if ok(spread.high if at_most else spread.low):
        return "met in every repetition"
    if ok(spread.median):
        return "**met at the median, not in every repetition**"
    return "**missed**"
