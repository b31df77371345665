"""benchmarks/tools/house_counts.py, the counts issue reviews quote: what counts as code, and which files a call
enters (functions only, not import-time module or class bodies)."""

from pathlib import Path

import pytest

from helpers.scripts import load_script

TOOL = Path(__file__).resolve().parents[2] / "benchmarks" / "tools" / "house_counts.py"


@pytest.fixture(scope="module")
def tool():
    return load_script(TOOL)


def test_comments_and_docstrings_are_not_code(tool):
    src = '"""a sink here"""\n\ndef f(x):\n    """and here"""\n    return x  # and a sink here\n\nWINDOW = 1\n'
    code = tool.code_text(src)
    assert "sink" not in code and "WINDOW" in code


def test_a_call_enters_the_files_whose_functions_run(tool):
    from frost.spec import Mask, heads_divide

    assert tool.files_entered(lambda: heads_divide(4, 2)) == ["spec.py"]
    assert tool.files_entered(lambda: Mask.of(True).kind) == ["spec.py"]
    assert tool.files_entered(lambda: None) == []
