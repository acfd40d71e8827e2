# Shared by every rules file - the validated config, the dataset the run is about (synthetic, real or
# a path), the output folders, the command every job runs, the derived run matrix and every helper
# function the rules call (the rules files hold rules only, as `snakemake --lint` asks).

import json
import os
import re
import sys
from pathlib import Path

from snakemake.utils import validate

REPO_DIR = Path(workflow.basedir).parent


# ---- config: --config values arrive as strings from the command line ---------------------------
def _coerce(value):
    """`--config key=[1,2]` gives ["1", "2"] and `key=null` gives "null" (Snakemake parses
    --config values with YAML's BaseLoader): turn them into numbers, booleans and None before validation."""
    if isinstance(value, str):
        if value.strip().lower() in ("null", "none", "~"):
            return None
        if value.strip().lower() in ("true", "false"):  # testbed=true
            return value.strip().lower() == "true"
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
validate(config, str(Path(workflow.basedir) / "schemas" / "config.schema.yaml"))


# ---- the command every job runs: `python -m lsm_gnn.cli` of the environment it runs in ----------
# A rule's conda env (--sdm conda) puts its own python first on PATH; without one, the jobs use the
# Python running Snakemake (the venv of `make reproduce`), put first here. The command line is the
# same in every environment, so a finished run planned from another one has nothing to do. The
# package comes from this checkout (PYTHONPATH), so a conda env needs only the dependencies.
CLI = "python -m lsm_gnn.cli"
os.environ.update(
    PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    PYTHONPATH=os.pathsep.join(p for p in [str(REPO_DIR), os.environ.get("PYTHONPATH", "")] if p),
)


# ---- which dataset ---------------------------------------------------------------------------------
SYNTHETIC_RE = re.compile(r"^synthetic(?P<hetero>-hetero)?-(?P<size>tiny|small|medium|[0-9]+)$")
REAL_RE = re.compile(
    r"^(?P<name>igb|igbh)-(?P<size>tiny|small|medium|large|full)$|^(?P<single>ogbn-papers100M|mag240m)$"
)
HETERO_REAL = {"igbh", "mag240m"}
# directory (under the download destination) that `lsm-gnn dataset download` fills, as in
# lsm_gnn/datasets/real/catalog.py: IGB/IGBH -> <size>, the OGB zips -> their top folder
REAL_ROOTS = {"ogbn-papers100M": "papers100M-bin", "mag240m": "mag240m_kddcup2021"}
DATASET_FORMS = (
    "synthetic-SIZE or synthetic-hetero-SIZE (SIZE: tiny, small, medium or a node count), "
    "igb-SIZE or igbh-SIZE (SIZE: tiny, small, medium, large, full), ogbn-papers100M, mag240m, "
    "or a path to a prepared dataset (a folder with metadata.json)"
)


def resolve_dataset(cfg: dict) -> dict:
    """What `dataset` (or its alias `size`) names: kind (synthetic | real | path), the folder the
    runs read, the tag naming results/<tag> and reports/<tag>, and whether it is heterogeneous."""
    name = f"synthetic-{cfg['size']}" if cfg.get("size") not in (None, "") else str(cfg["dataset"])
    data_dir = cfg["data_dir"]
    m = SYNTHETIC_RE.match(name)
    if m:
        dim = int(cfg["synthetic_dim"])
        tag = name if dim == 1024 else f"{name}-d{dim}"
        return {
            "kind": "synthetic",
            "name": name,
            "tag": tag,
            "data": f"{data_dir}/{tag}",
            "size": m["size"],
            "hetero": bool(m["hetero"]),
            "dim": dim,
        }
    m = REAL_RE.match(name)
    if m:
        real = m["name"] or m["single"]
        size = m["size"]
        raw = f"{cfg['raw_dir']}/{real}"
        root = f"{raw}/{size or REAL_ROOTS[real]}"
        return {
            "kind": "real",
            "name": name,
            "tag": name,
            "data": f"{data_dir}/{name}",
            "real": real,
            "size": size,
            "hetero": real in HETERO_REAL,
            "raw": raw,
            "raw_root": root,
        }
    path = Path(name).expanduser()
    if not (path / "metadata.json").is_file():
        raise ValueError(
            f"config key 'dataset': {name!r} is neither a dataset name nor a prepared dataset "
            f"(no {path / 'metadata.json'}); expected {DATASET_FORMS}"
        )
    meta = json.loads((path / "metadata.json").read_text())
    hetero = len(meta.get("node_types", {})) != 1 or len(meta.get("edge_types", {})) != 1
    return {
        "kind": "path",
        "name": meta.get("name") or path.name,
        "tag": path.resolve().name,
        "data": str(path),
        "hetero": hetero,
    }


DS = resolve_dataset(config)
DATA = DS["data"]
DATA_META = f"{DATA}/metadata.json"
TAG = DS["tag"]
# the device the training jobs train on (`device`): a GPU run's results and report go apart from the
# CPU run's (results/<tag>-cuda), so neither overwrites the other nor is compared as the other
DEVICE = config["device"]
RUN_TAG = TAG if DEVICE == "cpu" else f"{TAG}-{DEVICE}"
RES = f"results/{RUN_TAG}"
REPORT = f"reports/{RUN_TAG}"
LOGS = f"{RES}/logs"
SEED = int(config["seed"])
# the training jobs' --set for it, carried in a parameter they already have (train_run's window,
# baselines_run's sets: bl_run_sets): none on the CPU (train.device's default), so a CPU run's rules,
# parameters and command lines, and with them its finished results, are those of a workflow
# without the key (Snakemake reruns a job whose shell command or parameters changed)
DEVICE_SETS = "" if DEVICE == "cpu" else f"--set train.device={DEVICE}"


def with_device(flags: str) -> str:
    """`flags` followed by the device's --set (unchanged on the CPU)."""
    return f"{flags} {DEVICE_SETS}" if DEVICE_SETS else flags


# the sampler and model every section runs with
BATCH = int(config["batch_size"])
FANOUTS = str(config["fanouts"]).replace(" ", "")
FANOUT_LIST = f"[{FANOUTS}]"
MODEL = config["model"] if config["model"] != "auto" else ("rsage" if DS["hetero"] else "sage")
CACHE_FRACTION = float(config["cache_fraction"])

# Synthetic graphs this run generates: the dataset itself and the heterogeneous graph the cache
# section simulates (tag -> generate arguments); the generating checkpoint makes any of them.
SYNTHETIC = {}
if DS["kind"] == "synthetic":
    SYNTHETIC[TAG] = {"size": DS["size"], "hetero": DS["hetero"], "dim": DS["dim"]}
HETERO = None  # the IGBH-like graph of the simulator matrix
if config.get("hetero_size") not in (None, ""):
    HETERO = resolve_dataset(
        {
            **config,
            "size": None,
            "dataset": f"synthetic-hetero-{config['hetero_size']}",
            "synthetic_dim": config["hetero_dim"],
        }
    )
    SYNTHETIC[HETERO["tag"]] = {
        "size": HETERO["size"],
        "hetero": True,
        "dim": HETERO["dim"],
    }


def report_front_page() -> str:
    """The front page of `snakemake --report`: the description with the verdicts (rule verdicts_rst)
    once a run wrote it, the description alone before."""
    front = Path(f"{REPORT}/report-front.rst")
    return str(front.resolve()) if front.exists() else "report/workflow.rst"


# Each rules file appends the report fragments (markdown) its rules produce; the report's
# stitching job joins them in this order.
REPORT_FRAGMENTS = []


# ---- the dataset's files as inputs ------------------------------------------------------------------
def dataset_files(ds: dict):
    """Input function: metadata.json and every data file it lists, so that the jobs reading a
    dataset declare what they read. The list is known once the folder exists: a generated or
    prepared dataset is made by a checkpoint, and Snakemake re-evaluates this after it ran."""

    def files(wildcards):
        if ds["kind"] == "synthetic":
            checkpoints.dataset_generate.get(synthetic=ds["tag"])
        elif ds["kind"] == "real":
            checkpoints.dataset_prepare.get()
        meta = Path(ds["data"]) / "metadata.json"
        listed = sorted(json.loads(meta.read_text()).get("files", {}))
        return [str(meta), *(str(Path(ds["data"]) / name) for name in listed)]

    return files


def dataset_checksum_file(ds: dict):
    """Input function: the dataset's metadata.sha256 (metadata.json's own checksum) where it has one
    (an older dataset has none), once the dataset exists."""

    def files(wildcards):
        meta = Path(dataset_files(ds)(wildcards)[0])
        sums = meta.with_name("metadata.sha256")
        return [str(sums)] if sums.exists() else []

    return files


def data_dir(wildcards, input):
    """Params function: the dataset folder, from the job's declared metadata.json (input.data[0])."""
    return str(Path(input.data[0]).parent)


def meta_dir(wildcards, input):
    """Params function: the dataset folder of a report job that declares only input.meta."""
    return str(Path(input.meta).parent)


def feature_gib(input) -> float:
    """The dataset's feature bytes in GiB, from the metadata.json among the job's inputs."""
    meta = next(p for p in input if str(p).endswith("metadata.json"))
    return json.loads(Path(meta).read_text())["features"]["file_bytes"] / 2**30


def csv_list(values) -> str:
    return ",".join(str(v) for v in values)


def source_benchmarks(_wildcards=None):
    """The benchmark files of the jobs that made the dataset (its section reports their time)."""
    if DS["kind"] == "synthetic":
        return [f"{RES}/dataset/generate.benchmark.tsv"]
    if DS["kind"] == "real":
        return [
            f"{RES}/dataset/download.benchmark.tsv",
            f"{RES}/dataset/prepare.benchmark.tsv",
        ]
    return []


# ---- the cache section's matrix (30-cache.smk) ------------------------------------------------------
CACHE_VICTIM = str(config["cache_victim_depth"] or "config")
CACHE_FLAGS = " ".join(f"--cache-fraction {f}" for f in config["cache_fractions"])
# every policy of the sweeps: the registry's and the installed ones ("all"), then the config's own
# (package.module:Class or path/to/file.py:Class, which each job's `lsm-gnn simulate` resolves)
POLICY_FLAGS = " ".join(["--policy all"] + [f"--policy '{p}'" for p in config["cache_policies"]])
CACHE_MAX_BATCHES = f"--max-batches {config['cache_max_batches']}" if config["cache_max_batches"] else ""
REGIME_BATCHES = [int(b) for b in config["ratio_batch_sizes"]]
PAPER_BATCH = int(config["paper_batch_size"])
# the shared-vs-isolated replay's device counts (the scaling figure); 2, the paper's, always
SCALING_DEVICES = sorted({int(g) for g in config["scaling_devices"]} | {2})
PVP_BATCHES = sorted({int(b) for b in config["pvp_batch_sizes"]} | {BATCH, PAPER_BATCH})
PVP_SHARES = sorted({float(h) for h in config["pvp_host_shares"] if float(h) > 0})
PVP_WINDOWS = sorted({int(w) for w in config["pvp_windows"]} | {8})
# the run config's host share (lsm_gnn.config: VictimBufferConfig.host_fraction, None = the policy's 0.10)
PVP_CONFIG_SHARE = 0.1
# lines per victim queue in the authors' scripts (`pvp_depth`, lsm_gnn/cache/budget.py); the PVP study
# runs it as they do, in host memory beside the whole cache budget, not out of it
AUTHORS_DEPTH = 32768


def regime_iterations(batch: int) -> int:
    """Iterations of the regime point at `batch`: ratio_seeds seed nodes, at least 20."""
    return max(20, int(config["ratio_seeds"]) // batch)


def pvp_iterations(batch: int) -> int:
    """Iterations of the PVP study's trace at `batch`: the seeds of the headline trace
    (cache_max_batches x batch_size), at least 20; the headline trace itself at batch_size."""
    headline = int(config["cache_max_batches"] or 300)
    return max(20, headline * BATCH // batch)


def pvp_points(batch: int) -> list[dict]:
    """The configurations of the PVP study at one batch: hybrid, dynamic and static without the buffer
    at every W; with it at each host share (W = 8; every W at the config's share); hybrid over
    cache_fractions (W = 8, the config's share); hybrid and dynamic at the authors' configuration (W = 8,
    AUTHORS_DEPTH lines per queue in extra host memory). Each is one `lsm-gnn simulate` row."""
    pts = [
        dict(policy=p, fraction=CACHE_FRACTION, window=w, victim=False, host=None)
        for p in ("hybrid", "dynamic")
        for w in PVP_WINDOWS
    ]
    # static without the buffer at every W: claim (c) is decided on these no-buffer points
    pts += [dict(policy="static", fraction=CACHE_FRACTION, window=w, victim=False, host=None) for w in PVP_WINDOWS]
    for h in sorted(set(PVP_SHARES) | {PVP_CONFIG_SHARE}):
        for w in PVP_WINDOWS if h == PVP_CONFIG_SHARE else [8]:
            pts += [
                dict(policy=p, fraction=CACHE_FRACTION, window=w, victim=True, host=h) for p in ("hybrid", "dynamic")
            ]
    pts += [
        dict(policy="hybrid", fraction=float(f), window=8, victim=True, host=PVP_CONFIG_SHARE)
        for f in config["cache_fractions"]
        if abs(float(f) - CACHE_FRACTION) > 1e-12
    ]
    # the authors' configuration (claim d): the device cache keeps the whole budget as at share 0,
    # and W queues + the landing buffer of AUTHORS_DEPTH lines each sit in extra pinned host memory
    pts += [
        dict(policy=p, fraction=CACHE_FRACTION, window=8, victim=True, host=None, depth=AUTHORS_DEPTH, extra=True)
        for p in ("hybrid", "dynamic")
    ]
    return pts


# ---- one-device training (40-train.smk) -------------------------------------------------------------
TRAIN_SYSTEMS = ["lsm", "memory"]
TRAIN_WINDOW = (
    f"--warmup {config['train_warmup']}"
    if config["train_timed"] is None
    else f"--warmup {config['train_warmup']} --timed {config['train_timed']}"
)
# ... and the device it trains on (train_run's `window` parameter)
TRAIN_FLAGS = with_device(TRAIN_WINDOW)


# `train_repeats` rounds; round r runs every system with run_seed(SEED, r) (a new seed per round, the
# systems of a round on the same batches), the systems rotated from round to round, as one chain so
# that Snakemake cannot regroup the runs of a system (the baselines' order, below)
TRAIN_ORDER = [
    f"{RES}/train/{TRAIN_SYSTEMS[(r + i) % len(TRAIN_SYSTEMS)]}-r{r}.json"
    for r in range(int(config["train_repeats"]))
    for i in range(len(TRAIN_SYSTEMS))
]
TRAIN_PREVIOUS = dict(zip(TRAIN_ORDER[1:], TRAIN_ORDER[:-1]))


def train_previous(wildcards) -> list[str]:
    """The training run before this one in TRAIN_ORDER (none for the first)."""
    prev = TRAIN_PREVIOUS.get(f"{RES}/train/{wildcards.system}-r{wildcards.repeat}.json")
    return [prev] if prev else []


def train_seed(wildcards) -> int:
    from lsm_gnn.utils.seeds import run_seed

    return run_seed(SEED, int(wildcards.repeat))


# ---- the shared cache's per-owner feature files (rule owner_files, 50-multidevice.smk) ------------
def owners_folder(devices) -> str:
    """The owner files of `devices` owners: made in results/ by their own rule, never in the dataset's folder."""
    return f"{RES}/owners-{devices}"


def owners_set(wildcards, input) -> str:
    """Params function: the run's `--set` naming the owner files' folder, from its declared input."""
    owners = list(input.get("owners", []))
    return f"--set dataset.owners_dir={Path(owners[0]).parent}" if owners else ""


# ---- the baseline matrix (60-baselines.smk) ---------------------------------------------------------
# systems whose result depends on the memory budget, and those that hold no cache
BL_CACHED = [s for s in ("lsm", "isolated", "mmap") if s in config["baselines_systems"]]
BL_UNCACHED = [s for s in ("direct", "memory") if s in config["baselines_systems"]]
BL_DISTDGL = bool(config["baselines_distdgl"]) and not DS["hetero"]
BL_SETS = (
    f"--set sampler.batch_size={BATCH} --set 'sampler.fanouts={FANOUT_LIST}' --set model.name={MODEL} "
    f"--set train.epochs=2 --set train.warmup_iters={config['baselines_warmup']} "
    f"--set train.timed_iters={config['baselines_timed']}"
)
# Emulated accelerators (lsm_gnn.accelerator, after MLPerf Storage): each train step is a wait of
# the profile's GPU step time, so the systems' data planes are compared as they would feed a GPU,
# not the 2 cores' CPU training. `baselines_repeats` emulated runs of every system, interleaved and
# rotated (ABC, BCA, CAB: a slow quarter hour of the VM falls on every system alike); then
# `baselines_real_runs` runs that really train, for the loss and accuracy. No accelerator: only
# real runs (`baselines_repeats` of them).
BL_ACC = config["baselines_accelerator"]
BL_EMU_SETS = f"--set train.accelerator=emulated --set train.accelerator_profile={BL_ACC}" if BL_ACC else ""
BL_MODES = ([(BL_ACC, int(config["baselines_repeats"]))] if BL_ACC else []) + [
    (
        "real",
        int(config["baselines_real_runs"]) if BL_ACC else int(config["baselines_repeats"]),
    )
]
BL_CONFIGS = (
    [f"{s}-d{d}-c{c}" for s in BL_CACHED for d in config["baselines_devices"] for c in config["baselines_cache"]]
    + [f"{s}-d{d}-c0" for s in BL_UNCACHED for d in config["baselines_devices"]]
    + (["distdgl-m2-t2"] if BL_DISTDGL else [])
)
# every run in the order it runs: one chain, so that Snakemake cannot regroup the repeats of a system
BL_ORDER = [
    f"{RES}/baselines/{BL_CONFIGS[(r + i) % len(BL_CONFIGS)]}-{mode}-r{r}.json"
    for mode, n in BL_MODES
    for r in range(n)
    for i in range(len(BL_CONFIGS))
]
BL_PREVIOUS = dict(zip(BL_ORDER[1:], BL_ORDER[:-1]))
BL_RUNS = BL_ORDER
BL_EMULATED = [p for p in BL_ORDER if BL_ACC and f"-{BL_ACC}-r" in p]
BL_REAL = [p for p in BL_ORDER if "-real-r" in p]


def distdgl_partitions(machines, trainers) -> str:
    """The folder of Dist-DGL's partitions for one layout, made by the distdgl_partition job: METIS
    runs once per layout and every Dist-DGL run of it, baseline or testbed, reuses the partitions."""
    return f"{RES}/distdgl/partitions-m{machines}-t{trainers}"


def bl_previous(output: str) -> list[str]:
    """The run before this one in BL_ORDER (none for the first)."""
    prev = BL_PREVIOUS.get(output)
    return [prev] if prev else []


def bl_sets(wildcards):
    """The run's settings with its own seed: repeat r of every system runs with
    run_seed(seed, r) (MLPerf Storage draws a new seed per run; the systems of one round share it,
    so a round compares them on the same batches, as `lsm-gnn bench compare` does). The record
    carries it (config.train.seed)."""
    from lsm_gnn.utils.seeds import run_seed

    return f"{BL_SETS} --set train.seed={run_seed(SEED, int(wildcards.repeat))}"


def bl_run_sets(wildcards):
    """bl_sets and the device the run trains on (baselines_run; Dist-DGL's emulated machines stay on the CPU)."""
    return with_device(bl_sets(wildcards))


def bl_mode_sets(wildcards):
    return BL_EMU_SETS if wildcards.mode != "real" else ""


def bl_cache(wildcards):
    """The run's memory budget: cache-less systems (c0) ignore it and get the headline fraction."""
    return float(wildcards.cache) or CACHE_FRACTION


# ---- resources: what each job asks a scheduler for -------------------------------------------------
# Measured with the benchmark file of every job (results/<tag>/benchmarks/*.tsv: max RSS summed over
# the job's processes, wall seconds) in a synthetic-tiny reproduction on the 2-core VM, run beside a
# second one (so wall times are about 2x an idle machine's). The jobs that read the dataset scale
# with its feature bytes (metadata.json: features.file_bytes) as base + a factor x feature MB.
# Headroom: at least 1.3x the measured peak memory and 3x the measured wall time, rounded up; the
# figures per rule are in docs/workflow.md ("Resources").
REPORT_MEM_MB = 1500
REPORT_RUNTIME_MIN = 10
# a download or preparation of a real dataset: bounded by the network and the disk, not measured
# here beyond the test fixtures (IGB-full is 1.1 TB): one day, the usual longest partition limit
REAL_RUNTIME_MIN = 24 * 60


def scaled_mem_mb(input, base_mb: float, per_feature_mb: float) -> int:
    """base_mb plus per_feature_mb MB per MB of features: the in-memory ideal holds all of them
    (1.0), a cached system its budget and buffers (a fraction)."""
    return int(base_mb + per_feature_mb * feature_gib(input) * 1024)


def scaled_runtime(input, base_min: float, per_gib_min: float) -> int:
    """Minutes: base_min plus per_gib_min per GiB of features."""
    return int(base_min + per_gib_min * feature_gib(input)) + 1


def generate_mem_mb(spec: dict) -> int:
    """The generator holds the graph and one feature chunk: grows with the node count."""
    return int(2000 + 4 * synthetic_nodes(spec) / 1e3)


def generate_runtime(spec: dict) -> int:
    return int(5 + 4 * synthetic_nodes(spec) / 1e6) + 1


def synthetic_nodes(spec: dict) -> int:
    """Paper nodes of a generated graph: the named sizes of lsm_gnn.datasets.synthetic, or the count."""
    from lsm_gnn.datasets.synthetic import SIZES

    return SIZES.get(str(spec["size"])) or int(spec["size"])


def storage_runtime() -> int:
    """Minutes: storage_repeats rounds of every reader x pattern x batch point for storage_seconds
    and two fio jobs, plus three fio jobs once."""
    points = 4 * (len(config["storage_batch_sizes"]) + len(config["storage_seq_batch_sizes"]))
    rnd = points * float(config["storage_seconds"]) + 2 * float(config["fio_seconds"])
    seconds = int(config["storage_repeats"]) * rnd + 3 * float(config["fio_seconds"])
    return int(5 + 3 * seconds / 60) + 1


# ---- the paper's testbed, emulated (65-testbed.smk) ---------------------------------------------
# lsm, isolated, direct and Dist-DGL on the emulated `paper` storage device (2 SSDs of 980 Pro class
# per device) and emulated a100 accelerators, every time dilated by testbed_time_scale S (docs/
# accelerators.md, "Time scale"); 2 devices, the headline feature memory per device for every system.
# Runs: testbed_repeats rounds at each batch size (round r: a new seed, bench compare's
# run_seed(seed, r), shared by the systems of the round; the systems rotated), then the validation
# runs (testbed_validation_repeats rounds each) at testbed_validation_batch: `paper` at 2S
# (dilation), the `vm` profile (fio-measured in this run) at S = 1 beside the real disk (emulator
# vs real; the systems that read storage). One chain, each run waiting for the one before.
TB_ON = bool(config["testbed"])
TB_SYSTEMS = [s for s in config["testbed_systems"] if s != "distdgl" or not DS["hetero"]]
TB_STORAGE_SYSTEMS = [s for s in TB_SYSTEMS if s in ("lsm", "isolated", "direct")]
TB_BATCHES = [int(b) for b in config["testbed_batch_sizes"]]
TB_SCALE = float(config["testbed_time_scale"])
TB_VBATCH = int(config["testbed_validation_batch"])
TB_ACC = config["testbed_accelerator"]


def _tb_host_speed() -> float:
    """The matrix's f: the emulated testbed's default, the `paper` hardware profile's host_time_factor."""
    from lsm_gnn.project.profiles import load_profile

    return float(load_profile("paper").cpu.host_time_factor)


TB_HOST_SPEED = _tb_host_speed() if TB_ON else 1.0
TB_DEVICES = 2
TB_MACHINES, TB_TRAINERS = 2, 2  # Dist-DGL as bench compare runs it: 2 emulated machines x 2 trainers
# each system's own S where config's testbed_system_scales gives one (bench compare --system-scale),
# the others at testbed_time_scale; the dilation runs at twice each system's own S
TB_SYSTEM_SCALES = {s: float((config.get("testbed_system_scales") or {}).get(s, TB_SCALE)) for s in TB_SYSTEMS}


def tb_scale_tag(scale: float) -> str:
    return f"{scale:g}"


def tb_run(system: str, batch: int, profile: str, scale: float, repeat: int) -> str:
    return f"{RES}/testbed/runs/{system}-b{batch}-{profile}-s{tb_scale_tag(scale)}-r{repeat}.json"


def tb_run_f(system: str, batch: int, scale: float, host_speed: float, repeat: int) -> str:
    """A run at host speed f other than the hardware profile's (TB_AT_F)."""
    return f"{RES}/testbed/runs/{system}-b{batch}-paper-s{tb_scale_tag(scale)}-f{host_speed:g}-r{repeat}.json"


def _tb_rounds(systems: list[str], repeats: int, points: list[tuple]) -> list[str]:
    """Rounds of every (batch, profile, k) point's runs, the systems rotated round by round; each
    system at k times its own scale (TB_SYSTEM_SCALES), or at S = 1 where k is None."""
    out = []
    for r in range(repeats):
        for j, (batch, profile, k) in enumerate(points):
            n = len(systems)
            for i in range(n):
                s = systems[(r + j + i) % n]
                out.append(tb_run(s, batch, profile, 1.0 if k is None else k * TB_SYSTEM_SCALES[s], r))
    return out


TB_MAIN = _tb_rounds(TB_SYSTEMS, int(config["testbed_repeats"]), [(b, "paper", 1) for b in TB_BATCHES])
TB_DILATION = (
    _tb_rounds(TB_SYSTEMS, int(config["testbed_validation_repeats"]), [(TB_VBATCH, "paper", 2)])
    if config["testbed_dilation"]
    else []
)
TB_EMULATOR = (
    _tb_rounds(
        TB_STORAGE_SYSTEMS,
        int(config["testbed_validation_repeats"]),
        [(TB_VBATCH, "vm", None), (TB_VBATCH, "real", None)],
    )
    if config["testbed_emulator_check"]
    else []
)
# Dist-DGL at the largest batch at each other host speed f (emulation.host_speed: the paper's host
# core's time over this machine's): the claim's class is decided only where f = 0.5, 1 and 2 agree
# (LSM-GNN charges no stage at host speed, so its epoch is the matrix's at every f)
# A run at f > 1 runs at S / f: its host stages, charged at S x f x their CPU time, then take the
# matrix's wall time (at f = 2 and S = 32 that run alone took 10 of the testbed's 51 minutes); its
# other parts are charged at S / f and paced as every run's (lateness gated). At S = 16, f = 2 on
# synthetic-small, batch 1024 (2026-12-05): valid, the NIC 0.56 % late, 5 min 8 s.
TB_HOST_SPEEDS = [float(f) for f in config.get("testbed_host_speeds") or []]


def tb_scale_at_f(system: str, host_speed: float) -> float:
    return TB_SYSTEM_SCALES[system] / max(host_speed, 1.0)


TB_AT_F = (
    [
        tb_run_f("distdgl", max(TB_BATCHES), tb_scale_at_f("distdgl", f), f, r)
        for r in range(int(config["testbed_validation_repeats"]))
        for f in TB_HOST_SPEEDS
    ]
    if "distdgl" in TB_SYSTEMS
    else []
)
TB_ORDER = TB_MAIN + TB_AT_F + TB_DILATION + TB_EMULATOR if TB_ON else []
TB_PREVIOUS = dict(zip(TB_ORDER[1:], TB_ORDER[:-1]))


# claim (a)'s systems at the largest batch, each projected on the testbed's profile with the machine
# its emulation had (the SSD model, this core now x f, Dist-DGL's own host charges: bench validate)
def _tb_projected() -> list[str]:
    from lsm_gnn.project.model import CLAIM_SYSTEMS

    return [p for p in TB_MAIN if f"-b{max(TB_BATCHES)}-paper-" in p and Path(p).name.split("-", 1)[0] in CLAIM_SYSTEMS]


TB_PROJECTED = _tb_projected() if TB_ON else []
TB_VM_PROFILE = f"{RES}/testbed/vm-measured.yaml"
TB_PARTITIONS = distdgl_partitions(TB_MACHINES, TB_TRAINERS)


def tb_previous(output: str) -> list[str]:
    """The run before this one in TB_ORDER (none for the first)."""
    prev = TB_PREVIOUS.get(output)
    return [prev] if prev else []


def tb_inputs(wildcards) -> dict:
    """A testbed run's extra inputs: the run before it, the measured vm profile (vm runs), the
    Dist-DGL partitions (distdgl runs)."""
    if "host_speed" in wildcards.keys():
        out = tb_run_f(
            wildcards.system,
            int(wildcards.batch),
            float(wildcards.scale),
            float(wildcards.host_speed),
            int(wildcards.repeat),
        )
    else:
        out = tb_run(
            wildcards.system, int(wildcards.batch), wildcards.profile, float(wildcards.scale), int(wildcards.repeat)
        )
    extra = {"previous": tb_previous(out)}
    if wildcards.profile == "vm":
        extra["vm"] = TB_VM_PROFILE
    if wildcards.system == "distdgl":
        extra["partitions"] = TB_PARTITIONS
    return extra


def tb_seed(wildcards) -> int:
    """Round r's seed as bench compare draws it (lsm_gnn/utils/seeds.py: run_seed), so a round of the rules
    and a round of `lsm-gnn bench compare` draw the same batches."""
    from lsm_gnn.utils.seeds import run_seed

    return run_seed(SEED, int(wildcards.repeat))


def tb_sets(wildcards, input) -> str:
    """A testbed run's --set flags, from its wildcards and its inputs (the measured vm profile)."""
    sets = [
        f"sampler.batch_size={wildcards.batch}",
        f"'sampler.fanouts={FANOUT_LIST}'",
        f"model.name={MODEL}",
        f"train.seed={tb_seed(wildcards)}",
        "train.epochs=2",
        f"train.warmup_iters={config['testbed_warmup']}",
        f"train.timed_iters={config['testbed_timed']}",
        "train.accelerator=emulated",
        f"train.accelerator_profile={TB_ACC}",
        f"emulation.time_scale={wildcards.scale}",
    ]
    if "host_speed" in wildcards.keys():
        sets.append(f"emulation.host_speed={wildcards.host_speed}")
    if wildcards.profile == "real":
        sets.append("storage.device=real")
    else:
        profile = input.vm if wildcards.profile == "vm" else wildcards.profile
        sets += ["storage.device=emulated", f"storage.device_profile={profile}"]
    if wildcards.system == "distdgl":
        # its links unshaped: the testbed charges the NIC in user space (round trips x RTT x S, bytes)
        sets.append(f"baseline.partition_dir={input.partitions}")
    else:
        sets.append(f"cache.capacity_fraction={CACHE_FRACTION}")
    return " ".join(f"--set {s}" for s in sets)


def tb_topology(wildcards) -> str:
    """The run's devices: 2 for the cached and direct systems, Dist-DGL's machines x trainers."""
    if wildcards.system == "distdgl":
        return f"--machines {TB_MACHINES} --trainers {TB_TRAINERS}"
    return f"--devices {TB_DEVICES}"
