from frost.demo import DemoShape, run_demo


def test_demo_runs_and_matches_the_oracle():
    lines = []
    shape = DemoShape(batch=2, heads_q=4, heads_kv=1, seq=64, head_dim=32, window=16, short_q=10, short_kv=30)
    result = run_demo(shape, device="cpu", say=lines.append)
    assert result.engine == "reference" and "cute_sm120 declines" in result.why
    assert set(result.errors) == {"dq", "dk", "dv", "dsink"}
    assert all(rel < 2e-2 for _, rel in result.errors.values()), result.errors
    assert result.passed
    text = "\n".join(lines)
    assert "[5/5] fp64 oracle" in text and "wall time" in text


def test_demo_command_is_registered():
    from frost.cli import build_parser

    args = build_parser().parse_args(["demo", "--seq", "64", "--heads-q", "4", "--heads-kv", "1", "--head-dim", "32"])
    assert args.func.__module__ == "frost.commands.demo" and args.seq == 64


def test_demo_verdict_fails_when_an_error_exceeds_the_bound():
    from frost.demo import DemoResult

    shape = DemoShape()
    ok = DemoResult("reference", "", shape, {"dq": (1e-3, 1e-3)})
    bad = DemoResult("reference", "", shape, {"dq": (1.0, 2 * ok.bound)})
    assert ok.passed and not bad.passed
