"""The standard suite holds exactly its training shapes, and d256-det the head-dim-256 and deterministic rows."""

import pytest

from frost.bench.cases import D256_DET, STANDARD, QUICK, Case, case, deterministic_twin, select


def shape(c):
    return (c.batch, c.heads_q, c.heads_kv, c.seq_q, c.head_dim, c.causal, c.window, c.sink)


def test_standard_shapes():
    assert {shape(c) for c in STANDARD} == {
        (4, 16, 16, 4096, 64, False, None, False), (4, 16, 16, 4096, 64, True, None, False),
        (4, 16, 16, 4096, 128, False, None, False), (4, 16, 16, 4096, 128, True, None, False),
        (2, 32, 8, 4096, 128, True, None, False),
        (2, 64, 8, 4096, 64, True, None, False), (2, 64, 8, 4096, 64, True, None, True),
        (2, 64, 8, 4096, 64, True, 128, True),
        (2, 16, 16, 4096, 192, True, None, False), (2, 16, 16, 4096, 256, True, None, False),
        (1, 16, 16, 16384, 128, True, None, False), (16, 16, 16, 1024, 64, False, None, False)}
    assert len({c.name for c in STANDARD}) == len(STANDARD)


def test_d256_det_holds_d256_both_masks_and_each_deterministic_row_after_its_default_twin():
    by_name = {c.name: c for c in D256_DET}
    assert len(by_name) == len(D256_DET)
    assert {shape(c) for c in D256_DET if c.head_dim == 256} == {(2, 16, 16, 4096, 256, False, None, False),
                                                                   (2, 16, 16, 4096, 256, True, None, False)}
    dets = [i for i, c in enumerate(D256_DET) if c.deterministic]
    assert [D256_DET[i].name for i in dets] == ["gptoss-causal-det", "gqa32/8-d128-causal-det",
                                                "gptoss-swa128-sink-det"]
    for i in dets:
        default = D256_DET[i - 1]
        assert not default.deterministic and default in STANDARD
        assert deterministic_twin(default) == D256_DET[i]
    assert not any(c.deterministic for c in STANDARD)


def test_quick_is_two_small_cases():
    assert len(QUICK) == 2
    assert all(c.batch * c.heads_q * c.seq_q <= 32 * 1024 for c in QUICK)


def test_band():
    assert case("n", 1, 1, 8, 8).band == (None, None)
    assert case("c", 1, 1, 8, 8, causal=True).band == (None, 0)
    assert case("w", 1, 1, 8, 8, causal=True, window=128).band == (127, 0)


def test_invalid_cases_raise():
    with pytest.raises(ValueError, match="bad-gqa: heads_q 6 is not a multiple of heads_kv 4"):
        case("bad-gqa", 1, 6, 8, 8, hkv=4)
    with pytest.raises(ValueError):
        Case("window-without-causal", 1, 1, 1, 8, 8, 8, 8, window=4)


def test_select_filters_by_name_words():
    names = [c.name for c in select("standard", "gptoss,s1k")]
    assert names == ["gptoss-causal", "gptoss-causal-sink", "gptoss-swa128-sink", "s1k-d64"]
    assert select("none") == ()


def test_frost_bench_defaults_to_the_standard_suite_and_refuses_an_unknown_one(capsys):
    """An unknown suite, the standard suite's former name among them, is refused with the accepted names (exit 2),
    never run as something else."""
    from frost.cli import build_parser

    assert build_parser().parse_args(["bench"]).suite == "standard"
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["bench", "--suite", "issue7"])
    assert stop.value.code == 2
    assert "'standard'" in capsys.readouterr().err


def test_words_and_header_name_every_feature_from_the_fields():
    """The docs' words name each feature and mode that is on (a valued one with its value); the run log's header
    names every feature, on or off, and no mode."""
    c = Case("odd", 2, 8, 2, 16, 32, 64, 32, causal=True, window=4, sink=True, deterministic=True)
    assert c.words() == "B2 H8/2 S16/32 D64/32 causal window 4 sink deterministic"
    assert c.header() == "B=2 Hq=8 Hkv=2 S=16 D=64 causal=True window=4 sink=True"
    plain = case("plain", 4, 16, 4096, 64)
    assert plain.words() == "B4 H16 S4096 D64"
    assert plain.header() == "B=4 Hq=16 Hkv=16 S=4096 D=64 causal=False window=None sink=False"


def test_a_saved_case_dict_gives_back_its_case():
    c = deterministic_twin(_gptoss_swa())
    assert Case.from_dict({**c.as_dict(), "flops": 1.0}) == c


def _gptoss_swa():
    return next(c for c in STANDARD if c.name == "gptoss-swa128-sink")


def test_optional_inputs_and_shapes_follow_frost_spec():
    c = _gptoss_swa()
    assert c.optional_inputs == ("sink",) and case("n", 1, 2, 8, 8).optional_inputs == ()
    assert c.shape("q") == (2, 4096, 64, 64) and c.shape("k") == (2, 4096, 8, 64) and c.shape("sink") == (64,)
