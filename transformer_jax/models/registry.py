"""The model registry: `name -> (config class, module class)`, and configs built from sections.

A training config names its model (`config.model.name = "encoder_decoder"`) and lists the
config class's fields; the training loop, the loading code and the CLIs all build a model
through `build_config` and `build_model`, so adding a model means registering it here.

Some fields are decided by the data rather than the config file (the vocabulary size comes
from the tokenizer); they are `data_fields`, left unset (None) in the section and filled in by
`build_config`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import ml_collections
from flax import nnx


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes:
      name: the registry key, as written in `config.model.name`.
      config_class: a frozen dataclass of hyper-parameters with preset class methods.
      module_class: an `nnx.Module` built as `module_class(cfg, rngs=nnx.Rngs(...))`.
      data_fields: config fields the data decides when the section leaves them None.
      stand_ins: given a section's fields, values for its unset data fields that pass the
        config class's checks whatever the data turns out to be (e.g. an image size the patch
        size tiles), so that `check_section` can judge a section before the data is read.
    """

    name: str
    config_class: type
    module_class: type
    data_fields: tuple[str, ...] = ()
    stand_ins: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None


_MODELS: dict[str, ModelSpec] = {}
Section = Mapping[str, Any] | ml_collections.ConfigDict  # A `config.model` (or model.json).


def register(spec: ModelSpec) -> ModelSpec:
    """Adds a model to the registry (names are unique)."""
    if spec.name in _MODELS and _MODELS[spec.name] != spec:
        raise ValueError(f"a model named {spec.name!r} is already registered.")
    _MODELS[spec.name] = spec
    return spec


def get(name: object) -> ModelSpec:
    """The registered model `name` (any value a config holds); the error lists the known
    names."""
    if not isinstance(name, str) or name not in _MODELS:
        raise ValueError(
            f"config.model.name={name!r} is not a registered model; known: {sorted(_MODELS)}."
        )
    return _MODELS[name]


def names() -> list[str]:
    return sorted(_MODELS)


def spec_of(cfg: Any) -> ModelSpec:
    """The registered model whose config class `cfg` is an instance of."""
    for spec in _MODELS.values():
        if isinstance(cfg, spec.config_class):
            return spec
    raise TypeError(f"{type(cfg).__name__} is not the config class of a registered model.")


def _field_types(spec: ModelSpec) -> dict[str, type]:
    types = {"int": int, "float": float, "str": str, "bool": bool}
    return {f.name: types[str(f.type)] for f in dataclasses.fields(spec.config_class)}


_KINDS = {int: "an integer", float: "a finite number", str: "a string", bool: "True or False"}


def _has_type(value: Any, expected: type) -> bool:
    """Whether `value` may stand in a field of type `expected` (an int for a float, not a bool
    for a number: `True` is an int to Python, never a size or a rate to a user)."""
    if isinstance(value, bool):
        return expected is bool
    if expected is float:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, expected)


def config_section(name: str, preset: str | None = None, **overrides) -> ml_collections.ConfigDict:
    """A `config.model` section: `name` plus every field of the preset, ready for overrides.

    Data fields are typed placeholders (None until the data fills them, still overridable from
    the command line).

    Args:
      name: a registered model name.
      preset: one of the config class's `PRESETS`; None takes the class defaults.
      **overrides: field values that replace the preset's.
    """
    spec = get(name)
    cls = spec.config_class
    if preset is not None and preset not in cls.PRESETS:
        raise ValueError(f"{name} has no preset {preset!r}; presets: {cls.PRESETS}.")
    placeholder = {f: None for f in spec.data_fields}
    dummy = {"vocab_size": 64} if "vocab_size" in spec.data_fields else {}
    cfg = getattr(cls, preset)(**dummy) if preset else cls(**dummy)
    fields = {**dataclasses.asdict(cfg), **placeholder, **overrides}
    section = ml_collections.ConfigDict({"name": name})
    types = _field_types(spec)
    for key, value in fields.items():
        if value is None:
            section[key] = ml_collections.config_dict.placeholder(types[key])
        else:
            section[key] = value
    return section


def canonical_fields(section: Section) -> dict[str, Any]:
    """The section with every omitted field at its class default (data fields stay None).

    Two sections describe the same model exactly when their canonical fields are equal.
    """
    spec = get(section.get("name"))
    out = {"name": spec.name}
    for f in dataclasses.fields(spec.config_class):
        if f.name in section:
            out[f.name] = section[f.name]
        elif f.name in spec.data_fields or f.default is dataclasses.MISSING:
            out[f.name] = None
        else:
            out[f.name] = f.default
    return out


def build_config(section: Section, data_values: Mapping[str, Any] | None = None):
    """The model's config dataclass from a `config.model` section and the data's values.

    Raises:
      ValueError: naming the unknown, missing or invalid field (a value of the wrong type too).
    """
    spec = get(section.get("name"))
    fields = {k: v for k, v in dict(section).items() if k != "name"}
    types = _field_types(spec)
    unknown = sorted(set(fields) - set(types))
    if unknown:
        raise ValueError(
            f"config.model has fields {unknown} that model {spec.name!r} does not take; its "
            f"fields are {sorted(types)}."
        )
    for key, value in fields.items():
        if value is not None and not _has_type(value, types[key]):
            raise ValueError(
                f"config.model.{key} must be {_KINDS[types[key]]}, got {value!r} "
                f"({type(value).__name__})."
            )
    for key in spec.data_fields:
        if fields.get(key) is None and data_values and data_values.get(key) is not None:
            fields[key] = data_values[key]
    fields = {k: v for k, v in fields.items() if v is not None}
    try:
        return spec.config_class(**fields)
    except TypeError as e:
        raise ValueError(f"config.model ({spec.name}): {e}.") from e


def check_section(section: Section) -> None:
    """Raises ValueError naming the first field of a `config.model` section that no data can
    make valid: an unknown name or field, a value of the wrong type, or one the config class
    refuses (a negative rate, d_model not divisible by num_heads, ...).

    Data fields the section leaves None get the model's stand-ins (see `ModelSpec`), so only
    what the section itself sets is judged; the data's values are checked again when the model
    is built.
    """
    spec = get(section.get("name"))
    fields = {k: v for k, v in dict(section).items() if k != "name"}
    unset = [k for k, v in fields.items() if v is None and k not in spec.data_fields]
    if unset:  # build_config would quietly take the class default.
        raise ValueError(
            f"config.model.{unset[0]} is None; only the fields the data decides "
            f"{list(spec.data_fields)} may be left unset. Give it a value."
        )
    stand_ins = spec.stand_ins(fields) if spec.stand_ins is not None else {}
    try:
        build_config(section, stand_ins)
    except ValueError as e:
        message = str(e)
        raise ValueError(message if message.startswith("config.model") else
                         f"config.model ({spec.name}): {message}") from None  # fmt: skip


def build_model(cfg: Any, *, rngs: nnx.Rngs) -> nnx.Module:
    """The module of `cfg`'s model, with parameters drawn from `rngs`."""
    return spec_of(cfg).module_class(cfg, rngs=rngs)


def abstract_model(cfg: Any) -> tuple[nnx.GraphDef, nnx.State]:
    """(graphdef, abstract parameter state) of the model; nothing is allocated."""
    return nnx.split(nnx.eval_shape(lambda: build_model(cfg, rngs=nnx.Rngs(0))))


def count_params(cfg: Any) -> int:
    """Number of parameters of the model of `cfg`, from abstract shapes (nothing is allocated)."""
    abstract = nnx.eval_shape(lambda: build_model(cfg, rngs=nnx.Rngs(0)))
    return sum(int(x.size) for x in jax.tree.leaves(nnx.state(abstract, nnx.Param)))
