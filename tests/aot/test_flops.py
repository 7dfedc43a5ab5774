"""The attention kernels' FLOPs, which XLA's cost analysis does not count: splash attention
compiled for a TPU v5e on this CPU, cuDNN's fused attention from its custom calls' text, and
the compile report that adds them."""

import importlib.util
import types

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from transformer_jax.aot import report
from transformer_jax.aot.flops import custom_call_flops
from transformer_jax.aot.programs import Plan, Program
from transformer_jax.aot.targets import parse_target, target_devices

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None,
    reason='needs the aot extra: pip install -e ".[aot]"',
)
B, N, T, S, H = 2, 3, 256, 384, 64  # All different: a transposed axis cannot pass.


def splash_program(causal: bool, fused_backward: bool = False, length: int = S):
    """Lowers the gradient of splash attention over q [B, N, T, H], k, v [B, N, length, H]
    for one TPU v5e, under the named scope the models use."""
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as kernel,
    )
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    mesh = Mesh(target_devices(parse_target("v5e-1")), ("x",))
    mask = masks.CausalMask((T, length)) if causal else masks.FullMask((T, length))
    blocks = dict(block_q=128, block_kv=128, block_kv_compute=128, block_q_dkv=128,
                  block_kv_dkv=128, block_kv_dkv_compute=128)  # fmt: skip
    if fused_backward:
        blocks.update(use_fused_bwd_kernel=True)
    else:
        blocks.update(block_q_dq=128, block_kv_dq=128)
    splash = kernel.make_splash_mha(
        masks.MultiHeadMask([mask] * N), head_shards=1, q_seq_shards=1,
        block_sizes=kernel.BlockSizes(**blocks),
    )  # fmt: skip
    scope = "splash_attention_causal" if causal else "splash_attention_full"

    def loss(q, k, v):
        with jax.named_scope(scope):
            out = jax.vmap(splash)(q, k, v)
        return out.astype(jnp.float32).sum()

    sharding = NamedSharding(mesh, PartitionSpec())
    q = jax.ShapeDtypeStruct((B, N, T, H), jnp.bfloat16, sharding=sharding)
    kv = jax.ShapeDtypeStruct((B, N, length, H), jnp.bfloat16, sharding=sharding)
    return lambda: jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(q, kv, kv)


@needs_libtpu
@pytest.mark.parametrize(
    "causal, fused, length, per_bntsh",
    [
        (False, False, S, 4 + 6 + 8),  # forward, dq, dkv
        (True, False, T, (4 + 6 + 8) / 2),  # causal: half the blocks
        (False, True, S, 4 + 10),  # dkv computes dq too
    ],
)
def test_splash_flops_of_a_compiled_tpu_program(causal, fused, length, per_bntsh):
    text = splash_program(causal, fused, length)().compile().as_text()
    assert custom_call_flops(text) == per_bntsh * B * N * T * length * H


@needs_libtpu
def test_the_report_adds_the_kernels_flops_to_the_cost_analysis():
    lower = splash_program(causal=False)
    compiled = lower().compile()
    counted = float(compiled.cost_analysis()["flops"])
    program = Program("train step", lower, B * T, "token")
    result = report.compile_program(program, parse_target("v5e-1"), "splash", top_hbm=3)
    assert result.custom_call_flops == 18 * B * N * T * S * H
    assert result.flops == pytest.approx(counted + result.custom_call_flops)
    assert len(result.top_hbm) == 3 and result.top_hbm[0].bytes >= result.top_hbm[-1].bytes
    assert any(u.name.startswith("splash_mha_") for u in result.top_hbm)


# jax's cuDNN attention as XLA prints it (layout BTNH: q, k, v [B, T, N, H] = [4, 128, 2, 64],
# keys [4, 96, 2, 64]); the backend config names the [B, N, T, S] scores and the mask type.
_CONFIG = (
    '"cudnn_fmha_backend_config":{"fmha_scale":0.125,"dropout_rate":0,'
    '"intermediate_tensor_shape":{"element_type":"BF16","dimensions":["4","2","128","96"],'
    '"tuple_shapes":[],"layout":{"minor_to_major":["3","2","1","0"]}},'
    '"is_flash_attention":true,"mask_type":"MASK"}'
)
CUDNN = """HloModule jit_loss

ENTRY %main.1 (q: bf16[4,128,2,64], k: bf16[4,96,2,64], v: bf16[4,96,2,64], do: bf16[4,128,2,64]) -> bf16[4,128,2,64] {
  %q = bf16[4,128,2,64]{3,2,1,0} parameter(0)
  %k = bf16[4,96,2,64]{3,2,1,0} parameter(1)
  %v = bf16[4,96,2,64]{3,2,1,0} parameter(2)
  %do = bf16[4,128,2,64]{3,2,1,0} parameter(3)
  %fwd = (bf16[4,2,128,64]{3,1,2,0}, f32[4,2,128]{2,1,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax", operand_layout_constraints={bf16[4,128,2,64]{3,2,1,0}, bf16[4,96,2,64]{3,2,1,0}, bf16[4,96,2,64]{3,2,1,0}}, backend_config={"operation_queue_id":"0",CONFIG}
  %stats = f32[4,2,128]{2,1,0} get-tuple-element(%fwd), index=1
  %out = bf16[4,2,128,64]{3,1,2,0} get-tuple-element(%fwd), index=0
  %bwd = (bf16[4,128,2,64]{3,2,1,0}, bf16[4,96,2,64]{3,2,1,0}, bf16[4,96,2,64]{3,2,1,0}, u8[0]{0}) custom-call(%q, %k, %v, %stats, %do, %out), custom_call_target="__cudnn$fmhaSoftmaxBackward", operand_layout_constraints={bf16[4,128,2,64]{3,2,1,0}, bf16[4,96,2,64]{3,2,1,0}, bf16[4,96,2,64]{3,2,1,0}, f32[4,2,128]{2,1,0}, bf16[4,128,2,64]{3,2,1,0}, bf16[4,128,2,64]{3,1,2,0}}, backend_config={"operation_queue_id":"0",CONFIG}
  ROOT %dq = bf16[4,128,2,64]{3,2,1,0} get-tuple-element(%bwd), index=0
}
"""  # noqa: E501 (HLO lines as XLA prints them)


@pytest.mark.parametrize("mask, factor", [("NO_MASK", 1.0), ("PADDING", 1.0),
                                          ("CAUSAL", 0.5), ("PADDING_CAUSAL", 0.5)])  # fmt: skip
def test_cudnn_flops_forward_4_and_backward_10(mask, factor):
    text = CUDNN.replace("CONFIG", _CONFIG.replace("MASK", mask))
    bntsh = 4 * 2 * 128 * 96 * 64
    assert custom_call_flops(text) == (4 + 10) * bntsh * factor
    # Without the scores' shape in the config: from the operands, in jax's BTNH layout.
    bare = text.replace('"intermediate_tensor_shape"', '"other"')
    assert custom_call_flops(bare) == (4 + 10) * bntsh * factor


def test_no_kernels_no_flops():
    assert custom_call_flops("HloModule m\n\nENTRY %e () -> f32[] {\n}\n") == 0.0
    # A call of another target, or a cuBLAS call without dimension numbers, adds nothing.
    text = CUDNN.replace("__cudnn$fmha", "__other$call").replace("CONFIG", "{}")
    assert custom_call_flops(text) == 0.0
    text = CUDNN.replace("__cudnn$fmha", "__cublas$gemm").replace("CONFIG", "{}")
    assert custom_call_flops(text) == 0.0


def _gemm_config(lhs_contracting: str, lhs_batch: str) -> str:
    return (
        '{"operation_queue_id":"0","gemm_backend_config":{"selected_algorithm":"0",'
        '"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":['
        + lhs_contracting
        + '],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":['
        + lhs_batch
        + '],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}'
    )


# Matrix products of a train step compiled for an H100 as XLA prints them: a projection
# ([2048, 512] x [512, 1536]) and the attention scores of 64 rows x heads (batched, contracting
# the head dim 64): cuBLAS calls, whose FLOPs XLA's cost analysis on a GPU leaves out.
CUBLAS = (
    "HloModule jit_train_step\n\n"
    "ENTRY %main (x: bf16[2048,512], w: bf16[512,1536], q: f32[64,256,64], k: f32[64,64,256])"
    " -> f32[64,256,256] {\n"
    "  %x = bf16[2048,512]{1,0} parameter(0)\n"
    "  %w = bf16[512,1536]{1,0} parameter(1)\n"
    "  %q = f32[64,256,64]{2,1,0} parameter(2)\n"
    "  %k = f32[64,64,256]{2,1,0} parameter(3)\n"
    "  %custom-call.371 = (bf16[2048,1536]{1,0}, s8[4194304]{0}) custom-call(%x, %w), "
    'custom_call_target="__cublas$lt$matmul", metadata={op_name="jit(train_step)/dot_general"}, '
    "backend_config=" + _gemm_config('"1"', "") + "\n"
    "  ROOT %custom-call.375 = (f32[64,256,256]{2,1,0}, s8[4194304]{0}) custom-call(%q, %k), "
    'custom_call_target="__cublas$gemm", backend_config=' + _gemm_config('"2"', '"0"') + "\n"
    "}\n"
)


def test_cublas_matrix_products_count_2mnk():
    projection = 2 * 2048 * 1536 * 512
    scores = 2 * 64 * 256 * 256 * 64
    assert custom_call_flops(CUBLAS) == projection + scores
    # Added to an analysis before optimisation, which counts them already: left out.
    assert custom_call_flops(CUBLAS, gemms=False) == 0.0


def _result(**fields) -> report.Compiled:
    base = dict(name="train step", compile_s=1.0, argument_bytes=2**20, output_bytes=0,
                alias_bytes=0, temp_bytes=2**20, code_bytes=0, flops=1.97e12,
                bytes_accessed=819e9 / 4, collectives={}, attention="xla", items=1000,
                unit="token")  # fmt: skip
    return report.Compiled(**{**base, **fields})


def test_the_table_gives_both_terms_of_the_bound_and_the_ceiling():
    target = parse_target("v5e-8")  # 197 TFLOP/s, 819 GB/s: 1.97e12 FLOPs take 10 ms
    the_plan = Plan(
        mesh=jax.make_mesh((1,), ("data",)), model_cfg=types.SimpleNamespace(dtype="bfloat16"),
        kernel="xla", param_count=1, param_bytes=1, optimizer_bytes=1, programs=[],
    )  # fmt: skip
    # On a TPU the HBM term is the bytes by the layouts (here 100 ms); the cost analysis' bytes
    # accessed (250 ms, every memory) are shown beside it. Bound by HBM, ceiling 10 / 100.
    measured = _result(hbm_estimate_bytes=int(819e9 / 10))
    estimated = _result(name="eval step", bytes_accessed=None, cost_estimated=True)
    terms = report.roofline(measured, target)
    assert terms.flop_s == pytest.approx(0.01) and terms.hbm_s == pytest.approx(0.1)
    assert terms.accessed_s == pytest.approx(0.25)
    assert terms.bound_s == terms.hbm_s and terms.mfu_ceiling == pytest.approx(0.1)
    text = report.table(the_plan, target, [measured, estimated])
    rows = {line.split()[0] + " " + line.split()[1]: line for line in text.splitlines()
            if line.startswith(("train step ", "eval step ")) and " ms" in line}  # fmt: skip
    assert rows["train step"].split()[2:] == [
        "10", "ms", "100", "ms", "100", "ms", "HBM", "10.0%", "250", "ms"
    ]  # fmt: skip
    # Estimated FLOPs: the bytes are not known, and the table says so instead of a number.
    assert rows["eval step"].split()[2:] == ["~10", "ms", "unknown", "~10", "ms", "FLOPs", "only",
                                             "unknown"]  # fmt: skip
    # Off TPUs (no memory spaces) the HBM term is the cost analysis' bytes accessed.
    gpu = report.roofline(measured, parse_target("h100x8"))
    assert gpu.hbm_s == gpu.accessed_s == pytest.approx(819e9 / 4 / 3.35e12)
    assert "MFU ceiling" in text and "bytes are unknown" in text
