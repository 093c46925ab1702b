"""report.md (and summary.json, PNG plots) from a results folder.

The common header says what was measured where (device, model, kernel,
target, ssdsim's time_scale, parameters, seed); each suite writes its own
tables and plots below it (bench/suites/<suite>.py: report())."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import results as resmod
from bench.markdown import table
# kybertune.auto's plot() takes these from here (until it imports bench.plot)
from bench.results import Results
from bench.trace import report_section as trace_section


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def device_line(m: dict[str, Any]) -> str:
    d = m["device"]
    s = f"`{d['path']}`"
    if d.get("given") and d["given"] not in (d["path"], d["name"]):
        s += f" (given as `{d['given']}`)"
    s += f": {d['model']}, {human_bytes(d['size_bytes'])}"
    s += f", {d['hw_queues']} hardware queue(s) of depth {d['hw_depth']}"
    return s


def header(res: Results, title: str) -> str:
    m = res.manifest
    t = m["target"]
    d = m["device"]
    p = m["params"]
    out = [f"# {title}\n"]
    rows: list[tuple[str, str]] = [
        ("Device", device_line(m)),
        ("Kernel", f"`{t.get('kernel', '?')}`"),
        ("Target", f"{t.get('kind', '?')}, {t.get('cpus', '?')} CPU(s)"
                   + (f" ({t['cpu_model']})" if t.get("cpu_model") else "")
                   + f", {t.get('fio', 'fio ?')}"),
    ]
    if d.get("kind") == "ssdsim":
        mp = d.get("module_params", {})
        rows.append(("ssdsim", f"time_scale = {mp.get('time_scale', '?')}; parameters: "
                     + ", ".join(f"{k}={v}" for k, v in sorted(mp.items()))))
    elif d.get("kind") == "null_blk":
        mp = d.get("module_params", {})
        rows.append(("null_blk", ", ".join(f"{k}={v}" for k, v in sorted(mp.items())
                                           if k in NULL_BLK_SHOWN)))
    for k, v in t.items():
        if k.startswith("note"):
            rows.append(("Note", str(v)))
    rows += [
        ("Runs", f"{len(res.runs)} of {len(_nruns(m))} planned, "
                 f"status **{m.get('status', '?')}**; {p['reps']} repetition(s), "
                 f"{p['runtime']:g} s each after a {p['ramp']:g} s ramp; ioengine {p['ioengine']}"),
        ("Order", f"configurations in random order, seed {p['seed']}"),
        *trace_rows(p),
        ("When", f"{m.get('created', '?')} – {m.get('finished', '?')}"),
        ("Command", f"`{' '.join(m.get('command', []))}`"),
    ]
    out.append(table(["", ""], rows, "ll"))
    notes = list(m.get("notes", []))
    for name, ph in m.get("phases", {}).items():
        if ph.get("note"):
            notes.append(f"phase {name}: {ph['note']}")
    if notes:
        out.append("\nNotes:\n\n" + "".join(f"- {n}\n" for n in notes))
    if m.get("status") != "complete":
        out.append(f"\n**This run is {m.get('status')}**"
                   + (f": {m['error']}" if m.get("error") else "")
                   + "; the tables below hold what completed.\n")
    return "\n".join(out)


def trace_rows(p: dict[str, Any]) -> list[tuple[str, str]]:
    tr = p.get("trace")
    if not tr:
        return []
    what = ("every run, kept beside it" if tr.get("saved") else
            "only in the configurations that ask for them, kept beside their runs"
            if tr.get("kept") else "only in the runs that measure tracing's cost, not kept")
    return [("Tracing", f"{tr['tracer']}, {tr.get('buffer_kb_per_cpu')} KiB per CPU"
             + (f", clock {tr['clock']}" if tr.get("clock") else "")
             + f"; events {', '.join(tr.get('events', []))}; {what}")]


NULL_BLK_SHOWN = {"queue_mode", "irqmode", "completion_nsec", "submit_queues",
                  "hw_queue_depth", "bs", "blocksize", "gb", "memory_backed"}


def _nruns(m: dict[str, Any]) -> list[str]:
    return [k for _, _, block in m.get("order", []) for k in block]


def write(folder: str | Path) -> Path:
    """Write report.md, summary.json and plots/*.png into a results folder."""
    from bench.suites import get as get_suite
    res = resmod.load(folder)
    try:
        suite = get_suite(res.suite)
    except KeyError as e:
        raise resmod.ResultsError(f"{folder}: {e.args[0]}") from e
    plots = res.folder / "plots"
    plots.mkdir(exist_ok=True)
    for old in plots.glob("*.png"):
        old.unlink()
    rep = suite.report(res, plots)
    traces, trace_summary = trace_section(res)
    text = header(res, f"{suite.title}") + "\n" + rep.body + traces
    text += ("\n## Files\n\n`manifest.json` (parameters, order, one record per run), "
             "`runs/NNN-*.fio` (the exact job files), `runs/NNN-*.json` (fio's output), "
             + ("`runs/NNN-*.trace.txt.gz` or `runs/NNN-*.lttng/` (the traces), "
                if trace_summary else "")
             + "`plots/`.\n")
    summary = {**rep.summary, **({"traces": trace_summary} if trace_summary else {})}
    path = res.folder / "report.md"
    path.write_text(text)
    (res.folder / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True)
                                             + "\n")
    (res.folder / "headline.md").write_text(rep.headline)
    return path
