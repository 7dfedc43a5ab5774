"""Classify images with a trained Vision Transformer (a `configs/vit_*.py` run).

    classifier = ImageClassifier.from_checkpoint("runs/vit")
    classifier.predict(load_digits().images[:3] / 16)       # arrays in [0, 1] (or uint8)
    classifier.predict(["seven.png"], resize=True)          # files, read with Pillow
    classifier.attention(image)                             # PatchAttention over the patches

Images must have the size and channels the model was trained on (model.json); a file of
another size is an error unless `resize=True` (bilinear, to the trained size).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Float

from transformer_jax import storage
from transformer_jax.data.images.folder import read_image
from transformer_jax.inference.classifier import Prediction, label_names
from transformer_jax.inference.front_end import FromCheckpoint
from transformer_jax.inference.patch_attention import PatchAttention, patch_attention
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.load import Expect, Run
from transformer_jax.serving_mesh import on_mesh, under
from transformer_jax.sharding import to_host

ImageInput = np.ndarray | str | os.PathLike


def scoring_views(
    images: Float[Array, "B H W C"], flip: bool, shift: int
) -> list[Float[Array, "B H W C"]]:
    """What test-time augmentation scores: the images (and, with `flip`, their left-right
    mirror images), each moved by every offset (dy, dx) with |dy|, |dx| <= `shift` pixels,
    the vacated border 0 as in training's `random_shift`: 2 * (2 * shift + 1)^2 views with
    `flip`, (2 * shift + 1)^2 without (the unmoved images first)."""
    bases = [images, images[:, :, ::-1]] if flip else [images]
    if shift == 0:
        return bases
    _, h, w, _ = images.shape
    offsets = [(0, 0)] + [
        (dy, dx)
        for dy in range(-shift, shift + 1)
        for dx in range(-shift, shift + 1)
        if (dy, dx) != (0, 0)
    ]
    pad = ((0, 0), (shift, shift), (shift, shift), (0, 0))
    padded = [jnp.pad(base, pad) for base in bases]  # [B, H + 2 shift, W + 2 shift, C] each
    # out[y, x] = image[y - dy, x - dx] = padded[y - dy + shift, x - dx + shift], as
    # random_shift moves an image.
    return [
        p[:, shift - dy : shift - dy + h, shift - dx : shift - dx + w]
        for dy, dx in offsets
        for p in padded
    ]


def view_averaged_logits(
    logits_fn: Callable[[Float[Array, "B H W C"]], Float[Array, "B K"]],
    images: Float[Array, "B H W C"],
    flip: bool = True,
    shift: int = 0,
) -> Float[Array, "B K"]:
    """Test-time augmentation: log of the mean over `scoring_views` of softmax(f(view)).

    Logits whose softmax is the mean of the views' class probabilities (and whose
    cross-entropy is that mean's), so every loss and metric of logits applies unchanged.
    """
    views = scoring_views(images, flip, shift)
    log_probs = jnp.stack([jax.nn.log_softmax(logits_fn(v), axis=-1) for v in views])
    return jax.nn.logsumexp(log_probs, axis=0) - jnp.log(float(len(views)))


def mirror_averaged_logits(
    logits_fn: Callable[[Float[Array, "B H W C"]], Float[Array, "B K"]],
    images: Float[Array, "B H W C"],
) -> Float[Array, "B K"]:
    """Test-time flip: log((softmax(f(x)) + softmax(f(x mirrored left-right))) / 2)."""
    return view_averaged_logits(logits_fn, images, flip=True, shift=0)


@functools.partial(jax.jit, static_argnums=(0,))
def _probabilities(graphdef, params, images):
    return jax.nn.softmax(nnx.merge(graphdef, params)(images), axis=-1)


@functools.cache
def view_averaged_program(flip: bool, shift: int) -> Callable:
    """The jitted `f(graphdef, params, images)` -> the mean of `scoring_views`' class
    probabilities (one program per setting; `_probabilities` when there is one view)."""
    if not flip and shift == 0:
        return _probabilities

    @functools.partial(jax.jit, static_argnums=(0,))
    def averaged(graphdef, params, images):
        logits = view_averaged_logits(nnx.merge(graphdef, params), images, flip, shift)
        return jax.nn.softmax(logits, axis=-1)

    return averaged


probabilities_program = _probabilities  # What `transformer_jax.aot` compiles ahead of time.
mirrored_probabilities_program = view_averaged_program(True, 0)  # ... for a test_time_flip run.


@functools.partial(jax.jit, static_argnums=(0,))
def _attention(graphdef, params, images):
    logits, weights = nnx.merge(graphdef, params)(images, return_attention=True)
    return jax.nn.softmax(logits, axis=-1), weights


def as_model_pixels(array: np.ndarray, what: str) -> np.ndarray:
    """float32 pixels in [0, 1] from uint8 (0-255) or float (already in [0, 1]) values."""
    array = np.asarray(array)
    if array.dtype == np.uint8:
        return array.astype(np.float32) / 255.0
    if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{what}: pixels of dtype {array.dtype}; give uint8 or float values.")
    array = array.astype(np.float32)
    if array.size and (array.min() < 0.0 or array.max() > 1.0 or not np.isfinite(array).all()):
        raise ValueError(
            f"{what}: pixel values span [{array.min():g}, {array.max():g}], but the model reads "
            f"[0, 1] (or uint8 0-255). Scale them first, e.g. load_digits().images / 16."
        )
    return array


class ImageClassifier(FromCheckpoint):
    """A trained ViT with its label names. `from_checkpoint` serves a configs/vit_*.py run
    (with `mesh`, batches are split over data and fsdp). With `test_time_flip` or
    `test_time_shift` (a run's config fields of those names) each image's probabilities are
    the mean over its `scoring_views` (its mirror image; its moves by up to that many
    pixels), as the run's validation and test scored them."""

    EXPECT = Expect(
        "ImageClassifier",
        tasks=("image_classify",),
        models=("vit",),
        needs="a 'vit' model trained for 'image_classify' (a configs/vit_*.py run).",
    )

    def __init__(
        self,
        model: nnx.Module,
        label_names: Sequence[str],
        workdir: Workdir,
        steps,
        mesh: jax.sharding.Mesh | None = None,
        test_time_flip: bool = False,
        test_time_shift: int = 0,
    ):
        if len(label_names) != model.cfg.num_classes:
            raise CheckpointError(
                f"{workdir.labels_json}: {len(label_names)} labels, but the model has "
                f"{model.cfg.num_classes} outputs. Use the labels.json the run wrote."
            )
        self.model, self.label_names, self.workdir, self.steps = (
            model,
            tuple(label_names),
            workdir,
            list(steps),
        )
        self.image_shape = model.cfg.image_shape
        self.mesh = mesh  # The mesh the parameters are sharded over (None: replicated).
        self.test_time_flip = bool(test_time_flip)
        self.test_time_shift = int(test_time_shift)
        self._program = view_averaged_program(self.test_time_flip, self.test_time_shift)
        self._graphdef, self._params = nnx.split(model)

    @classmethod
    def from_run(cls, run: Run) -> ImageClassifier:
        """With the label names of the run's labels.json."""
        workdir = run.workdir
        try:
            names = label_names(json.loads(workdir.labels_json.read_bytes())["label_names"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(
                f"{workdir.labels_json}: missing or unreadable ({e}). It lists the class names; "
                f"rerun train.py on the workdir (it writes labels.json before training)."
            ) from e
        flip = bool(run.config.get("test_time_flip", False))  # Runs from before them: none.
        shift = int(run.config.get("test_time_shift", 0))
        views = {"test_time_flip": flip, "test_time_shift": shift}
        return cls(run.model, names, workdir, run.steps, run.mesh, **views)

    # ------------------------------------------------------------------------------ inputs
    def prepare(self, images, *, resize: bool = False) -> np.ndarray:
        """float32 `[B, H, W, C]` in [0, 1] from one image or a list: arrays `[H, W]`,
        `[H, W, C]` (uint8 or float in [0, 1]), a batch `[B, H, W(, C)]`, or file paths.

        Raises:
          ValueError: an image of another size or channel count (files: unless `resize`), or
            pixel values outside [0, 1]; the message names the input.
        """
        h, w, c = self.image_shape
        if isinstance(images, np.ndarray | jax.Array) and np.ndim(images) in (3, 4):
            array = np.asarray(images)
            is_batch = array.ndim == 4 or (array.ndim == 3 and array.shape[-1] not in (1, 3))
            if is_batch:
                return np.stack([self._one(x, f"images[{i}]", resize) for i, x in enumerate(array)])
        if isinstance(images, str | os.PathLike | np.ndarray | jax.Array):
            return self._one(images, "image", resize)[None]
        return np.stack([self._one(x, f"images[{i}]", resize) for i, x in enumerate(images)])

    def _one(self, image: ImageInput, what: str, resize: bool) -> np.ndarray:
        h, w, c = self.image_shape
        if isinstance(image, str | os.PathLike):
            path = storage.as_path(image)
            if not path.is_file():
                raise FileNotFoundError(f"{image}: no such image file.")
            try:
                pixels = read_image(path, (h, w) if resize else None, c)
            except Exception as e:  # Any decoder error (OSError, DecompressionBombError, ...).
                raise ValueError(f"{image}: not a readable image ({type(e).__name__}: {e}).") from e
            array = as_model_pixels(pixels, str(image))
            what = str(image)
        else:
            array = as_model_pixels(image, what)
        if array.ndim == 2:
            array = array[..., None]
        if array.shape != (h, w, c):
            hint = (
                " (pass resize=True, --resize on the command line)"
                if isinstance(image, str | os.PathLike)
                else ""
            )
            raise ValueError(
                f"{what}: an image of shape {array.shape}, but the model was trained on "
                f"{h}x{w} images with {c} channel(s){hint}."
            )
        return array

    # ------------------------------------------------------------------------------ outputs
    def predict(self, images, *, batch_size: int = 64, resize: bool = False):
        """The `Prediction` of one image, or a list of them for several (see `prepare`)."""
        single = isinstance(images, str | os.PathLike) or (
            isinstance(images, np.ndarray | jax.Array)
            and (np.ndim(images) == 2 or (np.ndim(images) == 3 and images.shape[-1] in (1, 3)))
        )
        pixels = self.prepare(images, resize=resize)
        out = []
        for start in range(0, len(pixels), batch_size):
            chunk = pixels[start : start + batch_size]
            padded = np.zeros((batch_size, *self.image_shape), np.float32)
            padded[: len(chunk)] = chunk  # one compiled shape whatever the count
            with under(self.mesh):
                probs = self._program(self._graphdef, self._params, *on_mesh(self.mesh, padded))
            probs = to_host(probs)
            for row in probs[: len(chunk)]:
                named = {n: float(p) for n, p in zip(self.label_names, row, strict=True)}
                out.append(Prediction(self.label_names[int(np.argmax(row))], named))
        return out[0] if single else out

    def attention(self, image, *, resize: bool = False) -> tuple[Prediction, PatchAttention]:
        """The prediction for one image and where the model looked (see `patch_attention`)."""
        pixels = self.prepare(image, resize=resize)
        if len(pixels) != 1:
            raise ValueError(f"attention takes one image, got {len(pixels)}.")
        with under(self.mesh):
            probs, weights = _attention(self._graphdef, self._params, *on_mesh(self.mesh, pixels))
            if self._program is not _probabilities:  # As `predict` makes it; maps: the image's.
                probs = self._program(self._graphdef, self._params, *on_mesh(self.mesh, pixels))
        row = to_host(probs)[0]
        named = {n: float(p) for n, p in zip(self.label_names, row, strict=True)}
        prediction = Prediction(self.label_names[int(np.argmax(row))], named)
        maps = patch_attention(
            [to_host(w)[0] for w in weights],
            self.model.cfg.grid,
            has_cls=self.model.cfg.pool == "cls",
        )
        return prediction, maps
