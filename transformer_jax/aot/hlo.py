"""Reading an optimised HLO module's text (`compiled.as_text()`): its computations, their
instructions, and an estimate of the HBM bytes each instruction moves.

Only the computations that run as programs are read for bytes: the entry, while bodies and
conditions, the branches of conditionals and the targets of calls. A fusion's body runs inside
the fusion, on registers and on-chip memory, so the fusion instruction stands for it: what it
reads (its operands) and what it writes (its output). XLA's scalar reducers (`to_apply` of a
reduce, an all-reduce, a sort) are never read either.

The estimate of one instruction is its output bytes plus its operands' bytes, as laid out
(tiles padded: a TPU stores f32[2,3] in a tile of 8 x 128), with these rules:

- arrays the compiler placed outside HBM (a layout with a memory space `S(n)`, n > 0: the
  TPU's on-chip memories) count zero;
- parameter, get-tuple-element, tuple, bitcast, constant and the other instructions that move
  nothing (while, call and conditional themselves: their computations are counted) count zero;
- an asynchronous pair (`copy-start` / `copy-done`, `all-gather-start` / `-done`, ...) counts
  once, on the start: its operands and what the done delivers.

A slice (`slice`, `dynamic-slice`, the TPU's asynchronous `slice-start`, which the compiler
uses to stream parts of arrays into on-chip memory) reads only its slice: it is charged what it
writes. It is an estimate, not a profile: a fusion that reads a slice of an operand is charged
the whole operand, and an in-place update its whole buffer.
"""

from __future__ import annotations

import dataclasses
import math
import re

# An element type's bits are in its name (s32, bf16, c64, f8e4m3fn), but for these.
_BITS = {"pred": 8, "token": 0}
_TYPE_BITS = re.compile(r"^(?:bf|[fsuc])(\d+)")
# An array shape and its layout: `bf16[4,8,256,64]{3,2,1,0:T(8,128)(2,1)S(1)}` (layout optional).
ARRAY = re.compile(r"\b([a-z]+\d*[a-z0-9]*)\[([^\]]*)\](\{[^{}]*\})?")
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
_TILE = re.compile(r"T\(([\d,]+)\)")
# A computation's first line: `ENTRY %main.5 (p: f32[2]) -> f32[2] {`, the signature optional.
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_COMMENT = re.compile(r"/\*.*?\*/")
_OP_NAME = re.compile(r'op_name="([^"]*)"')

# Instructions that read only a part of their first operand, as large as what they write.
SLICES = frozenset({"slice", "dynamic-slice", "slice-start"})
# Instructions that move no data themselves.
FREE = frozenset({
    "parameter", "get-tuple-element", "tuple", "bitcast", "constant", "after-all",
    "opt-barrier", "add-dependency", "partition-id", "replica-id", "domain", "while", "call",
    "conditional",
})  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One HLO instruction as printed: `name = shape opcode(operands), attributes`."""

    name: str
    shape: str  # The result shape with its layout(s), e.g. `(f32[2]{0}, s32[]{:T(128)})`.
    opcode: str
    operands: tuple[str, ...]  # The names of the instructions it reads.
    attributes: str  # The rest of the line(s): metadata, backend_config, called computations.

    @property
    def op_name(self) -> str:
        """The JAX operation it came from (its `metadata={op_name=...}`), or ""."""
        found = _OP_NAME.search(self.attributes)
        return found.group(1) if found else ""

    def attribute(self, key: str) -> str | None:
        """The value of `key=...` among the attributes (a name, or `{...}` as text)."""
        found = re.search(rf"\b{re.escape(key)}=(\{{[^{{}}]*\}}|%?[\w.\-]+)", self.attributes)
        return found.group(1) if found else None

    def braced(self, key: str) -> str | None:
        """The text of the attribute `key={...}`, nested braces included, or None."""
        found = re.search(rf"\b{re.escape(key)}=\{{", self.attributes)
        if not found:
            return None
        start = found.end() - 1
        return self.attributes[start : matching_bracket(self.attributes, start) + 1]


@dataclasses.dataclass(frozen=True)
class Computation:
    name: str
    entry: bool
    instructions: tuple[Instruction, ...]


@dataclasses.dataclass(frozen=True)
class HbmUse:
    """What one instruction of a program moves through HBM (`hbm_uses`)."""

    bytes: int
    name: str
    opcode: str
    shape: str  # Without layouts, shortened.
    op_name: str
    in_loop: bool  # In a while body or condition: runs once per iteration.


def element_bits(dtype: str) -> int | None:
    """Bits per element of an HLO element type (`bf16`: 16), None if it is not one."""
    if dtype in _BITS:
        return _BITS[dtype]
    found = _TYPE_BITS.match(dtype)
    return int(found.group(1)) if found else None


def arrays(shape: str) -> list[tuple[str, tuple[int, ...], str]]:
    """The arrays of a shape's text, tuples flattened: (element type, dims, layout)."""
    found = []
    for dtype, dims, layout in ARRAY.findall(shape):
        if element_bits(dtype) is None:  # Not an element type: `T(8,128)`-like text.
            continue
        sizes = tuple(int(d.lstrip("<=")) for d in dims.split(",") if d.strip())
        found.append((dtype, sizes, layout))
    return found


def laid_out_elements(dims: tuple[int, ...], layout: str) -> int:
    """Elements an array occupies as laid out: its most minor dimensions rounded up to its
    first tile (`{1,0:T(8,128)}`: f32[2,3] takes 8 x 128), as TPUs store them."""
    tile = _TILE.search(layout)
    if not tile:
        return math.prod(dims)
    order = [int(d) for d in layout.strip("{}").split(":")[0].split(",") if d.strip()]
    minor = [dims[d] for d in order] if len(order) == len(dims) else list(reversed(dims))
    sizes = [int(t) for t in tile.group(1).split(",")]
    minor += [1] * (len(sizes) - len(minor))
    for k, size in enumerate(reversed(sizes)):
        minor[k] = -(-minor[k] // size) * size
    return math.prod(minor)


def shape_bytes(shape: str, *, hbm_only: bool = False) -> int:
    """Bytes of every array in a shape's text (a tuple's summed), tiles padded; with
    `hbm_only`, arrays in a memory space other than 0 (`S(1)`: on-chip) are left out."""
    total = 0
    for dtype, dims, layout in arrays(shape):
        space = _MEMORY_SPACE.search(layout)
        if hbm_only and space and space.group(1) != "0":
            continue
        total += math.ceil(laid_out_elements(dims, layout) * element_bits(dtype) / 8)
    return total


def short_shape(shape: str, width: int = 40) -> str:
    """A shape without its layouts; a tuple too long for `width` characters keeps its first
    arrays and says how many it has: `(f32[4,128,128], ... 5 arrays)`."""
    plain = ARRAY.sub(lambda m: f"{m.group(1)}[{m.group(2)}]", _COMMENT.sub("", shape))
    plain = re.sub(r"\s+", " ", plain).strip()
    if len(plain) <= width or not plain.startswith("("):
        return plain
    items = [f"{dtype}[{','.join(map(str, dims))}]" for dtype, dims, _ in arrays(shape)]
    kept = 1
    while kept < len(items) and len(", ".join(items[: kept + 1])) + 16 <= width:
        kept += 1
    return "(" + ", ".join(items[:kept]) + f", ... {len(items)} arrays)"


def matching_bracket(text: str, start: int) -> int:
    """The index of the bracket that closes the one at `start` (parentheses and braces; those
    inside quoted strings are skipped)."""
    depth, quoted = 0, False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"' and text[i - 1] != "\\":
            quoted = not quoted
        elif quoted:
            continue
        elif c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    parts, depth, current = [], 0, []
    for c in text:
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_instruction(name: str, rest: str) -> Instruction | None:
    """The instruction `name = rest` (rest: `shape opcode(operands), attributes`)."""
    rest = rest.strip()
    if rest.startswith("("):
        end = matching_bracket(rest, 0) + 1
    else:
        end = rest.find(" ")
        end = len(rest) if end < 0 else end
    shape, tail = rest[:end], rest[end:].lstrip()
    opcode = re.match(r"([\w\-]+)\(", tail)
    if not opcode:
        return None
    open_at = opcode.end() - 1
    close_at = matching_bracket(tail, open_at)
    inside = _COMMENT.sub("", tail[open_at + 1 : close_at])
    operands = ()
    if opcode.group(1) not in ("parameter", "constant"):
        operands = tuple(
            m.group(1) for part in _split_top(inside) if (m := re.search(r"%?([\w.\-]+)$", part))
        )
    return Instruction(name, shape, opcode.group(1), operands, tail[close_at + 1 :])


def parse_module(text: str) -> dict[str, Computation]:
    """The computations of an HLO module's text, by name (instructions in printed order).

    Instructions may span several lines (a custom call's kernel metadata holds newlines): a
    line that does not start a new instruction continues the one before.
    """
    computations: dict[str, Computation] = {}
    current: tuple[str, bool] | None = None
    pending: list[list[str]] = []  # [name, text] of the computation's instructions so far.

    def finish():
        parsed = [parse_instruction(n, t) for n, t in pending]
        name, entry = current
        computations[name] = Computation(name, entry, tuple(i for i in parsed if i))

    for line in text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header:
                current, pending = (header.group(2), bool(header.group(1))), []
            continue
        if line == "}":
            finish()
            current = None
            continue
        start = _INSTRUCTION.match(line)
        if start and line.startswith(" "):
            pending.append([start.group(1), start.group(2)])
        elif pending:
            pending[-1][1] += "\n" + line
    return computations


def _called(instruction: Instruction) -> list[str]:
    """The computations an instruction runs as programs of their own (not fusion bodies or
    scalar reducers): a while's body and condition, a call's target, a conditional's branches."""
    op = instruction.opcode
    if op == "while":
        keys = ("condition", "body")
    elif op == "call":
        keys = ("to_apply",)
    elif op == "conditional":
        keys = ("branch_computations", "true_computation", "false_computation")
    else:
        return []
    names = []
    for key in keys:
        value = instruction.attribute(key)
        if value:
            names += [n.strip().lstrip("%") for n in value.strip("{}").split(",") if n.strip()]
    return names


def program_computations(computations: dict[str, Computation]) -> dict[str, bool]:
    """The computations that run as programs (see the module doc), each with whether it runs
    inside a while loop."""
    entry = next((c for c in computations.values() if c.entry), None)
    if entry is None:
        return {}
    found = {entry.name: False}
    todo = [entry.name]
    while todo:
        name = todo.pop()
        for instruction in computations[name].instructions:
            for callee in _called(instruction):
                in_loop = found[name] or instruction.opcode == "while"
                if callee in computations and (callee not in found or in_loop > found[callee]):
                    found[callee] = in_loop
                    todo.append(callee)
    return found


_CALLS = re.compile(
    r"\b(?:calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
    r"|\b(?:branch_computations|called_computations)=\{([^{}]*)\}"
)
# Matrix products: XLA's own, and the custom calls of cuBLAS, cuDNN and Pallas kernels.
_MATMUL_CALL = re.compile(r'custom_call_target="(__cublas|__cudnn|tpu_custom_call)')


def _callees(instruction: Instruction) -> list[str]:
    """Every computation an instruction calls (fusion bodies and reducers included)."""
    names = []
    for single, listed in _CALLS.findall(instruction.attributes):
        names += [single] if single else [n.strip().lstrip("%") for n in listed.split(",")]
    return [n for n in names if n]


def matmul_loops(text: str) -> list[str]:
    """The while loops of a module whose bodies run matrix products (scanned layers,
    micro-batches, decoding steps), by instruction name; not the small loops of integer
    work (XLA's CPU random bits)."""
    computations = parse_module(text)
    known: dict[str, bool] = {}

    def has_matmul(name: str) -> bool:
        if name not in known:
            known[name] = False  # A computation is never its own callee; guards a bad text.
            known[name] = any(
                i.opcode in ("dot", "convolution")
                or (i.opcode == "custom-call" and _MATMUL_CALL.search(i.attributes))
                or any(has_matmul(c) for c in _callees(i) if c in computations)
                for i in computations[name].instructions
            )
        return known[name]

    return [
        i.name
        for c in computations.values()
        for i in c.instructions
        if i.opcode == "while" and has_matmul((i.attribute("body") or "").lstrip("%"))
    ]


def hbm_uses(text: str, *, hbm_only: bool = True) -> list[HbmUse]:
    """Every instruction of the module's programs with the HBM bytes it moves (estimated as
    the module doc says), largest first; `hbm_only=False` counts every memory space."""
    computations = parse_module(text)
    uses = []
    for name, in_loop in program_computations(computations).items():
        instructions = computations[name].instructions
        shapes = {i.name: i.shape for i in instructions}
        done = {i.operands[0]: i for i in instructions if i.opcode.endswith("-done") and i.operands}
        for i in instructions:
            if i.opcode in FREE or i.opcode.endswith("-done"):
                continue
            written = i.shape
            if i.opcode.endswith("-start") and i.name in done:
                written = done[i.name].shape
            if i.opcode in SLICES and i.operands:
                # Reads its slice of the source (when the source is in the counted memory).
                source = shape_bytes(shapes.get(i.operands[0], ""), hbm_only=hbm_only)
                read = shape_bytes(written, hbm_only=False) if source else 0
            else:
                read = sum(shape_bytes(shapes.get(o, ""), hbm_only=hbm_only) for o in i.operands)
            total = read + shape_bytes(written, hbm_only=hbm_only)
            uses.append(HbmUse(total, i.name, i.opcode, short_shape(written), i.op_name, in_loop))
    uses.sort(key=lambda u: -u.bytes)
    return uses
