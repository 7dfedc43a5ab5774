"""The Noam learning-rate schedule (§5.3, eq. 3) against its closed form, and driving Adam."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from transformer_jax.training.schedules import noam_schedule


def test_noam_matches_closed_form_with_steps_from_one():
    d, warmup, factor = 512, 4000, 2.0
    schedule = noam_schedule(d, warmup, factor)
    for count in [0, 1, 10, 3999, 4000, 10_000, 99_999]:
        step = count + 1
        expected = factor * d**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert float(schedule(count)) == pytest.approx(expected, rel=1e-5)
    assert float(schedule(0)) > 0  # Optax's first count is 0: the first update still moves.
    values = np.array([float(schedule(c)) for c in range(0, 12_000, 50)])
    peak = int(np.argmax(values)) * 50 + 1
    assert abs(peak - warmup) <= 50  # rises linearly to the warm-up step, then decays


def test_noam_drives_optax_adam():
    schedule = noam_schedule(64, 10)
    tx = optax.adam(schedule)
    params = {"w": jnp.ones(3)}
    state = tx.init(params)
    updates, _ = tx.update({"w": jnp.ones(3)}, state, params)
    # Adam's first update has magnitude lr(step 1) per coordinate.
    np.testing.assert_allclose(-updates["w"], float(schedule(0)), rtol=1e-4)


@pytest.mark.parametrize("bad", [dict(d_model=0), dict(warmup_steps=-1), dict(factor=0.0)])
def test_noam_rejects_non_positive(bad):
    kwargs = dict(d_model=8, warmup_steps=4, factor=1.0) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        noam_schedule(**kwargs)
