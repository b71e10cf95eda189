"""The data every stage shares: ``units``, ``errors``, ``schema`` (validated input files),
``paths``, ``graph`` (ops and tensors), ``hardware``, ``costs`` (the cost model), ``profile``
(measured costs on disk), ``plan`` (decisions, plans and the plan file schema).
Nothing here imports from another stage."""
