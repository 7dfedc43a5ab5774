"""Checks shared by the data configs: one error format, naming the field, the value, the fix."""

from __future__ import annotations

import copy

import ml_collections

from transformer_jax import storage


def fail(field: str, problem: str, fix: str) -> ValueError:
    """The error for a bad `config.data` field: `data config field 'F': problem. fix`."""
    return ValueError(f"data config field '{field}': {problem}. {fix}")


def check_int(cfg: ml_collections.ConfigDict, field: str, minimum: int) -> None:
    """Raises unless `cfg[field]` is an integer (not a bool) >= `minimum`."""
    value = cfg[field]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise fail(field, f"got {value!r}", f"Use an integer >= {minimum}.")


def check_choice(cfg: ml_collections.ConfigDict, field: str, choices: tuple[str, ...]) -> None:
    """Raises unless `cfg[field]` is one of `choices`."""
    if cfg[field] not in choices:
        raise fail(field, f"got {cfg[field]!r}", f"Use one of {choices}.")


def check_fraction(cfg: ml_collections.ConfigDict, field: str, *, open_low: bool = True) -> None:
    """Raises unless `cfg[field]` is a number in (0, 1) (or [0, 1) with open_low=False)."""
    value = cfg[field]
    low_ok = value > 0.0 if open_low else value >= 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low_ok or value >= 1:
        interval = "(0, 1)" if open_low else "[0, 1)"
        raise fail(field, f"got {value!r}", f"Use a number in {interval}.")


def check_coverage(cfg: ml_collections.ConfigDict) -> None:
    """Raises unless `spm_character_coverage` is a number (not a bool) in (0, 1]."""
    value = cfg.spm_character_coverage
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise fail("spm_character_coverage", f"got {value!r}", "Use a number in (0, 1].")


def check_optional_file(cfg: ml_collections.ConfigDict, field: str) -> None:
    """Raises unless `cfg[field]` is unset (None) or the path of an existing file."""
    value = cfg[field]
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise fail(field, f"got {value!r}", "Give the path of a file, or leave it unset.")
    if not storage.as_path(value).is_file():
        raise fail(
            field,
            f"{value!r} is not a file (looked for {storage.as_path(value)})",
            "Check the path; relative paths are read from the current directory.",
        )


def check_missing(cfg: ml_collections.ConfigDict, defaults: ml_collections.ConfigDict, maker: str):
    """Raises naming the first field of `defaults` that `cfg` lacks."""
    missing = sorted(set(defaults.keys()) - set(cfg.keys()))
    if missing:
        raise fail(missing[0], "missing", f"Start from {maker}() and override fields.")


def absolute_paths(
    cfg: ml_collections.ConfigDict, fields: tuple[str, ...]
) -> ml_collections.ConfigDict:
    """A copy whose set path `fields` are absolute (local) or URLs (gs://), so that the
    workdir's config.json still finds them from another directory (evaluation, resumption)."""
    out = copy.deepcopy(cfg)
    for field in fields:
        if cfg[field] is not None:
            out[field] = str(storage.as_path(cfg[field]))
    return out


def check_batching(cfg: ml_collections.ConfigDict) -> None:
    """The batching fields every example-per-row input has: batch_multiple, batch_size,
    eval_batch_size (multiples of batch_multiple), shuffle_seed and num_workers."""
    check_int(cfg, "batch_multiple", 1)
    check_int(cfg, "batch_size", cfg.batch_multiple)
    check_int(cfg, "eval_batch_size", 1)
    check_int(cfg, "shuffle_seed", 0)
    check_int(cfg, "num_workers", 0)
    for field in ("batch_size", "eval_batch_size"):
        if cfg[field] % cfg.batch_multiple:
            raise fail(
                field,
                f"{cfg[field]} is not divisible by batch_multiple={cfg.batch_multiple}",
                "Use a multiple of batch_multiple.",
            )
