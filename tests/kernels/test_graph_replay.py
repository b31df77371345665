"""The graph-replay policy of a bound launch (frost.kernels.graph_replay), on a fake driver: which calls launch
directly, which capture, which replay, and what turns replay off. The real driver is exercised on the GPU
(test_engine_features_gpu.py::test_graph_replay_matches_direct_launch)."""

from __future__ import annotations

import pytest

from frost.kernels.graph_replay import GraphCaptureError, GraphReplay


class FakeDriver:
    def __init__(self, capturing=(), fail_capture=False):
        self.capturing_streams, self.fail_capture = set(capturing), fail_capture
        self.events: list[tuple] = []
        self.destroyed: list = []

    def is_capturing(self, stream):
        return stream in self.capturing_streams

    def capture(self, run):
        if self.fail_capture:
            raise GraphCaptureError("no")
        run("private")
        graph = ("graph", len(self.events))
        self.events.append(("capture", graph))
        return graph

    def launch(self, graph, stream):
        self.events.append(("graph", graph, stream))

    def destroy(self, graph):
        self.destroyed.append(graph)


def _replay(**driver_kw):
    driver, runs = FakeDriver(**driver_kw), []
    return GraphReplay(lambda args, stream: runs.append((args, stream)), capacity=2, driver=driver), driver, runs


def test_second_sighting_captures_and_later_calls_replay():
    replay, driver, runs = _replay()
    replay((1, 2), 7)
    assert runs == [((1, 2), 7)] and driver.events == []           # first sighting: a direct launch
    replay((1, 2), 8)
    assert runs[-1] == ((1, 2), "private")                          # captured on the private stream ...
    graph = driver.events[0][1]
    assert driver.events[1:] == [("graph", graph, 8)]               # ... and the graph runs this call
    replay((1, 2), 9)
    assert len(runs) == 2 and driver.events[-1] == ("graph", graph, 9)
    assert (replay.captures, replay.replays) == (1, 2)


def test_different_arguments_never_share_a_graph():
    replay, driver, runs = _replay()
    for args in ((1,), (2,), (1,), (2,)):
        replay(args, 0)
    g1, g2 = (e[1] for e in driver.events if e[0] == "capture")
    assert g1 != g2 and [e for e in driver.events if e[0] == "graph"] == [("graph", g1, 0), ("graph", g2, 0)]


def test_a_capturing_stream_gets_direct_launches():
    """The caller's own capture must record the kernels, not a graph launch: no capture, no replay there."""
    replay, driver, runs = _replay(capturing={5})
    for _ in range(3):
        replay((1,), 5)
    assert runs == [((1,), 5)] * 3 and driver.events == []
    replay((1,), 6)          # the tuple was never counted as seen while the stream was capturing
    assert driver.events == []


def test_least_recently_used_graph_is_destroyed_past_capacity():
    replay, driver, runs = _replay()
    for args in ((1,), (1,), (2,), (2,), (1,), (3,), (3,)):
        replay(args, 0)
    graphs = {e[1]: None for e in driver.events if e[0] == "capture"}
    g1, g2, g3 = graphs
    assert driver.destroyed == [g2]            # (1,) was used after (2,), so (2,) went
    replay((1,), 0)
    assert driver.events[-1] == ("graph", g1, 0)
    replay.close()
    assert sorted(driver.destroyed) == sorted([g1, g2, g3])


def test_a_failed_capture_turns_replay_off():
    replay, driver, runs = _replay(fail_capture=True)
    for _ in range(4):
        replay((1,), 0)
    assert runs == [((1,), 0)] * 4 and isinstance(replay.failure, GraphCaptureError) and driver.events == []


@pytest.mark.parametrize("env, expected", [(None, True), ("1", True), ("0", False), ("off", False)])
def test_launch_reads_frost_graph_replay(monkeypatch, env, expected):
    from frost.kernels import choose_config
    from frost.kernels.backward.launch import Launch, Problem
    from types import SimpleNamespace

    if env is None:
        monkeypatch.delenv("FROST_GRAPH_REPLAY", raising=False)
    else:
        monkeypatch.setenv("FROST_GRAPH_REPLAY", env)
    cfg = choose_config("bfloat16", 64, 64, True, "top_left", "sm_90a")
    launch = Launch(SimpleNamespace(backward=None), cfg, Problem(1, 1, 1, 8, 8, 1.0))
    assert (launch.replay is not None) is expected
    assert Launch(SimpleNamespace(backward=None), cfg, Problem(1, 1, 1, 8, 8, 1.0), graph_replay=False).replay is None
