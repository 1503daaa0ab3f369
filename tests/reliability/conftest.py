"""The reliability suites use the session's fixtures (tests/conftest.py); their marker,
``reliability``, is registered with the others in pyproject.toml."""
