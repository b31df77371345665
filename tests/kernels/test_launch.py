"""The fast launch path on CPU (no GPU, nothing compiled): a Launch passes the compiled backward (chain.BackwardChain)
the values its jit host entry declares, in order -- pointers as ints, strides, sizes, flags, the stream handle
last -- and the chain hands each kernel's host entry the values it declares."""

import inspect
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from frost.errors import SettingError
from frost.kernels.backward.api import choose_config, workspace_regions
from frost.kernels.backward.bwd_main import BwdMainKernel
from frost.kernels.backward.chain import BackwardChain
from frost.kernels.backward.dq_convert import DqConvertKernel
from frost.kernels.backward.dq_gemm import DqGemmKernel
from frost.kernels.backward.launch import LOG2_E, BackwardTensors, Launch, Problem
from frost.kernels.mask import (FLAG_BOTTOM_RIGHT, FLAG_ORDERED_DQ, FLAG_SEQ_KV, NO_BOUND, MaskBounds,
                                main_writes_dq)
from frost.kernels.backward.preprocess import PreprocessKernel
from frost.spec import kernel_flag
from helpers.tensors import randn_bhsd

KERNELS = {"preprocess": PreprocessKernel, "main": BwdMainKernel, "dq_convert": DqConvertKernel}
FLAG_SINK = kernel_flag("sink")


def _params(cls) -> list[str]:
    return list(inspect.signature(cls.__call__).parameters)[1:]   # drop self


def _recorder(name: str, calls: dict, params: list[str]):
    def launch(*args):
        assert len(args) == len(params), (name, len(args), len(params))
        calls[name] = dict(zip(params, args))
    return launch


def _recording_kernels(calls: dict):
    return SimpleNamespace(backward=_recorder("backward", calls, _params(BackwardChain)))


def _problem_tensors(b=2, hq=4, hkv=2, sq=100, skv=140, d=64, **features):
    """(config for the problem's ``features``: band_left, band_right, deterministic; io tensors; workspace)."""
    cfg = choose_config("bfloat16", d, d, True, "bottom_right", "sm_90a", **features)
    q, o, do, dq = (randn_bhsd((b, hq, sq, d), torch.bfloat16, layout="bshd") for _ in range(4))
    k, v, dk, dv = (randn_bhsd((b, hkv, skv, d), torch.bfloat16, layout="bshd") for _ in range(4))
    lse = torch.zeros(b, hq, sq)
    ws = {n: torch.zeros(max(nb, 16), dtype=torch.uint8) for n, nb in workspace_regions(cfg, b, hq, sq, skv)}
    return cfg, (q, k, v, o, do, lse, dq, dk, dv), ws


def test_launch_passes_the_chain_its_declared_arguments():
    calls = {}
    cfg, (q, k, v, o, do, lse, dq, dk, dv), ws = _problem_tensors(band_left=40, deterministic=True)
    seq_kv, sink, dsink = torch.tensor([140, 77], dtype=torch.int32), torch.zeros(4), torch.zeros(4)
    launch = Launch(_recording_kernels(calls), cfg, Problem(2, 4, 2, 100, 140, 0.125, cfg.mask(40),
                                                             deterministic=True,
                                                             optional=frozenset({"seq_len_kv", "sink", "dsink"})))
    launch(BackwardTensors(q, k, v, o, do, lse, dq, dk, dv, ws, {"seq_len_kv": seq_kv, "sink": sink, "dsink": dsink}),
           7)
    flags = FLAG_BOTTOM_RIGHT | FLAG_ORDERED_DQ | FLAG_SEQ_KV | kernel_flag("sink")
    a = calls["backward"]
    assert (a["pO"], a["pdO"], a["pLSE"], a["pSink"]) == (o.data_ptr(), do.data_ptr(), lse.data_ptr(), sink.data_ptr())
    assert (a["pK"], a["pdV"], a["pSeqKV"], a["pSem"]) == (k.data_ptr(), dv.data_ptr(), seq_kv.data_ptr(),
                                                          ws["dq_sem"].data_ptr())
    assert (a["pdQ"], a["pDsink"], a["pdQacc"]) == (dq.data_ptr(), dsink.data_ptr(), ws["dq_accum"].data_ptr())
    assert (a["seqlen_q"], a["seqlen_q_pad"], a["flags"], a["stream"]) == (100, 128, flags, 7)
    assert (a["heads"], a["heads_kv"], a["seqlen_kv"], a["head_dim"]) == (4, 2, 140, 64)
    assert (a["o_sb"], a["o_sh"], a["o_ss"]) == o.stride()[:3] and a["lse_ss"] == 1
    assert (a["k_sb"], a["k_sh"], a["k_ss"]) == k.stride()[:3] and a["dq_ss"] == dq.stride(2)
    assert a["scale"] == 0.125 and a["scale_log2"] == pytest.approx(0.125 * LOG2_E)
    assert (a["band_left"], a["band_right"]) == (40, 0)


def test_the_chain_hands_each_kernel_its_declared_arguments():
    """BackwardChain's host entry, run in Python with recording kernels: each kernel gets, by name, the chain's
    value of every parameter it declares (the chain names them alike), and a kernel is skipped when its extent is
    empty (no query rows: no preprocess or convert; no keys: no main kernel)."""
    chain_params = _params(BackwardChain)
    values = {name: f"<{name}>" for name in chain_params}
    bounds = {"bounds": MaskBounds(values["band_left"], values["band_right"])}   # the chain's mask, as one value
    for seq_q, seq_kv, ran in ((100, 140, set(KERNELS)), (0, 140, {"main"}), (100, 0, {"preprocess", "dq_convert"})):
        calls = {}
        chain = BackwardChain(*(_recorder(n, calls, _params(cls)) for n, cls in KERNELS.items()))
        args = values | {"seqlen_q": seq_q, "seqlen_kv": seq_kv}
        BackwardChain.__call__.__wrapped__(chain, *(args[n] for n in chain_params))
        assert set(calls) == ran
        passed = args | bounds
        for name, got in calls.items():
            assert got == {p: passed[p] for p in _params(KERNELS[name])}, name
    # a dq_gemm set's dQ kernel runs after the main kernel whenever there are query rows (without keys it writes
    # the zeros)
    for seq_q, seq_kv, ran in ((100, 140, True), (0, 140, False), (100, 0, True)):
        calls = {}
        chain = BackwardChain(*(_recorder(n, calls, _params(cls)) for n, cls in KERNELS.items()), True,
                              _recorder("dq_gemm", calls, _params(DqGemmKernel)))
        args = values | {"seqlen_q": seq_q, "seqlen_kv": seq_kv, "flags": 0}
        BackwardChain.__call__.__wrapped__(chain, *(args[n] for n in chain_params))
        assert ("dq_gemm" in calls) == ran and "dq_convert" not in calls
        if ran:
            passed = args | bounds
            assert calls["dq_gemm"] == {p: passed[p] for p in _params(DqGemmKernel)}


def test_a_set_whose_main_kernel_writes_dq_converts_only_for_dsink():
    """The main kernel writes dQ in a set compiled for ordered dQ on a dq_direct tile (and only there); that set's
    convert kernel runs only for dsink, any other set's whenever there are query rows."""
    assert main_writes_dq(True, True) and not main_writes_dq(True, False) and not main_writes_dq(False, True)
    chain_params = _params(BackwardChain)
    values = {name: f"<{name}>" for name in chain_params} | {"seqlen_q": 100, "seqlen_kv": 140}
    for writes, flags, converts in ((False, 0, True), (False, FLAG_ORDERED_DQ | FLAG_SINK, True),
                                    (True, FLAG_ORDERED_DQ, False), (True, FLAG_ORDERED_DQ | FLAG_SINK, True)):
        calls = {}
        chain = BackwardChain(*(_recorder(n, calls, _params(cls)) for n, cls in KERNELS.items()),
                              main_writes_dq=writes)
        args = values | {"flags": flags}
        BackwardChain.__call__.__wrapped__(chain, *(args[n] for n in chain_params))
        assert ("dq_convert" in calls) == converts, (writes, flags)
        assert {"preprocess", "main"} <= set(calls)


@pytest.mark.parametrize("d, band, det, ordered", [
    (64, (128, 0), False, True), (64, (128, 128), False, True), (64, (256, 0), False, True),
    (64, (257, 0), False, False), (64, (None, 0), False, False), (64, (None, None), False, False),
    (64, (None, None), True, True), (128, (0, 0), False, True), (32, (128, 0), False, True),
    (32, (129, 0), False, False), (160, (128, 0), False, True), (160, (129, 0), False, False),
    (160, (100, 0), True, True), (160, (None, 0), True, False),
    (192, (64, 0), False, False), (256, (100, 28), False, True), (256, (100, 29), False, False),
    (80, (500, 12), False, True), (80, (513, 0), False, False)])
def test_narrow_bands_order_dq_in_the_default_mode(d, band, det, ordered):
    """dQ is added in KV-tile order (FLAG_ORDERED_DQ) in deterministic mode (but not on the dq_gemm sets: d160 on a
    wide band), and in the default mode for bands of L + R <= catalogue.ORDERED_BAND (d192's grid tile:
    never, it does not write dQ directly)."""
    calls = {}
    cfg, tensors, ws = _problem_tensors(d=d, band_left=band[0], band_right=band[1], deterministic=det)
    assert cfg.key.ordered == cfg.key.ordered == ordered
    Launch(_recording_kernels(calls), cfg, Problem(2, 4, 2, 100, 140, 0.125, cfg.mask(*band),
                                                   deterministic=det))(BackwardTensors(*tensors, ws), 3)
    assert bool(calls["backward"]["flags"] & FLAG_ORDERED_DQ) == ordered


def test_ordered_dq_has_a_kernel_set_of_its_own(monkeypatch):
    """Ordered and atomic dQ compile to different kernel sets (the key says which): CompiledBackward.bind serves a
    problem of the other kind through its twin set, fetched once."""
    from frost.kernels.backward import api

    atomic_cfg, tensors, ws = _problem_tensors()
    ordered_cfg, _, _ = _problem_tensors(deterministic=True)
    assert atomic_cfg.key.as_str() != ordered_cfg.key.as_str()
    assert ordered_cfg.key.as_str().endswith(":o1") and not atomic_cfg.key.ordered
    det = Problem(2, 4, 2, 100, 140, 0.125, deterministic=True)
    fetched, calls = [], {}
    monkeypatch.setattr(api, "get_kernels", lambda key: fetched.append(key) or _recording_kernels(calls))
    bwd = api.CompiledBackward(atomic_cfg, _recording_kernels({}))
    for _ in range(2):
        bwd.bind(det)(BackwardTensors(*tensors, ws), 3)
    assert fetched == [ordered_cfg.key] and calls["backward"]["flags"] & FLAG_ORDERED_DQ
    assert bwd.bind(Problem(2, 4, 2, 100, 140, 0.125)).backward is bwd.kernels.backward


def test_mha_problems_bind_to_the_mha_set_where_one_exists(monkeypatch):
    """Where catalogue.MHA_PTXAS has options for a set (d64, atomic dQ), a problem without GQA binds to its MHA twin
    (the shared set's tile with catalogue._MHA_CHANGES, compiled with them; fetched once); GQA problems, ordered dQ and
    other pads keep the shared set. An MHA set is correct for any problem: its key is that tile's plus ':mha', and
    no key claims one that MHA_PTXAS lacks."""
    from frost.kernels.backward import api
    from frost.kernels.backward.select import KernelKey, tile_key
    from frost.kernels.backward.catalogue import tile_for_set

    cfg, _, _ = _problem_tensors()
    mha_key = replace(cfg.key, mha=True)
    assert not cfg.key.mha and mha_key.tile == tile_for_set(cfg.key.tile, False, mha=True) != cfg.key.tile
    assert mha_key.as_str() == cfg.key.as_str().replace(tile_key(cfg.key.tile),
                                                               tile_key(mha_key.tile)) + ":mha"
    assert choose_config("bfloat16", 64, 64, True, "top_left", "sm_90a", gqa_group=1).key.mha
    assert not choose_config("bfloat16", 64, 64, True, "top_left", "sm_90a", gqa_group=1, deterministic=True).key.mha
    assert not choose_config("bfloat16", 128, 128, True, "top_left", "sm_90a", gqa_group=1).key.mha
    with pytest.raises(ValueError, match="MHA"):
        KernelKey("bfloat16", 128, "sm_90a", mha=True)
    fetched = []
    monkeypatch.setattr(api, "get_kernels", lambda key: fetched.append(key) or _recording_kernels({}))
    bwd = api.CompiledBackward(cfg, _recording_kernels({}))
    mha = Problem(2, 4, 4, 100, 140, 0.125)
    for _ in range(2):
        bwd.bind(mha)
    assert fetched == [replace(cfg.key, mha=True)]
    assert bwd.bind(Problem(2, 4, 2, 100, 140, 0.125)).backward is bwd.kernels.backward
    bwd.bind(Problem(2, 4, 4, 100, 140, 0.125, deterministic=True))
    assert fetched[1:] == [replace(cfg.key, ordered=True)]


@pytest.mark.parametrize("d,band,det,narrow", [
    (64, (128, 0), False, True), (64, (128, 0), True, True), (64, (100, 156), False, True),
    (64, (257, 0), False, False), (64, (None, 0), True, False), (96, (128, 0), False, True),
    (96, (129, 0), True, False), (128, (128, 128), True, True), (128, (None, 0), False, False),
    (32, (128, 0), False, True), (32, (129, 0), False, False), (48, (100, 28), True, True),
    (80, (512, 0), False, True), (80, (513, 0), False, False), (160, (128, 0), False, False)])
def test_narrow_bands_run_on_a_narrow_band_set_where_one_exists(d, band, det, narrow):
    """An ordered narrow band (the bands the default mode orders) runs, in either mode, on the narrow-band set where
    its pad has one (catalogue._NARROW_CHANGES: its tile is the ordered set's with those changes, its key the ordered
    one's kind plus ':nb'); wide bands, atomic problems and the other pads never do. The Launch passes it the
    ordered flag."""
    from frost.kernels.backward.catalogue import _NARROW_CHANGES, tile_for_pads, tile_for_set

    calls = {}
    cfg, tensors, ws = _problem_tensors(d=d, band_left=band[0], band_right=band[1], deterministic=det)
    assert cfg.key.narrow == narrow and cfg.key.as_str().endswith(":nb") == narrow and cfg.key.ordered >= narrow
    if narrow:
        ordered_tile = tile_for_set(tile_for_pads(d), True)
        assert cfg.key.tile == replace(ordered_tile, **_NARROW_CHANGES[d]) != ordered_tile
    Launch(_recording_kernels(calls), cfg, Problem(2, 4, 2, 100, 140, 0.125, cfg.mask(*band),
                                                   deterministic=det))(BackwardTensors(*tensors, ws), 3)
    assert bool(calls["backward"]["flags"] & FLAG_ORDERED_DQ) == cfg.key.ordered


def test_the_narrow_band_set_is_a_twin_of_the_ordered_set(monkeypatch):
    """A narrow-band key needs ordered dQ and a pad with such a set, and carries its ptxas options
    (catalogue.NARROW_PTXAS); CompiledBackward.bind serves narrow and wide deterministic problems through each
    other's twin, fetched once."""
    from frost.kernels.backward import api
    from frost.kernels.backward.catalogue import NARROW_PTXAS
    from frost.kernels.backward.select import KernelKey

    for d, bad in ((64, {}), (160, {"ordered": True}), (64, {"ordered": True, "mha": True})):
        with pytest.raises(ValueError, match="narrow-band"):
            KernelKey("bfloat16", d, "sm_90a", narrow=True, **bad)
    assert KernelKey("bfloat16", 64, "sm_90a", ordered=True, narrow=True).ptxas_options == NARROW_PTXAS[64]
    assert KernelKey("bfloat16", 64, "sm_90a", ordered=True).ptxas_options is None
    wide_cfg, tensors, ws = _problem_tensors(deterministic=True)
    narrow_cfg, _, _ = _problem_tensors(band_left=128, deterministic=True)
    narrow, wide = (Problem(2, 4, 2, 100, 140, 0.125, narrow_cfg.mask(b), deterministic=True) for b in (128, None))
    fetched = []
    monkeypatch.setattr(api, "get_kernels", lambda key: fetched.append(key) or _recording_kernels({}))
    bwd = api.CompiledBackward(wide_cfg, _recording_kernels({}))
    for _ in range(2):
        bwd.bind(narrow)
    assert fetched == [narrow_cfg.key] and bwd.bind(wide).backward is bwd.kernels.backward
    assert api.CompiledBackward(narrow_cfg, _recording_kernels({})).bind(wide) and fetched[1:] == [wide_cfg.key]


def test_deterministic_mode_runs_on_the_dq_gemm_set_where_its_workspace_fits(monkeypatch):
    """Deterministic mode at d96/d128 and d160 and above outside the narrow bands takes the dq_gemm set (dQ by a
    GEMM over a stored dS^T: no ordered relay), whose workspace holds dS^T in its dq_accum region (d160/d192/d256:
    the default mode too); a problem whose dS^T would pass ds_workspace.DQ_GEMM_MAX_BYTES runs on the relay instead, a
    default-mode one on the atomic set (twins, fetched once)."""
    from frost.kernels.backward import api, ds_workspace
    from frost.kernels.backward.select import KernelKey

    cfg, tensors, ws = _problem_tensors(d=128, deterministic=True)
    assert cfg.key.dq_gemm and not cfg.key.ordered and cfg.key.as_str().endswith(":o0:dqg")
    assert dict(workspace_regions(cfg, 2, 4, 100, 140))["dq_accum"] == 2 * 4 * 256 * 128 * 2  # keys pad to 128
    for d, band, gemm in ((96, None, True), (128, 257, True), (128, 256, False), (96, 128, False), (64, None, False),
                          (192, None, True), (256, 129, True), (256, 128, False), (160, None, True),
                          (160, 128, False), (224, None, True), (224, 129, True), (224, 64, False),
                          (80, None, False)):
        c = choose_config("bfloat16", d, d, True, "top_left", "sm_90a", band_left=band, deterministic=True)
        assert c.key.dq_gemm == gemm and c.key.ordered == (not gemm), (d, band)
    # the pads of 64-key tiles take it in the default mode too (catalogue.DQ_GEMM_DEFAULT_PADS; head dims 200-224
    # pad to 256)
    for d, dv, band, gemm in ((128, 128, None, False), (192, 192, None, True), (192, 128, None, True),
                              (256, 256, None, True), (256, 256, 128, False), (160, 160, None, True),
                              (160, 160, 128, False), (224, 224, None, True), (200, 200, 128, False)):
        c = choose_config("bfloat16", d, dv, True, "top_left", "sm_90a", band_left=band)
        assert c.key.dq_gemm == gemm and not c.key.ordered == (gemm or band is None), (d, dv, band)
    for d, bad in ((128, {"ordered": True}), (64, {"mha": True}), (64, {})):
        with pytest.raises(ValueError, match="dq_gemm"):
            KernelKey("bfloat16", d, "sm_90a", dq_gemm=True, **bad)
    calls, fetched = {}, []
    det = Problem(2, 4, 2, 100, 140, 0.125, deterministic=True)
    Launch(_recording_kernels(calls), cfg, det)(BackwardTensors(*tensors, ws), 3)
    assert not calls["backward"]["flags"] & FLAG_ORDERED_DQ
    monkeypatch.setattr(api, "get_kernels", lambda key: fetched.append(key) or _recording_kernels({}))
    bwd = api.CompiledBackward(cfg, _recording_kernels({}))
    assert bwd.bind(det).backward is bwd.kernels.backward and not fetched
    for _ in range(2):
        bwd.bind(Problem(2, 4, 2, 100, 140, 0.125))
    assert fetched == [replace(cfg.key, dq_gemm=False)]
    monkeypatch.setattr(ds_workspace, "DQ_GEMM_MAX_BYTES", 2 * 4 * 256 * 128 * 2 - 1)
    assert dict(workspace_regions(cfg, 2, 4, 100, 140))["dq_accum"] == 2 * 4 * 128 * 128 * 4  # the fp32 rows
    bwd.bind(det)
    assert fetched[1:] == [replace(cfg.key, dq_gemm=False, ordered=True)]


def test_absent_inputs_get_a_stand_in_and_no_flag():
    calls = {}
    cfg, tensors, ws = _problem_tensors()
    problem = Problem(2, 4, 2, 100, 140, 0.125, cfg.mask())
    Launch(_recording_kernels(calls), cfg, problem)(BackwardTensors(*tensors, ws), 3)
    a = calls["backward"]
    assert a["pSeqQ"] == a["pSeqKV"] == a["pSink"] == a["pDsink"] == a["pDlse"] == ws["delta"].data_ptr()
    assert a["flags"] == FLAG_BOTTOM_RIGHT and a["band_left"] == NO_BOUND


def test_dlse_travels_with_its_strides_and_flag():
    calls = {}
    cfg, tensors, ws = _problem_tensors()
    dlse = torch.zeros(2, 4, 200)[..., ::2]          # a strided (B, Hq, Sq) view
    Launch(_recording_kernels(calls), cfg, Problem(2, 4, 2, 100, 140, 0.125, cfg.mask(), optional=frozenset({"dlse"})))(
        BackwardTensors(*tensors, ws, {"dlse": dlse}), 3)
    a = calls["backward"]
    assert a["pDlse"] == dlse.data_ptr() and (a["dlse_sb"], a["dlse_sh"], a["dlse_ss"]) == (800, 200, 2)
    assert a["flags"] == FLAG_BOTTOM_RIGHT | kernel_flag("dlse")


def test_empty_problems_zero_dsink():
    """No query rows: the chain writes no dsink, so the Launch zeroes it (and still launches: dK/dV are zeros to
    write); no batch or heads: nothing launches."""
    cfg, tensors, ws = _problem_tensors(sq=0)
    for batch, launched in ((2, True), (0, False)):
        calls = {}
        dsink = torch.full((4,), float("nan"))
        Launch(_recording_kernels(calls), cfg, Problem(batch, 4, 2, 0, 140, 0.125,
                                                               optional=frozenset({"sink", "dsink"})))(
            BackwardTensors(*tensors, ws, {"sink": torch.zeros(4), "dsink": dsink}), 3)
        assert bool(calls) == launched and bool((dsink == 0).all())


def test_with_config_shares_kernels_only_within_a_compile_key():
    from frost.kernels.backward.api import CompiledBackward

    kernels = object()   # stands in for a compiled set: nothing here launches
    causal = choose_config("bfloat16", 64, 64, True, "top_left", "sm_90a")
    bwd = CompiledBackward(causal, kernels)
    same_key = choose_config("bfloat16", 56, 48, False, "bottom_right", "sm_90a")
    bound = bwd.with_config(same_key)
    assert bound.cfg == same_key and bound.kernels is kernels and bwd.cfg == causal
    assert bound.selected and not bwd.selected   # a plan's config: bind launches its key as given
    with pytest.raises(ValueError, match="compile key"):
        bwd.with_config(choose_config("bfloat16", 128, 128, True, "top_left", "sm_90a"))


@pytest.mark.parametrize("d, limit", [(256, 8_388_480), (128, 16_777_088), (64, 33_554_304)])
def test_bind_refuses_sequences_past_the_accumulator_offsets(d, limit, monkeypatch):
    """One head's fp32 dQ accumulator holds seq_q (rounded up to 128) x padded head dim (acc_cols) elements with
    32-bit offsets: the bind refuses longer query sequences with a TensorError naming the tensor and the limit,
    at the same limit the probe declines with (seq_len_max)."""
    from frost.analyzer.capability import ACC_COL_PADS, ACC_ROW_PAD, CUTE_SM120, acc_cols, max_seq_q
    from frost.errors import TensorError
    from frost.kernels.backward import rowwise
    from frost.kernels.backward.api import CompiledBackward
    from frost.kernels.backward.catalogue import HEAD_DIM_PADS, tile_for

    assert ACC_ROW_PAD == rowwise.SEQ_PAD and ACC_COL_PADS == HEAD_DIM_PADS
    assert all(tile_for(h, h).head_dim_pad == acc_cols(h) for h in range(8, 257, 8))
    assert max_seq_q(CUTE_SM120, d) == limit and (limit + ACC_ROW_PAD) * d > (1 << 31) - 1 >= limit * d
    from frost.kernels.backward import api

    bwd = CompiledBackward(choose_config("bfloat16", d, d, True, "top_left", "sm_90a"), _recording_kernels({}))
    # (a twin set -- d256's problem past the dS workspace's limit runs on the atomic set -- is not compiled)
    monkeypatch.setattr(api, "get_kernels", lambda key: _recording_kernels({}))
    # (two query heads per kv head: an MHA problem at d64 would fetch the MHA set)
    bwd.bind(Problem(1, 2, 1, limit, 64, 1.0))   # the limit itself binds
    with pytest.raises(TensorError, match=rf"q\.shape\[2\].*{limit + 1}.*at most {limit}"):
        bwd.bind(Problem(1, 2, 1, limit + 1, 64, 1.0))
    with pytest.raises(TensorError, match=r"k\.shape\[2\]"):
        bwd.bind(Problem(1, 2, 1, 64, (1 << 28) + 1, 1.0))


def test_checked_call_names_the_bad_tensor():
    """CompiledBackward.__call__ checks every tensor before any launch and raises a TensorError (a ValueError)
    naming the tensor, what it got and what it accepts; on a CPU-only machine correct tensors stop at q.device."""
    from frost.errors import TensorError
    from frost.kernels.backward.api import CompiledBackward

    cfg, (q, k, v, o, do, lse, dq, dk, dv), ws = _problem_tensors()
    bwd = CompiledBackward(cfg, _recording_kernels({}))

    def call(**swap):
        t = dict(q=q, k=k, v=v, o=o, do=do, lse=lse, dq=dq, dk=dk, dv=dv) | swap
        bwd(t["q"], t["k"], t["v"], t["o"], t["do"], t["lse"], t["dq"], t["dk"], t["dv"], scale=0.125, workspace=ws)

    with pytest.raises(TensorError, match=r"v\.shape: got \(2, 2, 140, 32\)"):
        call(v=randn_bhsd((2, 2, 140, 32), torch.bfloat16, layout="bshd"))
    with pytest.raises(TensorError, match=r"do\.dtype: got torch\.float16"):
        call(do=randn_bhsd((2, 4, 100, 64), torch.float16, layout="bshd"))
    with pytest.raises(TensorError, match=r"dk\.stride"):
        call(dk=torch.zeros(2, 2, 140, 68, dtype=torch.bfloat16)[..., :64])   # rows pitched to 136 bytes
    from frost.limits import SEQ_STRIDE_LIMIT
    from frost.kernels.backward.checks import MAX_SEQ_STRIDE

    assert MAX_SEQ_STRIDE == SEQ_STRIDE_LIMIT == 1 << 24  # the probe declines (seq_stride_max) what the call refuses
    with pytest.raises(TensorError, match=r"q\.stride: got \(0, 64, 16777216, 1\); accepted: a sequence stride"):
        # (a meta tensor: no storage behind the 2**24-element row pitch)
        call(q=torch.empty_strided((2, 4, 100, 64), (0, 64, 1 << 24, 1), dtype=torch.bfloat16, device="meta"))
    with pytest.raises(TensorError, match=r"lse: got 'torch\.float16 \(2, 4, 100\)"):
        call(lse=torch.zeros(2, 4, 100, dtype=torch.float16))
    with pytest.raises(TensorError, match=r"q\.device: got 'cpu'; accepted: a CUDA device"):
        call()


def test_checked_entry_keeps_a_bound_launch_per_problem(monkeypatch):
    """CompiledBackward.__call__ binds a problem once (so its repeated calls can replay a CUDA graph), keeps at
    most MAX_BOUND_LAUNCHES of them (the oldest goes), and launches with the tensors of each call."""
    from frost.kernels.backward import api

    calls = {}
    cfg, (q, k, v, o, do, lse, dq, dk, dv), ws = _problem_tensors()
    bwd = api.CompiledBackward(cfg, _recording_kernels(calls))
    monkeypatch.setattr(api, "check_io", lambda cfg, t: (2, 4, 2, 100, 140, 0, 0))  # CPU tensors
    binds = []
    real_bind = api.CompiledBackward.bind
    monkeypatch.setattr(api.CompiledBackward, "bind", lambda self, p: binds.append(p) or real_bind(self, p))
    for scale in (0.125, 0.125, 0.25, 0.125):
        bwd(q, k, v, o, do, lse, dq, dk, dv, scale=scale, workspace=ws, stream=5)
        assert calls["backward"]["scale"] == scale and calls["backward"]["pQ"] == q.data_ptr()
    assert [p.scale for p in binds] == [0.125, 0.25]
    for i in range(api.MAX_BOUND_LAUNCHES):
        bwd(q, k, v, o, do, lse, dq, dk, dv, scale=1.0 + i, workspace=ws, stream=5)
    assert len(bwd._launches) == api.MAX_BOUND_LAUNCHES and 0.125 not in {p.scale for p in bwd._launches}


def test_dq_gemm_workspace_limit_from_the_environment(monkeypatch):
    """FROST_DQ_GEMM_MAX_BYTES caps the dS workspace (0: never use it); anything but a byte count is refused,
    naming the variable, the value and what is accepted."""
    from frost.kernels.backward import ds_workspace

    read = ds_workspace._max_bytes_from_env
    monkeypatch.delenv("FROST_DQ_GEMM_MAX_BYTES", raising=False)
    assert read() == 2 ** 31
    monkeypatch.setenv("FROST_DQ_GEMM_MAX_BYTES", "0")
    assert read() == 0
    for bad in ("abc", "-5", "1.5e9"):
        monkeypatch.setenv("FROST_DQ_GEMM_MAX_BYTES", bad)
        with pytest.raises(SettingError, match=rf"FROST_DQ_GEMM_MAX_BYTES: got '{bad}'.*whole number >= 0"):
            read()


def test_a_packed_launch_passes_the_segments_and_the_same_arguments_in_either_order():
    """A packed set's launch: batch stride 0, the prefix sums' pointers, the token counts and the dQ accumulator's
    rows per head (limits.packed_acc_rows); (T, H, D) tensors with seq_major give exactly the arguments of their
    logical (H, T, D) views."""
    from frost.kernels.packed import Packed
    from frost.limits import packed_acc_rows

    cfg = choose_config("bfloat16", 64, 64, True, "top_left", "sm_90a", varlen=True)
    assert cfg.key.varlen and not cfg.key.dq_gemm
    tq, tkv, hq, hkv = 300, 310, 4, 2
    thd = [torch.zeros(t, h, 64, dtype=torch.bfloat16) for t, h in ((tq, hq), (tkv, hkv), (tkv, hkv), (tq, hq),
                                                                    (tq, hq), (tq, hq), (tkv, hkv), (tkv, hkv))]
    q, k, v, o, do, dq, dk, dv = thd
    lse = torch.zeros(tq, hq).t()   # token-major in memory
    cu_q, cu_kv = torch.tensor([0, 100, 300], dtype=torch.int32), torch.tensor([0, 10, 310], dtype=torch.int32)
    ws = {n: torch.zeros(max(nb, 16), dtype=torch.uint8)
          for n, nb in workspace_regions(cfg, 2, hq, 200, 300, tokens_q=tq)}
    problem = Problem(2, hq, hkv, 200, 300, 0.125, tokens_q=tq, tokens_kv=tkv)
    runs = []
    for seq_major in (False, True):
        calls = {}
        tensors = thd if seq_major else [t.transpose(0, 1) for t in thd]
        Launch(_recording_kernels(calls), cfg, problem, graph_replay=False)(
            BackwardTensors(*tensors[:5], lse, *tensors[5:], ws, packed=Packed(cu_q, cu_kv, 200, 300)), 7,
            seq_major=seq_major)
        runs.append(calls["backward"])
    logical, seq_major = runs
    assert logical == seq_major
    a = logical
    assert (a["pCuQ"], a["pCuKV"]) == (cu_q.data_ptr(), cu_kv.data_ptr())
    assert (a["batch"], a["seqlen_q"], a["seqlen_kv"], a["tokens_q"], a["tokens_kv"]) == (2, 200, 300, tq, tkv)
    assert a["acc_rows"] == packed_acc_rows(tq, 2) and a["seqlen_q_pad"] == 256
    assert (a["q_sb"], a["q_sh"], a["q_ss"]) == (0, 64, hq * 64) and (a["k_sb"], a["k_sh"], a["k_ss"]) == (0, 64, 128)
    assert (a["lse_sb"], a["lse_sh"], a["lse_ss"]) == (0, 1, hq)
    assert ws["dq_accum"].numel() == hq * packed_acc_rows(tq, 2) * 64 * 4
