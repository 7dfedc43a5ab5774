"""The slot engine (continuous batching): each request's text equals `Generator.generate` for it
alone, greedy or sampled, whatever shares the slots with it and whenever it arrives; cancel and
stop free slots; bad requests raise; and nothing compiles after `warmup()`."""

import contextlib
import threading
import time

import jax
import pytest
from flax import nnx

from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.inference.generator import Generator, TextPieces
from transformer_jax.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer_jax.serving import gpt_slots
from transformer_jax.serving.gpt_slots import SlotEngine, prompt_buckets
from transformer_jax.tokens import BOS_ID, EOS_ID

MAX_LEN = 48  # C: buckets 16, 32, 48.
SLOTS = 4
WAIT_S = 30  # Most any request here may take (it takes milliseconds).
GLYPH = 0x4E00  # GlyphTokenizer: id i is the character chr(GLYPH + i).


class GlyphTokenizer(ByteTokenizer):  # (a ByteTokenizer for Generator's type check)
    """One printable character per id, special ids included, up to the first eos: equal texts
    are equal token ids (byte tokens would blur a tiny random model's invalid UTF-8 into
    U+FFFD). Special ids as ByteTokenizer's."""

    vocab_size = 64

    def encode(self, text: str) -> list[int]:
        return [ord(c) - GLYPH for c in text]

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        return "".join(chr(GLYPH + i) for i in ids[: ids.index(EOS_ID) if EOS_ID in ids else None])


def glyphs(n: int, stride: int) -> str:
    """A prompt of `n` ordinary tokens (n + 1 ids with bos)."""
    return "".join(chr(GLYPH + 4 + (i * stride) % 60) for i in range(n))


# Lengths hit every prefill bucket (bos + n tokens, n = 0 .. 39); the last fits 8 new tokens.
PROMPTS = [glyphs(n, s) for n, s in [(0, 1), (1, 3), (5, 7), (15, 11), (16, 13), (20, 17)]]
PROMPTS += [glyphs(33, 5), glyphs(39, 19)]
NEW = 8


@pytest.fixture(scope="module")
def gen() -> Generator:
    """A tiny random GPT whose eos logit is 1.05 x token 41's: some continuations stop at eos,
    some run to their length."""
    cfg = DecoderOnlyConfig.tiny(vocab_size=GlyphTokenizer.vocab_size, max_len=MAX_LEN)
    model = DecoderOnly(cfg, rngs=nnx.Rngs(1))
    table = model.embed.embedding
    table[...] = table[...].at[EOS_ID].set(1.05 * table[...][41])
    return Generator(model, GlyphTokenizer())


@pytest.fixture(scope="module")
def engine(gen):
    engine = SlotEngine(gen, slots=SLOTS)
    engine.warmup()
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture(scope="module")
def greedy(gen) -> dict[str, str]:
    """Each prompt's greedy continuation by `generate` (a batch equals each prompt alone:
    tests/inference/test_generator.py)."""
    return dict(zip(PROMPTS, gen.generate(PROMPTS, NEW, temperature=0), strict=True))


COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",  # a jit cache miss, even one the disk cache serves
    "/jax/core/compile/backend_compile_duration",
)


@pytest.fixture(scope="module")
def compiles():
    """The names of the compile events seen so far (from every thread)."""
    seen: list[str] = []

    def listen(event: str, duration: float, **kwargs) -> None:
        if event in COMPILE_EVENTS:
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    yield seen
    jax.monitoring.unregister_event_duration_listener(listen)


PROGRAMS = [gpt_slots.admit, gpt_slots.step, gpt_slots.empty_slots, gpt_slots.output_table]


def _programs() -> list[int]:
    return [f._cache_size() for f in PROGRAMS]


@contextlib.contextmanager
def no_compiles(compiles: list[str]):
    """Fails if anything is traced or compiled inside (the engine thread included)."""
    before, programs = len(compiles), _programs()
    yield
    assert compiles[before:] == [] and _programs() == programs


class Recorder:
    """A request's on_token: its ids, its text through `TextPieces`, its finish reasons. With
    a `gate`, the first token blocks the engine thread until the gate opens."""

    def __init__(self, gen: Generator, ids: list[int], gate: threading.Event | None = None):
        self.pieces, self.gate = TextPieces(gen, ids), gate
        self.ids: list[int] = []
        self.text, self.reasons = "", []
        self.first = threading.Event()

    def __call__(self, token: int | None, reason: str | None) -> None:
        if token is None:
            self.text += self.pieces.finish()
            self.reasons.append(reason)
            return
        self.ids.append(token)
        self.text += self.pieces.add(token)
        self.first.set()
        if self.gate is not None and len(self.ids) == 1:
            assert self.gate.wait(WAIT_S)


def submit(engine, gen, prompt, gate=None, **settings):
    ids = engine.encode(prompt)
    recorder = Recorder(gen, ids, gate)
    request = engine.submit(ids, on_token=recorder, **{"max_new_tokens": NEW, **settings})
    return request, recorder


def finished(pairs) -> list[Recorder]:
    for request, _ in pairs:
        assert request.wait(WAIT_S)
    return [recorder for _, recorder in pairs]


def expected_reason(text: str, max_new: int) -> str:
    return "length" if len(text) == max_new else "stop"  # GlyphTokenizer: a character a token


@contextlib.contextmanager
def opened_at_exit(gate: threading.Event):
    """Opens `gate` however the block ends: a failed test leaves no engine thread waiting."""
    try:
        yield gate
    finally:
        gate.set()


# ------------------------------------------------------------------------------------ tests
def test_text_pieces_hold_back_a_character_cut_between_byte_tokens():
    tokenizer = ByteTokenizer()
    pieces = TextPieces(tokenizer, [BOS_ID, *tokenizer.encode("n")])
    e_acute = tokenizer.encode("é")  # two bytes
    assert [pieces.add(t) for t in [*tokenizer.encode("a"), *e_acute]] == ["a", "", "é"]
    assert pieces.add(e_acute[0]) == "" and pieces.finish() == "\ufffd"


def test_prompt_buckets_double_from_16_and_end_at_the_context():
    assert prompt_buckets(48) == (16, 32, 48)
    assert prompt_buckets(1024) == (16, 32, 64, 128, 256, 512, 1024)
    assert prompt_buckets(16) == (16,) and prompt_buckets(10) == (10,)


def test_greedy_requests_equal_generate_arriving_staggered_through_reused_slots(
    gen, engine, greedy, compiles
):
    with opened_at_exit(threading.Event()) as gate, no_compiles(compiles):
        wave = [submit(engine, gen, PROMPTS[2], gate, temperature=0)]  # its first token waits
        wave += [submit(engine, gen, p, temperature=0) for p in PROMPTS[:2]]
        assert wave[0][1].first.wait(WAIT_S)  # the engine is mid-step
        wave += [submit(engine, gen, p, temperature=0) for p in PROMPTS[3:6]]  # some queue
        gate.set()
        assert wave[-1][0].wait(WAIT_S)
        wave += [submit(engine, gen, p, temperature=0) for p in PROMPTS[6:]]
        recorders = finished(wave)
    order = [PROMPTS[2], *PROMPTS[:2], *PROMPTS[3:]]
    assert [r.text for r in recorders] == [greedy[p] for p in order]
    assert [r.reasons for r in recorders] == [[expected_reason(greedy[p], NEW)] for p in order]
    assert {r.reasons[0] for r in recorders} == {"stop", "length"}
    assert engine.active == 0 and engine.waiting == 0


SAMPLED = [  # prompt, max_new_tokens, settings: buckets, lengths and settings share the slots
    (PROMPTS[1], 12, dict(temperature=1.0, seed=3)),
    (PROMPTS[3], 12, dict(temperature=0.7, top_k=20, top_p=0.9, seed=11)),
    (PROMPTS[5], 20, dict(temperature=1.3, top_p=0.8, seed=-5)),
]


def test_sampled_requests_equal_generate_and_stream_for_their_seed(gen, engine, compiles):
    want = [gen.generate([p], n, **s)[0] for p, n, s in SAMPLED]
    prompt, n, settings = SAMPLED[0]
    assert "".join(gen.stream(prompt, n, **settings)) == want[0]
    with no_compiles(compiles):  # mixed with greedy requests in the same steps
        pairs = [submit(engine, gen, p, max_new_tokens=n, **s) for p, n, s in SAMPLED]
        pairs += [submit(engine, gen, p, temperature=0) for p in PROMPTS[::3]]
        recorders = finished(pairs)
    assert [r.text for r in recorders[:3]] == want
    for r, (_, limit, _) in zip(recorders, SAMPLED, strict=False):
        assert r.reasons == [expected_reason(r.text, limit)] and len(r.ids) == len(r.text)
    # The same seed again draws the same tokens.
    with no_compiles(compiles):
        (again,) = finished([submit(engine, gen, prompt, max_new_tokens=n, **settings)])
    assert again.text == want[0]


def test_cancel_frees_queue_places_and_slots_for_later_requests(gen, engine, greedy, compiles):
    long = [p for p in PROMPTS if len(greedy[p]) == NEW]  # no eos in 8 tokens: cancel decides
    first, full = threading.Event(), threading.Event()
    with opened_at_exit(first), opened_at_exit(full), no_compiles(compiles):
        running = [submit(engine, gen, long[0], first, temperature=0)]
        assert running[0][1].first.wait(WAIT_S)  # the engine waits in its first step
        running += [submit(engine, gen, long[i % len(long)], temperature=0) for i in (1, 2)]
        running += [submit(engine, gen, long[1], full, temperature=0)]
        queued = submit(engine, gen, long[0], temperature=0)
        first.set()  # the next step takes three more requests, and waits again
        assert running[-1][1].first.wait(WAIT_S)
        assert engine.active == SLOTS and engine.waiting == 1
        for request, _ in [*running, queued]:
            request.cancel()
        full.set()
        (later,) = finished([submit(engine, gen, PROMPTS[0], temperature=0)])
        cancelled = finished([*running, queued])
    assert later.text == greedy[PROMPTS[0]]
    assert [r.reasons for r in cancelled] == [["cancelled"]] * (SLOTS + 1)
    assert [len(r.ids) for r in cancelled] == [2, 1, 1, 1, 0]  # freed at the next step
    assert engine.active == 0 and engine.waiting == 0


def test_requests_that_do_not_fit_or_have_bad_settings_raise(gen, engine):
    def recorder(token, reason):
        raise AssertionError("a rejected request delivered something")

    ids = engine.encode(PROMPTS[-1])  # 40 ids
    with pytest.raises(ValueError, match=r"40 tokens \+ max_new_tokens=9 exceed .* 48"):
        engine.submit(ids, max_new_tokens=9, on_token=recorder)
    with pytest.raises(ValueError, match="at most 39 tokens or ask for at most 8"):
        engine.submit(ids, max_new_tokens=9, on_token=recorder)
    capped = SlotEngine(gen, slots=2, max_new_tokens=4)
    with pytest.raises(ValueError, match="max_new_tokens=5 exceeds .* limit of 4"):
        capped.submit([BOS_ID], max_new_tokens=5, on_token=recorder)
    with pytest.raises(ValueError, match="temperature"):
        engine.submit([BOS_ID], max_new_tokens=2, temperature=-1, on_token=recorder)
    with pytest.raises(ValueError, match=r"ids\[1\] = 64 is not a token id in \[0, 64\)"):
        engine.submit([BOS_ID, 64], max_new_tokens=2, on_token=recorder)
    with pytest.raises(ValueError, match="ids is empty"):
        engine.submit([], max_new_tokens=2, on_token=recorder)
    with pytest.raises(ValueError, match=r"max_new_tokens must be an integer in \[1, 47\]"):
        SlotEngine(gen, max_new_tokens=48)
    assert engine.waiting == 0


def test_a_failed_step_ends_its_requests_with_error_and_the_engine_goes_on(
    gen, engine, greedy, compiles, monkeypatch
):
    step, calls = gpt_slots.step, []

    def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("injected failure")
        return step(*args, **kwargs)

    monkeypatch.setattr(gpt_slots, "step", failing_once)
    with no_compiles(compiles):
        (failed,) = finished([submit(engine, gen, PROMPTS[2], temperature=0)])
        (later,) = finished([submit(engine, gen, PROMPTS[2], temperature=0)])
    assert failed.reasons == ["error"] and failed.ids == []
    assert later.text == greedy[PROMPTS[2]] and later.reasons == ["length"]


def test_stop_drains_or_cancels_and_then_refuses_requests(gen, greedy, compiles):
    with no_compiles(compiles):  # the same shapes as the module's engine: no new program
        draining = SlotEngine(gen, slots=SLOTS)
        draining.start()
        pairs = [submit(draining, gen, p, temperature=0) for p in PROMPTS[:6]]
        draining.stop(drain_s=WAIT_S)
        assert [r.text for r in finished(pairs)] == [greedy[p] for p in PROMPTS[:6]]

    with opened_at_exit(threading.Event()) as gate, no_compiles(compiles):
        stopped = SlotEngine(gen, slots=SLOTS)
        stopped.start()
        pairs = [submit(stopped, gen, PROMPTS[2], gate, temperature=0)]
        pairs += [submit(stopped, gen, p, temperature=0) for p in PROMPTS[:6]]
        assert pairs[0][1].first.wait(WAIT_S)
        stopper = threading.Thread(target=stopped.stop)  # drain_s=0: cancel at once
        stopper.start()
        while not stopped._closed:
            time.sleep(0.001)
        gate.set()
        stopper.join(WAIT_S)
        recorders = finished(pairs)
    assert not stopper.is_alive()
    assert all(len(r.reasons) == 1 for r in recorders)
    # The slot blocked at its first token, and the requests still queued, were cancelled.
    assert recorders[0].reasons == ["cancelled"] and len(recorders[0].ids) == 1
    assert [r.reasons for r in recorders[SLOTS:]] == [["cancelled"]] * 3
    with pytest.raises(RuntimeError, match="stopped"):
        stopped.submit([BOS_ID], max_new_tokens=2, on_token=lambda *a: None)
