"""Decoding a random tiny Transformer: cache = no cache, beam vs greedy, sampling, jit, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax import EncoderDecoder, EncoderDecoderConfig
from transformer_jax.inference.decoding import (
    BOS_ID,
    EOS_ID,
    _beam_compiled,
    _check_source,
    beam_search,
    cache_stages,
    greedy_decode,
    output_length,
    sample,
)

PAD = 0
V, B, S, L = 19, 5, 7, 12  # vocabulary, batch, source length, output length: all different


def _model(seed=0, **overrides):
    return EncoderDecoder(EncoderDecoderConfig.tiny(vocab_size=V, **overrides), rngs=nnx.Rngs(seed))


def _src(seed=0, batch=B, length=S):
    src = np.random.default_rng(seed).integers(4, V, (batch, length))
    src[1, 4:] = PAD  # a shorter sentence
    return jnp.asarray(src)


def _lengths(tokens) -> np.ndarray:
    """Tokens up to and including eos; -1 where a row never emitted eos."""
    tokens = np.asarray(tokens)
    ended = (tokens == EOS_ID).any(-1)
    return np.where(ended, np.argmax(tokens == EOS_ID, axis=-1) + 1, -1)


def _assert_well_formed(tokens):
    """Real tokens, then eos, then only pad; pad never before eos and only one eos."""
    tokens = np.asarray(tokens).reshape(-1, np.shape(tokens)[-1])
    for row, n in zip(tokens, _lengths(tokens), strict=True):
        body = row if n < 0 else row[: n - 1]
        assert np.all((body != PAD) & (body != EOS_ID)), row
        if n > 0:
            assert np.all(row[n:] == PAD), row


def _teacher_forced_log_prob(model, src, tokens) -> np.ndarray:
    """Sum of log p(token | prefix) over the non-pad tokens, from the full forward pass."""
    tokens = np.asarray(tokens)
    tgt_in = np.concatenate([np.full((len(tokens), 1), BOS_ID), tokens[:, :-1]], axis=1)
    logits = np.asarray(model(src, jnp.asarray(tgt_in))).copy()
    logits[..., PAD] = -np.inf  # decoding never emits pad
    log_probs = np.asarray(jax.nn.log_softmax(jnp.asarray(logits)))
    picked = np.take_along_axis(log_probs, tokens[..., None], -1)[..., 0]
    return np.where(tokens != PAD, picked, 0.0).sum(-1)


def _normalised(scores, tokens, alpha):
    n = _lengths(tokens)
    n = np.where(n < 0, np.shape(tokens)[-1], n)
    return np.asarray(scores) / ((5.0 + n) / 6.0) ** alpha


@pytest.mark.parametrize(
    "overrides", [dict(), dict(norm="pre", positional="learned", share_embeddings=False)]
)
def test_greedy_cached_matches_uncached(overrides):
    model, src = _model(0, **overrides), _src(0)
    tokens, scores = greedy_decode(model, src, max_len=L)
    ref_tokens, ref_scores = greedy_decode(model, src, max_len=L, use_cache=False)
    np.testing.assert_array_equal(tokens, ref_tokens)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)
    assert tokens.shape == (B, L) and scores.shape == (B,)
    assert np.all(np.asarray(scores) < 0)


def test_beam_cached_matches_uncached():
    """Also checks the cache gather: only self-attention keys/values follow the parent beam."""
    model, src = _model(5), _src(5)
    tokens, scores = beam_search(model, src, beam_size=4, max_len=L)
    ref_tokens, ref_scores = beam_search(model, src, beam_size=4, max_len=L, use_cache=False)
    np.testing.assert_array_equal(tokens, ref_tokens)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)
    assert tokens.shape == (B, 4, L) and scores.shape == (B, 4)
    # Best first: hypotheses ending in eos by score, then any cut off at max_len by score.
    complete = _lengths(tokens) > 0
    assert np.all(np.diff(complete.astype(int), axis=1) <= 0)
    for group in (complete, ~complete):
        ranked = np.where(group, np.asarray(scores), np.nan)
        for row in ranked:
            row = row[~np.isnan(row)]
            assert np.all(np.diff(row) <= 0), ranked
    # The case is not trivial: some hypotheses end with eos at different lengths.
    assert len(set(_lengths(tokens).ravel())) >= 3


@pytest.mark.parametrize("seed", [0, 5])
def test_beam_of_one_is_greedy(seed):
    model, src = _model(seed), _src(seed)
    g_tokens, g_scores = greedy_decode(model, src, max_len=L)
    b_tokens, b_scores = beam_search(model, src, beam_size=1, alpha=0.0, max_len=L)
    np.testing.assert_array_equal(b_tokens[:, 0], g_tokens)
    np.testing.assert_allclose(b_scores[:, 0], g_scores, rtol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_scores_at_least_greedy(alpha):
    """Not a theorem (beam search may prune the greedy path), but holds on these random models;
    it fails if hypotheses, scores or the cache gather are mixed up."""
    for seed in (0, 5, 11):
        model, src = _model(seed), _src(seed)
        g_tokens, g_scores = greedy_decode(model, src, max_len=L)
        b_tokens, b_scores = beam_search(model, src, beam_size=4, alpha=alpha, max_len=L)
        greedy = _normalised(g_scores, g_tokens, alpha)
        assert np.all(np.asarray(b_scores[:, 0]) >= greedy - 1e-5), (seed, b_scores, greedy)
        # The best score is the model's log-prob of the returned tokens over lp(|Y|).
        best = np.asarray(b_tokens[:, 0])
        expected = _normalised(_teacher_forced_log_prob(model, src, best), best, alpha)
        np.testing.assert_allclose(b_scores[:, 0], expected, rtol=1e-4)


def test_decoding_with_marian_options_follows_the_teacher_forced_logits():
    """Halves positions, SiLU and a logits bias large enough to change the output: greedy (cached
    and not) is the argmax chain of the teacher-forced pass, and beam search's best score is the
    teacher-forced log-prob of its tokens. A decoding path that left out the bias fails."""
    marian = dict(positional="sinusoidal_halves", activation="silu", logits_bias=True)
    model, src = _model(0, **marian), _src(0)
    plain, _ = greedy_decode(model, src, max_len=L)  # bias still zero
    model.logits_bias[...] = 4.0 * jax.random.normal(jax.random.key(3), (V,))
    tokens, _ = greedy_decode(model, src, max_len=L)
    assert not np.array_equal(tokens, plain)
    uncached, _ = greedy_decode(model, src, max_len=L, use_cache=False)
    np.testing.assert_array_equal(uncached, tokens)
    tgt_in = np.concatenate([np.full((B, 1), BOS_ID), np.asarray(tokens)[:, :-1]], axis=1)
    logits = np.asarray(model(src, jnp.asarray(tgt_in))).copy()
    logits[..., PAD] = -np.inf  # decoding never emits pad
    n = _lengths(tokens)
    n = np.where(n < 0, L, n)
    for row, length in enumerate(n):
        np.testing.assert_array_equal(logits[row, :length].argmax(-1), tokens[row, :length])
    beams, scores = beam_search(model, src, beam_size=3, alpha=0.6, max_len=L)
    best = np.asarray(beams[:, 0])
    expected = _normalised(_teacher_forced_log_prob(model, src, best), best, 0.6)
    np.testing.assert_allclose(scores[:, 0], expected, rtol=1e-4)


def test_sampling_top1_and_cold_temperature_equal_greedy():
    model, src = _model(0), _src(0)
    g_tokens, g_scores = greedy_decode(model, src, max_len=L)
    for kw in (dict(top_k=1), dict(temperature=1e-5), dict(temperature=0.0)):
        tokens, scores = sample(model, src, jax.random.key(7), max_len=L, **kw)
        np.testing.assert_array_equal(tokens, g_tokens, err_msg=str(kw))
        np.testing.assert_allclose(scores, g_scores, rtol=1e-5)


def test_sampling_follows_its_key_and_scores_the_model_log_prob():
    model, src = _model(0), _src(0)
    a = sample(model, src, jax.random.key(1), max_len=L)
    b = sample(model, src, jax.random.key(1), max_len=L)
    c = sample(model, src, jax.random.key(2), max_len=L)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    _assert_well_formed(a[0])
    # Teacher-forcing the samples gives back their scores (log-probs with pad excluded).
    np.testing.assert_allclose(a[1], _teacher_forced_log_prob(model, src, a[0]), rtol=1e-4)


def test_top_k_restricts_samples():
    model, src = _model(0), _src(0)
    tokens, _ = sample(model, src, jax.random.key(3), top_k=2, temperature=5.0, max_len=L)
    tgt_in = np.concatenate([np.full((B, 1), BOS_ID), np.asarray(tokens)[:, :-1]], axis=1)
    logits = np.asarray(model(src, jnp.asarray(tgt_in))).copy()
    logits[..., PAD] = -np.inf
    top2 = np.argsort(-logits, axis=-1)[..., :2]
    live = np.asarray(tokens) != PAD
    assert np.all((top2 == np.asarray(tokens)[..., None]).any(-1)[live])
    # A hot temperature without top-k does leave the two best tokens.
    hot, _ = sample(model, src, jax.random.key(3), temperature=5.0, max_len=L)
    hot_in = np.concatenate([np.full((B, 1), BOS_ID), np.asarray(hot)[:, :-1]], axis=1)
    hot_top2 = np.argsort(-np.asarray(model(src, jnp.asarray(hot_in))), axis=-1)[..., :2]
    assert not np.all((hot_top2 == np.asarray(hot)[..., None]).any(-1)[np.asarray(hot) != PAD])


def test_outputs_have_pad_after_eos():
    model, src = _model(0), _src(0)
    greedy, _ = greedy_decode(model, src, max_len=L)
    beams, _ = beam_search(model, src, max_len=L)
    # Random models end at once or never when greedy; hot sampling ends rows mid-way too.
    for seed in range(20):
        samples, _ = sample(model, src, jax.random.key(seed), temperature=3.0, max_len=L)
        lengths = _lengths(samples)
        if np.any((lengths > 1) & (lengths < L)) and np.any(lengths == -1):
            break
    else:
        pytest.fail("no sample in 20 keys had both finished and unfinished rows")
    for tokens in (greedy, beams, samples):
        _assert_well_formed(tokens)


def test_empty_source_gives_empty_output():
    model = _model(0)
    src = _src(0).at[2].set(PAD)
    tokens, scores = greedy_decode(model, src, max_len=L)
    np.testing.assert_array_equal(tokens[2], [EOS_ID] + [PAD] * (L - 1))
    assert float(scores[2]) == 0.0
    b_tokens, b_scores = beam_search(model, src, max_len=L)
    np.testing.assert_array_equal(b_tokens[2, 0], [EOS_ID] + [PAD] * (L - 1))
    assert float(b_scores[2, 0]) == 0.0 and np.all(np.isfinite(np.asarray(b_scores)[[0, 1, 3]]))
    all_empty = jnp.zeros((2, S), jnp.int32)
    tokens, scores = beam_search(model, all_empty, max_len=L)
    assert np.all(np.asarray(tokens)[:, 0, 0] == EOS_ID)


def test_default_output_length_is_input_plus_50_capped():
    model = _model(0)  # tiny: cfg.max_len = 64
    assert output_length(model, 7, None) == 57  # §6.1: input length + 50
    assert output_length(model, 30, None) == 64
    tokens, _ = greedy_decode(model, _src(0), eos_id=None)  # eos disabled: all 57 tokens
    assert tokens.shape == (B, 57) and np.all(np.asarray(tokens) != PAD)
    learned = _model(0, positional="learned")
    assert output_length(learned, 7, 64) == 64
    with pytest.raises(ValueError, match="learned positions"):
        greedy_decode(learned, _src(0), max_len=65)
    with pytest.raises(ValueError, match="learned positions"):
        beam_search(learned, _src(0, length=70))


def test_bad_arguments_are_refused_with_a_reason():
    model, src = _model(0), _src(0)
    with pytest.raises(ValueError, match="leading batch axis"):  # (the test hook's shape check
        _check_source(model, src[0])  # would catch it first in greedy_decode)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, beam_size=0)
    with pytest.raises(ValueError, match="temperature"):
        sample(model, src, jax.random.key(0), temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        sample(model, src, jax.random.key(0), top_k=V + 1)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=0)


def test_repeated_calls_do_not_retrace(monkeypatch):
    """Same shapes and options (new values, new parameters): the compiled loop is reused."""
    traces = []
    decode_step = EncoderDecoder.decode_step

    def counted(self, tokens, cache):
        traces.append(tokens.shape)
        return decode_step(self, tokens, cache)

    monkeypatch.setattr(EncoderDecoder, "decode_step", counted)
    greedy_decode(_model(0), _src(0, batch=2, length=9), max_len=11)  # shapes no other test uses
    assert traces  # so it traced: the counter works
    traces.clear()
    greedy_decode(_model(3), _src(1, batch=2, length=9), max_len=11)
    assert not traces
    # Compiled here or by an earlier test; then alpha, top_k and temperature are traced values.
    beam_search(_model(0), _src(0), max_len=L)
    sample(_model(0), _src(0), jax.random.key(0), max_len=L)
    traces.clear()
    beam_search(_model(3), _src(1), alpha=0.9, max_len=L)
    sample(_model(3), _src(1), jax.random.key(1), top_k=3, temperature=0.5, max_len=L)
    assert not traces


def test_staged_cache_matches_uncached_over_several_stages():
    """70 fixed-length steps run in two stages (a 32-position cache, then 70): the cached
    greedy and beam outputs equal the uncached reference, which has no stages."""
    assert cache_stages(70) == (32, 70) and cache_stages(L) == (L,)
    model, src = _model(4), _src(4, batch=2)
    for search, kw in ((greedy_decode, {}), (beam_search, dict(beam_size=2))):
        tokens, scores = search(model, src, max_len=70, eos_id=None, **kw)
        ref_tokens, ref_scores = search(model, src, max_len=70, eos_id=None, use_cache=False, **kw)
        assert np.shape(tokens)[-1] == 70
        np.testing.assert_array_equal(tokens, ref_tokens)
        np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)


def test_beam_search_writes_its_reordered_caches_without_a_copy():
    """Two beam steps per loop iteration (`staged_while_loop`): the second step's gathered keys
    and values go straight into the loop's buffers. With one step per iteration XLA gathered
    every step's into a temporary and copied it back (the first step's of two still is, as a
    `[R, 1, N, C, H]` copy, which this does not count)."""
    model = _model()
    lowered = _beam_compiled.lower(
        model,
        _src(),
        jnp.float32(0.6),
        beam_size=3,
        max_len=L,
        use_cache=True,
        early_stopping=True,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    hlo = lowered.compile().as_text()
    cfg = model.cfg
    cache = f"f32[{B * 3},{cfg.num_heads},{L},{cfg.d_model // cfg.num_heads}]"
    gathers = [line for line in hlo.splitlines() if "gather" in line and f"= {cache}" in line]
    assert gathers, "no cache reordering found: the check below would prove nothing"
    copies = [line for line in hlo.splitlines() if f"= {cache}" in line and " copy(%gather" in line]
    assert not copies, copies
