"""Host-side contract of the SM120-class backward kernels (others code against these names).

    cfg = choose_config("bfloat16", 128, 128, causal=True, alignment="bottom_right", arch=detect_arch())
    ws = {name: torch.empty(n, dtype=torch.uint8, device="cuda")
          for name, n in workspace_regions(cfg, B, Hq, Sq, Skv, heads_kv=Hkv)}
    bwd = compile_backward(cfg)
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=1 / math.sqrt(128), workspace=ws,
        seq_len_q=None, seq_len_kv=None, band_left=None, band_right=None, sink=None, dsink=None,
        deterministic=False)

Tensors are logical BHSD (often transposed views of BSHD memory) with the head dim contiguous; every other stride
a multiple of 8 elements (Q's and dO's sequence stride below MAX_SEQ_STRIDE) and every base 16-byte aligned. K/V
(and dK/dV) have Hkv heads, Hq a multiple of Hkv (GQA/MQA: query head h reads kv head h // (Hq / Hkv); dK/dV are
summed over the group in fp32 in head order, in registers -- no partials). Optional runtime features (none
changes the compiled code, except that ordered dQ runs on a kernel set of its own, see ``deterministic``):

- ``seq_len_q`` / ``seq_len_kv``: int32 (B,) device tensors of per-batch lengths (values in [0, Sq] / [0, Skv];
  checked only with ``check_lengths=True``, which synchronizes); padded rows of dQ/dK/dV come out exact zeros.
- ``band_left`` / ``band_right``: band around the diagonal (None = unbounded; causal in the config means
  band_right defaults to 0); the config's alignment anchors the diagonal (bottom-right: j = i + skv_b - sq_b).
- ``sink`` fp32 (Hq,) with ``dsink`` fp32 (Hq,) output: dsink_h = -sum exp(sink_h - LSE) * delta over valid rows.
- ``dlse`` fp32 (B, Hq, Sq), any strides: the gradient on the forward's LSE output; delta becomes
  rowsum(dO o O) - dlse (valid rows only).
- ``deterministic=True``: dQ contributions are added in KV-tile order (bitwise-reproducible dQ; dK, dV and
  dsink are deterministic in every mode). Narrow bands (L + R up to launch.ORDERED_BAND for the head dim, e.g. a
  128-token window) are ordered in the default mode too, where that measured faster (launch.orders_dq).
  Ordered dQ runs on a kernel set of its own (KernelConfig.ordered, chosen by choose_config from the band and
  the mode), and those narrow bands at the pads up to d128 on another (KernelConfig.narrow: the GQA walk with heads
  outer, tiles._NARROW_CHANGES); a CompiledBackward called with a problem of another kind compiles that twin set
  on first use.
  Deterministic mode at d96/d128 outside those narrow bands runs instead on a set whose main kernel stores dS
  and whose own GEMM kernel then sums dQ per query tile in KV-tile order (KernelConfig.dq_gemm, dq_gemm.py:
  1.04-1.08x the default mode against the ordered adds' 1.12-1.15x), when the config was chosen for
  deterministic mode (workspace_regions sizes its dS workspace) and that workspace is at most
  dq_gemm.DQ_GEMM_MAX_BYTES; otherwise it orders the adds. At d160/d192/d256 (head dims 200-224 pad to 256)
  both modes run that set (it is deterministic, and faster than their 64-key tiles' fp32 dQ adds: 0.82-0.83x
  the time at d160, 0.86-0.92x at d192/d256), a problem too large for the workspace the atomic set (default
  mode) or the relay.

Problems without GQA (Hq == Hkv) run on a set compiled with other ptxas options where that measured faster for
them only (compile.MHA_PTXAS: d64's atomic set; KernelConfig.mha, from choose_config's ``gqa_group``); the same
code, so any set serves any problem, and a CompiledBackward fetches the one a problem should get on first use.

A call allocates nothing and never synchronizes (one call into the compiled host entry enqueues the three kernels
on the stream, plus a dsink zero-fill when Sq = 0), so it can be captured in a CUDA graph. A call checks its
tensors, then runs a launch.Launch; callers that check the tensors themselves (the engine, whose executor checks
them against the plan) bind a Launch once with ``bwd.bind(...)`` and call it directly, which costs a few
microseconds of host time."""

from __future__ import annotations

from dataclasses import dataclass, replace

from frost.kernels.backward import rowwise
from frost.kernels.arch import arch_config
from frost.kernels.backward.compile import DTYPES, KernelKey, get_kernels, has_mha_set
from frost.errors import TensorError
from frost.kernels.backward.dq_gemm import dq_gemm_fits, ds_workspace_bytes
from frost.kernels.backward.launch import (Launch, Problem, narrow_band_set, orders_dq, problem_mask, problem_orders_dq,
                                  takes_dq_gemm, wants_dq_gemm)
from frost.analyzer.capability import CUTE_SM120, max_seq_q
from frost.analyzer.extract import SEQ_STRIDE_LIMIT
from frost.kernels.mask import MaskSpec
from frost.kernels.backward.preprocess import SEM_ROWS
from frost.kernels.backward.rowwise import seq_pad
from frost.kernels.backward.tiles import TileConfig, pad_head_dim, tile_for


@dataclass(frozen=True)
class KernelConfig:
    dtype: str                 # "float16" | "bfloat16"
    head_dim_qk: int           # logical (multiple of 8, <= 256)
    head_dim_v: int            # <= head_dim_qk
    causal: bool
    alignment: str             # "top_left" | "bottom_right" (anchors causal and band bounds)
    arch: str                  # "sm_120a" | "sm_121a" | "sm_90a"
    head_dim_pad: int          # Q/K padded to this in shared memory (filled by choose_config)
    tile: TileConfig           # main-kernel tile config (filled by choose_config; its dv_pad is V's width; the
    #                            ordered set and some targets compile tiles.tile_for_target of it: kernel_key.tile)
    ordered: bool = False      # dQ added in KV-tile order (launch.orders_dq; filled by choose_config)
    mha: bool = False          # the set tuned for problems without GQA (compile.MHA_PTXAS; filled by choose_config)
    # the set with dQ by a GEMM of its own over a stored dS (dq_gemm.py; filled by choose_config: launch.wants_dq_gemm;
    # workspace_regions sizes the dS workspace for it where dq_gemm_fits)
    dq_gemm: bool = False
    # the ordered set for narrow bands (launch.narrow_band_set; filled by choose_config)
    narrow: bool = False

    @property
    def kernel_key(self) -> KernelKey:
        return KernelKey(self.dtype, self.head_dim_pad, self.arch, self.tile.head_dim_v_pad, self.ordered, self.mha,
                         self.dq_gemm, self.narrow)

    def with_set(self, ordered: bool, without_gqa: bool, dq_gemm: bool = False,
                 narrow_band: bool = False) -> "KernelConfig":
        """This config on the kernel set of that dQ order (ordered relay, atomic adds, or ``dq_gemm``), on its
        MHA twin where problems without GQA have one (compile.has_mha_set), and, ordered, on the narrow-band set
        where ``narrow_band`` (launch.narrow_band_set: a narrow band at a pad that has that set); the runtime values
        stay."""
        mha = without_gqa and not dq_gemm and has_mha_set(self.head_dim_pad, self.tile.head_dim_v_pad, ordered)
        narrow = ordered and narrow_band
        if (ordered, mha, dq_gemm, narrow) == (self.ordered, self.mha, self.dq_gemm, self.narrow):
            return self
        return replace(self, ordered=ordered, mha=mha, dq_gemm=dq_gemm, narrow=narrow)

    def for_problem(self, p: Problem) -> "KernelConfig":
        """This config on the kernel set the problem gets (with_set): a dq_gemm config keeps the deterministic
        problems whose workspace it sized (takes_dq_gemm), the others go to the relay (narrow bands to its
        narrow-band set) or the atomic set."""
        ordered = problem_orders_dq(self, p)
        gemm = self.dq_gemm and takes_dq_gemm(self, p)
        return self.with_set(ordered and not gemm, p.heads == p.heads_kv, gemm,
                             narrow_band_set(self.tile, problem_mask(self, p)))

    @property
    def mask(self) -> MaskSpec:
        return MaskSpec(self.causal, self.alignment)


def choose_config(dtype: str, head_dim_qk: int, head_dim_v: int, causal: bool, alignment: str, arch: str, *,
                  band_left: int | None = None, band_right: int | None = None,
                  deterministic: bool = False, gqa_group: int | None = None) -> KernelConfig:
    """The config of a problem. The band and the mode pick whether dQ is ordered (its own kernel set), the GQA
    group (Hq / Hkv; None: not known yet) whether the set tuned for MHA serves it; a CompiledBackward still serves
    the other kinds of problem, through its twin sets."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not in {DTYPES}")
    arch_config(arch)
    tile = tile_for(head_dim_qk, head_dim_v)
    mask = MaskSpec(bool(causal), alignment, band_left, band_right)
    ordered = orders_dq(tile, mask, deterministic)
    gemm = wants_dq_gemm(tile, mask, deterministic)
    cfg = KernelConfig(dtype, head_dim_qk, head_dim_v, bool(causal), alignment, arch, pad_head_dim(head_dim_qk), tile)
    return cfg.with_set(ordered and not gemm, gqa_group == 1, gemm, narrow_band_set(tile, mask))


def compile_key(cfg: KernelConfig) -> str:
    """Stable string of what the generated code depends on. Configs that differ only in runtime values
    (logical head dims padding alike, causal or not, alignment; and per call: GQA group, lengths, band, sink)
    share a key and one compiled kernel set; ordered dQ (deterministic mode, narrow bands) has a set of its own."""
    return cfg.kernel_key.as_str()


def workspace_regions(cfg: KernelConfig, batch: int, heads_q: int, seq_q: int, seq_kv: int,
                      heads_kv: int | None = None) -> list[tuple[str, int]]:
    """(name, nbytes) of the caller-owned workspace: fp32 dQ accumulator and per-row LSE*log2(e) and delta
    (rows padded to a multiple of 128), the deterministic-mode dQ-order semaphores (one int32 per 16 rows) and the
    dsink partials (one fp32 per 128 rows). Each region must start 16-byte aligned. No region depends on heads_kv
    (GQA sums dK/dV in registers) or on the features used, so one workspace serves every call of a shape; a
    dq_gemm config's dq_accum region holds the dS workspace instead (dq_gemm.ds_workspace_bytes: B x Hq x Skv x Sq
    x 2 bytes) where that fits dq_gemm.DQ_GEMM_MAX_BYTES (the problems that do not fit run on the ordered or atomic
    set, which need the plain region)."""
    del heads_kv
    rows = batch * heads_q * seq_pad(seq_q)
    acc = rows * cfg.head_dim_pad * 4
    if cfg.dq_gemm and dq_gemm_fits(batch, heads_q, seq_q, seq_kv):  # the region holds dS instead
        acc = max(acc, ds_workspace_bytes(batch, heads_q, seq_q, seq_kv))
    return [("dq_accum", acc), ("lse_log2", rows * 4), ("delta", rows * 4),
            ("dq_sem", round_up16(rows // SEM_ROWS * 4)),
            ("dsink_part", round_up16(rows // rowwise.ROWS_PER_CTA * 4))]


def round_up16(n: int) -> int:
    """Workspace regions are sized in 16-byte multiples (vector and cp.async alignment)."""
    return -(-n // 16) * 16


MAX_SEQ_STRIDE = SEQ_STRIDE_LIMIT  # elements: a query tile's rows (up to 128) are addressed with 32-bit offsets
MAX_BOUND_LAUNCHES = 32  # problems (sizes, scale, band, features) a CompiledBackward keeps a bound Launch for


def compile_backward(cfg: KernelConfig) -> "CompiledBackward":
    """Compiles (or fetches from the in-process cache) preprocess + main + dq convert for cfg.arch."""
    return CompiledBackward(cfg)


class CompiledBackward:
    def __init__(self, cfg: KernelConfig, kernels=None):
        """``kernels``: an already compiled or loaded set for ``cfg.kernel_key`` (disk cache, tuning runs);
        by default the in-process cache compiles or returns it."""
        self.cfg = cfg
        self.kernels = get_kernels(cfg.kernel_key) if kernels is None else kernels
        self._launches: dict[Problem, Launch] = {}   # __call__'s bound launches, so repeated calls replay graphs
        # (ordered, mha, dq_gemm, narrow) -> the set of problems of another kind (KernelConfig.for_problem)
        self._twins: dict = {}

    def with_config(self, cfg: KernelConfig) -> "CompiledBackward":
        """The same compiled kernels launched with another config's runtime values (mask kind, logical head
        dims); the configs must share a compile key."""
        if cfg == self.cfg:
            return self
        if compile_key(cfg) != compile_key(self.cfg):
            raise ValueError(f"config {compile_key(cfg)} does not share the compile key {compile_key(self.cfg)}")
        return CompiledBackward(cfg, self.kernels)

    def __call__(self, q, k, v, o, do, lse, dq, dk, dv, *, scale: float, workspace: dict, stream=None,
                 seq_len_q=None, seq_len_kv=None, band_left: int | None = None, band_right: int | None = None,
                 sink=None, dsink=None, deterministic: bool = False, check_lengths: bool = False,
                 dlse=None) -> None:
        batch, heads, heads_kv, seq_q, seq_kv = self._check(q, k, v, o, do, lse, dq, dk, dv, workspace)
        _check_side_inputs(q, batch, heads, seq_len_q, seq_len_kv, sink, dsink, dlse)
        if check_lengths:
            check_length_values(seq_len_q, seq_len_kv, seq_q, seq_kv)
        problem = Problem(batch, heads, heads_kv, seq_q, seq_kv, scale, band_left, band_right, deterministic,
                          seq_len_q is not None, seq_len_kv is not None, sink is not None, dlse is not None)
        launch = self._launches.get(problem)
        if launch is None:
            if len(self._launches) >= MAX_BOUND_LAUNCHES:
                self._launches.pop(next(iter(self._launches)))   # the oldest
            launch = self._launches[problem] = self.bind(problem)
        launch(q, k, v, o, do, lse, dq, dk, dv, workspace, stream, seq_len_q, seq_len_kv, sink, dsink, dlse)

    def bind(self, problem: Problem) -> Launch:
        """The fast entry: a Launch for one problem, for callers that check the tensors themselves. The checks
        that depend only on the problem (GQA group, sequence limit, mask bounds) happen here, once."""
        p = problem
        if p.heads_kv == 0 and p.heads or p.heads_kv and p.heads % p.heads_kv:
            raise TensorError("k.shape[1]", p.heads_kv, f"a divisor of the query heads {p.heads} (GQA/MQA)")
        limit_q = max_seq_q(CUTE_SM120, self.cfg.head_dim_qk)
        if p.seq_q > limit_q:
            raise TensorError("q.shape[2] (seq_q)", p.seq_q, f"at most {limit_q} at head dim {self.cfg.head_dim_qk} "
                              "(32-bit offsets into one head's fp32 dQ accumulator)")
        if p.seq_kv > CUTE_SM120.max_seq:
            raise TensorError("k.shape[2] (seq_kv)", p.seq_kv, f"at most {CUTE_SM120.max_seq}")
        cfg = self.cfg.for_problem(p)
        if cfg is not self.cfg:
            kind = (cfg.ordered, cfg.mha, cfg.dq_gemm, cfg.narrow)
            twin = self._twins.get(kind)
            if twin is None:
                twin = self._twins[kind] = CompiledBackward(cfg)
            return twin.bind(p)
        return Launch(self.kernels, cfg, p)

    def _check(self, q, k, v, o, do, lse, dq, dk, dv, workspace):
        import torch

        cfg = self.cfg
        batch, heads, seq_q, dqk = q.shape
        heads_kv, seq_kv = k.shape[1], k.shape[2]
        want = {"q": (q, (batch, heads, seq_q, dqk)), "k": (k, (batch, heads_kv, seq_kv, dqk)),
                "v": (v, (batch, heads_kv, seq_kv, cfg.head_dim_v)), "o": (o, (batch, heads, seq_q, cfg.head_dim_v)),
                "do": (do, (batch, heads, seq_q, cfg.head_dim_v)), "dq": (dq, tuple(q.shape)),
                "dk": (dk, tuple(k.shape)), "dv": (dv, tuple(v.shape))}
        tdtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[cfg.dtype]
        if dqk != cfg.head_dim_qk:
            raise TensorError("q.shape[3]", dqk, f"{cfg.head_dim_qk} (this kernel set's head_dim_qk)")
        for name, (t, shape) in want.items():
            if tuple(t.shape) != shape:
                raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
            if t.dtype != tdtype:
                raise TensorError(f"{name}.dtype", t.dtype, f"{tdtype}")
            if t.device != q.device:
                raise TensorError(f"{name}.device", str(t.device), f"{q.device} (the device of q)")
            if t.numel() and (t.stride(3) != 1 or any(s % 8 for s in t.stride()[:3]) or t.data_ptr() % 16):
                raise TensorError(f"{name}.stride", t.stride(), "stride 1 on the head dim, the other strides "
                                  "multiples of 8 elements, and a 16-byte aligned base address")
            if name in ("q", "do") and t.stride(2) >= MAX_SEQ_STRIDE:
                raise TensorError(f"{name}.stride", t.stride(), f"a sequence stride (dim 2) below {MAX_SEQ_STRIDE} "
                                  "elements (the kernels address a query tile's rows in 32 bits)")
        if tuple(lse.shape) != (batch, heads, seq_q) or lse.dtype != torch.float32 or lse.device != q.device:
            raise TensorError("lse", f"{lse.dtype} {tuple(lse.shape)} on {lse.device}",
                              f"torch.float32 {(batch, heads, seq_q)} on {q.device}")
        if q.device.type != "cuda":
            raise TensorError("q.device", str(q.device), "a CUDA device (the kernels run there)")
        for name, nbytes in workspace_regions(cfg, batch, heads, seq_q, seq_kv, heads_kv):
            t = workspace.get(name)
            need = max(nbytes, 16)
            if t is None or t.numel() * t.element_size() < need or t.data_ptr() % 16 or t.device != q.device:
                got = None if t is None else f"{t.numel() * t.element_size()} bytes on {t.device}"
                raise TensorError(f"workspace[{name!r}]", got, f">= {need} bytes, 16-byte aligned, on {q.device}")
        return batch, heads, heads_kv, seq_q, seq_kv


def _check_side_tensor(name: str, t, shape: tuple, dtype, device, contiguous: bool = True) -> None:
    import torch

    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, f"a {dtype} tensor of shape {shape} on {device}")
    if tuple(t.shape) != shape:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
    if t.dtype != dtype:
        raise TensorError(f"{name}.dtype", t.dtype, f"{dtype}")
    if t.device != device:
        raise TensorError(f"{name}.device", t.device, f"{device} (the device of q)")
    if contiguous and t.numel() > 1 and t.stride(0) != 1:
        raise TensorError(f"{name}.stride", t.stride(), "contiguous")


def _check_side_inputs(q, batch, heads, seq_len_q, seq_len_kv, sink, dsink, dlse=None) -> None:
    """Validate the optional runtime tensors (before any launch)."""
    import torch

    for name, t in (("seq_len_q", seq_len_q), ("seq_len_kv", seq_len_kv)):
        if t is not None:
            _check_side_tensor(name, t, (batch,), torch.int32, q.device)
    if (sink is None) != (dsink is None):
        raise TensorError("dsink", None if dsink is None else "a tensor",
                          "a fp32 (Hq,) output exactly when sink is given")
    if sink is not None:
        _check_side_tensor("sink", sink, (heads,), torch.float32, q.device)
        _check_side_tensor("dsink", dsink, (heads,), torch.float32, q.device)
    if dlse is not None:
        _check_side_tensor("dlse", dlse, (batch, heads, q.shape[2]), torch.float32, q.device, contiguous=False)


def check_length_values(seq_len_q, seq_len_kv, seq_q: int, seq_kv: int) -> None:
    """Per-batch lengths must lie in [0, S]: reads them back, so it synchronizes (skip it under graph capture)."""
    for name, t, full in (("seq_len_q", seq_len_q, seq_q), ("seq_len_kv", seq_len_kv, seq_kv)):
        if t is not None and t.numel() and (int(t.min()) < 0 or int(t.max()) > full):
            raise TensorError(name, t.tolist(), f"lengths in [0, {full}]")
