"""frost.spec's optional inputs reach every analyzer table: a new optional input is a spec row, a Facts flag and a
Capability flag, and the decline rules, compile-key tags, report flags and support-matrix rows follow from them."""

from __future__ import annotations

from frost import spec
from frost.analyzer.capability import Capability
from frost.analyzer.capability import RULES
from frost.analyzer.facts import Facts
from frost.analyzer.matrix import ROWS


def test_every_optional_input_has_a_feature_row() -> None:
    features = {f.facts for f in spec.INPUT_FEATURES}
    optional_inputs = {t.feature for t in spec.TENSORS if t.optional and t.reads}
    assert optional_inputs == features


def test_feature_rows_name_real_fields() -> None:
    for f in spec.INPUT_FEATURES:
        assert f.facts in Facts.model_fields, f.facts
        assert f.capability in Capability.__dataclass_fields__, f.capability
    tags = [f.tag for f in spec.INPUT_FEATURES]
    assert len(set(tags)) == len(tags)


def test_each_feature_is_declined_and_shown_in_the_matrix() -> None:
    declined = {(r.code, r.field) for r in RULES}
    labels = {label for row, _ in ROWS for label in row.values()}
    for f in spec.INPUT_FEATURES:
        assert (f.capability, f.facts) in declined
        assert all(label in labels for label in f.row.values())
    # every capability an optional input needs has at least one matrix row
    assert {f.capability for f in spec.INPUT_FEATURES} == {f.capability for f in spec.INPUT_FEATURES if f.row}


def test_optional_ports_are_the_optional_roles_an_op_kind_reads_or_writes() -> None:
    from types import SimpleNamespace

    ins = SimpleNamespace(q="q", sink="s", seq_len_q=None, seq_len_kv="lk", dlse="g")
    outs = SimpleNamespace(dq="dq", dsink="ds")
    assert spec.optional_ports("forward", ins, outs) == {"sink": "s", "seq_len_kv": "lk"}
    assert spec.optional_ports("backward", ins, outs) == {"dlse": "g", "sink": "s", "seq_len_kv": "lk", "dsink": "ds"}
