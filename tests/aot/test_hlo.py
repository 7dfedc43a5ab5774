"""Reading optimised HLO text: the computations that run as programs, and the HBM bytes each
instruction moves (`--top_hbm`), on a handwritten module and on a compiled tiny program."""

import importlib.util

import pytest

from configs import tiny
from transformer_jax.aot import hlo, plan, target_mesh
from transformer_jax.aot.targets import parse_target

# f32[8,128] is 4,096 bytes, with or without its T(8,128) tile. The custom call's output is a
# bf16[2,4,16,64] whose minor 64 is padded to the tile's 128 lanes; it reads an array the
# copy put in on-chip memory (S(1)); its kernel metadata spans two lines.
MODULE = """HloModule jit_f, entry_computation_layout={(f32[8,128]{1,0})->f32[8,128]{1,0}}

%add.clone (x.1: f32[], y.1: f32[]) -> f32[] {
  %x.1 = f32[] parameter(0)
  %y.1 = f32[] parameter(1)
  ROOT %add.9 = f32[] add(%x.1, %y.1)
}

%fused_computation (param_0: f32[8,128]) -> f32[8,128] {
  %param_0 = f32[8,128]{1,0} parameter(0)
  ROOT %multiply.1 = f32[8,128]{1,0} multiply(%param_0, %param_0)
}

%body (p: (s32[], f32[8,128])) -> (s32[], f32[8,128]) {
  %p = (s32[], f32[8,128]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8,128]{1,0} get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %square = f32[8,128]{1,0} fusion(%x), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/while/body/mul"}
  ROOT %t = (s32[], f32[8,128]{1,0}) tuple(%next, %square)
}

%cond (p.1: (s32[], f32[8,128])) -> pred[] {
  %p.1 = (s32[], f32[8,128]{1,0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%p.1), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i.1, %n), direction=LT
}

ENTRY %main (a: f32[8,128]) -> f32[8,128] {
  %a = f32[8,128]{1,0:T(8,128)} parameter(0)
  %zero = f32[] constant(0)
  %copy-start = (f32[8,128]{1,0:T(8,128)S(1)}, f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%a)
  %copy-done = f32[8,128]{1,0:T(8,128)S(1)} copy-done(%copy-start)
  %sum = f32[8]{0:T(128)} reduce(%a, %zero), dimensions={1}, to_apply=%add.clone, metadata={op_name="jit(f)/reduce_sum"}
  %kernel = (bf16[2,4,16,64]{3,2,1,0:T(8,128)(2,1)}, f32[2,4]{1,0}) custom-call(%copy-done, /*index=1*/%sum), custom_call_target="tpu_custom_call", frontend_attributes={kernel_metadata={
}}, metadata={op_name="jit(f)/pallas_call"}
  %c0 = s32[] constant(0)
  %init = (s32[], f32[8,128]{1,0}) tuple(%c0, %a)
  %w = (s32[], f32[8,128]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[8,128]{1,0} get-tuple-element(%w), index=1
}

FileNames
1 "f.py"
"""  # noqa: E501 (HLO lines as XLA prints them)


def test_the_programs_of_a_module_and_their_loops():
    computations = hlo.parse_module(MODULE)
    assert set(computations) == {"add.clone", "fused_computation", "body", "cond", "main"}
    assert [c.name for c in computations.values() if c.entry] == ["main"]
    kernel = next(i for i in computations["main"].instructions if i.name == "kernel")
    assert kernel.opcode == "custom-call" and kernel.operands == ("copy-done", "sum")
    assert kernel.op_name == "jit(f)/pallas_call"  # after the line break of its metadata
    # Fusion bodies and scalar reducers run inside their instruction: not programs.
    assert hlo.program_computations(computations) == {"main": False, "body": True, "cond": True}


def test_hbm_bytes_of_each_instruction():
    uses = {u.name: u for u in hlo.hbm_uses(MODULE)}
    assert {name: u.bytes for name, u in uses.items()} == {
        # Writes its outputs and reads sum; its first input is on chip.
        "kernel": 2 * 4 * 16 * 128 * 2 + 2 * 4 * 4 + 128 * 4,
        "square": 4096 + 4096,
        "sum": 4096 + 4 + 128 * 4,  # reads a and zero, writes 8 floats padded to 128
        "copy-start": 4096,  # reads a (HBM); what copy-done delivers is on chip
        "next": 4 + 4 + 4,
        "lt": 4 + 4 + 1,
    }
    assert [u.name for u in hlo.hbm_uses(MODULE)][:2] == ["kernel", "square"]
    assert uses["square"].in_loop and uses["lt"].in_loop and not uses["kernel"].in_loop
    assert uses["square"].op_name == "jit(f)/while/body/mul" and uses["sum"].opcode == "reduce"
    assert uses["kernel"].shape == "(bf16[2,4,16,64], f32[2,4])"
    # Counting every memory space, the copy also writes its on-chip copy.
    every = {u.name: u.bytes for u in hlo.hbm_uses(MODULE, hbm_only=False)}
    assert every["copy-start"] == 2 * 4096 and every["kernel"] == uses["kernel"].bytes + 4096


SLICED = """HloModule jit_g

ENTRY %main (a: f32[64,128]) -> f32[16,128] {
  %a = f32[64,128]{1,0:T(8,128)} parameter(0)
  %slice-start = ((f32[64,128]{1,0:T(8,128)}), f32[16,128]{1,0:T(8,128)S(1)}, s32[]{:S(2)}) slice-start(%a), slice={[16:32], [0:128]}
  %slice-done = f32[16,128]{1,0:T(8,128)S(1)} slice-done(%slice-start)
  %rows = f32[16,128]{1,0:T(8,128)} slice(%a), slice={[0:16], [0:128]}
  ROOT %sum = f32[16,128]{1,0:T(8,128)} add(%slice-done, %rows)
}
"""  # noqa: E501 (HLO lines as XLA prints them)


def test_a_slice_is_charged_its_slice_not_its_source():
    """The TPU streams parts of arrays into on-chip memory with asynchronous slices: each reads
    16 of the source's 64 rows, not all of them."""
    rows = 16 * 128 * 4
    uses = {u.name: u.bytes for u in hlo.hbm_uses(SLICED)}
    assert uses == {"slice-start": rows, "rows": 2 * rows, "sum": 2 * rows}
    every = {u.name: u.bytes for u in hlo.hbm_uses(SLICED, hbm_only=False)}
    assert every["slice-start"] == 2 * rows and every["sum"] == 3 * rows


@pytest.mark.parametrize(
    "shape, hbm, every",
    [
        ("f32[2,3]{1,0}", 24, 24),
        ("f32[2,3]{1,0:T(8,128)}", 8 * 128 * 4, 8 * 128 * 4),
        ("f32[3,2]{0,1:T(8,128)}", 8 * 128 * 4, 8 * 128 * 4),  # dim 0 is the minor one
        ("bf16[4,8,256,64]{3,2,1,0:T(8,128)(2,1)S(1)}", 0, 4 * 8 * 256 * 128 * 2),
        ("(s32[]{:T(128)}, pred[5]{0}, /*index=2*/s4[3])", 128 * 4 + 5 + 2, 128 * 4 + 5 + 2),
        ("token[]", 0, 0),
    ],
)
def test_shape_bytes(shape, hbm, every):
    assert hlo.shape_bytes(shape, hbm_only=True) == hbm
    assert hlo.shape_bytes(shape) == every


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="needs libtpu")
def test_on_a_compiled_tiny_program_the_total_is_near_the_cost_analysis():
    """Counting every memory space, the instructions' bytes add up to within a factor of 2 of
    XLA's "bytes accessed" (1.3-2.0x on the tiny config's programs); HBM alone is less."""
    config = tiny.get_config()
    config.mesh = {"data": 2, "fsdp": 2, "tensor": 2}
    mesh = target_mesh(parse_target("v5e-8"), dict(config.mesh))
    program = next(p for p in plan(config, mesh, inference=False).programs if p.name == "eval step")
    compiled = program.lower().compile()
    text, cost = compiled.as_text(), compiled.cost_analysis()
    accessed = float(cost["bytes accessed"])
    every = sum(u.bytes for u in hlo.hbm_uses(text, hbm_only=False))
    uses = hlo.hbm_uses(text)
    assert 0.5 < every / accessed < 2.5, (every, accessed)
    assert 0 < sum(u.bytes for u in uses) <= every
    assert [u.bytes for u in uses] == sorted((u.bytes for u in uses), reverse=True)
    assert all(u.opcode not in hlo.FREE for u in uses)
    assert any(u.op_name.startswith("jit(eval_step)/") for u in uses[:10])


def test_loops_that_run_matrix_products():
    assert hlo.matmul_loops(MODULE) == []  # its loop body multiplies elementwise
    dot = "dot(%param_0, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    assert hlo.matmul_loops(MODULE.replace("multiply(%param_0, %param_0)", dot)) == ["w"]


def test_short_shapes_drop_layouts_and_say_how_many_arrays():
    assert hlo.short_shape("f32[8,128]{1,0:T(8,128)S(1)}") == "f32[8,128]"
    five = ", ".join(["f32[4,128,128]{2,1,0:T(8,128)}"] * 5)
    assert hlo.short_shape(f"({five})") == "(f32[4,128,128], ... 5 arrays)"
    assert (
        hlo.short_shape(f"({five})", width=60) == "(f32[4,128,128], f32[4,128,128], ... 5 arrays)"
    )
