"""A convolutional stem before the patch projection, as a pure function (Xiao et al. 2021,
"Early Convolutions Help Transformers See Better"; the hybrid of Dosovitskiy et al. 2020, §3.1).

Each layer is a 3 x 3 convolution with stride 1 or 2 (one pixel of zero padding on every side,
so an even side halves exactly) followed by ReLU; a stack with k stride-2 layers shrinks the
image by 2^k, and the ViT's patch projection then reads patches of P / 2^k of the stem's
output, so the token grid is the same (H/P) x (W/P) as without a stem. The convolutions give
the first layer a locality and translation equivariance the linear patch projection lacks,
which is what small datasets and short schedules miss most.

Letters: B batch, H height, W width, C channels in, O channels out; h, w the output's sides.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
from jaxtyping import Array, Float

STEM_KERNEL = 3  # Every stem layer's kernel is 3 x 3.


def stem_layout(full_res_layers: int, layers: int, channels: int) -> list[tuple[int, int]]:
    """(output channels, stride) of each stem layer: `full_res_layers` of stride 1 and width
    `channels`, then `layers` of stride 2 whose width doubles at each (`channels`, 2 x, ...)."""
    return [(channels, 1)] * full_res_layers + [(channels * 2**i, 2) for i in range(layers)]


def conv_stem(
    images: Float[Array, "B H W C"],
    kernels: Sequence[Array],
    biases: Sequence[Array],
    strides: Sequence[int],
) -> Float[Array, "B h w O"]:
    """relu(conv(x, K_i, stride s_i) + b_i) for each layer i in turn.

    Args:
      images: the input.
      kernels: layer i's kernel `[3, 3, C_i, O_i]`, C_0 = C and C_{i+1} = O_i.
      biases: layer i's bias `[O_i]`.
      strides: layer i's stride, 1 or 2.

    Returns:
      `[B, H / 2^k, W / 2^k, O_last]` for k stride-2 layers (H and W must be multiples of 2^k).
    """
    x = images
    for kernel, bias, stride in zip(kernels, biases, strides, strict=True):
        if x.shape[1] % stride or x.shape[2] % stride:
            raise ValueError(
                f"conv_stem: a {x.shape[1]}x{x.shape[2]} feature map cannot be halved by a "
                f"stride-{stride} layer; use fewer stem layers or images whose sides are "
                f"multiples of 2**layers."
            )
        pad = STEM_KERNEL // 2
        x = jax.lax.conv_general_dilated(
            x,
            kernel,
            window_strides=(stride, stride),
            padding=((pad, pad), (pad, pad)),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        )
        x = jax.nn.relu(x + bias)
    return x
