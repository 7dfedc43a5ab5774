"""The line-to-line CLIs (translate, generate, classify, fill_mask) on hostile input.

Each CLI's `main` runs in this process on the session's tiny runs, loaded once per module:
`from_checkpoint` is patched to hand out the loaded model wrapped in a recorder, so a property
can check both sides of the CLI: the texts it passed to the model are exactly the input lines
(no line split, merged, shifted or altered), and it wrote exactly one output line per answer,
in order. Loading itself is tested in tests/inference and tests/robustness/test_hostile_workdirs.
"""

from __future__ import annotations

import contextlib
import json
import re
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.robustness.hostile import (
    NEAR_TEXT,
    expected_error_line,
    first_line_ok,
    fuzz,
    hostile_line,
    run_cli,
    text_file,
)
from transformer_jax.cli import classify, fill_mask, generate, translate
from transformer_jax.cli.common import one_line
from transformer_jax.data.files import decode_utf8, split_lines
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.translator import Translator


class Recording:
    """A loaded model whose `method` calls are recorded: (inputs, outputs) per call."""

    def __init__(self, real, method: str):
        self._real, self._method, self.calls = real, method, []

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if name != self._method:
            return attr

        def record(items, *args, **kwargs):
            out = attr(items, *args, **kwargs)
            self.calls.append((list(items), out))
            return out

        return record


@contextlib.contextmanager
def loaded_as(module, class_name: str, recording: Recording):
    """`module.<class_name>.from_checkpoint` returns `recording` inside the block."""
    stub = types.SimpleNamespace(from_checkpoint=lambda *args, **kwargs: recording)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, class_name, stub)
        yield


@pytest.fixture(scope="module")
def models(tiny_workdir, tiny_lm_workdir, tiny_bert_workdir, tiny_classifier):
    return {
        "translate": Translator.from_checkpoint(tiny_workdir),
        "generate": Generator.from_checkpoint(tiny_lm_workdir),
        "classify": Classifier.from_checkpoint(tiny_classifier),
        "fill_mask": MaskFiller.from_checkpoint(tiny_bert_workdir),
    }


CLIS = {  # name -> (module, class name, recorded method, flags)
    "translate": (translate, "Translator", "translate", ["--beam_size=1"]),
    "generate": (generate, "Generator", "generate", ["--max_new_tokens=2", "--temperature=0"]),
    "classify": (classify, "Classifier", "predict", []),
    "fill_mask": (fill_mask, "MaskFiller", "fill_mask", ["--top_k=2"]),
}


def run(models, name: str, stdin: bytes, *flags: str):
    """(exit code, stdout lines without the final "", stderr, the recording) of one CLI run."""
    module, class_name, method, defaults = CLIS[name]
    recording = Recording(models[name], method)
    with loaded_as(module, class_name, recording):
        code, out, err = run_cli(module.main, ["--workdir=loaded", *defaults, *flags], stdin)
    lines = out.decode("utf-8").split("\n")
    assert lines[-1] == "", out[-80:]  # Every line ends with "\n".
    assert "Traceback" not in err
    return code, lines[:-1], err, recording


def assert_one_error_line(code: int, lines: list[str], err: str, where: str) -> None:
    assert code == 1 and lines == [], (code, lines, err)
    assert err.startswith(f"error: {where}: ") and err.count("\n") == 1, err


# ------------------------------------------------------------------------ every CLI, any bytes
@pytest.mark.parametrize("name", list(CLIS))
@fuzz("cli_bytes")
@given(data=st.one_of(NEAR_TEXT, st.binary(max_size=40)))
def test_any_bytes_give_an_answer_per_line_or_one_error_naming_the_line(models, name, data):
    code, lines, err, _ = run(models, name, data)
    bad_line = expected_error_line(data)
    if bad_line is not None:
        assert_one_error_line(code, lines, err, f"<stdin>:{bad_line}")
    elif code == 0:
        assert len(lines) == len(split_lines(decode_utf8(data, "-")))
    else:  # The text decodes, but classify needs tab-separated pairs and fill_mask a [MASK].
        assert name in ("classify", "fill_mask") and re.match(r"error: <stdin>:\d+: ", err), err


# ------------------------------------------------------------------ valid text, line for line
lines_of = st.lists(hostile_line(), max_size=6).filter(first_line_ok)


@fuzz("translate")
@given(lines=lines_of, data=st.data())
def test_translate_writes_one_line_per_input_line_in_order(models, lines, data):
    code, out, err, recording = run(models, "translate", data.draw(text_file(lines)))
    assert code == 0, err
    ((inputs, outputs),) = recording.calls
    assert inputs == lines
    assert out == [one_line(o) for o in outputs]


@fuzz("generate")
@given(lines=lines_of, data=st.data())
def test_generate_writes_one_escaped_line_per_prompt_in_order(models, lines, data):
    code, out, err, recording = run(models, "generate", data.draw(text_file(lines)))
    assert code == 0, err
    ((inputs, outputs),) = recording.calls
    assert inputs == lines
    assert out == [generate.escape(o) for o in outputs]


pair_line = st.tuples(
    hostile_line(12, exclude="\t"), hostile_line(12, exclude="\t").filter(str.strip)
)


@fuzz("classify")
@given(
    pairs=st.lists(pair_line, max_size=6),
    bad=st.none() | st.tuples(st.integers(0, 6), st.sampled_from(["", "one", "a\tb\tc", "a\t "])),
    data=st.data(),
)
def test_classify_answers_every_pair_or_names_the_first_line_that_is_not_one(
    models, pairs, bad, data
):
    lines = [f"{a}\t{b}" for a, b in pairs]
    if bad is not None:
        at = min(bad[0], len(lines))
        lines.insert(at, bad[1])
    if not first_line_ok(lines):
        return
    code, out, err, recording = run(models, "classify", data.draw(text_file(lines)), "--json")
    if bad is not None:
        assert_one_error_line(code, out, err, f"<stdin>:{at + 1}")
        assert recording.calls == []  # Nothing reached the model.
        return
    assert code == 0, err
    if not pairs:
        assert out == [] and recording.calls == []
        return
    ((inputs, predictions),) = recording.calls
    assert inputs == pairs
    assert [json.loads(line)["label"] for line in out] == [p.label for p in predictions]


mask_line = st.one_of(
    st.tuples(hostile_line(8), hostile_line(8)).map(lambda p: f"{p[0]}[MASK]{p[1]}"),
    st.tuples(hostile_line(4), hostile_line(4)).map(lambda p: f"{p[0]} [MASK] [MASK]{p[1]}"),
    hostile_line(8),  # Mostly without a mask: refused, naming the line.
)


@fuzz("fill_mask")
@given(lines=st.lists(mask_line, max_size=5).filter(first_line_ok), data=st.data())
def test_fill_mask_answers_every_line_or_names_the_first_it_cannot_fill(models, lines, data):
    code, out, err, recording = run(models, "fill_mask", data.draw(text_file(lines)))
    problems = [models["fill_mask"].problem(line) for line in lines]
    if any(problems):
        first = next(i for i, p in enumerate(problems) if p)
        assert_one_error_line(code, out, err, f"<stdin>:{first + 1}")
        assert err.startswith(f"error: <stdin>:{first + 1}: the text {problems[first][:20]}")
        return
    assert code == 0, err
    if not lines:
        assert out == []
        return
    ((inputs, results),) = recording.calls
    assert inputs == lines
    assert out == [fill_mask.format_line(masks, False) for masks in results]
    assert [len(line.split(" | ")) for line in out] == [line.count("[MASK]") for line in lines]


# ----------------------------------------------------------------------- whole runs, no stubs
LONG = "nine " * 200_000  # 1 MB: far beyond every model's positions.
HOSTILE = ["three hundred", "", "fo\u2028ur", "\ttwelve\x85 ", LONG, "\ufeffnine", "x\ry", " "]


def test_translate_end_to_end_keeps_alignment_with_crlf_bom_and_a_1mb_line(
    tiny_workdir, tmp_path, models
):
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(("\ufeff" + "\r\n".join(HOSTILE)).encode())
    argv = [f"--workdir={tiny_workdir}", f"--input={source}", f"--output={target}"]
    code, out, err = run_cli(translate.main, [*argv, "--beam_size=1"])
    assert code == 0 and out == b"", err
    expected = models["translate"].translate(HOSTILE, beam_size=1)
    assert target.read_bytes().decode().split("\n") == [one_line(e) for e in expected] + [""]


@pytest.mark.parametrize(
    "main, flags, line",
    [
        (generate.main, ["--max_new_tokens=2", "--temperature=0"], LONG),
        (classify.main, [], f"{LONG}\tquatre"),
        (fill_mask.main, ["--top_k=1"], f"The [MASK] {LONG}"),
    ],
)
def test_a_1mb_line_is_answered_in_its_place(
    main, flags, line, tiny_lm_workdir, tiny_classifier, tiny_bert_workdir
):
    workdir = {generate.main: tiny_lm_workdir, classify.main: tiny_classifier}.get(
        main, tiny_bert_workdir
    )
    first = "The [MASK] x" if main is fill_mask.main else "one\tun"
    stdin = "\n".join([first, line, first]).encode()
    code, out, err = run_cli(main, [f"--workdir={workdir}", *flags], stdin)
    assert code == 0, err
    answers = out.decode().split("\n")
    assert len(answers) == 4 and answers[0] == answers[2] and answers[-1] == ""


def test_translate_reports_unwritable_output_and_unreadable_input(tiny_workdir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("nine\n")
    bad_out = tmp_path / "missing" / "out.txt"
    for argv in ([f"--input={source}", f"--output={bad_out}"], [f"--input={tmp_path}"]):
        code, out, err = run_cli(translate.main, [f"--workdir={tiny_workdir}", *argv])
        assert code == 1 and out == b"" and err.startswith("error: ") and "Traceback" not in err


@pytest.mark.parametrize("name, flag", [("classify", "--text"), ("fill_mask", "--text"),
                                       ("generate", "--prompt")])  # fmt: skip
def test_undecodable_arguments_are_named(models, name, flag):
    # What Python makes of `--text=$'caf\xe9'` from a shell: a lone surrogate.
    text = "one\tun" if name == "classify" else "ok [MASK]"
    code, out, err, _ = run(models, name, b"", f"{flag}={text}", f"{flag}=caf\udce9 [MASK]")
    assert_one_error_line(code, out, err, f"{flag} #2")
    assert "not valid UTF-8 (byte 0xe9 at character 4)" in err


@pytest.mark.parametrize(
    ("name", "flag"),
    [("generate", "--seed=1180591620717411303424"), ("generate", "--temperature=inf"),
     ("generate", "--top_p=nan"), ("translate", "--alpha=nan"), ("translate", "--max_len=0"),
     ("classify", "--batch_size=0"), ("fill_mask", "--top_k=0")],
)  # fmt: skip
def test_out_of_range_flags_are_one_error_line(models, name, flag):
    stdin = {"classify": b"one\tun\n", "fill_mask": b"a [MASK]\n"}.get(name, b"nine\n")
    code, out, err, recording = run(models, name, stdin, flag)
    assert code == 1 and out == [] and recording.calls == [], err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert flag.split("=")[0].lstrip("-") in err
