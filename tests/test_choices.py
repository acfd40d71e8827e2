"""The accepted values of storage.reader and cache.engine are one list each (lsm_gnn.choices):
the config model, the factories and the CLI all take theirs from it."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from lsm_gnn import choices
from lsm_gnn.config import CacheConfig, StorageConfig, load_config
from lsm_gnn.utils.errors import ConfigError, InputError


def _literal(model, field: str) -> tuple:
    ann = model.model_fields[field].annotation
    assert typing.get_origin(ann) is typing.Literal
    return typing.get_args(ann)


def test_the_config_model_accepts_exactly_the_registries_values():
    assert _literal(CacheConfig, "engine") == choices.ENGINES
    assert _literal(StorageConfig, "reader") == choices.READERS
    for engine in choices.ENGINES:
        assert CacheConfig(engine=engine).engine == engine
    for reader in choices.READERS:
        assert StorageConfig(reader=reader).reader == reader


def test_the_factories_and_the_cli_read_the_same_lists():
    import lsm_gnn.storage
    from lsm_gnn.cache import engines
    from lsm_gnn.cli.simulate import simulate
    from lsm_gnn.storage import open as storage_open

    assert engines.ENGINES is choices.ENGINES
    assert storage_open.READERS is lsm_gnn.storage.READERS is choices.READERS
    engine_option = next(p for p in simulate.params if p.name == "engine")
    assert tuple(engine_option.type.choices) == choices.ENGINES
    assert engine_option.default == CacheConfig().engine
    assert set(choices.ROW_ENGINES) < set(choices.ENGINES) and "reference" not in choices.ROW_ENGINES


def test_a_value_outside_the_list_is_an_error_naming_the_key_and_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("cache:\n  engine: quantum\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "cache.engine" in str(e.value) and str(path) in str(e.value) and "'reference'" in str(e.value)
    path.write_text("storage:\n  reader: tape\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "storage.reader" in str(e.value) and str(path) in str(e.value) and "'mmap'" in str(e.value)


def test_the_engine_factory_rejects_a_name_outside_the_list():
    from lsm_gnn.cache.budget import budget_for_cache_rows
    from lsm_gnn.cache.engines import make_engine

    cfg = CacheConfig()
    with pytest.raises(InputError, match="unknown cache engine 'quantum'; expected one of 'cpu', 'gpu', 'reference'"):
        make_engine(cfg, budget_for_cache_rows(cfg, 64, 1000), 1000, np.zeros(1000, np.uint8), kind="quantum")
