import threading
import time

from frost.lowering import cache_stats
from frost.lowering.plan_cache import PLANS, PlanCache


def test_lru_hits_misses_and_evictions():
    cache = PlanCache(max_size=2)
    for key in ("a", "b", "a", "c", "b"):  # c evicts b (a was refreshed), then b is built again and evicts a
        cache.get_or_build(key, lambda key=key: key.upper())
    assert cache.snapshot_counts() == {"hits": 1, "misses": 4, "evictions": 2}
    assert len(cache) == 2


def test_cache_stats_read_the_shared_plan_cache():
    before = cache_stats()
    PLANS.get_or_build(("test_plan_cache", "x"), lambda: "plan")
    PLANS.get(("test_plan_cache", "x"))
    d = cache_stats() - before
    assert (d.hits, d.misses) == (1, 1)


def test_resize_evicts_oldest():
    cache = PlanCache(max_size=8)
    for key in range(5):
        cache.get_or_build(key, lambda key=key: key)
    cache.resize(2)
    assert len(cache) == 2 and cache.get(4) == 4 and cache.get(0) is None


def test_concurrent_requests_build_once():
    cache, built = PlanCache(), []

    def build():
        built.append(1)
        time.sleep(0.05)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_build("k", build))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len({id(r) for r in results}) == 1


def test_concurrent_kernel_requests_compile_once():
    from frost.lowering import FakeCompiler, KernelUnit
    from frost.lowering.compiler import compiled_kernel

    class Slow(FakeCompiler):
        def compile(self, unit):
            time.sleep(0.05)
            return super().compile(unit)

    compiler, unit, got = Slow(), KernelUnit("cute_sm120", "k", "sm_120a"), []
    threads = [threading.Thread(target=lambda: got.append(compiled_kernel(compiler, unit))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compiler.compiled == ["k"] and len({id(k) for k in got}) == 1
    assert cache_stats().compiles == 1 and cache_stats().kernel_hits == 7
