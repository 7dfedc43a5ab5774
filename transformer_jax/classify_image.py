"""Classify image files with a trained ViT (a `configs/vit_*.py` run), and show its attention.

    python -m transformer_jax.classify_image --workdir=runs/vit digit.png other.png
    python -m transformer_jax.classify_image --workdir=runs/vit --test_images=3 \
        --attention_dir=runs/vit/attention

Inputs are image files (PNG, JPEG, ... read with Pillow; `--resize` scales them to the trained
size, otherwise another size is an error), or the first N images of the run's own test split
(`--test_images=N`). Each line out answers one input: `input<TAB>label<TAB>probability`, or with
`--json` one JSON object per line. `--attention_dir` also writes, per input, a PNG of the [CLS]
token's attention per layer and head over the image, and the attention rollout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

from transformer_jax import tasks
from transformer_jax.cli_lines import one_line, quiet_logs, write_lines
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.inference.mesh import FLAG_HELP as MESH_FLAG_HELP
from transformer_jax.inference.mesh import MeshError
from transformer_jax.inference.patch_attention import save_attention_png
from transformer_jax.workdir import CheckpointError


def test_split_images(classifier: ImageClassifier, count: int):
    """(names, images [N, H, W, C]) of the first `count` images of the run's test split."""
    config = classifier.workdir.read_config()
    task = tasks.get(config.task)(config, classifier.workdir)
    split = task.dataset.splits["test"]
    if not len(split):
        raise ValueError(f"{classifier.workdir}: the run's data has no test split.")
    count = min(count, len(split))
    return [f"test[{i}]" for i in range(count)], split.images[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_jax.classify_image", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workdir", required=True, help="The train.py workdir of a ViT run.")
    parser.add_argument("images", nargs="*", help="Image files to classify.")
    parser.add_argument("--test_images", type=int, default=0, help="Also the first N test images.")
    parser.add_argument("--resize", action="store_true", help="Scale files to the trained size.")
    parser.add_argument("--json", action="store_true", help="One JSON object per line.")
    parser.add_argument("--attention_dir", default=None, help="Write attention PNGs here.")
    parser.add_argument("--step", type=int, default=None, help="Checkpoint step (default: latest).")
    parser.add_argument("--mesh", default=None, help=MESH_FLAG_HELP)
    args = parser.parse_args(argv)
    quiet_logs()
    try:
        if args.test_images < 0:
            raise ValueError(f"--test_images must be >= 0, got {args.test_images}.")
        if not args.images and not args.test_images:
            raise ValueError("give image files, or --test_images=N for the run's test images.")
        classifier = ImageClassifier.from_checkpoint(args.workdir, args.step, mesh=args.mesh)
        names = list(args.images)
        pixels = [classifier.prepare(p, resize=args.resize)[0] for p in args.images]
        if args.test_images:
            test_names, test_pixels = test_split_images(classifier, args.test_images)
            names += test_names
            pixels += list(test_pixels)
        predictions = classifier.predict(pixels) if pixels else []
        if args.attention_dir:
            out_dir = pathlib.Path(args.attention_dir)
            for i, (name, image) in enumerate(zip(names, pixels, strict=True)):
                prediction, maps = classifier.attention(image)
                p = prediction.probabilities[prediction.label]
                stem = pathlib.Path(name).stem if i < len(args.images) else name
                stem = stem.replace("[", "_").replace("]", "")
                path = save_attention_png(
                    image, maps, out_dir / f"{stem}.attention.png",
                    title=f"{name}: {prediction.label} (p={p:.2f})",
                )  # fmt: skip
                print(f"attention: {path}", file=sys.stderr)
    except MeshError as e:
        print(f"error: --mesh={args.mesh}: {e}", file=sys.stderr)
        return 1
    except (CheckpointError, ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out = []
    for name, p in zip(names, predictions, strict=True):
        if args.json:
            out.append(json.dumps({"input": name, **dataclasses.asdict(p)}, ensure_ascii=False))
        else:
            out.append(f"{one_line(name)}\t{one_line(p.label)}\t{p.probabilities[p.label]:.4f}")
    write_lines(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
