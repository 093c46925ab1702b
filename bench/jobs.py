"""fio job files: a [global] section for what every job shares and one
section per job, every parameter explicit (as in fio's own examples)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Value = str | int | float | None   # None: a flag without a value (time_based)

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


@dataclass(frozen=True)
class Job:
    name: str
    options: Mapping[str, Value] = field(default_factory=dict)


def _fmt(v: Value) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _section(title: str, options: Mapping[str, Value]) -> str:
    lines = [f"[{title}]"]
    for k, v in options.items():
        lines.append(k if v is None else f"{k}={_fmt(v)}")
    return "\n".join(lines) + "\n"


def render(global_options: Mapping[str, Value], jobs: Sequence[Job], comment: str = "") -> str:
    """The text of a job file."""
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate fio job names: {names}")
    for j in jobs:
        if not j.name or any(c in j.name for c in "[]\n ="):
            raise ValueError(f"bad fio job name {j.name!r}")
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + "\n".join([_section("global", global_options)]
                            + [_section(j.name, j.options) for j in jobs])


def common(filename: str, runtime: float, ramp: float, ioengine: str = "io_uring",
           percentiles: Sequence[float] = PERCENTILES) -> dict[str, Value]:
    """Global options every benchmark job shares: the raw device, O_DIRECT,
    a fixed run time after a ramp, completion-latency percentiles."""
    if runtime <= 0:
        raise ValueError("runtime must be positive")
    return {
        "filename": filename,
        "direct": 1,
        "ioengine": ioengine,
        "time_based": None,
        "runtime": f"{runtime:g}s",
        "ramp_time": f"{ramp:g}s",
        "norandommap": None,
        "randrepeat": 0,
        "percentile_list": ":".join(f"{p:g}" for p in percentiles),
        "group_reporting": 0,
    }


def parse_options(text: str) -> dict[str, dict[str, str | None]]:
    """A job file's sections and options (for tests and the report)."""
    out: dict[str, dict[str, str | None]] = {}
    cur: dict[str, str | None] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = out.setdefault(line[1:-1], {})
            continue
        if cur is None:
            raise ValueError(f"option outside a section: {line!r}")
        k, sep, v = line.partition("=")
        cur[k.strip()] = v.strip() if sep else None
    return out
