"""How far to trust the cost model: ``calibrate`` (fit hardware efficiencies to measured step
times; ``fit``: the search), ``sensitivity`` (a plan's step time as the link and the compute
efficiency move), ``robustness`` (plans made on one hardware judged on another); docs/calibration.md,
docs/robustness.md."""
