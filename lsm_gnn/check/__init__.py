"""`lsm-gnn check`: checks of an installed package on the machine it runs on.

`check gpu` (lsm_gnn.check.gpu) runs every GPU test and the GPU benchmarks, time-boxed, into one
JSON; `check compile` (lsm_gnn.check.compile) compiles every CUDA program of the engines
(lsm_gnn.check.nvrtc.translation_units) for sm_80 / sm_90 with nvcc and reports each kernel's
resources and occupancy, no GPU needed (NVRTC through CuPy where nvcc is absent).
lsm_gnn.check.env holds the one rule of whether a GPU is here (the GPU tests' marker uses it too).
"""
