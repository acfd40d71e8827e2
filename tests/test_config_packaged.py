"""Each default is written once (lsm_gnn/config.py): a packaged config states only what makes it
differ from the defaults, and `lsm-gnn train` trains alike with or without `--config lsm`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from lsm_gnn.cli.train import BUILTIN, build_config, builtin_config
from lsm_gnn.config import RunConfig, config_to_dict

# what each packaged config must change from the defaults, and nothing else
MUST_DIFFER = {"lsm": {}, "memory": {"storage.reader": "memory", "cache.enabled": False}}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_every_packaged_config_is_known_and_states_only_what_differs_from_the_defaults():
    shipped = {Path(str(p)).stem for p in resources.files("lsm_gnn").joinpath("configs").iterdir()
               if str(p).endswith(".yaml")}
    assert shipped == set(BUILTIN) == set(MUST_DIFFER)
    defaults = _flat(config_to_dict(RunConfig()))
    for name in BUILTIN:
        stated = _flat(yaml.safe_load(builtin_config(name).read_text()) or {})
        assert {k for k, v in stated.items() if defaults.get(k) == v} == set(), f"{name}.yaml restates a default"
        assert stated == MUST_DIFFER[name]
        loaded = _flat(config_to_dict(build_config(name)))
        assert {k for k in loaded if loaded[k] != defaults[k]} == set(MUST_DIFFER[name])


def test_lsm_gnn_train_has_one_learning_rate_with_or_without_a_packaged_config():
    assert {build_config(name).train.lr for name in (None, *BUILTIN)} == {RunConfig().train.lr}
