"""The residual `Block` and the `Stack` of blocks that every model is built from (§3.1).

One block is self-attention (causal or not), optional cross-attention over a memory, and the
position-wise feed-forward network, each a residual sublayer with post-LN (the paper) or pre-LN.
The encoder of the paper is a stack of non-causal blocks, its decoder a stack of causal blocks
with cross-attention; a GPT is the decoder without cross-attention, BERT and ViT the encoder.

Letters: B batch, T query length, S memory length, C cache length, N heads, D model dim,
I inputs decoded (B = I with greedy decoding, B = I * K with K beams).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.nn.attention import Segments, dropout
from transformer_jax.nn.layers import FeedForward, LayerNorm
from transformer_jax.nn.multi_head import KVCache, MemoryKV, MultiHeadAttention
from transformer_jax.nn.stacked import layer_view, stack_modules
from transformer_jax.sharding import constrain_batch, target_platform

NORMS = ("post", "pre")
# Rematerialisation policies of a Stack (what the backward pass recomputes): none, everything
# inside a block, or everything except matrix products.
REMAT = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}
SelfMask = Bool[Array, "#B #N #T #T"] | Segments
CrossMask = Bool[Array, "#B #N #T #S"] | Segments
CacheMask = Bool[Array, "#B #N #T #C"]
# Cross-attention mask while decoding: one row per input (I), which its beams' rows share.
MemoryMask = Bool[Array, "#I #N #T #S"]


@jax.custom_vjp
def gradient_barrier(x: Float[Array, "B T D"]) -> Float[Array, "B T D"]:
    """The identity, whose gradient is computed whole (stored) before anything uses it.

    A pre-LN stack's residual stream x_{l+1} = x_l + f_l(LN(x_l)) has the gradient
    g_l = g_{l+1} + (LN and f_l's part): a sum over every later layer. XLA on CPU fused that
    sum into each of its consumers in every layer's backward pass, the transposing copies for
    the weight gradients among them, recomputing it per layer (docs/performance.md gives the
    cost). It drops optimization barriers before fusing, so the gradient passes through a
    conditional instead (both branches the identity; its predicate, the gradient's first
    element equal to itself, is not known at compile time), which stores it.
    """
    return x


def _barrier_fwd(x):
    return x, None


def _barrier_bwd(_, g):
    first = g[(0,) * g.ndim]
    return (jax.lax.cond(first == first, lambda g: g, lambda g: g * 1.0, g),)


gradient_barrier.defvjp(_barrier_fwd, _barrier_bwd)


def fold(rng: jax.Array | None, i: int | Int[Array, ""]) -> jax.Array | None:
    """A distinct key per sublayer and layer; `None` stays `None` (deterministic runs)."""
    return None if rng is None else jax.random.fold_in(rng, i)


@dataclasses.dataclass(frozen=True)
class BlockSpec:
    """What one block is made of; every model states it explicitly.

    Attributes:
      d_model, num_heads, d_ff: widths (§3.1-§3.3).
      causal: self-attention sees only earlier positions (§3.2.3).
      cross_attention: add attention over a memory (encoder-decoder attention, §3.2.3).
      norm: "post" = LayerNorm(x + Sublayer(x)) (§3.1); "pre" = x + Sublayer(LayerNorm(x)).
      activation: FFN non-linearity, a key of `transformer_jax.nn.layers.ACTIVATIONS`.
      dropout_rate: on every sublayer output before the residual sum (§5.4).
      attention_dropout_rate: on the attention weights.
      use_bias: biases in the attention projections.
      layer_norm_eps: LayerNorm epsilon.
      dtype: computation dtype (parameters stay float32).
      attention_kernel: how attention runs when its weights are not returned (one of
        `transformer_jax.nn.attention.ATTENTION_KERNELS`).
      scan_layers: a `Stack` of these blocks stores their parameters stacked on a leading layer
        axis and runs them as one `lax.scan` (compiled once, whatever the depth) instead of one
        after the other.
      remat: what a `Stack`'s backward pass recomputes instead of storing (`REMAT`): "none",
        "full" (each block's activations: least memory) or "dots" (keeps matmul outputs).
    """

    d_model: int
    num_heads: int
    d_ff: int
    causal: bool
    cross_attention: bool = False
    norm: str = "post"
    activation: str = "relu"
    dropout_rate: float = 0.0
    attention_dropout_rate: float = 0.0
    use_bias: bool = True
    layer_norm_eps: float = 1e-6
    dtype: object = jnp.float32
    attention_kernel: str = "auto"
    scan_layers: bool = False
    remat: str = "none"


class Block(nnx.Module):
    """Self-attention, optional cross-attention, feed-forward: each a residual sublayer."""

    def __init__(self, spec: BlockSpec, *, rngs: nnx.Rngs):
        if spec.norm not in NORMS:
            raise ValueError(f"Block norm must be one of {NORMS}, got {spec.norm!r}.")
        self.spec = spec

        def attention():
            return MultiHeadAttention(
                spec.d_model,
                spec.num_heads,
                use_bias=spec.use_bias,
                dropout_rate=spec.attention_dropout_rate,
                dtype=spec.dtype,
                attention_kernel=spec.attention_kernel,
                rngs=rngs,
            )

        def norm():
            return LayerNorm(spec.d_model, eps=spec.layer_norm_eps, dtype=spec.dtype)

        self.self_attn = attention()
        self.self_attn_norm = norm()
        if spec.cross_attention:
            self.cross_attn = attention()
            self.cross_attn_norm = norm()
        self.ffn = FeedForward(
            spec.d_model, spec.d_ff, activation=spec.activation, dtype=spec.dtype, rngs=rngs
        )
        self.ffn_norm = norm()

    def _residual(self, x, sublayer, norm: LayerNorm, rng, deterministic):
        """Post-LN `LN(x + Drop(f(x)))` (§3.1, §5.4) or pre-LN `x + Drop(f(LN(x)))`.

        `sublayer(h, rng)` returns `(output, extra)`; `extra` (weights or a cache) is passed on.
        """
        inner, outer = fold(rng, 0), fold(rng, 1)
        rate = self.spec.dropout_rate
        if self.spec.norm == "post":
            y, extra = sublayer(x, inner)
            return norm(x + dropout(y, rate, outer, deterministic)), extra
        y, extra = sublayer(norm(x), inner)
        return x + dropout(y, rate, outer, deterministic), extra

    def _ffn(self, x, rng, deterministic):
        return self._residual(
            x, lambda h, _: (self.ffn(h), None), self.ffn_norm, rng, deterministic
        )

    def __call__(
        self,
        x: Float[Array, "B T D"],
        mask: SelfMask | None,
        *,
        memory: Float[Array, "B S D"] | None = None,
        cross_mask: CrossMask | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_weights: bool = False,
    ) -> tuple[Float[Array, "B T D"], dict[str, Array]]:
        """A full-sequence pass (training, scoring).

        Args:
          x: `[B, T, D]`.
          mask: self-attention mask (padding or segments); the causal mask is added here when
            the block is causal.
          memory: `[B, S, D]`, required with cross-attention.
          cross_mask: cross-attention mask, broadcastable to `[B, N, T, S]`.
          rng, deterministic: dropout.
          return_weights: return the attention weights (the reference attention runs then;
            without them the spec's attention kernel may).

        Returns:
          The output `[B, T, D]` and the attention weights (empty unless `return_weights`):
          `{"self": [B, N, T, T]}` and, with cross-attention, `"cross": [B, N, T, S]`.
        """
        causal = self.spec.causal

        def self_attention(h, key):
            return self.self_attn(
                h,
                h,
                mask,
                is_causal=causal,
                rng=key,
                deterministic=deterministic,
                return_weights=return_weights,
            )

        # Sublayer keys: 0 self-attention, 1 cross-attention, 2 feed-forward.
        x, weights = self._residual(
            x, self_attention, self.self_attn_norm, fold(rng, 0), deterministic
        )
        out = {"self": weights}
        if self.spec.cross_attention:
            if memory is None:
                raise ValueError("Block with cross_attention needs memory=[B, S, D].")

            def cross_attention(h, key):
                return self.cross_attn(
                    h,
                    memory,
                    cross_mask,
                    rng=key,
                    deterministic=deterministic,
                    return_weights=return_weights,
                )

            x, out["cross"] = self._residual(
                x, cross_attention, self.cross_attn_norm, fold(rng, 1), deterministic
            )
        x, _ = self._ffn(x, fold(rng, 2), deterministic)
        return x, out if return_weights else {}

    # ---------------------------------------------------------------------------- decoding
    def init_cache(self, batch: int, length: int, memory: Float[Array, "B S D"] | None = None):
        """`{"self": KVCache}` for `length` positions, plus `"cross": MemoryKV` of `memory`."""
        cache = {"self": self.self_attn.init_cache(batch, length)}
        if self.spec.cross_attention:
            if memory is None:
                raise ValueError("Block with cross_attention needs memory to build its cache.")
            cache["cross"] = self.cross_attn.memory(memory)
        return cache

    def decode(
        self,
        x: Float[Array, "B T D"],
        cache: dict[str, KVCache | MemoryKV],
        mask: CacheMask | None = None,
        cross_mask: MemoryMask | None = None,
    ) -> tuple[Float[Array, "B T D"], dict[str, KVCache | MemoryKV]]:
        """The next `T` positions through the cache (inference: no dropout).

        `mask` further restricts the cached self-attention (e.g. a prompt's padding);
        causality comes from the cache. Returns the output and the new cache.
        """
        new = dict(cache)

        def self_attention(h, _):
            return self.self_attn.cached(h, cache["self"], mask)

        x, new["self"] = self._residual(x, self_attention, self.self_attn_norm, None, True)
        if self.spec.cross_attention:

            def cross_attention(h, _):
                return self.cross_attn.cached(h, cache["cross"], cross_mask)

            x, new["cross"] = self._residual(x, cross_attention, self.cross_attn_norm, None, True)
        x, _ = self._ffn(x, None, True)
        return x, new


class Stack(nnx.Module):
    """`num_layers` identical blocks; pre-LN adds a final LayerNorm (the residual stream is
    never normalised otherwise).

    With `spec.scan_layers` the blocks are stored as one block whose parameters have a leading
    layer axis (`transformer_jax.nn.stacked`; the same values as unrolled blocks from the same
    seed), and the full-sequence pass is one `lax.scan` over it: XLA compiles one block and the
    optimizer updates one array per parameter, so compile time does not grow with depth.
    Checkpoints restore into either layout. `spec.remat` wraps each block in `jax.checkpoint`.
    """

    def __init__(self, spec: BlockSpec, num_layers: int, *, rngs: nnx.Rngs):
        if spec.remat not in REMAT:
            raise ValueError(f"remat={spec.remat!r} is not one of {tuple(REMAT)}.")
        blocks = [Block(spec, rngs=rngs) for _ in range(num_layers)]
        self.num_layers = num_layers
        self.stacked = spec.scan_layers and num_layers > 0
        self.layers = stack_modules(blocks) if self.stacked else nnx.List(blocks)
        self.final_norm = (
            LayerNorm(spec.d_model, eps=spec.layer_norm_eps, dtype=spec.dtype)
            if spec.norm == "pre"
            else None
        )
        self.remat = spec.remat

    def layer(self, i: int) -> Block:
        """Block `i` (a view of the stacked parameters when they are stacked)."""
        return layer_view(self.layers, i) if self.stacked else self.layers[i]

    def _finish(self, x):
        return x if self.final_norm is None else self.final_norm(x)

    def __call__(
        self,
        x: Float[Array, "B T D"],
        mask: SelfMask | None,
        *,
        memory: Float[Array, "B S D"] | None = None,
        cross_mask: CrossMask | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_weights: bool = False,
    ) -> tuple[Float[Array, "B T D"], list[dict[str, Array]]]:
        """`[B, T, D]` -> (`[B, T, D]`, per-layer attention weights as `Block` returns them)."""
        if not self.num_layers:
            return self._finish(x), []
        graphdef = nnx.graphdef(self.layers if self.stacked else self.layers[0])

        def block(x, state, i):
            """Layer i (its state given) on x; a pure function of arrays, so it can be
            scanned and rematerialised."""
            y, w = nnx.merge(graphdef, state)(
                x,
                mask,
                memory=memory,
                cross_mask=cross_mask,
                rng=fold(rng, i),
                deterministic=deterministic,
                return_weights=return_weights,
            )
            return constrain_batch(y), w

        if REMAT[self.remat] is not None:
            block = jax.checkpoint(block, policy=REMAT[self.remat])
        if self.stacked and not return_weights:

            def step(x, inputs):
                return block(x, inputs[1], inputs[0])[0], None

            layers = (jnp.arange(self.num_layers), nnx.state(self.layers))
            x, _ = jax.lax.scan(step, x, layers)
            return self._finish(x), [{} for _ in range(self.num_layers)]
        states = [nnx.state(self.layer(i)) for i in range(self.num_layers)]
        # Between unrolled pre-LN layers on one CPU device, the residual gradient is stored once
        # per layer (see `gradient_barrier`). The scan stores it anyway; other backends fuse
        # differently, a GPU would read each conditional's predicate on the host, and over a mesh
        # the predicate would be one more collective per layer.
        mesh = jax.sharding.get_abstract_mesh()
        barrier = (
            self.final_norm is not None
            and target_platform() == "cpu"
            and (mesh.empty or mesh.size == 1)
        )
        weights = []
        for i, state in enumerate(states):
            x, w = block(gradient_barrier(x) if barrier else x, state, i)
            weights.append(w)
        return self._finish(x), weights

    def init_cache(
        self, batch: int, length: int, memory: Float[Array, "B S D"] | None = None
    ) -> tuple[dict, ...]:
        """One cache per layer (see `Block.init_cache`)."""
        return tuple(
            self.layer(i).init_cache(batch, length, memory) for i in range(self.num_layers)
        )

    def decode(
        self,
        x: Float[Array, "B T D"],
        caches: tuple[dict, ...],
        mask: CacheMask | None = None,
        cross_mask: MemoryMask | None = None,
    ) -> tuple[Float[Array, "B T D"], tuple[dict, ...]]:
        """The next `T` positions through every layer's cache."""
        new = []
        for i, cache in enumerate(caches):
            x, cache = self.layer(i).decode(x, cache, mask, cross_mask)
            new.append(cache)
        return self._finish(x), tuple(new)


def unstacked(model: nnx.Module) -> nnx.Module:
    """A copy of `model` whose every stacked `Stack` holds its layers as per-layer blocks,
    sliced out of the stack once (the same arrays when no stack is stacked).

    Decoding calls a stack layer by layer at every step, and a stacked `Stack` slices each
    layer's parameters out of the stack at every call. XLA on CPU did not hoist those slices
    out of the decoding loop: it copied every layer's weights at every step, so a scanned
    model decoded slower than an unrolled one. Called inside `jax.jit` before the loop, the
    slices are taken once per call. `model` is not changed.
    """
    view = nnx.clone(model)
    stacks = [m for _, m in nnx.iter_modules(view) if isinstance(m, Stack) and m.stacked]
    for stack in stacks:
        stack.layers = nnx.List([stack.layer(i) for i in range(stack.num_layers)])
        stack.stacked = False
    return view
