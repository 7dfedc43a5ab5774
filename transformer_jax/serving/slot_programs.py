"""The jitted programs of the GPT slot engine (`gpt_slots.SlotEngine`), as pure functions.

The slots are the leaves of one batch-1 `DecoderOnly` cache of the whole context C, each with
a leading slot axis S. `admit` prefills one prompt into one slot (one program per prompt
bucket, the slot traced); `step` feeds every slot its last token through `jax.vmap` of the
model's `decode_step` and picks each slot's next token with its own settings and key.

Letters: S slots, C context (cache length), L prompt bucket, V vocabulary, D model width.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Bool, Float, Int, UInt32

from transformer_jax.inference.generator import LENGTH_STEP
from transformer_jax.inference.search import sampling_pick


def prompt_buckets(context: int) -> tuple[int, ...]:
    """Prefill buffer lengths: `LENGTH_STEP` doubled up to the context, then the context.

    A doubling ladder keeps warmup to a few compiled prefill programs (log2(C / 16) + 1) for at
    most twice the prompt's prefill work."""
    sizes, size = [], LENGTH_STEP
    while size < context:
        sizes.append(size)
        size *= 2
    return (*sizes, context)


def request_key(seed: int) -> np.ndarray:
    """The key data of `Generator.generate`'s batch 0 for `seed` (a batch of one)."""
    return np.asarray(jax.random.key_data(jax.random.fold_in(jax.random.key(seed), 0)))


def _at_index(cache: dict, index: Int[Array, ""]) -> dict:
    """`cache` with its next free column, top-level and every layer's, set to `index`."""
    layers = tuple(
        {**layer, "self": layer["self"].replace(index=index)} for layer in cache["layers"]
    )
    return {**cache, "index": index, "layers": layers}


def _slot_cache(model, context: int) -> dict:
    """An empty batch-1 cache of `context` columns without its output table (shared)."""
    cache = model.init_cache(1, context)
    return {k: v for k, v in cache.items() if k != "output_table"}


# The slots are the leaves of one `_slot_cache`, each with a leading slot axis S: the cache's
# own classes (KVCache) would not have the shapes they declare with that axis.
Slots = list[jax.Array]


@functools.partial(jax.jit, static_argnames=("graphdef", "slots", "context"))
def empty_slots(graphdef, params, *, slots: int, context: int) -> Slots:
    """`slots` empty batch-1 caches of `context` columns."""
    one = jax.tree.leaves(_slot_cache(nnx.merge(graphdef, params), context))
    return [jnp.zeros((slots, *x.shape), x.dtype) for x in one]


@functools.partial(jax.jit, static_argnames=("graphdef",))
def output_table(graphdef, params) -> Float[Array, "D V"]:
    """The tied E^T every slot reads (`DecoderOnly.init_cache`'s "output_table"), made once."""
    return nnx.merge(graphdef, params).embed.transposed_table()


@functools.partial(jax.jit, static_argnames=("graphdef", "context"), donate_argnames=("state",))
def admit(
    graphdef, params, state: Slots, prompt: Int[Array, "1 L"], end: Int[Array, ""],
    slot: Int[Array, ""], *, context: int,
) -> Slots:  # fmt: skip
    """`state` with slot `slot` holding the cache of `prompt[:, :end]` (the rest of the
    buffer is padding). `slot` is traced: one program per bucket L, whichever slot is free."""
    model = nnx.merge(graphdef, params)
    cache = {**_slot_cache(model, context), "output_table": model.embed.transposed_table()}
    _, cache = model.decode_step(prompt, cache)
    cache = _at_index({k: v for k, v in cache.items() if k != "output_table"}, end)
    return [
        jax.lax.dynamic_update_index_in_dim(s, c, slot, 0)
        for s, c in zip(state, jax.tree.leaves(cache), strict=True)
    ]


def pick_each(
    log_probs: Float[Array, "S V"],
    keys: UInt32[Array, "S K"],
    steps: Int[Array, " S"],
    temperature: Float[Array, " S"],
    top_k: Int[Array, " S"],
    top_p: Float[Array, " S"],
    greedy: Bool[Array, " S"],
) -> Int[Array, " S"]:
    """Each slot's next token: the argmax where `greedy`, else `sampling_pick` with the slot's
    settings and key `fold_in(key, step)`, as `search.sample_loop` draws step `step` for a
    batch whose row 0 is this slot. Sampling (a sort over V) runs only when a slot samples."""
    best = jnp.argmax(log_probs, axis=-1).astype(jnp.int32)

    def draw(row, key_data, step, temp, k, p):
        key = jax.random.fold_in(jax.random.wrap_key_data(key_data), step)
        return sampling_pick(temp, k, p)(row[None], key)[0]

    def sample():
        drawn = jax.vmap(draw)(log_probs, keys, steps, temperature, top_k, top_p)
        return jnp.where(greedy, best, drawn)

    return jax.lax.cond(jnp.all(greedy), lambda: best, sample)


@functools.partial(jax.jit, static_argnames=("graphdef", "context"), donate_argnames=("state",))
def step(
    graphdef, params, table: Float[Array, "D V"], state: Slots, last: Int[Array, " S"],
    live: Bool[Array, " S"], keys: UInt32[Array, "S K"], steps: Int[Array, " S"],
    temperature: Float[Array, " S"], top_k: Int[Array, " S"], top_p: Float[Array, " S"],
    greedy: Bool[Array, " S"], *, context: int,
) -> tuple[Int[Array, " S"], Slots]:  # fmt: skip
    """One token for every slot: feeds `last`, returns the picks and the advanced state.
    Slots not `live` keep their index (their picks are garbage); `table` is read by all."""
    model = nnx.merge(graphdef, params)
    structure = jax.tree.structure(_slot_cache(model, context))

    def one(leaves, token, live):
        cache = jax.tree.unflatten(structure, leaves)
        logits, new = model.decode_step(token[None, None], {**cache, "output_table": table})
        new = _at_index(new, jnp.where(live, new["index"], cache["index"]))
        del new["output_table"]
        return jax.nn.log_softmax(logits[0, 0].astype(jnp.float32)), jax.tree.leaves(new)

    log_probs, state = jax.vmap(one)(state, last, live)
    greedy = greedy | ~live  # free slots never make the step sample
    return pick_each(log_probs, keys, steps, temperature, top_k, top_p, greedy), state
