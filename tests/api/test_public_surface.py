"""The public API shows itself: dir(frost) and help(frost) list every public name (the lazily loaded ones too), and
the errors a caller may catch are exported from frost."""

from __future__ import annotations

import pydoc

import frost

PUBLIC = ("attention", "attention_varlen", "sdpa_forward", "sdpa_backward", "sdpa_forward_varlen",
          "sdpa_backward_varlen", "compile", "check_support", "detect_target", "Plan", "SupportReport", "Reason",
          "GraphBuilder", "Graph", "TensorSpec")
ERRORS = ("FrostError", "TensorError", "ArgumentTypeError", "GraphError", "NotSupported", "EngineError",
          "TargetError", "SettingError")


def test_dir_lists_the_public_api():
    names = dir(frost)
    assert set(PUBLIC + ERRORS) <= set(names)
    assert "importlib" not in names and "annotations" not in names


def test_help_documents_the_lazily_loaded_functions():
    text = pydoc.render_doc(frost, renderer=pydoc.plaintext)
    for name in ("attention(q", "attention_varlen(q", "sdpa_forward(q", "sdpa_backward_varlen(q", "check_support("):
        assert name in text


def test_the_errors_are_frost_errors():
    for name in ERRORS:
        assert issubclass(getattr(frost, name), frost.FrostError)
    assert issubclass(frost.ArgumentTypeError, TypeError) and issubclass(frost.ArgumentTypeError, frost.TensorError)
