"""The pinned thread-count variables (lsm_gnn/utils/threads.py)."""

import os

import pytest

from lsm_gnn.utils.threads import THREAD_VARS, pinned_thread_env, thread_env


def test_thread_env_sets_every_variable_and_restores_the_callers(monkeypatch):
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert thread_env(3) == {k: "3" for k in THREAD_VARS}
    with pinned_thread_env(1):
        assert all(os.environ[k] == "1" for k in THREAD_VARS)
    assert os.environ["MKL_NUM_THREADS"] == "2" and "OMP_NUM_THREADS" not in os.environ
    with pytest.raises(ValueError, match="at least 1"):
        thread_env(0)
