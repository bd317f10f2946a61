"""helpers.formulas.speculation by hand: eq. 1 term by term, a round's cost, the break-even acceptance."""
import pytest

from helpers.formulas import speculation
from helpers.serving import speculative


def test_eq1_has_one_owner():
    # the measured side imports the formulas, never a copy of them
    assert speculative.VerifyCost is speculation.VerifyCost
    assert not hasattr(speculative, "expected_tokens_per_pass") and not hasattr(speculative, "round_cost")


def test_tokens_per_pass_term_by_term_by_hand():
    # α = 0.6, k = 4: 1 + 0.6 + 0.36 + 0.216 + 0.1296 = 2.3056; (1 − 0.6^5) ÷ 0.4 = 0.92224 ÷ 0.4 = 2.3056
    p = speculation.tokens_per_pass_parts(0.6, 4)
    assert p.kept == pytest.approx((0.6, 0.36, 0.216, 0.1296))
    assert p.total == pytest.approx(2.3056) and p.closed_form == pytest.approx(2.3056)
    assert p.whole_draft_kept == pytest.approx(0.1296)
    assert p.kept_share_of_drafted == pytest.approx(1.3056 / 4)            # 32.6 % of drafted tokens kept
    # α = 0.5, k = 2: 1 + 0.5 + 0.25 = 1.75
    assert speculation.tokens_per_pass_parts(0.5, 2).total == pytest.approx(1.75)
    # the edges: no draft yields the target's own token only; α = 1 keeps every draft
    none = speculation.tokens_per_pass_parts(0.7, 0)
    assert (none.kept, none.total, none.kept_share_of_drafted) == ((), 1.0, 0.0)
    assert speculation.tokens_per_pass_parts(1.0, 3).total == 4.0 == speculation.expected_tokens_per_pass(1.0, 3)
    assert speculation.tokens_per_pass_parts(0.0, 3).total == 1.0


def test_round_cost_by_hand():
    assert speculation.round_cost(1.0, 4, 0.25) == pytest.approx(2.0)       # verify 1 + 4 × 0.25
    assert speculation.round_cost(1.2, 5, 0.0) == pytest.approx(1.2)        # prompt lookup: no draft steps


def test_break_even_alpha_by_hand():
    # k = 1: 1 + α = cost, so α = cost − 1
    assert speculation.break_even_alpha(1, 1.5) == pytest.approx(0.5, abs=1e-9)
    # k = 2: 1 + α + α² = 1.75 at α = 0.5
    assert speculation.break_even_alpha(2, 1.75) == pytest.approx(0.5, abs=1e-9)
    # k = 4, cost 2: 1 + α + α² + α³ + α⁴ = 2, α ≈ 0.5188 (checked by substitution)
    a = speculation.break_even_alpha(4, 2.0)
    assert 1 + a + a ** 2 + a ** 3 + a ** 4 == pytest.approx(2.0, abs=1e-9) and 0.518 < a < 0.520
    # a round that costs one step pays at any α; one dearer than k + 1 tokens never pays
    assert speculation.break_even_alpha(4, 1.0) == 0.0 and speculation.break_even_alpha(4, 0.8) == 0.0
    assert speculation.break_even_alpha(4, 5.0) == pytest.approx(1.0, abs=1e-9)
    assert speculation.break_even_alpha(4, 5.01) is None
