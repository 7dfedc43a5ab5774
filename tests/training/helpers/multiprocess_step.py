"""Worker for test_multiprocess.py: N processes x 4 CPU devices run the same sharded steps.

Usage: python multiprocess_step.py PROCESS_ID NUM_PROCESSES PORT OUT_JSON
Each process feeds only its own rows (jax.make_array_from_process_local_data); the losses and a
parameter checksum are written to OUT_JSON by every process.
"""

import functools
import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")  # 4 per process
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

process_id, num_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if num_processes > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes, process_id)

import numpy as np  # noqa: E402

from transformer_jax import sharding as shd  # noqa: E402
from transformer_jax.models.encoder_decoder import EncoderDecoderConfig  # noqa: E402
from transformer_jax.tasks.translation import translation_loss  # noqa: E402
from transformer_jax.training import step as ts  # noqa: E402
from transformer_jax.training.optimizer import make_optimizer  # noqa: E402
from transformer_jax.training.state import create_train_state  # noqa: E402

LOSS = functools.partial(translation_loss, label_smoothing=0.1)
# One layer a side: the cross-process collectives are those of any depth, at half the compile.
CFG = EncoderDecoderConfig.tiny(
    vocab_size=40, dropout_rate=0.1, num_encoder_layers=1, num_decoder_layers=1
)
ROWS = 16


def global_rows(step):
    rng = np.random.default_rng(step)
    src = rng.integers(4, 40, (ROWS, 9)).astype(np.int32)
    tgt = rng.integers(4, 40, (ROWS, 7)).astype(np.int32)
    src[::3, 6:] = 0
    tgt[::2, 5:] = 0
    tgt_in = np.concatenate([np.full((ROWS, 1), 2, np.int32), tgt[:, :-1]], 1)
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt, "weights": (tgt != 0).astype(np.float32)}


tx, _ = make_optimizer(CFG.d_model, warmup_steps=10)
mesh = shd.make_mesh({"data": -1, "fsdp": 2})
graphdef, state, shardings = create_train_state(CFG, tx, mesh, seed=0)
train_fn, _ = ts.compile_steps(graphdef, tx, shardings, mesh, loss_fn=LOSS)
per_host = ROWS // jax.process_count()
losses = []
for step in range(3):
    rows = global_rows(step)
    local = {
        k: v[jax.process_index() * per_host : (jax.process_index() + 1) * per_host]
        for k, v in rows.items()
    }
    state, m = train_fn(state, ts.global_batch(local, mesh), jax.random.key(3))
    losses.append(float(m["loss_sum"] / m["tokens"]))
# One jitted reduction (the same program on every process), replicated result.
total = jax.jit(lambda p: sum(jax.numpy.abs(x).sum() for x in jax.tree.leaves(p)))
checksum = float(total(state.params))
with open(out, "w") as f:
    json.dump(
        {
            "losses": losses,
            "checksum": checksum,
            "devices": jax.device_count(),
            "process_count": jax.process_count(),
        },
        f,
    )
