"""Image classification with the Vision Transformer: cross-entropy (optionally label-smoothed)
over the classes, accuracy (and top-5 beyond 5 classes) and macro-F1.

Batches from `transformer_jax.data.images.pipeline`: `images` float32 [B, H, W, C] in [0, 1],
`labels` int32 [B], `weights` float32 [B]. Metrics, the best checkpoint and the report are
every label task's (`LabelTask`). At the test, the model's figures are printed beside an RBF
SVC and logistic regression on the raw pixels of the same split, fitted on the same training
images.

With `config.init_from` every parameter but the head comes from a pretrained ViT (trained here
or converted); the head is always new, sized by this data's classes (even when their number is
the pretrained one's: the classes are other ones). The images must have the pretrained model's
size and channels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from transformer_jax.data.images import config as image_config
from transformer_jax.data.images import digits, folder, idx, pipeline, tfds_source
from transformer_jax.inference import image_classifier
from transformer_jax.inference.image_classifier import view_averaged_logits
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks import image_baselines, pretrained
from transformer_jax.tasks.label_sums import label_sums
from transformer_jax.tasks.label_task import NO_SKLEARN, LabelTask
from transformer_jax.tasks.shared_fields import (
    LABEL_SMOOTHING,
    check_number,
    check_shared_fields,
)

IMAGE_FIELDS = ("num_classes", "image_height", "image_width", "channels")  # The model's.
# What makes images fit a pretrained model (config.init_from); one text for the height and the
# width, so that a square's two differences read as one fix.
SIZE_HINT = (
    "give images of the pretrained model's size: set --config.data.folder_size={value} to "
    "resize a folder's images to {value}x{value}"
)


def image_loss(
    model: nnx.Module,
    batch: dict[str, jax.Array],
    rng: jax.Array | None,
    deterministic: bool,
    smoothing: float = 0.0,
    test_time_flip: bool = False,
    test_time_shift: int = 0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed smoothed cross-entropy, metric sums incl. the confusion matrix) of a batch;
    deterministic (validation, test) with `test_time_flip` or `test_time_shift`, of the mean
    of the class probabilities of each image's `scoring_views`."""
    if deterministic and (test_time_flip or test_time_shift):
        logits = view_averaged_logits(model, batch["images"], test_time_flip, test_time_shift)
    else:
        logits = model(batch["images"], rng=rng, deterministic=deterministic)  # [B, K]
    sums = label_sums(logits, batch["labels"], batch["weights"], smoothing=smoothing)
    return sums["loss_sum"], sums


class ImageClassificationTask(LabelTask):
    """Classify images with the ViT's [CLS] (or mean-pooled) output."""

    name = "image_classify"
    absolute_data_paths = staticmethod(image_config.with_absolute_paths)
    score_kind = "image"
    example_noun = "images"
    model_defining_data_fields = (
        "source",
        "tfds_name",
        "folder_train",
        "folder_size",
        "folder_channels",
    )
    fresh_params = ("head_kernel", "head_bias")
    fresh_fields = ("num_classes",)
    init_from_hints = {
        "image_height": SIZE_HINT,
        "image_width": SIZE_HINT,
        "channels": "give images of {value} channel(s): set --config.data.folder_channels={value}",
    }

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        super().add_config_fields(config)  # baselines: an RBF SVC and logistic regression
        config.label_smoothing = 0.0  # epsilon of the label-smoothed cross-entropy (0 = plain).
        config.baseline_max_train = 10_000  # Images the baselines fit on (SVC grows as N^2).
        # Validation and test (and ImageClassifier on the run) score the mean of each image's
        # and its left-right mirror image's probabilities: for classes a mirror keeps.
        config.test_time_flip = False
        # ... and of the image moved by every offset of up to this many pixels in y and x
        # (0: none), (2 * shift + 1)^2 times the cost of scoring (docs/vit.md).
        config.test_time_shift = 0
        pretrained.add_init_from(config)  # A ViT to fine-tune with a new head; '': from scratch.

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "vit")
        check_number(config, "label_smoothing", LABEL_SMOOTHING)
        if not isinstance(config.get("test_time_flip", False), bool):
            raise ValueError(
                f"config.test_time_flip must be True or False, got {config.test_time_flip!r}."
            )
        shift = config.get("test_time_shift", 0)
        if isinstance(shift, bool) or not isinstance(shift, int) or not 0 <= shift <= 4:
            raise ValueError(
                f"config.test_time_shift must be an integer from 0 to 4 (pixels; 1 scores 9 "
                f"moves of each image), got {shift!r}."
            )
        image_config.validate_image_data_config(config.data)
        cls.check_baselines(config)
        pretrained.check_init_from(config)
        max_train = config.get("baseline_max_train")
        if isinstance(max_train, bool) or not isinstance(max_train, int) or max_train < 1:
            raise ValueError(
                f"config.baseline_max_train must be a positive integer, got {max_train!r}."
            )

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        self.dataset = pipeline.load_image_dataset(config.data)
        for split, images in self.dataset.splits.items():
            pipeline.log_split(split, images)
        self.write_labels()

    def labels_info(self) -> dict[str, Any]:
        return {"image_shape": list(self.dataset.image_shape)}

    def data_values(self) -> Mapping[str, Any]:
        height, width, channels = self.dataset.image_shape
        return {
            "num_classes": self.dataset.num_classes,
            "image_height": height,
            "image_width": width,
            "channels": channels,
        }

    @classmethod
    def abstract_data_values(cls, config: ml_collections.ConfigDict) -> dict[str, Any]:
        """The classes and the image height, width and channels, no image read: digits are
        10 classes of 8x8x1; an IDX source's come from the files' headers (and the labels
        file when data.idx_label_names is unset); a folder source has a class per subfolder
        of data.folder_train (listed) and data.folder_size squares of data.folder_channels;
        a TFDS source's come
        from its builder's metadata. What the config cannot tell (a folder without
        folder_size; a builder TFDS cannot describe without TensorFlow) is config.model's
        field of that name; without it, a ValueError names the field to set."""
        data = config.data
        if data.source == "digits":
            (height, width, channels), classes = digits.IMAGE_SHAPE, len(digits.LABEL_NAMES)
            values = dict(zip(IMAGE_FIELDS, (classes, height, width, channels), strict=True))
        elif data.source == "folder":
            values = {
                "num_classes": len(folder.class_folders(data.folder_train)),
                "channels": data.folder_channels,
            }
            if data.folder_size is not None:
                values["image_height"] = values["image_width"] = data.folder_size
        elif data.source == "idx":
            files = pipeline.idx_files(data)
            shape = idx.idx_shape(files["train_images"])
            names = image_config.idx_label_names(data)
            classes = len(names) if names else int(idx.read_idx(files["train_labels"]).max()) + 1
            values = {
                "num_classes": classes,
                "image_height": shape[1] if len(shape) > 1 else None,
                "image_width": shape[2] if len(shape) > 2 else None,
                "channels": shape[3] if len(shape) == 4 else 1,
            }
        else:
            values = tfds_source.builder_image_values(data)
        for field in IMAGE_FIELDS:
            if values.get(field) is None:
                values[field] = config.model.get(field)
        unknown = [field for field in IMAGE_FIELDS if values[field] is None]
        if unknown:
            raise ValueError(
                f"config.data.source={data.source!r}: the images' {', '.join(unknown)} are "
                f"only known once they are read. Set config.model.{unknown[0]}"
                f"{' (and the others)' if len(unknown) > 1 else ''}"
                f"{' or config.data.folder_size' if data.source == 'folder' else ''}."
            )
        return {field: values[field] for field in IMAGE_FIELDS}

    @classmethod
    def example_spec(cls, config, rows):
        """`images`, float32 [rows, H, W, C] (`abstract_data_values`'s)."""
        values = cls.abstract_data_values(config)
        shape = (rows, values["image_height"], values["image_width"], values["channels"])
        return {"images": jax.ShapeDtypeStruct(shape, jnp.float32)}

    @staticmethod
    def probabilities_program():
        return image_classifier.probabilities_program

    def serving_program(self):
        """With `test_time_flip` or `test_time_shift`, the view-averaged probabilities
        ImageClassifier serves."""
        flip = bool(self.config.get("test_time_flip", False))
        return image_classifier.view_averaged_program(flip, self.test_time_shift())

    def test_time_shift(self) -> int:
        return int(self.config.get("test_time_shift", 0))  # Runs from before it: none.

    def train_iterator(self):
        return pipeline.ImageTrainIterator(self.dataset.splits["train"], self.config.data)

    def eval_batches(self, split: str = "eval"):
        if not len(self.dataset.splits[split]):
            return []
        return pipeline.image_eval_batches(self.dataset.splits[split], self.config.data)

    def loss_fn(self, model, batch, rng, deterministic):
        smoothing = float(self.config.label_smoothing)
        flip = bool(self.config.get("test_time_flip", False))  # Runs from before it: none.
        shift = self.test_time_shift()
        return image_loss(model, batch, rng, deterministic, smoothing, flip, shift)

    def baseline_lines(self, split: str, metrics: dict) -> list[str]:
        """An RBF SVC and logistic regression on the raw pixels, fitted on the training split."""
        if not image_baselines.HAVE_SKLEARN:
            return [NO_SKLEARN]
        scores = image_baselines.pixel_baselines(
            self.dataset.splits["train"],
            self.dataset.splits[split],
            self.dataset.num_classes,
            max_train=self.config.baseline_max_train,
        )
        lines = []
        for name, score in scores.items():
            metrics[f"{name}_accuracy"] = score["accuracy"]
            metrics[f"{name}_macro_f1"] = score["macro_f1"]
            lines.append(
                f"  {image_baselines.NAMES[name]} on raw pixels, same split: accuracy "
                f"{100 * score['accuracy']:.2f}%, macro-F1 {100 * score['macro_f1']:.2f}% "
                f"({score['seconds']:.1f} s)"
            )
        return lines
