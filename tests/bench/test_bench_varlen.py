"""benchmarks/bench_varlen.py's host side (its GPU runs are the packed-sequence benchmark): the documents, the FLOP
count on the real pairs, and the ratios, steps and memory its table reports, from made-up timings."""

from pathlib import Path

import pytest

from frost.bench.cases import case
from frost.bench.flops import backward_flops, forward_flops
from helpers.scripts import load_script

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_varlen.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH)


def test_documents_are_fixed_and_in_range(bench):
    uniform = bench.lengths("uniform")
    assert uniform == bench.lengths("uniform") and len(uniform) == 8 and sum(uniform) == 39427
    assert all(256 <= n <= 8192 for n in uniform)
    long, *short = bench.lengths("one-long")
    assert long == 12288 and len(short) == 23 and all(1 <= n <= 2048 for n in short)
    with pytest.raises(ValueError, match="mix"):
        bench.lengths("other")


def test_a_step_is_the_forward_plus_the_backward(bench):
    row = bench.Row("d128", [128], ms={"frost_packed/fwd": 1.0, "frost_packed/bwd": 2.5})
    bench._add_step(row, "frost_packed", {"fwd": 4e9, "bwd": 10e9}, 1.0)
    assert row.ms["frost_packed/step"] == pytest.approx(3.5)
    assert row.tflops["frost_packed/step"] == pytest.approx(14e9 / 3.5 / 1e9)
    half = bench.Row("d128", [128], ms={"frost_packed/fwd": 1.0, "frost_packed": "error"})
    bench._add_step(half, "frost_packed", {"fwd": 4e9, "bwd": 10e9}, 1.0)
    assert "frost_packed/step" not in half.ms


def test_pairs_are_exact_and_priced_as_frost_bench_prices_a_pair(bench):
    """A causal document of n tokens holds n(n+1)/2 (query, key) pairs, which frost.bench.flops counts exactly for
    a window as wide as the document (its causal cases count n^2/2); the bench prices a pair as frost bench does,
    4 H D forward and 2.5 times that backward."""
    for n in (1, 77, 300):
        c = case("doc", 1, 8, n, 64, causal=True, window=n)
        assert 4.0 * 8 * 64 * bench.causal_pairs(n) == pytest.approx(forward_flops(c))
        assert 10.0 * 8 * 64 * bench.causal_pairs(n) == pytest.approx(backward_flops(c))


def test_ratios_and_markdown_from_made_up_timings(bench):
    row = bench.Row("d64 gpt-oss", [256, 512],
                    ms={"frost_packed/fwd": 1.0, "frost_packed/bwd": 2.0, "frost_padded/bwd": 4.0,
                        "fa4_packed/bwd": 2.5, "fa4_packed/fwd": 1.2},
                    tflops={"frost_packed/bwd": 300.0, "frost_dense_same_tokens/bwd": 320.0},
                    peak_mib={"frost_packed": 120.4, "frost_padded": 480.0})
    r = bench.ratios(row, "bwd")
    assert r["vs_dense"] == pytest.approx(300 / 320) and r["padded_over_packed"] == pytest.approx(2.0)
    assert r["fa4_over_packed"] == pytest.approx(1.25) and r["fa4_note"] is None
    f = bench.ratios(row, "fwd")
    assert f["vs_dense"] is None and f["padded_over_packed"] is None and f["fa4_over_packed"] == pytest.approx(1.2)
    table = bench.markdown([row]).splitlines()
    assert len(table) == 5
    assert table[2] == "| uniform | d64 gpt-oss | forward | 1.000 | - | 1.20 | - | - | 120/480 |"
    assert table[3] == "| uniform | d64 gpt-oss | backward | 2.000 | 300.0 | 1.25 | 0.94 | 2.00 |  |"
    declined = bench.Row("d64 +sink", [256], ms={"fa4_packed": "declined: no sink"})
    assert bench.ratios(declined, "bwd")["fa4_note"] == "declined: no sink"
    assert bench.markdown([declined]).splitlines()[2] == "| uniform | d64 +sink | forward | - | - | - | - | - | -/- |"
    assert "fa4/packed time declined: no sink" in bench.summary(declined)


def test_only_the_peer_is_padded_and_only_when_asked(bench):
    from contextlib import nullcontext

    assert isinstance(bench._launches("frost_packed", "padded"), nullcontext)
    assert isinstance(bench._launches("fa4_packed", "free"), nullcontext)
    assert not isinstance(bench._launches("fa4_packed", "padded"), nullcontext)
