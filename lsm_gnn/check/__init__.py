"""`lsm-gnn check`: checks of an installed package on the machine it runs on.

`check gpu` (lsm_gnn.check.gpu) runs every GPU test and the GPU benchmarks, time-boxed, into one
JSON; `check compile` (lsm_gnn.check.nvrtc) compiles every CUDA program with NVRTC, no GPU needed.
lsm_gnn.check.env holds the one rule of whether a GPU is here (the GPU tests' marker uses it too).
"""
