"""How long train.py takes to save and exit after a preemption notice (SIGTERM).

Starts `train.py` with the given config overrides, sends SIGTERM `--after` seconds after the
model line (the setup is done), and reports the seconds from the signal to the exit, the step
saved and the exit code. A cloud preemption kills the VM about 30 s after the notice.

  python benchmarks/preemption_latency.py                       # default config
  python benchmarks/preemption_latency.py --config.log_every=1000
  python benchmarks/preemption_latency.py --config.model.d_model=256 --config.model.d_ff=1024 \
      --config.model.num_encoder_layers=3 --config.model.num_decoder_layers=3

Arguments other than `--after`, `--workdir` and `--out` go to train.py unchanged. With `--out`
the measurement is also recorded in that JSON file (its row for the same train.py arguments
replaced, the others kept), with the date, machine and versions.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for benchmarks.main_job


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", type=float, default=45.0, help="seconds of training first")
    parser.add_argument("--workdir", default=None, help="default: a new temporary folder")
    parser.add_argument("--out", default=None, help="a JSON file to record the row in")
    args, train_args = parser.parse_known_args()
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="preemption_"))
    if args.workdir is not None and workdir.exists():
        shutil.rmtree(workdir)  # A fresh run each time: resuming would measure something else.
    cmd = [sys.executable, str(ROOT / "train.py"), f"--workdir={workdir}", *train_args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    while not any(line.startswith("model:") for line in lines):
        if proc.poll() is not None:
            time.sleep(0.5)
            sys.exit("train.py ended before training:\n" + "".join(lines[-20:]))
        time.sleep(0.1)
    time.sleep(args.after)
    proc.send_signal(signal.SIGTERM)
    signalled = time.time()
    code = proc.wait()
    seconds = time.time() - signalled
    time.sleep(0.5)  # The reader thread takes the last lines.
    saved = [m.group(1) for line in lines if (m := re.search(r"saved step (\d+)", line))]
    model = next(line.strip() for line in lines if line.startswith("model:"))
    print(model)
    print(f"train.py {' '.join(train_args) or '(default config)'}")
    print(
        f"SIGTERM after {args.after:g} s of training: exit code {code} {seconds:.1f} s later, "
        f"saved step {saved[-1] if saved else 'none'} (workdir {workdir})"
    )
    if args.out:
        record(pathlib.Path(args.out), {
            "train_args": train_args, "after_s": args.after, "model": model, "exit_code": code,
            "seconds": round(seconds, 2), "saved_step": int(saved[-1]) if saved else None,
        })  # fmt: skip
    return 0 if code == 0 and saved else 1


def record(path: pathlib.Path, row: dict) -> None:
    """Writes `row` into `path`'s rows, replacing the row of the same train.py arguments."""
    from benchmarks.main_job import machine

    data = json.loads(path.read_text()) if path.exists() else {"rows": []}
    rows = [r for r in data["rows"] if r["train_args"] != row["train_args"]]
    row |= {"date": time.strftime("%Y-%m-%d"), "machine": machine(),
            "jax": importlib.metadata.version("jax")}  # fmt: skip
    path.write_text(json.dumps({"rows": [*rows, row]}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
