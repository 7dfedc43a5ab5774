"""FLOPs of the kernels that XLA's cost analysis cannot see.

XLA counts a custom call's operand and result bytes but not its FLOPs: a program whose
attention runs as Pallas's splash kernel (TPU) or cuDNN's fused attention (GPU) would report
its matrix products without attention's, and a program compiled for a GPU, whose matrix
products are cuBLAS calls (`__cublas$gemm`, `__cublas$lt$matmul`), would report almost none of
them. `custom_call_flops` counts them from the calls' shapes, per device (the shapes in a
compiled program are one device's). A cuBLAS call of result [..., M, N] contracting K is
2MNK FLOPs per batch element.

Letters: B batch, N heads, T query length, S key length, H head dim (Hqk of the queries and
keys, Hv of the values). One product of [T, H] by [H, S] is 2TSH FLOPs; the kernels run:

| call | products | FLOPs (Hqk = Hv = H) |
| --- | --- | --- |
| splash forward (`splash_mha_fwd*`) | Q K^T, P V | 4 BNTSH |
| splash dq (`splash_mha_dq*`) | Q K^T again, dO V^T, dS K | 6 BNTSH |
| splash dkv (`splash_mha_dkv*`) | Q K^T again, dO V^T, P^T dO, dS^T Q | 8 BNTSH |
| splash dkv computing dq too (fused backward) | the above and dS K | 10 BNTSH |
| cuDNN forward (`__cudnn$fmha*`) | Q K^T, P V | 4 BNTSH |
| cuDNN backward (`__cudnn$fmha*Backward`) | Q K^T again, dO V^T, P^T dO, dS K, dS^T Q | 10 BNTSH |

cuDNN's flash backward recomputes the scores: its forward keeps only the softmax statistics
([B, N, T]) for it. A causal call skips the blocks above the diagonal, about half: splash's
calls count half when JAX placed them under `jax.named_scope("splash_attention_causal")`
(their op_name says so), cuDNN's when their mask type is causal.
"""

from __future__ import annotations

import math
import re

from transformer_jax.aot import hlo

_SPLASH = re.compile(r"^splash_m[hq]a_(fwd|dq|dkv)")
_CUBLAS = re.compile(r'custom_call_target="__cublas\$(gemm|lt\$matmul)\w*"')
_LHS_CONTRACTING = re.compile(r'"lhs_contracting_dimensions"\s*:\s*\[([^\]]*)\]')
_CUDNN = re.compile(r'custom_call_target="__cudnn\$(fmha\w*)"')
_INTERMEDIATE = re.compile(
    r'"intermediate_tensor_shape"\s*:\s*\{[^{}]*?"dimensions"\s*:\s*\[([^\]]*)\]'
)
_MASK = re.compile(r'"mask_type"\s*:\s*"(\w+)"')
SPLASH_CAUSAL_SCOPE = "splash_attention_causal"


def custom_call_flops(hlo_text: str, *, gemms: bool = True) -> float:
    """FLOPs per device of the custom calls (splash, cuDNN attention and, with `gemms`, cuBLAS
    matrix products) in an optimised HLO module's text (`compiled.as_text()`): each call counted
    once, as XLA's cost analysis counts a loop body once. 0.0 when there are none. Leave
    `gemms` out when the FLOPs they are added to already count the matrix products (an
    analysis of the program before optimisation)."""
    calls = ("splash_m", "__cudnn$fmha", *(("__cublas$",) if gemms else ()))
    if not any(call in hlo_text for call in calls):
        return 0.0
    total = 0.0
    for computation in hlo.parse_module(hlo_text).values():
        shapes = {i.name: i.shape for i in computation.instructions}
        for instruction in computation.instructions:
            if instruction.opcode == "custom-call":
                total += _call_flops(instruction, shapes, gemms)
    return total


def _float_operands(instruction: hlo.Instruction, shapes: dict[str, str]) -> list[tuple]:
    """The dims of the call's floating-point operands, in order (from its operand layout
    constraints, else from the operands' own shapes)."""
    constraints = instruction.braced("operand_layout_constraints")
    if constraints:
        listed = hlo.arrays(constraints)
    else:
        listed = [a for o in instruction.operands for a in hlo.arrays(shapes.get(o, ""))]
    return [dims for dtype, dims, _ in listed if dtype.startswith(("f", "bf"))]


def _gemm_flops(instruction: hlo.Instruction, shapes: dict[str, str]) -> float:
    """2 x the result's elements x the contracted size, of a cuBLAS call (its result is a
    tuple: the product, then cuBLAS's workspace bytes)."""
    contracting = _LHS_CONTRACTING.search(instruction.attributes)
    result = hlo.arrays(instruction.shape)
    lhs = hlo.arrays(shapes.get(instruction.operands[0], "")) if instruction.operands else []
    if not (contracting and result and lhs):
        return 0.0
    dims = [int(d.strip(' "')) for d in contracting.group(1).split(",") if d.strip(' "')]
    return 2.0 * math.prod(result[0][1]) * math.prod(lhs[0][1][d] for d in dims)


def _call_flops(instruction: hlo.Instruction, shapes: dict[str, str], gemms: bool) -> float:
    if _CUBLAS.search(instruction.attributes):
        return _gemm_flops(instruction, shapes) if gemms else 0.0
    splash = _SPLASH.match(instruction.name)
    cudnn = _CUDNN.search(instruction.attributes)
    if not (splash or cudnn):
        return 0.0
    operands = _float_operands(instruction, shapes)
    if len(operands) < 3:
        return 0.0
    q, k, v = operands[:3]
    hqk, hv = q[-1], v[-1]
    if splash:
        # q [..., T, Hqk] (B and N before), k [..., S, Hqk]: every query meets every key.
        scores = math.prod(q[:-1]) * k[-2]
        phase = splash.group(1)
        if phase == "fwd":
            per_score = 2 * (hqk + hv)
        elif phase == "dq":
            per_score = 2 * (2 * hqk + hv)
        else:
            per_score = 2 * (2 * hqk + 2 * hv)
            fused_dq = any(
                len(dims) == len(q) + 1 and dims[-3:] == q[-3:]
                for _, dims, _ in hlo.arrays(instruction.shape)
            )
            per_score += 2 * hqk * fused_dq
        causal = SPLASH_CAUSAL_SCOPE in instruction.op_name
    else:
        dims = _INTERMEDIATE.search(instruction.attributes)
        if dims:  # [B, N, T, S], as jax's cuDNN lowering writes it.
            scores = math.prod(int(d.strip(' "')) for d in dims.group(1).split(","))
        else:  # jax's default layout: q [B, T, N, H], k [B, S, N, H].
            scores = math.prod(q[:-1]) * k[-3]
        backward = "Backward" in cudnn.group(1)
        per_score = 2 * (3 * hqk + 2 * hv) if backward else 2 * (hqk + hv)
        mask = _MASK.search(instruction.attributes)
        causal = bool(mask and "CAUSAL" in mask.group(1)) or '"is_causal_mask":true' in (
            instruction.attributes.replace(" ", "")
        )
    return float(scores * per_score) * (0.5 if causal else 1.0)
