"""ViT runs served: `POST /v1/classify-image` with a PNG or JPEG.

The image comes as the body (`Content-Type: image/png` or `image/jpeg`) or as the `image` field
of a multipart form (what `curl -F image=@cat.png` sends). It is decoded with Pillow in the
event loop, converted to the model's channels, and resized to the model's size only when the
request says `resize=true` (a query parameter or form field); otherwise an image of another
size is refused with the size the model takes. Every batch has `max_batch` rows: one program.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.serving.errors import ApiError
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.service import Service
from transformer_jax.serving.settings import Limits

MAX_PIXELS = 40_000_000  # Larger images (a decompression bomb) are refused before decoding.


def decode_image(data: bytes, shape: tuple[int, int, int], resize: bool) -> np.ndarray:
    """uint8 `[H, W, C]` pixels of an encoded image, in the model's channels and size.

    Raises:
      ApiError: 400 for bytes Pillow cannot read as an image, 413 past `MAX_PIXELS`, 422
        for another size without `resize` (naming the size the model takes).
    """
    from PIL import Image  # The vision extra's; imported when an image model is served.

    h, w, c = shape
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # Pillow only warns up to twice this: we check too.
    too_big = ApiError(
        413,
        f"the image has more than {MAX_PIXELS} pixels, the most this server decodes; "
        f"the model takes {w}x{h}.",
        param="image",
    )
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > MAX_PIXELS:  # Its header's size: not decoded yet.
                raise too_big
            image.load()
            image = image.convert("L" if c == 1 else "RGB")
            if image.size != (w, h):
                if not resize:
                    raise ApiError(
                        422,
                        f"the image is {image.size[0]}x{image.size[1]} pixels; "
                        f"the model takes {w}x{h}: send that size, or resize=true "
                        "to scale it (bilinear).",
                        param="image",
                    )
                image = image.resize((w, h), Image.Resampling.BILINEAR)
            pixels = np.asarray(image, np.uint8)
    except ApiError:
        raise
    except Image.DecompressionBombError:
        raise too_big from None
    except Exception as e:  # noqa: BLE001 - any decoder error is the client's bad file
        raise ApiError(
            400,
            f"the image could not be read ({type(e).__name__}: "
            f"{str(e)[:200]}); send a PNG or JPEG.",
            param="image",
        ) from None
    return pixels[..., None] if pixels.ndim == 2 else pixels


class ImageService(Service):
    """Image classification (`ImageClassifier`)."""

    KIND = "image-classification"
    ROUTES = ("/v1/classify-image",)

    def __init__(self, name: str, classifier: ImageClassifier, limits: Limits, metrics: Metrics):
        self.classifier = classifier
        super().__init__(name, limits, metrics)

    def run_batch(self, payloads: Sequence[np.ndarray]) -> list:
        return self.classifier.predict(list(payloads), batch_size=self.limits.max_batch)

    def warmup_batches(self) -> list[list[np.ndarray]]:
        return [[np.zeros(self.classifier.image_shape, np.uint8)]]

    def describe(self) -> dict:
        h, w, c = self.classifier.image_shape
        return {
            **super().describe(),
            "labels": list(self.classifier.label_names),
            "image_size": [w, h],
            "channels": c,
        }
