"""What a model's tokens cost: an editable price table, in US dollars per million tokens.

:data:`PRICES` holds list prices for common models, keyed by model name (the part of a spec after
``provider:``). Edit it in place, pass your own table to :func:`price_for`, or (from the CLI) add
``[prices."<model>"]`` tables to ``plait.toml``. Prices change: a cost is an estimate, shown only
when the model is in the table.

Lookup (:func:`price_for`): the exact spec (``openai:gpt-4.1-mini``), then the bare name
(``gpt-4.1-mini``), then the longest table name the model's name starts with followed by ``-``
(so the dated ``claude-sonnet-4-5-20250929`` finds ``claude-sonnet-4-5``); ``None`` when nothing
matches.

:attr:`~plait.messages.Usage.input_tokens` counts every prompt token, cached ones included (both
adapters report it so): :func:`cost` charges cache reads and writes at their own rates and the
rest at the input rate. A cache rate left unset costs as ordinary input, except
``cache_write_1h`` (Anthropic's 1-hour writes), which defaults to twice the input rate, as
Anthropic bills it. :func:`cache_savings` is what the cache saved against the same tokens sent
uncached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plait.errors import ConfigurationError
from plait.messages import Usage

__all__ = ["PRICES", "Price", "cache_savings", "cost", "price_for"]

_MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens. ``cache_read`` / ``cache_write`` default to ``input``;
    ``cache_write_1h`` (the 1-hour writes among the cache writes) to twice ``input``.

    Raises :class:`~plait.errors.ConfigurationError` for a rate that is negative, infinite or
    NaN.
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write", "cache_write_1h"):
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0 <= value < float("inf"):
                raise ConfigurationError(
                    f"Price.{name} must be dollars per million tokens (a finite number >= 0), "
                    f"got {value!r}."
                )


PRICES: dict[str, Price] = {
    # OpenAI (input, output, cached input)
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "o3": Price(2.0, 8.0, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic (input, output, cache read, cache write of 5 minutes, of 1 hour)
    "claude-opus-4-1": Price(15.0, 75.0, 1.50, 18.75, 30.0),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75, 30.0),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.30, 3.75, 6.0),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75, 6.0),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25, 2.0),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0, 1.6),
}
"""The default table (list prices, USD per million tokens); edit it to suit your account."""


def price_for(model: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model`` (a spec or a bare name) in ``table`` (default :data:`PRICES`),
    looked up as the module docstring says; ``None`` when the table does not know it."""
    prices = PRICES if table is None else table
    if model in prices:
        return prices[model]
    name = model.partition(":")[2] if ":" in model else model
    name = name.partition("@")[0]  # openai-compatible:<model>@<base_url>
    if name in prices:
        return prices[name]
    prefixes = [key for key in prices if name.startswith(key + "-")]
    return prices[max(prefixes, key=len)] if prefixes else None


def cost(usage: Usage, price: Price) -> float:
    """What ``usage`` cost at ``price``, in US dollars (cached tokens at their own rates; the
    1-hour writes among the cache writes at ``cache_write_1h``)."""
    cache_read = usage.cache_read_tokens
    cache_write = usage.cache_write_tokens
    write_1h = min(usage.cache_write_1h_tokens, cache_write)
    fresh = max(usage.input_tokens - cache_read - cache_write, 0)
    read_rate = price.input if price.cache_read is None else price.cache_read
    write_rate = price.input if price.cache_write is None else price.cache_write
    write_1h_rate = 2 * price.input if price.cache_write_1h is None else price.cache_write_1h
    total = (
        fresh * price.input
        + cache_read * read_rate
        + (cache_write - write_1h) * write_rate
        + write_1h * write_1h_rate
        + usage.output_tokens * price.output
    )
    return total / _MILLION


def cache_savings(usage: Usage, price: Price) -> float:
    """Dollars the prompt cache saved on ``usage``: its cost with every input token at the
    input rate, minus its cost as billed (negative when writes cost more than reads saved)."""
    uncached = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return cost(uncached, price) - cost(usage, price)
