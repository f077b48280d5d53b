"""Fuzzing ACP peers: schema-derived strategies, the frame campaigns and the stateful session machine.

The strategies are public through ``acp_conformance.strategies``, which
re-exports them from the private modules here, one per concern, in import
order (each imports only those above it):

* ``_expect``: ``Problem``, ``Expect``, ``Frame``, the clause ids and error
  codes answers are judged on, and the shared ``Expect`` values;
* ``_model``: the schema model (definitions, methods, fast validators);
* ``_options``: the options every strategy takes and the names they accept;
* ``_text``: free text (Faker, edge cases); ``_json``: arbitrary JSON values;
* ``_compiler``: JSON Schema to Hypothesis strategies;
* ``_valid``: valid values, params and messages, and the ``Frame`` builders;
* ``_mutations``: the mutation families; ``_frames``: ``frames()``,
  ``invalid_frames()``, ``evenly()``; ``_bytes``: byte damage and chunkings.

Nothing here imports pytest: the suite's tests drive these from
``acp_conformance/suite``.
"""
