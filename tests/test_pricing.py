"""plait.pricing: the editable price table, its lookup rules and the cost of a usage."""

from __future__ import annotations

import math

import pytest

from plait.errors import ConfigurationError
from plait.messages import Usage
from plait.pricing import PRICES, Price, cost, price_for


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("openai:gpt-4.1-mini", "gpt-4.1-mini"),
        ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("openai-compatible:gpt-4o@http://127.0.0.1:8000/v1", "gpt-4o"),
        ("openai:gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),  # longest prefix, not gpt-4.1
    ],
)
def test_price_for_finds_specs_bare_names_and_dated_names(model: str, key: str) -> None:
    assert price_for(model) is PRICES[key]


def test_price_for_unknown_model_is_none_and_a_prefix_must_end_at_a_dash() -> None:
    assert price_for("openai:my-finetune") is None
    assert price_for("gpt-4.10") is None  # "gpt-4.1" is a prefix but not followed by "-"


def test_price_for_prefers_an_exact_spec_in_a_custom_table() -> None:
    table = {"openai:gpt-4o": Price(1, 2), "gpt-4o": Price(3, 4)}
    assert price_for("openai:gpt-4o", table) == Price(1, 2)
    assert price_for("gpt-4o", table) == Price(3, 4)


def test_cost_charges_cached_tokens_at_their_own_rates() -> None:
    price = Price(input=2.0, output=8.0, cache_read=0.5, cache_write=4.0)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=500_000,
        cache_read_tokens=400_000,
        cache_write_tokens=100_000,
    )
    # 500k fresh * 2 + 400k * 0.5 + 100k * 4 + 500k * 8, per million
    assert math.isclose(cost(usage, price), 1.0 + 0.2 + 0.4 + 4.0)


def test_cost_without_cache_rates_charges_cached_tokens_as_input() -> None:
    usage = Usage(input_tokens=2_000, output_tokens=0, cache_read_tokens=1_000)
    assert math.isclose(cost(usage, Price(1.0, 1.0)), 2_000 / 1_000_000)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), True, "1"])
def test_price_refuses_rates_that_are_not_finite_non_negative_numbers(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="dollars per million tokens"):
        Price(bad, 1.0)  # type: ignore[arg-type]


def test_one_hour_writes_cost_twice_the_input_rate_and_savings_are_reported() -> None:
    from plait.pricing import cache_savings

    price = Price(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)
    usage = Usage(
        input_tokens=1_000_000,
        cache_read_tokens=500_000,
        cache_write_tokens=300_000,
        cache_write_1h_tokens=100_000,
    )
    # fresh 200k at 3.00, reads 500k at 0.30, 5m writes 200k at 3.75, 1h writes 100k at 6.00
    assert cost(usage, price) == pytest.approx(0.6 + 0.15 + 0.75 + 0.6)
    assert cache_savings(usage, price) == pytest.approx(3.0 - 2.1)
    assert PRICES["claude-sonnet-4-5"].cache_write_1h == 6.0
