"""Make a small test fixture from a real results folder: keep the runs whose
key matches a pattern, and in fio's JSON only the fields the reports read
(fio's own layout, minus histograms and per-second statistics).

    python3 -m bench.tests.trim_results SRC DST --keep 'empty/randread/' [--rep 0]
        [--trace-lines 80]

A run's ftrace text trace keeps its header and first --trace-lines events
(all by default); an LTTng trace directory is copied as it is.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path
from typing import Any

DIR_KEYS = ("io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios")
LAT_KEYS = ("min", "max", "mean", "stddev", "N")
JOB_KEYS = ("jobname", "groupid", "error", "elapsed", "job options", "job_runtime",
            "usr_cpu", "sys_cpu", "ctx", "majf", "minf")


def trim_dir(d: dict[str, Any]) -> dict[str, Any]:
    out = {k: d[k] for k in DIR_KEYS if k in d}
    if d.get("total_ios", 0):
        for lat in ("clat_ns", "lat_ns"):
            if lat in d:
                out[lat] = {k: d[lat][k] for k in LAT_KEYS if k in d[lat]}
                if "percentile" in d[lat]:
                    out[lat]["percentile"] = d[lat]["percentile"]
    return out


def trim(result: dict[str, Any]) -> dict[str, Any]:
    out = {k: result[k] for k in ("fio version", "timestamp", "time", "global options")
           if k in result}
    out["jobs"] = []
    for j in result["jobs"]:
        tj = {k: j[k] for k in JOB_KEYS if k in j}
        for d in ("read", "write", "trim"):
            if d in j:
                tj[d] = trim_dir(j[d])
        out["jobs"].append(tj)
    if "disk_util" in result:
        out["disk_util"] = result["disk_util"]
    return out


def trim_trace(text: str, events: int | None) -> str:
    """An ftrace text trace's header and its first @events events (None: all)."""
    out: list[str] = []
    n = 0
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            n += 1
            if events is not None and n > events:
                break
        out.append(line)
    return "".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--keep", action="append", required=True, help="regex on run keys")
    ap.add_argument("--rep", type=int, action="append", help="keep only these repetitions")
    ap.add_argument("--trace-lines", type=int, help="events kept of each ftrace text trace")
    a = ap.parse_args()
    m = json.loads((a.src / "manifest.json").read_text())
    pats = [re.compile(p) for p in a.keep]

    def keep(key: str, rep: int) -> bool:
        return any(p.search(key) for p in pats) and (a.rep is None or rep in a.rep)
    if a.dst.exists():
        shutil.rmtree(a.dst)
    (a.dst / "runs").mkdir(parents=True)
    runs = [r for r in m["runs"] if keep(r["key"], r["rep"])]
    for r in runs:
        shutil.copy(a.src / r["job"], a.dst / r["job"])
        (a.dst / r["log"]).write_text((a.src / r["log"]).read_text())
        res = json.loads((a.src / r["json"]).read_text())
        (a.dst / r["json"]).write_text(json.dumps(trim(res), indent=1) + "\n")
        tr = r.get("trace", {}).get("file")
        if tr and (a.src / tr).is_dir():
            shutil.copytree(a.src / tr, a.dst / tr)
        elif tr:
            (a.dst / tr).write_text(trim_trace((a.src / tr).read_text(), a.trace_lines))
    m["runs"] = runs
    m["order"] = [[ph, rep, [k for k in block if keep(k, rep)]] for ph, rep, block in m["order"]]
    m["order"] = [o for o in m["order"] if o[2]]
    m["phases"] = {k: v for k, v in m.get("phases", {}).items()
                   if any(r["phase"] == k for r in runs)}
    (a.dst / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")


if __name__ == "__main__":
    main()
