"""Kernel cost model: predicted time per kernel, config, arch and shape from the compiled
machine code (SASS / AMDGCN facts of compile_check) and the launch grid, with the term that
binds. model.py holds the bounds, perf.json the per-arch constants and the fit, launches.py the
launch grids, calibrate.py the fit on the measured H200 rows and its held-out judgement,
predict.py the `--predict` command and the rows the GPU check prints before it runs.
"""
