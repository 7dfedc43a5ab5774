"""Classify texts or text pairs with a fine-tuned encoder (a `configs/bert_*` fine-tuning run).

    classifier = Classifier.from_checkpoint("runs/bert_numbers")
    classifier.predict([("four hundred and two", "quatre cent deux")])
    # -> [Prediction(label="translation", probabilities={"not_translation": 0.03, ...})]

Inputs are laid out exactly as in fine-tuning (`[CLS] A [SEP] (B [SEP])`); one longer than the
model's positions is cut from the end of its longer text, with a warning.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from transformer_jax.data.bert.inputs import encode_plain, real_tokens, specials_of
from transformer_jax.inference.encoder_inputs import batch_inputs, load_encoder
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.runs.load import Run
from transformer_jax.serving_mesh import MeshLike, on_mesh, under
from transformer_jax.sharding import to_host

Input = str | tuple[str, str] | list[str]


@dataclasses.dataclass(frozen=True)
class Prediction:
    """The most probable label and every label's probability."""

    label: str
    probabilities: dict[str, float]


@functools.partial(jax.jit, static_argnums=(0,))
def _probabilities(graphdef, params, tokens, segments):
    model = nnx.merge(graphdef, params)
    real = real_tokens(tokens)
    hidden = model(tokens, segments, attention_mask=real)
    return jax.nn.softmax(model.classify(model.pool(hidden, real)), axis=-1)


probabilities_program = _probabilities  # What `transformer_jax.aot` compiles ahead of time.


def label_names(names: object) -> list[str]:
    """The `label_names` of a labels.json, checked: a list of distinct strings."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"'label_names' must be a list of strings, got {names!r:.200}")
    if len(set(names)) != len(names):
        raise ValueError(f"'label_names' repeats a name: {names!r:.200}")
    return names


class Classifier:
    """A fine-tuned encoder with its label names."""

    def __init__(self, run: Run, label_names: Sequence[str], pair: bool | None):
        """`pair`: whether inputs are pairs of texts; None reads either (a converted
        `BertForSequenceClassification`, whose config does not say)."""
        if len(label_names) != run.model.cfg.num_labels:
            raise CheckpointError(
                f"{run.workdir.labels_json}: {len(label_names)} labels, but the model has "
                f"{run.model.cfg.num_labels} outputs. Use the labels.json the run wrote."
            )
        self.run, self.label_names, self.pair = run, tuple(label_names), pair
        self.max_len = run.model.cfg.max_len
        self._graphdef, self._params = nnx.split(run.model)

    @classmethod
    def from_checkpoint(
        cls, workdir: str | os.PathLike, step: int | None = None, *, mesh: MeshLike | None = None
    ) -> Classifier:
        """Loads a fine-tuning workdir (task 'classify') written by train.py; with `mesh` (axis
        sizes such as `{"fsdp": 4, "tensor": 2}`, or a `Mesh`) its parameters are restored
        straight into their shards of that mesh and batches are split over data and fsdp.

        Raises:
          MeshError: `mesh` does not fit the devices or the model (a ValueError).
          CheckpointError: not a classifier's workdir, or a file is missing or damaged.
        """
        return cls.from_run(load_encoder(workdir, ("classify",), "Classifier", step, mesh))

    @classmethod
    def from_run(cls, run: Run) -> Classifier:
        """The classifier of a loaded fine-tuning run, with its labels.json."""
        path = run.workdir.labels_json
        try:
            labels = json.loads(path.read_bytes())
            names, pair = label_names(labels["label_names"]), labels["pair"]
            if not isinstance(pair, bool | None):
                raise TypeError(f"'pair' is {pair!r}, not true, false or null")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(
                f"{path}: missing or unreadable ({e}). It lists the label names; rerun "
                f"train.py on the workdir (it writes labels.json before training)."
            ) from e
        return cls(run, names, pair)

    def _check(self, inputs: Sequence[Input]) -> list[tuple[str, str | None]]:
        checked = []
        for i, item in enumerate(inputs):
            if isinstance(item, str):
                if self.pair:
                    raise ValueError(
                        f"inputs[{i}] is one text, but this classifier reads pairs of texts "
                        f"(text_a, text_b): give both, e.g. ('four', 'quatre')."
                    )
                checked.append((item, None))
                continue
            if not isinstance(item, (tuple, list)) or not all(isinstance(t, str) for t in item):
                raise TypeError(f"inputs[{i}] is {item!r}: give a str or a pair of str.")
            if self.pair is False:
                raise ValueError(f"inputs[{i}] is a pair, but this classifier reads single texts.")
            if len(item) != 2 or not item[1].strip():
                raise ValueError(
                    f"inputs[{i}] has no second text: this classifier reads pairs (text_a, "
                    f"text_b), both non-empty; got {item!r}."
                )
            checked.append((item[0], item[1]))
        return checked

    def predict(self, inputs: Input | Sequence[Input], *, batch_size: int = 32):
        """The prediction of each input (a text, or a (text_a, text_b) pair for a pair model).

        Returns a `Prediction` for a single input, else a list of them in order.

        Raises:
          ValueError: a pair missing its second text, or the wrong kind of input.
        """
        single = isinstance(inputs, str) or (
            isinstance(inputs, tuple)
            and len(inputs) == 2
            and all(isinstance(t, str) for t in inputs)
        )
        items = self._check([inputs] if single else list(inputs))
        a_ids = encode_plain(self.run.tokenizer, [a for a, _ in items])
        b_ids = encode_plain(self.run.tokenizer, [b or "" for _, b in items])
        encoded = [
            (a, b if item[1] is not None else None)
            for a, b, item in zip(a_ids, b_ids, items, strict=True)
        ]
        out = []
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start : start + batch_size]
            tokens, segments = batch_inputs(
                chunk, self.max_len, rows=batch_size, specials=specials_of(self.run.tokenizer)
            )
            with under(self.run.mesh):
                probs = _probabilities(
                    self._graphdef, self._params, *on_mesh(self.run.mesh, tokens, segments)
                )
            probs = to_host(probs)
            for row in probs[: len(chunk)]:
                named = {n: float(p) for n, p in zip(self.label_names, row, strict=True)}
                out.append(Prediction(self.label_names[int(np.argmax(row))], named))
        return out[0] if single else out
