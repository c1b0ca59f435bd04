"""The scheme contract kit: what every positional encoding must satisfy in this suite, checked without a
reference implementation (``contract.kit``). ``python -m nmt scheme check NAME`` runs it on any
registered scheme; the built-in schemes' contract tests run the same checks."""
