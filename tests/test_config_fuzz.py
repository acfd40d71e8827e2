"""Every input to the run configuration ends in a result or a clear error, never a traceback: the
config loader on any YAML document (and on bytes that are not YAML or not text), and the CLI's
`--set` on any key and value. A clear error is a ConfigError naming the file (or the overrides) and
the key. Property-based (hypothesis), seeded by hypothesis's own derandomised database-free runs."""

from __future__ import annotations

import string

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_gnn.config import RunConfig, load_config
from lsm_gnn.utils.errors import ConfigError

# keys the config really has, so that the documents reach the validators as well as the unknown-key path
SECTIONS = {name: sorted(field.annotation.model_fields) for name, field in RunConfig.model_fields.items()
            if hasattr(field.annotation, "model_fields")}
REAL_KEYS = [f"{s}.{k}" for s, ks in SECTIONS.items() for k in ks] + list(SECTIONS)

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)
key_names = st.one_of(st.sampled_from(REAL_KEYS), st.text(alphabet=string.ascii_letters + "._-=[] ", max_size=16))


def documents():
    """A YAML document: a mapping of real and random keys (nested by section), or any YAML value."""
    mapping = st.dictionaries(st.one_of(st.sampled_from(list(SECTIONS)), st.text(max_size=8)),
                              st.one_of(values, st.dictionaries(st.sampled_from(sum(SECTIONS.values(), [])), values,
                                                                max_size=4)), max_size=4)
    return st.one_of(mapping, values).map(lambda d: yaml.safe_dump(d, allow_unicode=True))


def assert_clear(err: ConfigError, source: str):
    assert err.source == source and err.key and str(err).startswith(f"{source}: {err.key}: ")


FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(text=st.one_of(documents(), st.text(max_size=60)))
def test_any_yaml_document_is_a_config_or_an_error_naming_the_file_and_key(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    try:
        cfg = load_config(path)
    except ConfigError as e:
        assert_clear(e, str(path))
    else:
        assert isinstance(cfg, RunConfig)


@FUZZ
@given(data=st.binary(max_size=40))
def test_bytes_that_are_not_text_are_an_error_naming_the_file(tmp_path, data):
    path = tmp_path / "run.yaml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as e:
        assert_clear(e, str(path))


@FUZZ
@given(key=key_names, value=st.one_of(st.text(max_size=20), values.map(lambda v: yaml.safe_dump(v).strip())),
       base=st.one_of(st.none(), documents()))
def test_any_set_key_and_value_is_a_config_or_an_error_naming_the_key(tmp_path, key, value, base):
    path = None
    if base is not None:
        path = tmp_path / "base.yaml"
        path.write_text(base)
    try:
        cfg = load_config(path, [f"{key}={value}"])
    except ConfigError as e:
        assert_clear(e, str(path) if path else "<defaults>")
    else:
        assert isinstance(cfg, RunConfig)


@pytest.mark.parametrize("override, key", [("sampler.batch_size=[", "sampler.batch_size"),
                                           ("=1", "(key)"), ("sampler..batch_size=1", "sampler..batch_size")])
def test_found_cases_name_the_key(override, key):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert e.value.key == key
