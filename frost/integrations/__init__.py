"""Adapters that plug frost into other libraries. Each lives in its own subpackage and imports its library only
there, so `import frost` never pulls in an optional dependency."""
