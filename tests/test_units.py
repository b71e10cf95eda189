"""Human units: parse/format round trips and bad strings (slackswap.core.units)."""

import pytest

from slackswap.core.errors import SlackSwapError
from slackswap.core.units import (
    format_bytes,
    format_rate,
    format_seconds,
    parse_bytes,
    parse_flops,
    parse_rate,
    parse_seconds,
)


@pytest.mark.parametrize("text, expected", [
    ("24GiB", 24 * 2**30), ("80GB", 80 * 10**9), ("512 MiB", 512 * 2**20), ("1024B", 1024),
    ("1024", 1024), (1024, 1024), ("100kB", 100_000), ("1.5KiB", 1536), (" 2 TB ", 2 * 10**12),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("fn, text, expected", [
    (parse_rate, "25GB/s", 25e9), (parse_rate, "2.0TB/s", 2e12), (parse_rate, "31.5 GB/s", 31.5e9),
    (parse_rate, 2.5e10, 2.5e10),
    (parse_flops, "312TFLOP/s", 312e12), (parse_flops, "989 TFLOPS", 989e12), (parse_flops, 1e12, 1e12),
    (parse_seconds, "10us", 10e-6), (parse_seconds, "2.5ms", 2.5e-3), (parse_seconds, "1s", 1.0),
    (parse_seconds, "1min", 60.0), (parse_seconds, "300ns", 3e-7), (parse_seconds, 0.5, 0.5),
])
def test_parse_rates_and_times(fn, text, expected):
    assert fn(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("value", [3 * 2**30, 1536, 7 * 2**40 + 12345, 999, 2**20])
def test_bytes_round_trip(value):
    back = parse_bytes(format_bytes(value).replace(" ", ""))
    assert back == pytest.approx(value, rel=5e-3)


@pytest.mark.parametrize("value", [2.5e10, 1.2e10, 4.5e11])
def test_rate_round_trip(value):
    assert parse_rate(format_rate(value).replace(" ", "")) == pytest.approx(value, rel=1e-3)


@pytest.mark.parametrize("value", [0.0123, 1.5, 2.5e-5, 3e-8])
def test_seconds_round_trip(value):
    assert parse_seconds(format_seconds(value).replace(" ", "")) == pytest.approx(value, rel=1e-2)


def test_format_examples():
    assert format_bytes(3 * 2**30) == "3.00 GiB"
    assert format_bytes(float("inf")) == "unlimited"
    assert format_bytes(12) == "12 B"
    assert format_seconds(0.0123) == "12.30 ms"
    assert format_rate(2.5e10) == "25.0 GB/s"


@pytest.mark.parametrize("fn, value", [
    (parse_bytes, "abc"), (parse_bytes, "-1GB"), (parse_bytes, "10XB"), (parse_bytes, True),
    (parse_bytes, None), (parse_bytes, "1e400"), (parse_bytes, float("nan")), (parse_bytes, "5 GB/s"),
    (parse_rate, "5GB"), (parse_rate, "fast"), (parse_rate, -1.0),
    (parse_flops, "312TB/s"), (parse_flops, "lots"),
    (parse_seconds, "10 parsecs"), (parse_seconds, "-1us"), (parse_seconds, "us"), (parse_seconds, [1]),
])
def test_bad_values_raise_value_error_naming_field(fn, value):
    with pytest.raises(SlackSwapError, match="myfield"):
        fn(value, "myfield")
    with pytest.raises(ValueError):
        fn(value)
