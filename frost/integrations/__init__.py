"""Adapters that plug frost into other libraries. Each lives in its own subpackage and imports its library only
there, so `import frost` never pulls in an optional dependency. The versions each adapter is written against are
here, where reading them imports no library."""

TRANSFORMERS_MIN, TRANSFORMERS_BELOW = "5.25", "6"   # pyproject's `transformers` extra says the same


def check_transformers_version(found: str) -> None:
    """ImportError (naming the version found and the range accepted) unless transformers ``found`` is in range:
    the adapter reads transformers' mask helpers of that range by name, and an older transformers lacks some."""
    from packaging.version import Version

    if not Version(TRANSFORMERS_MIN) <= Version(found) < Version(TRANSFORMERS_BELOW):
        raise ImportError(f"frost.integrations.transformers: transformers {found} is installed; accepted: "
                          f"transformers>={TRANSFORMERS_MIN},<{TRANSFORMERS_BELOW} "
                          "(pip install 'frost-sdpa[transformers]')")
