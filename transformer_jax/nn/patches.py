"""Images as sequences of patches (Dosovitskiy et al. 2020, §3.1), as pure functions.

An image `[H, W, C]` is cut into non-overlapping `P x P` patches, read in row-major order (left
to right, then top to bottom); each patch p_n is flattened to `P*P*C` values (row, column,
channel) and projected: x_n = W p_n + b. The projection is one matrix product of the flattened
patches, or equally a convolution with a `P x P` kernel and stride P; both views are here and
give the same numbers.

Letters: B batch, H height, W width, C channels, P patch size, N patches = (H/P)(W/P),
F = P*P*C patch values, D model dim.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def check_patch_grid(height: int, width: int, patch: int) -> tuple[int, int]:
    """(rows, columns) of the patch grid; a clear error when P does not tile the image."""
    if patch <= 0 or height % patch or width % patch:
        raise ValueError(
            f"patch size {patch} does not tile a {height}x{width} image: height and width must "
            f"be multiples of it (pick a divisor, e.g. {_divisors(height, width)})."
        )
    return height // patch, width // patch


def _divisors(height: int, width: int) -> list[int]:
    return [p for p in range(1, min(height, width) + 1) if height % p == 0 and width % p == 0]


def patchify(images: Float[Array, "B H W C"], patch: int) -> Float[Array, "B N F"]:
    """The flattened patches of each image, row-major: patch n = (n // (W/P), n % (W/P))."""
    b, h, w, c = images.shape
    rows, cols = check_patch_grid(h, w, patch)
    x = images.reshape(b, rows, patch, cols, patch, c)
    x = x.transpose(0, 1, 3, 2, 4, 5)  # [B, rows, cols, P, P, C]
    return x.reshape(b, rows * cols, patch * patch * c)


def embed_patches_dense(
    images: Float[Array, "B H W C"],
    kernel: Float[Array, "P P C D"],
    bias: Float[Array, " D"],
) -> Float[Array, "B N D"]:
    """x_n = W p_n + b with the patches flattened explicitly (reshape, then one einsum)."""
    patch, _, c, d = kernel.shape
    flat = patchify(images, patch)
    return jnp.einsum("BNF,FD->BND", flat, kernel.reshape(patch * patch * c, d)) + bias


def embed_patches_conv(
    images: Float[Array, "B H W C"],
    kernel: Float[Array, "P P C D"],
    bias: Float[Array, " D"],
) -> Float[Array, "B N D"]:
    """The same projection as a convolution with a `P x P` kernel and stride P."""
    patch, _, _, d = kernel.shape
    check_patch_grid(images.shape[1], images.shape[2], patch)
    y = jax.lax.conv_general_dilated(
        images,
        kernel,
        window_strides=(patch, patch),
        padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )  # [B, H/P, W/P, D]
    return y.reshape(y.shape[0], -1, d) + bias


def sincos_2d(rows: int, cols: int, d_model: int) -> Float[Array, "N D"]:
    """Fixed 2-D sine-cosine position embeddings for a `rows x cols` patch grid, row-major.

    A quarter of the features encodes the column x and a quarter the row y, each as sin and cos
    of the coordinate at the frequencies 10000^(-i / (D/4)), i < D/4 (the 1-D encoding of §3.5
    of the Transformer paper, applied per axis): [sin(x w), cos(x w), sin(y w), cos(y w)].
    """
    if d_model % 4:
        raise ValueError(
            f"sincos_2d needs d_model divisible by 4 (sin and cos for each of x and y), got "
            f"{d_model}."
        )
    quarter = d_model // 4
    omega = 1.0 / 10000.0 ** (jnp.arange(quarter, dtype=jnp.float32) / quarter)  # [D/4]
    y, x = jnp.meshgrid(jnp.arange(rows), jnp.arange(cols), indexing="ij")  # [rows, cols]
    xw = x.reshape(-1, 1).astype(jnp.float32) * omega  # [N, D/4]
    yw = y.reshape(-1, 1).astype(jnp.float32) * omega
    return jnp.concatenate([jnp.sin(xw), jnp.cos(xw), jnp.sin(yw), jnp.cos(yw)], axis=1)
