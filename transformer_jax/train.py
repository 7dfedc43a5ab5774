"""The main job: `train_and_evaluate(config, workdir)`.

Sections: config and workdir -> data and tokenizer -> mesh -> model and optimizer (born sharded)
-> restore -> the loop (one jitted step) -> evaluation -> checkpoints -> final test.
Re-running with the same workdir resumes from the latest checkpoint, with the same data order
and dropout keys as an uninterrupted run.
"""

from __future__ import annotations

import pathlib
import time

import jax
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax import data as data_lib
from transformer_jax.checkpointing import (
    Checkpoints,
    PreemptionFlag,
    abstract_with_shardings,
    check_or_write_config,
)
from transformer_jax.config import TransformerConfig
from transformer_jax.evaluation import corpus_scores
from transformer_jax.losses import summarize
from transformer_jax.metrics_writer import MetricsWriter, format_duration
from transformer_jax.sharding import make_mesh
from transformer_jax.train_step import (
    compile_steps,
    create_train_state,
    global_batch,
    make_optimizer,
)

_POSITIVE = (
    "num_train_steps",
    "warmup_steps",
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "grad_accum_steps",
)


def validate_train_config(config: ml_collections.ConfigDict) -> None:
    """Raise a ValueError naming the field for values the loop cannot run with."""
    for name in _POSITIVE:
        value = config[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"config.{name} must be a positive integer, got {value!r}.")
    if not 0.0 <= config.label_smoothing < 1.0:
        raise ValueError(f"config.label_smoothing must be in [0, 1), got {config.label_smoothing}.")
    rows = config.data.batch_multiple
    if config.grad_accum_steps > 1 and rows % config.grad_accum_steps:
        raise ValueError(
            f"config.grad_accum_steps={config.grad_accum_steps} must divide "
            f"config.data.batch_multiple={rows} so batches split into equal micro-batches."
        )
    data_lib.validate_data_config(config.data)


def model_config(config: ml_collections.ConfigDict, vocab_size: int) -> TransformerConfig:
    """The model's dataclass from `config.model`, with the tokenizer's vocabulary size."""
    fields = dict(config.model)
    fields.setdefault("max_len", config.data.max_len)
    return TransformerConfig(vocab_size=vocab_size, **fields)


def _evaluate(eval_fn, params, batches, mesh) -> dict:
    sums = None
    for batch in batches:
        out = eval_fn(params, global_batch(batch, mesh))
        sums = out if sums is None else jax.tree.map(np.add, sums, out)
    return summarize(jax.device_get(sums))


def _bleu(graphdef, params, tokenizer, pairs, config, mesh) -> dict:
    """Greedy (KV-cached) translations of `pairs`' sources, scored against their targets."""
    from transformer_jax.translator import Translator

    translator = Translator(nnx.merge(graphdef, params), tokenizer, mesh=mesh)
    hyps = translator.translate(
        [s for s, _ in pairs], beam_size=1, batch_size=config.decode_batch_size
    )
    return corpus_scores(hyps, [t for _, t in pairs]) | {"examples": hyps[:3]}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Train, evaluate and checkpoint into `workdir`; returns the final metrics."""
    workdir = pathlib.Path(workdir).expanduser().resolve()
    validate_train_config(config)
    check_or_write_config(workdir, config)
    log = MetricsWriter(
        workdir, enabled=jax.process_index() == 0, total_steps=config.num_train_steps
    )

    # ---------------------------------------------------------------- data and tokenizer
    tokenizer = data_lib.load_tokenizer_or_train(config.data, workdir)
    train_iter = data_lib.make_train_iterator(config.data, tokenizer, workdir)
    eval_batches = data_lib.make_eval_batches(config.data, tokenizer, "eval")
    bleu_pairs = data_lib.get_pairs(config.data, "eval")[: config.eval_bleu_sentences]

    # --------------------------------------------------------- mesh, model, optimizer
    mesh = make_mesh(dict(config.mesh))
    cfg = model_config(config, tokenizer.vocab_size)
    tx, schedule = make_optimizer(
        cfg.d_model,
        warmup_steps=config.warmup_steps,
        lr_factor=config.lr_factor,
        b1=config.adam_b1,
        b2=config.adam_b2,
        eps=config.adam_eps,
        grad_clip_norm=config.grad_clip_norm,
    )
    graphdef, state, shardings = create_train_state(cfg, tx, mesh, config.seed)
    train_fn, eval_fn = compile_steps(
        graphdef,
        tx,
        shardings,
        mesh,
        label_smoothing=config.label_smoothing,
        grad_accum_steps=config.grad_accum_steps,
    )
    log.message(
        f"model: {sum(x.size for x in jax.tree.leaves(state.params)):,} parameters, "
        f"vocabulary {cfg.vocab_size}, mesh {dict(mesh.shape)}, {jax.device_count()} devices"
    )

    # ------------------------------------------------------------------- restore
    ckpt = Checkpoints(workdir, keep=config.keep_checkpoints)
    if ckpt.latest_step() is not None:
        abstract = abstract_with_shardings(jax.eval_shape(lambda s: s, state), shardings)
        state, data_state, _ = ckpt.restore(abstract)
        train_iter.set_state(data_state)
        log.message(f"resumed from {workdir}/checkpoints at step {int(state.step)}")

    # ------------------------------------------------------------------- the loop
    rng = jax.random.key(config.seed + 1)  # dropout; train_step folds in the step number
    preempt = PreemptionFlag()
    step = int(state.step)
    window, window_start, last = [], time.time(), {}
    try:
        while step < config.num_train_steps:
            state, metrics = train_fn(state, global_batch(next(train_iter), mesh), rng)
            step += 1
            window.append(metrics)
            final = step == config.num_train_steps
            if step % config.log_every == 0 or final:
                sums = jax.device_get(jax.tree.map(lambda *x: sum(x), *window))
                elapsed = time.time() - window_start
                train = summarize(sums) | {
                    "learning_rate": float(schedule(step - 1)),
                    "grad_norm": float(window[-1]["grad_norm"]),
                    "tokens_per_sec": float(sums["tokens"]) / max(elapsed, 1e-9),
                }
                log.write(step, "train", train)
                log.progress(step, train, len(window) / max(elapsed, 1e-9))
                window, window_start = [], time.time()
            if step % config.eval_every == 0 or final:
                last = _evaluate(eval_fn, state.params, eval_batches, mesh)
                if bleu_pairs:
                    scores = _bleu(graphdef, state.params, tokenizer, bleu_pairs, config, mesh)
                    examples = scores.pop("examples")
                    signature = scores.pop("bleu_signature")
                    last |= scores
                    log.message(f"  sacreBLEU signature: {signature}; e.g. {examples[0]!r}")
                log.write(step, "eval", last)
                log.message(
                    f"eval @ {step}: "
                    + ", ".join(f"{k} {v:.4g}" for k, v in last.items() if k != "tokens")
                )
            if step % config.checkpoint_every == 0 or final or preempt.requested:
                ckpt.save(step, state, train_iter.get_state(), {"seed": config.seed}, force=True)
                if "bleu" in last and step % config.eval_every == 0:
                    ckpt.save_best(
                        step, state, train_iter.get_state(), {"seed": config.seed}, last["bleu"]
                    )
            if preempt.requested:
                log.message(f"preempted: saved step {step}; rerun the same command to resume.")
                break
    finally:
        ckpt.wait()
        ckpt.close()
        preempt.restore_handler()

    # ------------------------------------------------------------------- final test
    result = {"step": step, **last}
    if step >= config.num_train_steps and config.test_sentences:
        pairs = data_lib.get_pairs(config.data, "test")
        if config.test_sentences > 0:
            pairs = pairs[: config.test_sentences]
        started = time.time()
        test = _bleu(graphdef, state.params, tokenizer, pairs, config, mesh)
        test.pop("examples")
        log.write(step, "test", test)
        log.message(
            f"test ({len(pairs)} sentences, {format_duration(time.time() - started)}): "
            f"BLEU {test['bleu']:.2f}, chrF {test['chrf']:.2f}, "
            f"exact match {100 * test['exact_match']:.1f}%  [{test['bleu_signature']}]"
        )
        result["test"] = test
    log.close()
    return result
