"""The default model's shapes on 8 simulated CPU devices: train, evaluate and checkpoint.

Regression test for the XLA:CPU all-reduce deadlock ("may be stuck", then SIGABRT after 40 s)
that the default config hit with `--xla_force_host_platform_device_count=8` on a 2-core machine.

Mechanism (jaxlib 0.10.2): the CPU client has max(cores, devices) = 8 pool threads, and every
device's part of an 8-device program runs on one of them, blocking it until the program ends; a
step's gradient all-reduce therefore needs all 8 at once. Each device also admits at most 32
programs in flight; the 33rd launch blocks *on a pool thread*. A loop that dispatches without
bound reaches 32 queued steps (or 32 tiny programs summing a metric window on the devices),
a launch takes a pool thread, only 7 participants of the next all-reduce can run, and nothing
completes again. The loop must stay at most one step ahead of the devices.

The checks are on that cause, not on the hang (which takes XLA 60 s to turn into an abort): the
loop must have waited for step n-1 before it dispatches step n+1 (deterministic, whatever the
machine's speed), and no more than two dispatched steps may ever be unfinished.
Eight steps, evaluated and saved every four: the checks hold from the third step on; most of the
time is compiling the train step, the eval step and greedy decoding.
"""

import json

import jax
import pytest

from configs import default
from transformer_jax.training import loop as train_lib
from transformer_jax.training import programs as programs_lib

MAX_IN_FLIGHT = 2  # the step just dispatched and the one before it


@pytest.mark.slow(seconds=40)
def test_default_shapes_train_eval_checkpoint_on_8_devices(tmp_path, monkeypatch):
    assert jax.device_count() == 8, "conftest.py simulates 8 CPU devices"

    c = default.get_config()
    # The default model and batch shapes (d_model 128, 2+2 layers, d_ff 512, 4 heads, 4096
    # tokens per side, rows of 48) are kept; only the corpus is small, for a quick tokenizer.
    assert (c.model.d_model, c.model.num_encoder_layers, c.model.num_decoder_layers) == (128, 2, 2)
    assert (c.model.d_ff, c.model.num_heads, c.data.tokens_per_batch) == (512, 4, 4096)
    c.data.embedded_train_size = 2000
    c.data.embedded_eval_size = 64
    c.data.embedded_test_size = 64
    c.data.spm_sample_size = 4000
    c.num_train_steps = 8
    c.log_every = 4
    c.eval_every = 4
    c.checkpoint_every = 4
    c.eval_bleu_sentences = 8
    c.decode_batch_size = 8
    c.test_sentences = 0

    compile_steps = programs_lib.compile_steps
    block_until_ready = jax.block_until_ready
    in_flight_seen, waited = [], set()

    def watched_block_until_ready(tree):
        waited.update(id(leaf) for leaf in jax.tree.leaves(tree))
        return block_until_ready(tree)

    def watched_compile_steps(*args, **kwargs):
        train_fn, eval_fn = compile_steps(*args, **kwargs)
        dispatched = []

        def watched_train_fn(state, batch, rng):
            if len(dispatched) >= 2 and id(dispatched[-2]) not in waited:
                raise AssertionError(
                    f"step {len(dispatched) + 1} dispatched before the loop waited for step "
                    f"{len(dispatched) - 1}: it runs ahead of the devices without bound"
                )
            new_state, metrics = train_fn(state, batch, rng)
            dispatched.append(jax.tree.leaves(metrics)[0])
            unfinished = sum(not m.is_ready() for m in dispatched)
            in_flight_seen.append(unfinished)
            if unfinished > MAX_IN_FLIGHT:
                raise AssertionError(
                    f"{unfinished} train steps dispatched and unfinished at step "
                    f"{len(dispatched)}: the loop runs ahead of the devices without bound"
                )
            return new_state, metrics

        return watched_train_fn, eval_fn

    monkeypatch.setattr(programs_lib, "compile_steps", watched_compile_steps)
    monkeypatch.setattr(train_lib.jax, "block_until_ready", watched_block_until_ready)

    result = train_lib.train_and_evaluate(c, str(tmp_path))

    assert result["step"] == 8
    assert max(in_flight_seen) <= MAX_IN_FLIGHT
    assert sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir()) == [4, 8]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [4, 8]
    assert all("bleu" in r for r in evals)
    train = [r for r in rows if r["split"] == "train"]
    assert train[-1]["loss"] < train[0]["loss"]  # the window sums on the host are still right
