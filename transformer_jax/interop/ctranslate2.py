"""Translation workdir -> CTranslate2 model directory (`to_ctranslate2`), and a front end that
translates text with one (`Ct2Translator`).

    from transformer_jax.interop.ctranslate2 import Ct2Translator, to_ctranslate2
    to_ctranslate2("runs/en-de", "serving/en-de", quantization="int8")
    Ct2Translator("serving/en-de").translate(["The house is wonderful."])

CTranslate2 (`pip install "transformer_jax[ctranslate2]"`: numpy only, no PyTorch) gets the
model through its spec API, `ctranslate2.specs.TransformerSpec`, filled with numpy arrays. The
directory holds CTranslate2's files (model.bin, config.json, shared_vocabulary.json), the
workdir's tokenizer (`tokenizer.model`, or a converted checkpoint's `tokenizer/`) and
`transformer_jax.json` (the source workdir, steps, positions and tokenizer kind).

Tokens: CTranslate2 looks tokens up by string, so its vocabulary is the tokenizer's pieces in
id order (a CTranslate2 id is the workdir's id). Its unk, bos (= the decoder's start token) and
eos are the tokenizer's: `<unk>`, `<s>`, `</s>` for a workdir trained here; `<unk>`, `<pad>`,
`</s>` for a converted OPUS-MT one, whose decoder starts from `<pad>`. Sources get eos appended
by CTranslate2 (`add_source_eos`), as `Translator` appends it. CTranslate2 pads by lengths, so
it never reads the pad token; this project's decoders never emit it (its probability goes to
the other tokens), and the export makes CTranslate2 do the same: the pad logit gets a bias of
`PAD_LOGIT_BIAS`, whose exponential is exactly 0 in every float type.

Letters: D model width, N heads, H head width, V vocabulary.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
from flax import nnx

from transformer_jax import storage
from transformer_jax.data import pretrained_tokenizer as pretrained
from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tables import Dims, Row, dense, heads_out, repeat, same, write
from transformer_jax.interop.tensors import flat_params
from transformer_jax.models.fields import SINUSOIDAL
from transformer_jax.nn.positional import sinusoidal_encoding
from transformer_jax.nn.stacked import to_layout
from transformer_jax.runs import reading
from transformer_jax.runs import tokenizer as run_tokenizer
from transformer_jax.runs.layout import Workdir

INSTALL = 'pip install "transformer_jax[ctranslate2]"'
# CTranslate2's weight types (`Converter.convert(quantization=...)`); None keeps float32.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16", "float32")  # fmt: skip
# Our FFN activations -> CTranslate2's `common_spec.Activation` members.
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELUTanh", "silu": "SWISH"}
# Added to the pad logit: exp(-1e4) is 0 in float32, float16 and bfloat16, and -1e4 is finite in
# each of them, so pad's probability is exactly 0 and every other token's is unchanged.
PAD_LOGIT_BIAS = -1e4
META = "transformer_jax.json"
VOCABULARY = "shared_vocabulary.json"  # CTranslate2's file: one vocabulary for both sides.


def import_ctranslate2():
    """The `ctranslate2` module, or an ImportError that says how to install it."""
    try:
        import ctranslate2
    except ImportError as e:
        raise ImportError(
            f"CTranslate2 is not installed; {INSTALL} (numpy only, no PyTorch)."
        ) from e
    return ctranslate2


@dataclasses.dataclass(frozen=True)
class Exported:
    """What `to_ctranslate2` wrote."""

    path: str  # The CTranslate2 model directory.
    steps: tuple[int, ...]  # Checkpoint steps whose (mean) parameters were exported.
    quantization: str  # The weight type ("float32" unless asked otherwise).
    special_tokens: dict[str, str]  # CTranslate2's unk, bos, eos and decoder start tokens.
    tokenizer: str  # "sentencepiece" (tokenizer.model), "pretrained" (tokenizer/) or "byte".


# ------------------------------------------------------------------------- vocabulary, tokens
def vocabulary(tokenizer, size: int, where: str) -> list[str]:
    """The `size` pieces of the model's ids; ids the tokenizer lacks get `<unused{id}>`.

    Raises:
      ConversionError: two ids share a piece (CTranslate2 could not tell them apart).
    """
    known = tokenizer.vocab_size  # Once: a converted tokenizer computes it each time.
    pieces = [tokenizer.id_to_piece(i) if i < known else "" for i in range(size)]
    pieces = [p or f"<unused{i}>" for i, p in enumerate(pieces)]
    first: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        if piece in first:
            raise ConversionError(
                f"{where}: ids {first[piece]} and {i} are both the piece {piece!r}; CTranslate2 "
                f"looks tokens up by string, so it cannot hold this vocabulary."
            )
        first[piece] = i
    return pieces


def special_tokens(pieces: list[str], *, unk_id: int, bos_id: int, eos_id: int) -> dict[str, str]:
    """CTranslate2's config tokens: the tokenizer's unk, bos (the decoder's start) and eos."""
    bos = pieces[bos_id]
    return dict(unk_token=pieces[unk_id], bos_token=bos, eos_token=pieces[eos_id],
                decoder_start_token=bos)  # fmt: skip


def check_exportable(cfg, where: str) -> None:
    """ConversionError naming the field of `cfg` CTranslate2's Transformer cannot express."""
    if cfg.activation not in ACTIVATIONS:
        raise ConversionError(
            f"{where}: activation={cfg.activation!r}; CTranslate2's Transformer has "
            f"{sorted(ACTIVATIONS)} of this project's activations."
        )
    if cfg.positional not in SINUSOIDAL and cfg.positional != "learned":
        raise ConversionError(
            f"{where}: positional={cfg.positional!r}; CTranslate2 adds a table of positions "
            f"(sinusoidal {sorted(SINUSOIDAL)} or learned)."
        )
    if min(cfg.num_encoder_layers, cfg.num_decoder_layers) < 1:
        raise ConversionError(
            f"{where}: num_encoder_layers={cfg.num_encoder_layers}, num_decoder_layers="
            f"{cfg.num_decoder_layers}; CTranslate2's Transformer needs a layer in each stack."
        )


# ------------------------------------------------------------------------------ the weights
def _weights(model) -> dict[str, np.ndarray]:
    """Float32 parameters by path, layers one by one, plus `position_encodings` `[max_len, D]`."""
    cfg = model.cfg
    weights = {  # Copies: CTranslate2 quantizes them in place, and jax's arrays are read-only.
        name: np.array(value, np.float32)
        for name, value in flat_params(to_layout(nnx.state(model, nnx.Param), False)).items()
    }
    if cfg.positional in SINUSOIDAL:
        table = sinusoidal_encoding(cfg.max_len, cfg.d_model, layout=SINUSOIDAL[cfg.positional])
        weights["position_encodings"] = np.asarray(table, np.float32)
    else:
        weights["position_encodings"] = weights.pop("pos_embed")
    return weights


def _fused(parts: tuple[np.ndarray, ...], dims: Dims) -> np.ndarray:
    """Query/key/value kernels `[D, N, H]` -> one `[k*D, D]` linear weight (biases `[N, H]` ->
    `[k*D]`), CTranslate2's fused projections."""
    if parts[0].ndim == 2:  # Biases.
        return np.concatenate([p.reshape(dims["d"]) for p in parts])
    return np.concatenate([p.reshape(dims["d"], -1).T for p in parts])


def _unfused(x: np.ndarray, dims: Dims) -> tuple[np.ndarray, ...]:
    d, n, h = dims["d"], dims["n"], dims["h"]
    if x.ndim == 1:
        return tuple(x[j : j + d].reshape(n, h) for j in range(0, x.shape[0], d))
    return tuple(x[j : j + d].T.reshape(d, n, h) for j in range(0, x.shape[0], d))


def _projections(ours: str, kinds: Sequence[str], theirs: str) -> list[Row]:
    """`kinds` of `ours` (query, key, value) as one CTranslate2 linear `theirs` (the key's bias
    is zeros: ours has none)."""
    k = len(kinds)
    biases = tuple("" if kind == "key" else f"{ours}/{kind}_bias" for kind in kinds)
    return [
        Row(tuple(f"{ours}/{kind}" for kind in kinds), f"{theirs}.weight",
            lambda x: (k * x["d"], x["d"]), (lambda x: (x["d"], x["n"], x["h"]),) * k,
            _unfused, _fused),
        Row(biases, f"{theirs}.bias", lambda x: (k * x["d"],), (lambda x: (x["n"], x["h"]),) * k,
            _unfused, _fused),
    ]  # fmt: skip


def _norm(ours: str, theirs: str) -> list[Row]:
    return [
        same(f"{ours}/scale", f"{theirs}.gamma", "d"),
        same(f"{ours}/bias", f"{theirs}.beta", "d"),
    ]


def _out(ours: str, theirs: str) -> list[Row]:
    return [
        heads_out(f"{ours}/out", f"{theirs}.weight"),
        same(f"{ours}/out_bias", f"{theirs}.bias", "d"),
    ]


# A layer's parameters as CTranslate2's `TransformerSpec` attributes, relative to our
# `encoder/layers/{i}/` and its `encoder.layer.{i}.` (`.0` indexes a list).
_FFN = [
    *_norm("ffn_norm", "ffn.layer_norm"),
    *dense("ffn/w1", "ffn/b1", "ffn.linear_0", "d", "f"),
    *dense("ffn/w2", "ffn/b2", "ffn.linear_1", "f", "d"),
]
_SELF = [
    *_projections("self_attn", ("query", "key", "value"), "self_attention.linear.0"),
    *_out("self_attn", "self_attention.linear.1"),
    *_norm("self_attn_norm", "self_attention.layer_norm"),
]
ENCODER_LAYER = [*_SELF, *_FFN]
DECODER_LAYER = [
    *_SELF,
    *_projections("cross_attn", ("query",), "attention.linear.0"),
    *_projections("cross_attn", ("key", "value"), "attention.linear.1"),
    *_out("cross_attn", "attention.linear.2"),
    *_norm("cross_attn_norm", "attention.layer_norm"),
    *_FFN,
]


def _assign(spec, tensors: dict[str, np.ndarray]) -> None:
    """Sets each `a.b.0.c` attribute path of `spec` to its tensor."""
    for name, value in tensors.items():
        *parents, leaf = name.split(".")
        node = spec
        for part in parents:
            node = node[int(part)] if part.isdigit() else getattr(node, part)
        setattr(node, leaf, value)


def model_spec(model, pieces: list[str], tokens: dict[str, str], where: str = "model"):
    """A `ctranslate2.specs.TransformerSpec` holding `model` (an `EncoderDecoder`).

    CTranslate2's linear weights are `[out, in]`; its self-attention fuses the query, key and
    value projections into one `[3D, D]` linear, its cross-attention keys and values into one
    `[2D, D]`. Our keys have no bias (the softmax cancels it), so theirs gets zeros. The output
    projection's bias is the logits bias (zeros without one), with `PAD_LOGIT_BIAS` at pad.

    Args:
      pieces: the V vocabulary strings (`vocabulary`); tokens: `special_tokens(pieces, ...)`.
    """
    import_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    cfg = model.cfg
    check_exportable(cfg, where)
    weights = _weights(model)
    d, pre_norm = cfg.d_model, cfg.norm == "pre"
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.num_encoder_layers, cfg.num_decoder_layers),
        cfg.num_heads,
        pre_norm=pre_norm,
        activation=getattr(common_spec.Activation, ACTIVATIONS[cfg.activation]),
    )
    spec.config.layer_norm_epsilon = cfg.layer_norm_eps
    spec.config.add_source_eos = True  # Sources end with eos, as `Translator` feeds them.
    for key, token in tokens.items():
        setattr(spec.config, key, token)

    used = set()

    def w(name):
        used.add(name)
        return weights[name]

    for ct2_stack in (spec.encoder, spec.decoder):
        ct2_stack.scale_embeddings = cfg.scale_embeddings  # embedding * sqrt(d_model)
        ct2_stack.position_encodings.encodings = w("position_encodings")
    dims = {"d": d, "n": cfg.num_heads, "h": cfg.head_dim, "f": cfg.d_ff}
    rows = [
        *repeat(ENCODER_LAYER, "encoder/layers/{i}/", "encoder.layer.{i}.", cfg.num_encoder_layers),
        *repeat(DECODER_LAYER, "decoder/layers/{i}/", "decoder.layer.{i}.", cfg.num_decoder_layers),
    ]
    if pre_norm:  # Each stack's final LayerNorm.
        rows += [*_norm("encoder/final_norm", "encoder.layer_norm"),
                 *_norm("decoder/final_norm", "decoder.layer_norm")]  # fmt: skip
    _assign(spec, write(weights, rows, dims, used))
    source = w("src_embed/embedding")  # One table for both stacks and the output (§3.4) ...
    target = source if cfg.share_embeddings else w("tgt_embed/embedding")  # ... unless not.
    spec.encoder.embeddings[0].weight = source
    spec.decoder.embeddings.weight = target
    spec.decoder.projection.weight = target if cfg.tie_output else w("output_proj").T
    bias = w("logits_bias").copy() if cfg.logits_bias else np.zeros(cfg.vocab_size, np.float32)
    bias[cfg.pad_id] = PAD_LOGIT_BIAS
    spec.decoder.projection.bias = bias
    if unused := sorted(set(weights) - used):  # e.g. a parameter added to the model later
        raise ConversionError(f"{where}: parameters without a place in CTranslate2: {unused}")
    if len(pieces) != cfg.vocab_size:
        raise ConversionError(f"{where}: {len(pieces)} pieces for {cfg.vocab_size} ids.")
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def _check_quantization(quantization: str | None) -> None:
    if quantization not in (None, *QUANTIZATIONS):
        raise ValueError(f"quantization={quantization!r} is not one of {QUANTIZATIONS}.")


def write_model(spec, out_dir: str | os.PathLike, quantization: str | None = None) -> None:
    """Validates `spec` and saves it (weights as `quantization`) into the new `out_dir`."""
    _check_quantization(quantization)
    spec.validate()  # Every variable set, the vocabulary as long as the embeddings.
    spec.optimize(quantization=quantization)
    os.makedirs(out_dir)
    spec.save(str(out_dir))


# ------------------------------------------------------------------------------ workdir
def _tokenizer_kind(tokenizer) -> str:
    if isinstance(tokenizer, Tokenizer):
        return "sentencepiece"
    return "byte" if isinstance(tokenizer, ByteTokenizer) else "pretrained"


def _write_tokenizer(tokenizer, kind: str, out: pathlib.Path) -> None:
    """The workdir's tokenizer beside the model, so the directory stands alone."""
    if kind == "sentencepiece":
        (out / "tokenizer.model").write_bytes(tokenizer.model_proto)
    elif kind == "pretrained":
        tokenizer.save(storage.as_path(out / pretrained.WORKDIR_FOLDER))


def _check_out_dir(out_dir: str | os.PathLike) -> pathlib.Path:
    if "://" in os.fspath(out_dir):
        raise ConversionError(
            f"{out_dir}: CTranslate2 reads and writes local directories; export to a local path."
        )
    out = pathlib.Path(out_dir).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConversionError(
            f"{out}: not empty. Export into a new directory (nothing was written)."
        )
    return out


def to_ctranslate2(
    workdir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    step: int | None = None,
    average_last: int = 0,
    quantization: str | None = None,
) -> Exported:
    """Writes a translation workdir as a CTranslate2 model directory that
    `ctranslate2.Translator(out_dir)` loads, with its vocabulary and tokenizer (module doc).

    Args:
      workdir: a translation workdir (trained here, or converted from Marian/OPUS-MT).
      out_dir: a new (or empty) local directory.
      step: the checkpoint step; default the latest.
      average_last: if > 1, the mean of the last `average_last` checkpoints up to `step`.
      quantization: CTranslate2's weight type, one of `QUANTIZATIONS` (e.g. "int8"); default
        float32.

    Raises:
      ConversionError: not a translation workdir, a field CTranslate2 cannot express (named),
        or `out_dir` is not empty. Nothing is written then.
      CheckpointError: the workdir or its checkpoint cannot be read.
      ImportError: ctranslate2 is not installed.
    """
    import_ctranslate2()
    _check_quantization(quantization)
    out = _check_out_dir(out_dir)
    source = Workdir.at(workdir).require()
    config = source.read_config()
    name, task = config.model.get("name"), config.get("task")
    if name != "encoder_decoder" or task != "translation":
        raise ConversionError(
            f"{source.config_json}: task={task!r} with model {name!r}; CTranslate2 export takes "
            f"translation workdirs (task 'translation', model 'encoder_decoder'). GPT, BERT "
            f"and ViT workdirs export with to_hf (--to_hf)."
        )
    tokenizer = run_tokenizer.load_tokenizer(source, config)
    cfg = reading.load_model_config(source, config, tokenizer)
    where = str(source.model_json)
    check_exportable(cfg, where)
    pieces = vocabulary(tokenizer, cfg.vocab_size, where)
    ids = dict(unk_id=tokenizer.unk_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    if None in ids.values():
        raise ConversionError(
            f"{where}: the tokenizer lacks a special token CTranslate2 needs: {ids}."
        )
    tokens = special_tokens(pieces, **ids)
    model, steps = reading.load_model(source, config, tokenizer, step, average_last)
    spec = model_spec(model, pieces, tokens, where)
    kind = _tokenizer_kind(tokenizer)
    meta = dict(workdir=str(source.path), steps=list(steps), max_len=cfg.max_len,
                tokenizer=kind, quantization=quantization or "float32")  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside `out` and renamed into place: a failure leaves no partial directory.
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write_model(spec, staging / "model", quantization)
        _write_tokenizer(tokenizer, kind, staging / "model")
        (staging / "model" / META).write_text(json.dumps(meta, indent=1))
        if out.exists():
            out.rmdir()  # Empty (checked above).
        os.replace(staging / "model", out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Exported(str(out), tuple(steps), meta["quantization"], tokens, kind)


# ------------------------------------------------------------------------------ front end
def load_tokenizer(model_dir: str | os.PathLike):
    """The tokenizer `to_ctranslate2` wrote into `model_dir`."""
    path = pathlib.Path(model_dir)
    kind = json.loads((path / META).read_text())["tokenizer"]
    if kind == "sentencepiece":
        return Tokenizer((path / "tokenizer.model").read_bytes(), origin=str(path))
    if kind == "pretrained":
        return pretrained.load(storage.as_path(path / pretrained.WORKDIR_FOLDER))
    return ByteTokenizer()


class Ct2Translator:
    """Translates text with a `to_ctranslate2` directory: the workdir's tokenizer around
    `ctranslate2.Translator`.

    Attributes:
      translator: the `ctranslate2.Translator` (built with `device`, `compute_type` and the
        other keyword arguments, e.g. `intra_threads`).
      tokenizer: the workdir's tokenizer, read from the directory.
      max_len: the model's positions: the longest source (eos included) and output.
    """

    def __init__(self, model_dir: str | os.PathLike, *, device: str = "cpu",
                 compute_type: str = "default", **options: Any):  # fmt: skip
        ctranslate2 = import_ctranslate2()
        path = pathlib.Path(model_dir)
        self.max_len = json.loads((path / META).read_text())["max_len"]
        self.tokenizer = load_tokenizer(path)
        self.pieces = json.loads((path / VOCABULARY).read_text())
        self._ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.translator = ctranslate2.Translator(
            str(path), device=device, compute_type=compute_type, **options
        )

    def translate_ids(
        self, sources: Sequence[Sequence[int]], *, beam_size: int = 4, max_len: int | None = None,
        **options: Any,
    ) -> list[list[int]]:  # fmt: skip
        """The best output ids (eos left out) of each source (ids without eos).

        Args:
          max_len: most output tokens; default the longest source + 50, at most `max_len`.
          options: `translate_batch`'s, e.g. `length_penalty=0` to rank beams by summed
            log-probability as `Translator(alpha=0)` does (CTranslate2 divides the score by
            length**length_penalty, default 1; the GNMT penalty here differs).
        """
        if not sources:
            return []
        longest = max(len(ids) for ids in sources) + 1
        options.setdefault("max_batch_size", 64)
        options.setdefault("min_decoding_length", 0)
        results = self.translator.translate_batch(
            [[self.pieces[i] for i in ids] for ids in sources],
            beam_size=beam_size,
            max_input_length=self.max_len,
            max_decoding_length=max_len or min(longest + 50, self.max_len),
            **options,
        )
        return [[self._ids[piece] for piece in r.hypotheses[0]] for r in results]

    def translate(self, texts: Sequence[str], **options: Any) -> list[str]:
        """The translation of each text (blank ones give ""); `options` as `translate_ids`."""
        encoded = [self.tokenizer.encode(t) if t.strip() else [] for t in texts]
        todo = [i for i, ids in enumerate(encoded) if ids]
        outputs = [""] * len(texts)
        translated = self.translate_ids([encoded[i] for i in todo], **options)
        for i, ids in zip(todo, translated, strict=True):
            outputs[i] = self.tokenizer.decode(ids)
        return outputs
