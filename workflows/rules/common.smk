# Shared by every rule file: the validated config, the dataset the run is about (synthetic, real or
# a path), the output folders, the `lsm-gnn` command and small helpers.

import json
import re
import sys
from pathlib import Path

from snakemake.utils import validate

WORKFLOW_DIR = Path(workflow.basedir)


# ---- config: --config values arrive as strings from the command line ---------------------------
def _coerce(value):
    """`--config key=[1,2]` gives ["1", "2"] and `key=null` gives "null" (Snakemake parses
    --config values with YAML's BaseLoader): turn them into numbers and None before validation."""
    if isinstance(value, str):
        if value.strip().lower() in ("null", "none", "~"):
            return None
        return value
    if isinstance(value, list):
        out = []
        for v in value:
            if isinstance(v, str):
                for parse in (int, float):
                    try:
                        v = parse(v)
                        break
                    except ValueError:
                        pass
            out.append(v)
        return out
    return value


for _key in list(config):
    config[_key] = _coerce(config[_key])
if isinstance(config.get("fanouts"), int):  # --config fanouts=10 arrives as a number
    config["fanouts"] = str(config["fanouts"])
validate(config, str(WORKFLOW_DIR / "workflows/schemas/config.schema.yaml"))


# ---- the lsm-gnn command: the venv's console script next to the Python running Snakemake ---------
def find_cli() -> str:
    exe = Path(sys.executable).with_name("lsm-gnn")
    return str(exe) if exe.exists() else "lsm-gnn"


CLI = find_cli()


# ---- which dataset ---------------------------------------------------------------------------------
SYNTHETIC_RE = re.compile(r"^synthetic(?P<hetero>-hetero)?-(?P<size>tiny|small|medium|[0-9]+)$")
REAL_RE = re.compile(r"^(?P<name>igb|igbh)-(?P<size>tiny|small|medium|large|full)$|^(?P<single>ogbn-papers100M|mag240m)$")
HETERO_REAL = {"igbh", "mag240m"}
# directory (under the download destination) that `lsm-gnn dataset download` fills, as in
# lsm_gnn/datasets/real/catalog.py: IGB/IGBH -> <size>, the OGB zips -> their top folder
REAL_ROOTS = {"ogbn-papers100M": "papers100M-bin", "mag240m": "mag240m_kddcup2021"}
DATASET_FORMS = ("synthetic-SIZE or synthetic-hetero-SIZE (SIZE: tiny, small, medium or a node count), "
                 "igb-SIZE or igbh-SIZE (SIZE: tiny, small, medium, large, full), ogbn-papers100M, mag240m, "
                 "or a path to a prepared dataset (a folder with metadata.json)")


def resolve_dataset(cfg: dict) -> dict:
    """What `dataset` (or its alias `size`) names: kind (synthetic | real | path), the folder the
    runs read, the tag naming results/<tag> and reports/<tag>, and whether it is heterogeneous."""
    name = f"synthetic-{cfg['size']}" if cfg.get("size") not in (None, "") else str(cfg["dataset"])
    data_dir = cfg["data_dir"]
    m = SYNTHETIC_RE.match(name)
    if m:
        dim = int(cfg["synthetic_dim"])
        tag = name + ("" if dim == 1024 else f"-d{dim}")
        return {"kind": "synthetic", "name": name, "tag": tag, "data": f"{data_dir}/{tag}",
                "size": m["size"], "hetero": bool(m["hetero"]), "dim": dim}
    m = REAL_RE.match(name)
    if m:
        real = m["name"] or m["single"]
        size = m["size"]
        raw = f"{cfg['raw_dir']}/{real}"
        root = f"{raw}/{size or REAL_ROOTS[real]}"
        return {"kind": "real", "name": name, "tag": name, "data": f"{data_dir}/{name}", "real": real,
                "size": size, "hetero": real in HETERO_REAL, "raw": raw, "raw_root": root}
    path = Path(name).expanduser()
    if not (path / "metadata.json").is_file():
        raise ValueError(f"config key 'dataset': {name!r} is neither a dataset name nor a prepared dataset "
                         f"(no {path / 'metadata.json'}); expected {DATASET_FORMS}")
    meta = json.loads((path / "metadata.json").read_text())
    hetero = len(meta.get("node_types", {})) != 1 or len(meta.get("edge_types", {})) != 1
    return {"kind": "path", "name": meta.get("name") or path.name, "tag": path.resolve().name,
            "data": str(path), "hetero": hetero}


DS = resolve_dataset(config)
DATA = DS["data"]
DATA_META = f"{DATA}/metadata.json"
TAG = DS["tag"]
RES = f"results/{TAG}"
REPORT = f"reports/{TAG}"
LOGS = f"{RES}/logs"
SEED = int(config["seed"])

# the sampler and model every section runs with
BATCH = int(config["batch_size"])
FANOUTS = str(config["fanouts"]).replace(" ", "")
FANOUT_LIST = "[" + FANOUTS + "]"
MODEL = config["model"] if config["model"] != "auto" else ("rsage" if DS["hetero"] else "sage")
CACHE_FRACTION = float(config["cache_fraction"])

# Synthetic graphs this run generates: the dataset itself and the heterogeneous graph the cache
# section simulates (tag -> generate arguments); rule dataset_generate makes any of them.
SYNTHETIC = {}
if DS["kind"] == "synthetic":
    SYNTHETIC[TAG] = {"size": DS["size"], "hetero": DS["hetero"], "dim": DS["dim"]}
HETERO = None  # the IGBH-like graph of the simulator matrix
if config.get("hetero_size") not in (None, ""):
    HETERO = resolve_dataset({**config, "size": None, "dataset": f"synthetic-hetero-{config['hetero_size']}",
                              "synthetic_dim": config["hetero_dim"]})
    SYNTHETIC[HETERO["tag"]] = {"size": HETERO["size"], "hetero": True, "dim": HETERO["dim"]}

# Each rules file appends the report fragments (markdown) its rules produce; rule report stitches
# them together in this order.
REPORT_FRAGMENTS = []

