"""Parameter mappings as tables: a family declares once which of its parameters is which tensor
of another format, and how each tensor is transformed; reading and writing are the same two
functions for every family.

    LAYER = [
        Row(("self_attn/query", ""), "attention.self.query.weight", ...),
        ...
    ]
    rows = [*top_rows, *repeat(LAYER, "encoder/layers/{i}/", "encoder.layer.{i}.", 12)]
    params = read(source, rows, dims)       # a checkpoint's tensors -> our parameters by path
    tensors = write(flat, rows, dims)       # our parameters by path -> the checkpoint's tensors

A row joins one tensor of theirs to one or more of our parameters (GPT-2's one query-key-value
matrix is three of ours). An empty path is a part we do not keep (the key bias, which cancels in
the softmax): it is read and checked, then dropped, and written as zeros; so is a parameter a
model lacks (`use_bias=False`). `Dims` are the sizes the shapes are made of.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tensors import Source

# Our parameters a model may lack (biases, with use_bias=False): written as zeros.
_MAY_LACK = re.compile(r"(_bias|/b[12])$")

Dims = dict[str, int]  # d (model), n (heads), h (head dim), f (feed-forward), v (vocabulary)
Shape = Callable[[Dims], tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class Row:
    """Our parameters `ours` <-> their tensor `theirs`.

    Attributes:
      ours: our parameter paths ("" for a part not kept).
      theirs: their tensor's name.
      shape: their tensor's shape.
      parts: our parameters' shapes, in the order of `ours`.
      split: their tensor -> our parameters (a tuple in the order of `ours`).
      join: our parameters (zeros where not kept or absent) -> their tensor.
      alternatives: older names of their tensor, tried in order when reading.
    """

    ours: tuple[str, ...]
    theirs: str
    shape: Shape
    parts: tuple[Shape, ...]
    split: Callable[[np.ndarray, Dims], tuple[np.ndarray, ...]]
    join: Callable[[tuple[np.ndarray, ...], Dims], np.ndarray]
    alternatives: tuple[str, ...] = ()

    def prefixed(self, ours: str, theirs: str) -> Row:
        """The row inside a block: `ours` and `theirs` put before the names."""
        return dataclasses.replace(
            self,
            ours=tuple(ours + p if p else "" for p in self.ours),
            theirs=theirs + self.theirs,
            alternatives=tuple(theirs + a for a in self.alternatives),
        )


def repeat(rows: Sequence[Row], ours: str, theirs: str, count: int) -> list[Row]:
    """A block's rows for each of `count` layers; `ours` and `theirs` hold `{i}`."""
    return [
        row.prefixed(ours.format(i=i), theirs.format(i=i)) for i in range(count) for row in rows
    ]


def read(source: Source, rows: Iterable[Row], dims: Dims) -> dict[str, np.ndarray]:
    """Our parameters by path from a checkpoint (each tensor checked against its shape)."""
    out = {}
    for row in rows:
        tensor = source.get(row.theirs, row.shape(dims), *row.alternatives)
        for path, value in zip(row.ours, row.split(tensor, dims), strict=True):
            if path:
                out[path] = value
    return out


def write(
    flat: dict[str, np.ndarray], rows: Iterable[Row], dims: Dims, used: set[str] | None = None
) -> dict[str, np.ndarray]:
    """Their tensors by name from our parameters by path (zeros for parts not kept, and for
    biases the model lacks, as with `use_bias=False`); the paths read are added to `used`.

    Raises:
      ConversionError: a parameter other than a bias is missing (a mapping that names a
        parameter the model does not have).
    """
    out = {}
    for row in rows:
        parts = []
        for path, shape in zip(row.ours, row.parts, strict=True):
            if path in flat:
                parts.append(flat[path])
                if used is not None:
                    used.add(path)
            elif not path or _MAY_LACK.search(path):
                parts.append(np.zeros(shape(dims), np.float32))
            else:
                raise ConversionError(f"{row.theirs}: the model has no parameter {path!r}.")
        out[row.theirs] = np.ascontiguousarray(row.join(tuple(parts), dims))
    return out


# ------------------------------------------------------------------------------ row makers
def _dims(*names: str) -> Shape:
    return lambda dims: tuple(dims[n] for n in names)


def same(ours: str, theirs: str, *names: str, alternatives: tuple[str, ...] = ()) -> Row:
    """A tensor kept as it is, of shape `names` (e.g. "d")."""
    return Row(
        (ours,), theirs, _dims(*names), (_dims(*names),),
        split=lambda x, _: (x,), join=lambda p, _: p[0], alternatives=alternatives,
    )  # fmt: skip


def linear(ours: str, theirs: str, d_in: str, d_out: str) -> Row:
    """A kernel `[in, out]` stored as a `[out, in]` linear weight (PyTorch's nn.Linear)."""
    return Row(
        (ours,), theirs, _dims(d_out, d_in), (_dims(d_in, d_out),),
        split=lambda x, _: (x.T,), join=lambda p, _: p[0].T,
    )  # fmt: skip


def norm(ours: str, theirs: str, older: bool = False) -> list[Row]:
    """A LayerNorm's scale and bias (`older`: also read TensorFlow's gamma/beta names)."""
    scale_alt, bias_alt = ((f"{theirs}.gamma",), (f"{theirs}.beta",)) if older else ((), ())
    return [
        same(f"{ours}/scale", f"{theirs}.weight", "d", alternatives=scale_alt),
        same(f"{ours}/bias", f"{theirs}.bias", "d", alternatives=bias_alt),
    ]


def reshaped(ours: str, theirs: str, shape: Sequence[str], ours_shape: Sequence[str]) -> Row:
    """A tensor stored with another shape of the same size, both given by dimension names
    (e.g. `("one", "one", "d")` for our `("d",)`)."""
    theirs_shape, our_shape = _dims(*shape), _dims(*ours_shape)
    return Row(
        (ours,), theirs, theirs_shape, (our_shape,),
        split=lambda x, dims: (x.reshape(our_shape(dims)),),
        join=lambda p, dims: p[0].reshape(theirs_shape(dims)),
    )  # fmt: skip


def _per_head(ours: str, theirs: str, axes: tuple[str, ...], transposed: bool) -> Row:
    """A kernel of ours shaped by `axes` (letters of `dims`) stored as a `[D, D]` weight
    (`transposed`: as `[out, in]`)."""

    def split(x, dims):
        return ((x.T if transposed else x).reshape(*(dims[a] for a in axes)),)

    def join(parts, dims):
        x = parts[0].reshape(dims["d"], dims["d"])
        return x.T if transposed else x

    return Row((ours,), theirs, _dims("d", "d"), (_dims(*axes),), split, join)


def heads_in(ours: str, theirs: str, transposed: bool = True) -> Row:
    """A query, key or value kernel `[D, N, H]` stored as a `[D, D]` weight (`transposed`: as
    `[out, in]`)."""
    return _per_head(ours, theirs, ("d", "n", "h"), transposed)


def heads_out(ours: str, theirs: str, transposed: bool = True) -> Row:
    """An output kernel `[N, H, D]` stored as a `[D, D]` weight (`transposed`: `[out, in]`)."""
    return _per_head(ours, theirs, ("n", "h", "d"), transposed)


def head_bias(ours: str, theirs: str) -> Row:
    """A query or value bias `[N, H]` stored as `[D]`; `ours` "" for the key's (not kept)."""
    return Row(
        (ours,), theirs, _dims("d"), (_dims("n", "h"),),
        split=lambda x, dims: (x.reshape(dims["n"], dims["h"]),),
        join=lambda p, dims: p[0].reshape(dims["d"]),
    )  # fmt: skip


def attention(
    ours: str, qkv: Sequence[str], out: str, bias: bool = True, keep_bias: bool = True
) -> list[Row]:
    """An attention layer stored as four `[out, in]` linears: the query, key and value ones
    named `qkv`, the output one `out` (names without `.weight`). The key's bias is read and
    dropped (it cancels in the softmax); with `keep_bias` False the query's and value's too
    (a model without biases); `bias` False: the checkpoint has none."""
    rows = []
    for kind, name in zip(("query", "key", "value"), qkv, strict=True):
        rows.append(heads_in(f"{ours}/{kind}", f"{name}.weight"))
        if bias:
            kept = kind != "key" and keep_bias
            rows.append(head_bias(f"{ours}/{kind}_bias" if kept else "", f"{name}.bias"))
    rows.append(heads_out(f"{ours}/out", f"{out}.weight"))
    if bias:
        rows.append(same(f"{ours}/out_bias", f"{out}.bias", "d"))
    return rows


def dense(ours_kernel: str, ours_bias: str, theirs: str, d_in: str, d_out: str) -> list[Row]:
    """An `[out, in]` linear and its bias as our kernel `[in, out]` and bias."""
    return [
        linear(ours_kernel, f"{theirs}.weight", d_in, d_out),
        same(ours_bias, f"{theirs}.bias", d_out),
    ]
