"""Classify image files with a trained ViT (a `configs/vit_*.py` run), and show its attention.

    python -m transformer_jax classify-image --workdir=runs/vit digit.png other.png
    python -m transformer_jax classify-image --workdir=runs/vit --test_images=3 \\
        --attention_dir=runs/vit/attention

Inputs are image files (PNG, JPEG, ... read with Pillow; `--resize` scales them to the trained
size, otherwise another size is an error), or the first N images of the run's own test split
(`--test_images=N`). Each line out answers one input: `input<TAB>label<TAB>probability`, or with
`--json` one JSON object per line. `--attention_dir` also writes, per input, a PNG of the [CLS]
token's attention per layer and head over the image, and the attention rollout.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys

from absl import flags

from transformer_jax import tasks
from transformer_jax.cli import common
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.inference.patch_attention import save_attention_png


def test_split_images(classifier: ImageClassifier, count: int):
    """(names, images [N, H, W, C]) of the first `count` images of the run's test split."""
    config = classifier.workdir.read_config()
    task = tasks.get(config.task)(config, classifier.workdir)
    split = task.dataset.splits["test"]
    if not len(split):
        raise ValueError(f"{classifier.workdir}: the run's data has no test split.")
    count = min(count, len(split))
    return [f"test[{i}]" for i in range(count)], split.images[:count]


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv, "ViT run")
    common.checkpoint_flags(fv, average=True)
    common.mesh_flag(fv)
    flags.DEFINE_integer("test_images", 0, "Also the first N test images.", flag_values=fv)
    flags.DEFINE_boolean("resize", False, "Scale files to the trained size.", flag_values=fv)
    flags.DEFINE_boolean("json", False, "One JSON object per line.", flag_values=fv)
    flags.DEFINE_string("attention_dir", None, "Write attention PNGs here.", flag_values=fv)


def write_attention(classifier, names, pixels, files: int, out_dir: pathlib.Path) -> None:
    """One PNG per input: [CLS] attention per layer and head, and the rollout."""
    for i, (name, image) in enumerate(zip(names, pixels, strict=True)):
        prediction, maps = classifier.attention(image)
        p = prediction.probabilities[prediction.label]
        stem = pathlib.Path(name).stem if i < files else name
        stem = stem.replace("[", "_").replace("]", "")
        path = save_attention_png(
            image, maps, out_dir / f"{stem}.attention.png",
            title=f"{name}: {prediction.label} (p={p:.2f})",
        )  # fmt: skip
        print(f"attention: {path}", file=sys.stderr)


def classify_image(fv: flags.FlagValues, files: list[str]) -> int:
    common.at_least(fv.test_images, 0, "test_images")
    if not files and not fv.test_images:
        raise ValueError("give image files, or --test_images=N for the run's test images.")
    classifier = ImageClassifier.from_checkpoint(
        fv.workdir, fv.step, average_last=fv.average_last, mesh=fv.mesh
    )
    names = list(files)
    pixels = [classifier.prepare(p, resize=fv.resize)[0] for p in files]
    if fv.test_images:
        test_names, test_pixels = test_split_images(classifier, fv.test_images)
        names += test_names
        pixels += list(test_pixels)
    predictions = classifier.predict(pixels) if pixels else []
    if fv.attention_dir:
        write_attention(classifier, names, pixels, len(files), pathlib.Path(fv.attention_dir))
    out = []
    for name, p in zip(names, predictions, strict=True):
        if fv.json:
            out.append(json.dumps({"input": name, **dataclasses.asdict(p)}, ensure_ascii=False))
        else:
            label = common.one_line(p.label)
            out.append(f"{common.one_line(name)}\t{label}\t{p.probabilities[p.label]:.4f}")
    common.write_lines(out)
    return 0


COMMAND = common.Command(
    "python -m transformer_jax classify-image",
    __doc__,
    define_flags,
    classify_image,
    positional="IMAGE ...",
)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
