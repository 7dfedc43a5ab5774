"""train.py on the tiny config on a real NVIDIA GPU: it finishes, its loss falls, and in
bfloat16 its attention runs on cuDNN (no fallback logged). Marked `gpu`; skipped without one."""

import json
import math
import pathlib
import subprocess
import sys

import jax
import pytest

from tests.train_runs import subprocess_env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        jax.default_backend() != "gpu", reason="needs an NVIDIA GPU (JAX_PLATFORMS=cuda)"
    ),
]

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = 30


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tiny_config_trains_on_the_gpu(tmp_path, dtype):
    assert jax.default_backend() == "gpu"
    cmd = [
        sys.executable, str(ROOT / "train.py"), "--config=configs/tiny.py",
        f"--workdir={tmp_path}", f"--config.num_train_steps={STEPS}",
        f"--config.eval_every={STEPS}", f"--config.checkpoint_every={STEPS}",
        "--config.eval_bleu_sentences=0", "--config.test_sentences=0",
        f"--config.model.dtype={dtype}",
    ]  # fmt: skip
    env = subprocess_env(JAX_PLATFORMS="cuda")  # The GPU or an error, never the CPU.
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = {r["step"]: r["loss"] for r in rows if r["split"] == "train"}
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert all(math.isfinite(x) for x in losses.values()), losses
    last = [losses[s] for s in range(STEPS - 4, STEPS + 1)]
    assert sum(last) / len(last) < losses[1] - 0.5, losses
    if dtype == "bfloat16":
        assert "cuDNN cannot run" not in proc.stderr, proc.stderr[-3000:]
