"""python3 -m bench (see bench/cli.py)."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEBIAN_PY = "/usr/bin/python3"

try:
    import matplotlib  # noqa: F401
except ImportError:
    # The project's Python tooling runs on Debian's python3 (scripts/README.md); another
    # python3 first on PATH (pyenv, a venv) may lack matplotlib: use Debian's.
    if os.path.exists(DEBIAN_PY) and os.path.realpath(sys.executable) != \
            os.path.realpath(DEBIAN_PY) and not os.environ.get("BENCH_REEXEC"):
        env = {**os.environ, "BENCH_REEXEC": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        os.execve(DEBIAN_PY, [DEBIAN_PY, "-m", "bench", *sys.argv[1:]], env)
    sys.exit("bench: needs matplotlib and numpy: apt-get install python3-matplotlib "
             "python3-numpy (scripts/setup does), and run it with /usr/bin/python3")

# the project root, for `scripts.vmbed`, when run from elsewhere; kyber-tune's
# folder, for kybertune, whose steps follow the kyber-grid suite in `demo`
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "kyber-tune"))

from bench.cli import main  # noqa: E402
from kybertune import demo as kyber_tune_demo  # noqa: E402

sys.exit(main(demo_steps={"kyber-grid": kyber_tune_demo.steps}))
