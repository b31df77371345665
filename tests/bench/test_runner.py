"""Every (case, backend) is isolated: declines and exceptions become n/a rows, the budget becomes skipped rows,
and the JSON is written after each case."""

import json

import pytest

from frost.bench import runner, timing
from frost.bench.cases import case
from frost.bench.report import NA, OK, SKIPPED, Report

from .fakes import FakeBackend

C = case("tiny", 1, 2, 16, 8, causal=True)


@pytest.fixture
def fake_timing(monkeypatch):
    monkeypatch.setattr(runner, "make_sets", lambda c, opts: [object()])
    monkeypatch.setattr(runner, "release_memory", lambda: None)
    monkeypatch.setattr(timing, "median_ms", lambda run, n, **kw: (run(0), timing.Timing(2.0, 5, 0.1))[1])
    monkeypatch.setattr(timing, "host_us", lambda run, n, **kw: 7.0)


def test_measure_ok_declined_and_raising(fake_timing):
    opts = runner.Options(device="cpu")
    good = runner.measure(C, FakeBackend("good", detail="cute_sm120"), [object()], opts)
    assert good.status == OK and good.ms == 2.0 and good.detail == "cute_sm120" and good.host_us == 7.0
    unhosted = runner.measure(C, FakeBackend("good"), [object()], runner.Options(device="cpu", host_time=False))
    assert unhosted.status == OK and unhosted.host_us is None
    assert good.tflops == pytest.approx(2.5 * 4 * 2 * 8 * 16 * 16 / 2 / 2e-3 / 1e12)
    declined = runner.measure(C, FakeBackend("no", decline="no sink"), [object()], opts)
    assert (declined.status, declined.note) == (NA, "no sink")
    broken = runner.measure(C, FakeBackend("bad", error=RuntimeError("No available kernel\nmore")), [object()], opts)
    assert (broken.status, broken.note) == (NA, "RuntimeError: No available kernel")


def test_run_case_isolates_backends(fake_timing):
    backends = [FakeBackend("a"), FakeBackend("b", error=ValueError("boom")), FakeBackend("c")]
    rows = runner.run_case(C, backends, runner.Options(device="cpu"), None, lambda s: None)
    assert [r.status for r in rows] == [OK, NA, OK]


def test_inputs_failure_marks_every_backend(monkeypatch):
    def fail(c, opts):
        raise MemoryError("too big")

    monkeypatch.setattr(runner, "make_sets", fail)
    rows = runner.run_case(C, [FakeBackend("a"), FakeBackend("b")], runner.Options(), None, lambda s: None)
    assert all(r.status == NA and "MemoryError" in r.note for r in rows)


def test_budget_exhausted_skips(fake_timing):
    rows = runner.run_case(C, [FakeBackend("a")], runner.Options(), deadline=0.0, log=lambda s: None)
    assert rows[0].status == SKIPPED and rows[0].note == "time budget"


def test_run_writes_json_after_each_case(fake_timing, tmp_path):
    path = str(tmp_path / "r.json")
    seen = []
    cases = [C, case("tiny2", 1, 2, 16, 8)]

    def log(line):
        if line.startswith("case tiny2"):
            seen.append(json.load(open(path))["cases"][0]["name"])     # first case already on disk

    report = runner.run(cases, [FakeBackend("frost"), FakeBackend("peer")], runner.Options(device="cpu"),
                        Report(meta={"dtype": "bfloat16"}), path, log=log)
    assert seen == ["tiny"]
    saved = json.load(open(path))
    assert [c["name"] for c in saved["cases"]] == ["tiny", "tiny2"] and len(saved["results"]) == 4
    assert len(report.results) == 4


def test_short_reason_is_one_bounded_line():
    text = runner.short(RuntimeError("x" * 500 + "\nsecond line"))
    assert "\n" not in text and len(text) <= 160
