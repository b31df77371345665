"""CUDA-graph replay of a bound launch: one graph launch instead of the backward's three kernel launches.

Why: a graph launch of the three kernels costs a fraction of the host time of launching them one by one
(docs/performance.md, "Host side"). A graph bakes in every kernel argument, so one is kept per
argument tuple (pointers, strides, sizes, scale, band, flags: everything but the stream) and replayed only on an
exact match, which does the same work as launching those kernels with those arguments. A tuple is captured the
second time it is seen: a training loop's allocator hands each layer the same buffers step after step, while
arguments that never repeat cost one dictionary entry. A call on a stream that is itself being captured (the
caller's own CUDA graph) launches the kernels directly, so that capture records them. ``FROST_GRAPH_REPLAY=0``
turns replay off (launch.Launch reads it when it is bound)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from frost import settings

CAPACITY = 64  # graphs (and once-seen tuples) kept per bound launch, least recently used dropped first


def replay_enabled() -> bool:
    return settings.switch("FROST_GRAPH_REPLAY", True)


class GraphCaptureError(RuntimeError):
    """Capturing the launch into a graph failed; the launch goes on without replay."""


class GraphReplay:
    """``replay(args, stream)`` does what ``run(args, stream)`` does (launch the kernels with ``args`` on the raw
    ``stream``), through a graph captured for ``args`` where it has one."""

    def __init__(self, run, capacity: int = CAPACITY, driver=None):
        self._run = run
        self._capacity = capacity
        self._driver = driver
        self._graphs: OrderedDict = OrderedDict()   # args -> instantiated graph
        self._seen: OrderedDict = OrderedDict()     # args seen once
        self._lock = threading.Lock()
        self.failure: Exception | None = None       # why replay was turned off for this launch
        self.captures = self.replays = 0

    def __call__(self, args: tuple, stream: int) -> None:
        driver = self._driver or self._load_driver()
        if self.failure is not None or driver.is_capturing(stream):
            return self._run(args, stream)
        graph = self._graphs.get(args)
        if graph is None:
            graph = self._capture_on_second_sighting(args, driver)
            if graph is None:
                return self._run(args, stream)
        else:
            self._graphs.move_to_end(args)
        driver.launch(graph, stream)
        self.replays += 1

    def _capture_on_second_sighting(self, args: tuple, driver):
        if self._seen.pop(args, False) is False:
            self._seen[args] = None
            if len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return None
        with self._lock:
            try:
                graph = driver.capture(lambda stream: self._run(args, stream))
            except GraphCaptureError as e:
                self.failure = e
                return None
            self._graphs[args] = graph
            self.captures += 1
            if len(self._graphs) > self._capacity:
                driver.destroy(self._graphs.popitem(last=False)[1])
        return graph

    def _load_driver(self):
        self._driver = CudaGraphDriver()
        return self._driver

    def close(self) -> None:
        """Destroy the graphs (launches in flight still complete)."""
        while self._graphs:
            self._driver.destroy(self._graphs.popitem()[1])

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the driver module may be gone; the process frees the graphs
            pass


class CudaGraphDriver:
    """The four driver calls replay needs (cuda.bindings, which CuTe DSL already depends on). Captures run on a
    private stream per CUDA context, in thread-local mode so other threads' work is not disturbed."""

    def __init__(self):
        from cuda.bindings import driver

        self._driver = driver
        self._none = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
        self._streams: dict[int, object] = {}

    def is_capturing(self, stream: int) -> bool:
        """True also when the stream cannot be queried: the direct launch then reports the problem."""
        err, status = self._driver.cuStreamIsCapturing(stream)
        return err != self._driver.CUresult.CUDA_SUCCESS or status != self._none

    def capture(self, run):
        driver = self._driver
        stream = self._private_stream()
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._check(driver.cuStreamBeginCapture(stream, mode)[0], "cuStreamBeginCapture")
        try:
            run(int(stream))
        except Exception as e:  # e.g. a launch path that does something capture forbids: launch directly then
            driver.cuStreamEndCapture(stream)
            raise GraphCaptureError(f"the launch failed under stream capture: {e}") from e
        err, graph = driver.cuStreamEndCapture(stream)
        self._check(err, "cuStreamEndCapture")
        err, graph_exec = driver.cuGraphInstantiate(graph, 0)
        driver.cuGraphDestroy(graph)
        self._check(err, "cuGraphInstantiate")
        return graph_exec

    def launch(self, graph_exec, stream: int) -> None:
        err, = self._driver.cuGraphLaunch(graph_exec, stream)
        if err != self._driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuGraphLaunch of the backward's graph failed: {err}")

    def destroy(self, graph_exec) -> None:
        self._driver.cuGraphExecDestroy(graph_exec)

    def _private_stream(self):
        driver = self._driver
        err, ctx = driver.cuCtxGetCurrent()
        self._check(err, "cuCtxGetCurrent")
        key = int(ctx)
        if key not in self._streams:
            err, stream = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
            self._check(err, "cuStreamCreate")
            self._streams[key] = stream
        return self._streams[key]

    def _check(self, err, what: str) -> None:
        if err != self._driver.CUresult.CUDA_SUCCESS:
            raise GraphCaptureError(f"{what} failed: {err}")
