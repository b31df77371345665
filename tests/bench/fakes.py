"""Fake backends and reports for the harness tests (no GPU, no kernels)."""

from frost.bench.backends.base import Backend, Prepared
from frost.bench.report import NA, OK, Report, Result


class FakeBackend(Backend):
    def __init__(self, name, same_class=True, decline=None, error=None, detail=""):
        self.name, self.same_class = name, same_class
        self._decline, self._error, self._detail = decline, error, detail
        self.calls = 0

    def declines(self, c, which="backward"):
        return self._decline

    def prepare(self, c, sets, scale, which="backward"):
        if self._error:
            raise self._error

        def run(i):
            self.calls += 1

        return Prepared(run, detail=self._detail)


def ok(case, backend, tflops, same_class=True, detail=""):
    return Result(case, backend, OK, ms=1000.0 / tflops, tflops=tflops, same_class=same_class, detail=detail)


def fake_report():
    """Two cases: one where every peer ran, one where only frost did."""
    rows = [ok("a", "frost", 300.0, detail="cute_sm120"), ok("a", "torch-flash", 200.0),
            ok("a", "torch-cudnn", 400.0, same_class=False), Result("a", "fa4", NA, note="ImportError: no flash_attn"),
            ok("b", "frost", 100.0, detail="reference"), Result("b", "torch-flash", NA, note="no learnable sink")]
    cases = [{"name": "a", "flops": 1e12}, {"name": "b", "flops": 1e12}]
    ceiling = {"points": [{"dtype": "bfloat16", "ctas_per_sm": 1, "grid": 132, "ms": 1.0, "tflops": 500.0},
                          {"dtype": "bfloat16", "ctas_per_sm": 4, "grid": 528, "ms": 1.0, "tflops": 600.0}]}
    return Report({"suite": "test", "dtype": "bfloat16", "device": "FakeGPU"}, cases, rows, ceiling)
