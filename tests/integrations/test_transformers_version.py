"""The transformers adapter names the transformers version it needs instead of failing on a missing helper."""

import pytest

from frost.integrations import TRANSFORMERS_BELOW, TRANSFORMERS_MIN, check_transformers_version


@pytest.mark.parametrize("found", ["5.17.0", "4.57.1", "6.0.0"])
def test_a_transformers_outside_the_range_is_named(found):
    with pytest.raises(ImportError, match=rf"transformers {found} is installed; accepted: "
                                          rf"transformers>={TRANSFORMERS_MIN},<{TRANSFORMERS_BELOW}"):
        check_transformers_version(found)


@pytest.mark.parametrize("found", [TRANSFORMERS_MIN, TRANSFORMERS_MIN + ".0", "5.99.1"])
def test_a_transformers_in_range_passes(found):
    check_transformers_version(found)
