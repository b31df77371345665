"""Host-side contract of the SM120-class backward kernels (others code against these names).

    cfg = choose_config("bfloat16", 128, 128, causal=True, alignment="bottom_right", arch=detect_arch())
    ws = {name: torch.empty(n, dtype=torch.uint8, device="cuda")
          for name, n in workspace_regions(cfg, B, Hq, Sq, Skv, heads_kv=Hkv)}
    bwd = compile_backward(cfg)
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=1 / math.sqrt(128), workspace=ws,
        seq_len_q=None, seq_len_kv=None, band_left=None, band_right=None, sink=None, dsink=None,
        deterministic=False)

Tensors are logical BHSD (often transposed views of BSHD memory) with the head dim contiguous; every other stride
a multiple of 8 elements (Q's and dO's sequence stride below checks.MAX_SEQ_STRIDE) and every base 16-byte aligned.
K/V (and dK/dV) have Hkv heads, Hq a multiple of Hkv (GQA/MQA: query head h reads kv head h // (Hq / Hkv); dK/dV are
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
  dsink are deterministic in every mode).

Which kernel set runs a problem (atomic, ordered, narrow-band, dq_gemm, the MHA twin) is select.select's
decision, made once: choose_config makes it for what it is told (``sizes``, ``gqa_group``); a CompiledBackward
called or bound with a problem of another kind selects that problem's set and compiles it on first use, except when
its config was selected for the plan it serves (``with_config``, the engine's path), where bind trusts the key. A
config whose key is a dq_gemm set has the dS workspace in its dq_accum region (workspace_regions), so its problems
may take that set; other configs' problems never do.

A call allocates nothing and never synchronizes (one call into the compiled host entry enqueues the three kernels
on the stream, plus a dsink zero-fill when Sq = 0), so it can be captured in a CUDA graph. A call gathers its
tensors into one launch.BackwardTensors, checks them (checks.py), then runs a launch.Launch bound to its
launch.Problem; callers that check the tensors themselves (the engine, whose executor checks them against the plan)
bind a Launch once with ``bwd.bind(problem)`` and call it with each call's BackwardTensors, which costs a few
microseconds of host time."""

from __future__ import annotations

from dataclasses import dataclass, replace

from frost import limits
from frost.kernels.backward import rowwise
from frost.kernels.backward.checks import check_io, check_problem, check_side_inputs, check_workspace
from frost.kernels.backward.compile import get_kernels
from frost.kernels.backward.ds_workspace import dq_gemm_fits, ds_workspace_bytes
from frost.kernels.backward.launch import BackwardTensors, Launch, Problem
from frost.kernels.backward.preprocess import SEM_ROWS
from frost.kernels.backward.select import KernelKey, Sizes, select
from frost.kernels.backward.tiles import TileConfig
from frost.kernels.optional_inputs import given
from frost.kernels.packed import Packed
from frost.spec import Mask, caller_mask


@dataclass(frozen=True)
class KernelConfig:
    """A problem's runtime values (logical head dims, causality, alignment) and the kernel set selected for it."""
    dtype: str                 # "float16" | "bfloat16"
    head_dim_qk: int           # logical (multiple of 8, <= 256)
    head_dim_v: int            # <= head_dim_qk
    causal: bool
    alignment: str             # "top_left" | "bottom_right" (anchors causal and band bounds)
    arch: str                  # "sm_120a" | "sm_121a" | "sm_90a"
    key: KernelKey             # the kernel set (select.select)

    @property
    def head_dim_pad(self) -> int:
        return self.key.head_dim_pad

    @property
    def tile(self) -> TileConfig:
        """The pad pair's table tile (its n_block is every set's at that pad)."""
        return self.key.table_tile

    def mask(self, band_left: int | None = None, band_right: int | None = None) -> Mask:
        """The mask of a call of this config with the given band keywords (its causality and alignment are the
        config's); a TensorError names a bad keyword."""
        return caller_mask(self.causal, self.alignment, band_left, band_right)


def choose_config(dtype: str, head_dim_qk: int, head_dim_v: int, causal: bool, alignment: str, arch: str, *,
                  band_left: int | None = None, band_right: int | None = None, deterministic: bool = False,
                  gqa_group: int | None = None, sizes: Sizes | None = None, varlen: bool = False) -> KernelConfig:
    """The config of a problem, its kernel set chosen by select.select from the band, the mode and ``sizes``
    (None: not known yet; then ``gqa_group``, Hq / Hkv or None, says whether it has GQA); ``varlen``: packed
    sequences."""
    mask = caller_mask(causal, alignment, band_left, band_right)
    key = select(dtype, arch, head_dim_qk, head_dim_v, mask, deterministic, sizes=sizes, gqa_group=gqa_group,
                 varlen=varlen)
    return KernelConfig(dtype, head_dim_qk, head_dim_v, bool(causal), alignment, arch, key)


def compile_key(cfg: KernelConfig) -> str:
    """Stable string of what the generated code depends on. Configs that differ only in runtime values
    (logical head dims padding alike, causal or not, alignment; and per call: GQA group, lengths, band, sink)
    share a key and one compiled kernel set; ordered dQ (deterministic mode, narrow bands) has a set of its own."""
    return cfg.key.as_str()


def workspace_regions(cfg: KernelConfig, batch: int, heads_q: int, seq_q: int, seq_kv: int,
                      heads_kv: int | None = None, tokens_q: int = 0) -> list[tuple[str, int]]:
    """(name, nbytes) of the caller-owned workspace: fp32 dQ accumulator and per-row LSE*log2(e) and delta
    (rows padded to a multiple of 128), the deterministic-mode dQ-order semaphores (one int32 per 16 rows) and the
    dsink partials (one fp32 per 128 rows). Each region must start 16-byte aligned. No region depends on heads_kv
    (GQA sums dK/dV in registers) or on the features used, so one workspace serves every call of a shape; a
    dq_gemm config's dq_accum region holds the dS workspace instead (ds_workspace.ds_workspace_bytes: B x Hq x Skv x Sq
    x 2 bytes) where that fits ds_workspace.DQ_GEMM_MAX_BYTES (the problems that do not fit run on the ordered or atomic
    set, which need the plain region). A packed (varlen) config's seq_q is max_seqlen_q and its dQ accumulator holds
    ``tokens_q`` rows per head (limits.packed_acc_rows), not batch x max_seqlen_q."""
    del heads_kv
    rows = batch * heads_q * limits.seq_pad(seq_q)
    acc = rows * cfg.head_dim_pad * 4
    if cfg.key.varlen:
        acc = heads_q * limits.packed_acc_rows(tokens_q, batch) * cfg.head_dim_pad * 4
    if cfg.key.dq_gemm and dq_gemm_fits(batch, heads_q, seq_q, seq_kv):  # the region holds dS instead
        acc = max(acc, ds_workspace_bytes(batch, heads_q, seq_q, seq_kv))
    return [("dq_accum", acc), ("lse_log2", rows * 4), ("delta", rows * 4),
            ("dq_sem", round_up16(rows // SEM_ROWS * 4)),
            ("dsink_part", round_up16(rows // rowwise.ROWS_PER_CTA * 4))]


def round_up16(n: int) -> int:
    """Workspace regions are sized in 16-byte multiples (vector and cp.async alignment)."""
    return -(-n // 16) * 16


MAX_BOUND_LAUNCHES = 32  # problems (sizes, scale, band, features) a CompiledBackward keeps a bound Launch for


def compile_backward(cfg: KernelConfig) -> "CompiledBackward":
    """Compiles (or fetches from the in-process cache) preprocess + main + dq convert for cfg.arch."""
    return CompiledBackward(cfg)


class CompiledBackward:
    def __init__(self, cfg: KernelConfig, kernels=None, selected: bool = False):
        """``kernels``: an already compiled or loaded set for ``cfg.key`` (disk cache, tuning runs); by default the
        in-process cache compiles or returns it. ``selected``: cfg.key was selected for every problem this object
        will bind (a plan's), so bind launches it as given."""
        self.cfg = cfg
        self.selected = selected
        self.kernels = get_kernels(cfg.key) if kernels is None else kernels
        self._launches: dict[Problem, Launch] = {}   # __call__'s bound launches, so repeated calls replay graphs
        self._twins: dict[KernelKey, CompiledBackward] = {}   # the sets of problems of another kind

    def with_config(self, cfg: KernelConfig) -> "CompiledBackward":
        """The same compiled kernels launched with the runtime values (mask kind, logical head dims) of a config
        selected for a plan's problem (its key is this set's); bind trusts that key."""
        if cfg.key != self.cfg.key:
            raise ValueError(f"config {compile_key(cfg)} does not share the compile key {compile_key(self.cfg)}")
        return CompiledBackward(cfg, self.kernels, selected=True)

    def __call__(self, q, k, v, o, do, lse, dq, dk, dv, *, scale: float, workspace: dict, stream=None,
                 band_left: int | None = None, band_right: int | None = None, deterministic: bool = False,
                 check_lengths: bool = False, packed: Packed | None = None, **optional) -> None:
        """``packed``: the segments of a varlen config's call (tensors logical (H, T, D), lse and dlse (Hq, Tq);
        seq_len_q / seq_len_kv are then seqused). ``optional``: the optional tensors by frost.spec role
        (seq_len_q, seq_len_kv, sink with its dsink output, dlse; None: not given). Rows outside every segment
        are not written."""
        t = BackwardTensors(q, k, v, o, do, lse, dq, dk, dv, workspace, given("backward", optional,
                                                                             "CompiledBackward"), packed)
        sizes = batch, heads, heads_kv, seq_q, seq_kv, tokens_q, tokens_kv = check_io(self.cfg, t)
        check_workspace(workspace, workspace_regions(self.cfg, batch, heads, seq_q, seq_kv, tokens_q=tokens_q),
                        q.device)
        check_side_inputs(t, sizes, check_lengths)
        problem = Problem(batch, heads, heads_kv, seq_q, seq_kv, scale, self.cfg.mask(band_left, band_right),
                          deterministic, frozenset(t.optional), tokens_q=tokens_q, tokens_kv=tokens_kv)
        launch = self._launches.get(problem)
        if launch is None:
            if len(self._launches) >= MAX_BOUND_LAUNCHES:
                self._launches.pop(next(iter(self._launches)))   # the oldest
            launch = self._launches[problem] = self.bind(problem)
        launch(t, stream)

    def bind(self, problem: Problem) -> Launch:
        """The fast entry: a Launch for one problem, for callers that check the tensors themselves. The checks
        that depend only on the problem (GQA group, sequence limit) happen here, once (checks.check_problem)."""
        check_problem(self.cfg, problem)
        chosen = self if self.selected else self._set_for(problem)
        return Launch(chosen.kernels, chosen.cfg, problem)

    def _set_for(self, p: Problem) -> "CompiledBackward":
        """This set or the twin that select.select picks for the problem (a dq_gemm set only where this config's
        workspace holds the dS region)."""
        c = self.cfg
        key = select(c.dtype, c.arch, c.head_dim_qk, c.head_dim_v, p.mask, p.deterministic,
                     sizes=Sizes(p.batch, p.heads, p.heads_kv, p.seq_q, p.seq_kv), ds_workspace=c.key.dq_gemm,
                     varlen=c.key.varlen)
        if key == c.key:
            return self
        twin = self._twins.get(key)
        if twin is None:
            twin = self._twins[key] = CompiledBackward(replace(c, key=key))
        return twin
