"""Image folders with files that are not images: every unreadable file is named, none crashes
the reader (empty, random bytes, text, truncated, a header claiming a decompression bomb)."""

from __future__ import annotations

import io
import random
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from transformer_jax.data.images.folder import folder_dataset


def png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def bomb_header(side: int = 20_000) -> bytes:
    """A PNG whose header claims side x side pixels (Pillow refuses > 2 x 89M pixels)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


GOOD = png(np.zeros((8, 8), np.uint8))
BAD = {
    "empty.png": b"",
    "random.jpg": random.Random(0).randbytes(300),
    "text.png": b"this is not an image\n",
    "truncated.png": GOOD[: len(GOOD) // 2],
    "bomb.png": bomb_header(),
}


def test_every_unreadable_image_is_named(tmp_path):
    for root in ("train", "eval"):
        for label in ("a", "b"):
            folder = tmp_path / root / label
            folder.mkdir(parents=True)
            (folder / "ok.png").write_bytes(GOOD)
    for name, data in BAD.items():
        (tmp_path / "train" / "a" / name).write_bytes(data)
    with pytest.raises(ValueError) as error:
        folder_dataset(str(tmp_path / "train"), str(tmp_path / "eval"), None, None, 1)
    message = str(error.value)
    assert message.startswith(f"{len(BAD)} image file(s) could not be read")
    for name in BAD:
        assert str(tmp_path / "train" / "a" / name) in message, name
    assert "Delete or fix them" in message
