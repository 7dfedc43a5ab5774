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
from collections.abc import Mapping
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
    """

    name: str
    config_class: type
    module_class: type
    data_fields: tuple[str, ...] = ()


_MODELS: dict[str, ModelSpec] = {}
Section = Mapping[str, Any] | ml_collections.ConfigDict  # A `config.model` (or model.json).


def register(spec: ModelSpec) -> ModelSpec:
    """Adds a model to the registry (names are unique)."""
    if spec.name in _MODELS and _MODELS[spec.name] != spec:
        raise ValueError(f"a model named {spec.name!r} is already registered.")
    _MODELS[spec.name] = spec
    return spec


def get(name: str) -> ModelSpec:
    """The registered model `name`; the error lists the known names."""
    if name not in _MODELS:
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
      ValueError: naming the unknown, missing or invalid field.
    """
    spec = get(section.get("name"))
    fields = {k: v for k, v in dict(section).items() if k != "name"}
    known = set(_field_types(spec))
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(
            f"config.model has fields {unknown} that model {spec.name!r} does not take; its "
            f"fields are {sorted(known)}."
        )
    for key in spec.data_fields:
        if fields.get(key) is None and data_values and data_values.get(key) is not None:
            fields[key] = data_values[key]
    fields = {k: v for k, v in fields.items() if v is not None}
    try:
        return spec.config_class(**fields)
    except TypeError as e:
        raise ValueError(f"config.model ({spec.name}): {e}.") from e


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
