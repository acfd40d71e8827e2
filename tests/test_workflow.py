"""The Snakemake workflow end to end on the real datasets' layouts, served from a loopback mirror
(tests/realdata_fixtures.py: tiny files in the exact IGB / OGB layouts), with the run matrix shrunk
by config keys; plus the config schema, the dataset forms and the rule conventions (dry runs).

Each run works in its own folder (`snakemake --directory`), so nothing lands in the repository's
data/, results/ or reports/. Checksums: the fixture archives cannot have the real MD5s, so the
runs that download a checksummed archive (IGB/IGBH tarballs, MAG240M) replace those catalog entries
through a sitecustomize module on PYTHONPATH, exactly as tests/test_real_datasets.py does in-process
with monkeypatch; ogbn-papers100M has no published checksum and runs unpatched."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import realdata_fixtures as fx

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not installed next to this Python")

# The run matrix shrunk to the fixtures' few hundred nodes: small batches, a few iterations per
# timing window, short storage points, a tiny heterogeneous graph for the simulator.
SMALL = [
    "batch_size=16", "fanouts=5,5", "cache_fraction=0.2",
    "storage_seconds=0.1", "storage_batch_sizes=[16,64]", "storage_seq_batch_sizes=[32]", "fio_seconds=0.3",
    "storage_repeats=2", "cache_windows=[4]", "cache_fractions=[0.1,0.2]", "cache_max_batches=null",
    "ratio_batch_sizes=[4,16]", "ratio_seeds=64", "hetero_size=1000", "hetero_dim=8", "hetero_max_batches=8",
    "pvp_host_shares=[0.2]", "pvp_windows=[8]", "pvp_batch_sizes=[16]", "paper_batch_size=32",
    "train_epochs=2", "train_hidden=16", "train_warmup=1", "train_timed=2",
    "train_repeats=1", "multidevice_batches=4", "multidevice_warmup=1",
    "baselines_warmup=1", "baselines_timed=2", "baselines_cache=[0.2]", "baselines_systems=[lsm]",
    "baselines_repeats=1", "baselines_real_runs=1",
]
# (the order of the repeats, interleaved and rotated, is checked on a dry run of 3 repeats below,
# and the median of repeated runs on a copy of this run's record: a second repeat of each baseline
# would cost the whole test about a minute)
# The timed rules claim both cores and the one `timed` unit (profiles/default: timed=1) so that
# timed runs never overlap; here nothing is compared, so two of them may share the machine.
ONE_THREAD = ["--set-threads", *(f"{r}=1" for r in ("storage_bench", "train_run", "multidevice_bench",
                                                    "baselines_run", "baselines_distdgl")),
              "--resources", "timed=2"]

SITECUSTOMIZE = '''
import json, os
_over = os.environ.get("LSM_GNN_TEST_CATALOG")
if _over:
    from lsm_gnn.datasets.real import catalog as _catalog
    _over = json.loads(_over)
    for _k, _v in _over.get("IGB_TARBALL_MD5", {}).items():
        _catalog.IGB_TARBALL_MD5[tuple(_k.split(":"))] = _v
    if "MAG240M_MD5" in _over:
        _catalog.MAG240M_MD5 = _over["MAG240M_MD5"]
'''


@pytest.fixture
def server():
    s = fx.FileServer()
    yield s
    s.close()


def snakemake(workdir: Path, *args: str, config=(), catalog: dict | None = None, timeout=840):
    env = dict(os.environ, DGLBACKEND="pytorch")
    if catalog:
        hook = workdir / "_hook"
        hook.mkdir(parents=True, exist_ok=True)
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env["PYTHONPATH"] = os.pathsep.join([str(hook), env.get("PYTHONPATH", "")]).strip(os.pathsep)
        env["LSM_GNN_TEST_CATALOG"] = json.dumps(catalog)
    cmd = [str(SNAKEMAKE), "--snakefile", str(REPO / "workflow" / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", *args]
    if config:
        cmd += ["--config", *config]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def _fail(proc, workdir: Path) -> str:
    """Snakemake's output and the logs of the jobs that failed."""
    out = proc.stdout + proc.stderr
    logs = [f"--- {p}\n" + (workdir / p).read_text(errors="replace")[-3000:]
            for p in dict.fromkeys(re.findall(r"log: (\S+) \(check log", out)) if (workdir / p).is_file()]
    return f"snakemake exited {proc.returncode}\n{out[-6000:]}\n" + "\n".join(logs)


# ---- the whole workflow on ogbn-papers100M's layout -----------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(900)   # about 2 minutes on 2 busy cores; the margin is for slower CI machines
def test_whole_workflow_on_papers100m_layout(server, tmp_path):
    z, arrays = fx.papers100m_zip(n=3000, m=24000, seed=3)
    server.add("/ogb/nodeproppred/papers100M-bin.zip", z)
    server.drops["/ogb/nodeproppred/papers100M-bin.zip"] = (1, len(z) // 3)   # resumed, not restarted
    t0 = time.perf_counter()
    proc = snakemake(tmp_path, *ONE_THREAD,
                     config=["dataset=ogbn-papers100M", f"base_url={server.base}/ogb/nodeproppred", *SMALL])
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, _fail(proc, tmp_path)
    print(f"whole workflow on the papers100M layout: {elapsed:.0f} s")

    # download resumed after the dropped connection, then prepare, verify
    assert [s for _, _, s in server.log] == [200, 206]
    raw = tmp_path / "data/raw/ogbn-papers100M/papers100M-bin"
    assert json.loads((raw / ".lsm-gnn-download.json").read_text())["name"] == "ogbn-papers100M"
    assert "OK (full check" in (tmp_path / "results/ogbn-papers100M/dataset/verify.txt").read_text()
    from lsm_gnn.datasets.format import Dataset

    ds = Dataset(tmp_path / "data/ogbn-papers100M")
    np.testing.assert_array_equal(ds.feature_array(), arrays["feat"])

    report = (tmp_path / "reports/ogbn-papers100M/report.md").read_text()
    for section in ("## Dataset: ogbn-papers100M", "## Storage", "## Cache policies", "## The victim buffer's regime",
                    "## Training on one device", "## Multi-device", "## Baselines",
                    "## What the measured traffic costs on other hardware"):
        assert section in report
    # the report opens with the four verdicts, each with a verdict computed by a stated rule
    assert report.index("## Verdicts") < report.index("**Regime.**") < report.index("## Dataset")
    verdicts = report[report.index("## Verdicts"):report.index("**Regime.**")]
    for claim in ("(a) one node with 2 GPUs", "(b) the shared cache", "(c) the hybrid policy", "(d) the victim buffer",
                  "at the authors' configuration", "(e) the communication layer"):
        assert claim in verdicts
    # one verdict per kind of evidence that bears on a claim: (a) measured and projected (emulated: the
    # testbed is off here); (b), (c), (d) at equal memory and at the authors' configuration simulated; (e) measured
    words = r"\*\*(holds|holds only when|does not hold here|not measured here|no verdict)\*\*"
    screen, full = verdicts.split("### Every kind of evidence, in full")
    assert len(re.findall(words, full)) == 7
    assert "not measured (testbed off: make reproduce-testbed)" in full
    # the first screen: a sentence per claim (6, (d) twice) with its verdict, and the claims figure
    assert len(re.findall(r"^- \*\*\([a-e]\)\*\* .*: " + words, screen, re.M)) == 6
    assert "![each claim" in screen and (tmp_path / "reports/ogbn-papers100M/figures/claims.png").is_file()
    assert len(report[:report.index("### Every kind of evidence")].splitlines()) <= 60
    figs = json.loads((tmp_path / "reports/ogbn-papers100M/figures.json").read_text())
    assert sorted(figs["verdicts"]) == ["b", "c", "d"] and figs["settings"]["batch_size"] == 16
    timings = json.loads((tmp_path / "reports/ogbn-papers100M/timings.json").read_text())
    assert timings["verdict_a"]["claim"] == "a" and "hostname" in json.loads(
        (tmp_path / "reports/ogbn-papers100M/machine.json").read_text())["hardware"]
    paper_range = json.loads((tmp_path / "results/ogbn-papers100M/projection/paper-range.json").read_text())
    assert sorted(paper_range["batches"]) == ["16", "32"]
    assert all(len(b["variants"]) >= 5 and b["min"] <= b["base"] <= b["max"] for b in paper_range["batches"].values())
    # no time ratio from one run (train_repeats=1): every cell of the training table's "steady vs
    # ideal" column is "-" (the ideal itself) or "not measured here (...)", never a bare number
    training = report[report.index("## Training on one device"):report.index("## Multi-device")]
    lines = training.splitlines()
    at = next(i for i, line in enumerate(lines) if "steady vs ideal" in line and line.startswith("|"))
    col = [c.strip() for c in lines[at].strip("|").split("|")].index("steady vs ideal")
    rows = [line for line in lines[at + 2:] if line.startswith("|")]
    rows = rows[:next((i for i, line in enumerate(lines[at + 2:]) if not line.startswith("|")), len(rows))]
    assert rows
    cells = {[c.strip() for c in row.strip("|").split("|")][col] for row in rows}
    assert cells - {"-"} and all(c == "-" or c.startswith("not measured here (") for c in cells), cells
    assert any("from one run of a system: no spread" in c for c in cells), cells
    assert "Real dataset `ogbn-papers100M`" in report and "mirror" in report
    # the regime in the summary and in every section that runs a cache
    stated = re.findall(r"cache rows / distinct rows per iteration = \**([0-9.]+)", " ".join(report.split()))
    assert len(stated) == 6 and all(float(x) > 0 for x in stated)   # summary, cache, hetero, train, 2 devices, baselines
    regime = json.loads((tmp_path / "results/ogbn-papers100M/cache/regime.json").read_text())
    assert regime["batch_size"] == 16 and regime["cache_rows_per_iteration_rows"] > 0
    assert [p["batch_size"] for p in regime["regime_sweep"]] == [4, 16]
    assert regime["hetero"]["dataset"] == "synthetic-hetero-1000-d8"
    # every record and the simulator's JSON state the regime
    sim = json.loads((tmp_path / "results/ogbn-papers100M/cache/sweep-W4.json").read_text())
    assert all(r["cache_rows_per_iteration_rows"] > 0 for r in sim["results"])
    summary = (tmp_path / "results/ogbn-papers100M/baselines/summary.csv").read_text()
    assert "cache_rows_per_iteration_rows" in summary and "distdgl" in summary and "direct" not in summary
    # every baseline ran once with emulated accelerators (baselines_repeats=1) and once really training
    # (baselines_real_runs=1): one row per configuration and accelerator, the median of its runs
    import pandas as pd

    table = pd.read_csv(tmp_path / "results/ogbn-papers100M/baselines/summary.csv")
    emu, real = table[table.accelerator == "a100"], table[table.accelerator == "real"]
    assert sorted(emu.label) == sorted(real.label) == ["distdgl 2x2", "lsm d2 c0.2"]
    assert (emu.runs == 1).all() and (real.runs == 1).all() and (emu.au > 0).all() and real.au.isna().all()
    assert real.val_acc.notna().all() and emu.val_acc.isna().all()
    runs = tmp_path / "results/ogbn-papers100M/baselines"
    assert len(list(runs.glob("*-a100-r0.json"))) == 2 and len(list(runs.glob("*-real-r0.json"))) == 2
    # the runs ran in the chain's order: emulated lsm, Dist-DGL, then the real ones
    order = ["lsm-d2-c0.2", "distdgl-m2-t2"]
    chain = [runs / f"{name}-{mode}-r0.json" for mode in ("a100", "real") for name in order]
    created = [json.loads(p.read_text())["created"] for p in chain]
    assert created == sorted(created)
    # repeats of one configuration make one row: the median, min, max and the spread (flagged above 5 %)
    sys.path.insert(0, str(REPO / "workflow/scripts"))
    import baselines_report

    rep = tmp_path / "repeats"
    rep.mkdir()
    rec = json.loads((runs / "lsm-d2-c0.2-a100-r0.json").read_text())
    for r, scale in enumerate((1.0, 1.2, 1.1)):
        rec["metrics"]["time"]["epoch_steady_s"] = 10.0 * scale
        (rep / f"lsm-d2-c0.2-a100-r{r}.json").write_text(json.dumps(rec))
    agg = baselines_report.rows(sorted(rep.glob("*.json")), 4096).iloc[0]
    assert agg.runs == 3 and agg.epoch_steady_s == pytest.approx(11.0) and agg.steady_min == pytest.approx(10.0)
    assert agg.steady_spread == pytest.approx(2.0 / 11.0) and agg.spread_flagged
    ratios = json.loads((runs / "ratios.json").read_text())
    assert ratios["accelerator"] == "a100" and ratios["lsm_au"] > 0
    valid = json.loads((tmp_path / "results/ogbn-papers100M/projection/validate-this-machine.json").read_text())
    assert all(len(v["measured_runs_s"]) == 1 for v in valid["systems"].values())
    grid = pd.read_csv(tmp_path / "results/ogbn-papers100M/projection/igb_full_grid.csv")
    assert set(grid.ssds_per_gpu) == {1, 2, 4, 8} and set(grid.memory_per_gpu) == {0.1, 0.2}
    assert set(grid.batch_size) == {16, 32} and grid.bottleneck.notna().all()
    train = json.loads((tmp_path / "results/ogbn-papers100M/train/lsm-r0.json").read_text())
    assert train["config"]["sampler"]["batch_size"] == 16 and train["config"]["sampler"]["fanouts"] == [5, 5]
    for fig in ("dataset_degree", "storage_throughput", "cache_storage_rows", "cache_policies_no_buffer", "cache_regime",
                "cache_pvp", "train_epoch_time", "multidevice", "baselines_epoch", "projection_igb_full"):
        assert (tmp_path / f"reports/ogbn-papers100M/figures/{fig}.png").stat().st_size > 1000

    # a second run has nothing to do
    again = snakemake(tmp_path, "-n", *ONE_THREAD, config=["dataset=ogbn-papers100M", f"base_url={server.base}/ogb/nodeproppred",
                                              *SMALL])
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_the_baseline_runs_are_planned_interleaved_and_rotated(tmp_path):
    """Each run waits for the one before it in one chain: repeat r runs the systems from the r-th on
    (ABC, BCA, CAB), the emulated repeats first, then the real-compute runs."""
    proc = snakemake(tmp_path, "-n", "results/synthetic-tiny/baselines/summary.csv",
                     config=["size=tiny", "baselines_repeats=3", "baselines_real_runs=1",
                             "baselines_systems=[lsm,isolated]"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = {out: set(ins.split(", ")) for out, ins in re.findall(
        r"Missing output files: (\S+?); Input files updated by another job: ([^\n]+)", proc.stdout + proc.stderr)}
    base = "results/synthetic-tiny/baselines"
    systems = ["lsm-d2-c0.1", "isolated-d2-c0.1", "distdgl-m2-t2"]
    chain = [f"{base}/{systems[(r + i) % 3]}-{mode}-r{r}.json"
             for mode, n in (("a100", 3), ("real", 1)) for r in range(n) for i in range(3)]
    assert set(chain) <= set(after) | {chain[0]}
    for prev, run in zip(chain, chain[1:]):
        assert prev in after[run], f"{run} does not wait for {prev}"


def test_each_repeat_of_the_baseline_chain_runs_with_its_own_seed_shared_by_its_round(tmp_path):
    """MLPerf Storage draws a new seed per run: repeat r of every system gets run_seed(seed, r)."""
    from lsm_gnn.utils.seeds import run_seed

    proc = snakemake(tmp_path, "-n", "-p", "results/synthetic-tiny/baselines/summary.csv",
                     config=["size=tiny", "seed=3", "baselines_repeats=3", "baselines_real_runs=1",
                             "baselines_systems=[lsm,isolated]"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seeds = {}
    for seed, out in re.findall(r"--set train\.seed=(\d+)[^\n]*--record (\S+)", proc.stdout):
        seeds[out] = int(seed)
    assert len(seeds) == 3 * 3 + 3, sorted(seeds)
    for run, seed in seeds.items():
        r = int(re.search(r"-r(\d+)\.json$", run)[1])
        assert seed == run_seed(3, r), run
    assert len({seeds[k] for k in seeds if "-a100-" in k}) == 3
    # the default device: no job is told one (train.device's default, cpu), so a CPU run's commands
    # are those of a workflow without the key
    assert "train.device" not in proc.stdout


def test_device_cuda_trains_every_training_job_on_the_gpu_into_results_of_its_own(tmp_path):
    """`device=cuda`: train_run and every baseline run but Dist-DGL's get train.device=cuda, and the
    run writes results/<tag>-cuda and reports/<tag>-cuda, apart from the CPU run's."""
    targets = ["results/synthetic-tiny-cuda/train/summary.csv", "results/synthetic-tiny-cuda/baselines/summary.csv"]
    proc = snakemake(tmp_path, "-n", "-p", *targets,
                     config=["size=tiny", "device=cuda", "train_repeats=1", "baselines_repeats=1",
                             "baselines_real_runs=1", "baselines_systems=[lsm,isolated,direct,memory]"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = dict((out, cmd) for cmd, out in re.findall(r"(python -m lsm_gnn\.cli (?:train|run) [^\n]*)--record (\S+)",
                                                        proc.stdout))
    trained = {out for out, cmd in runs.items() if "--set train.device=cuda" in cmd}
    want = {f"results/synthetic-tiny-cuda/train/{s}-r0.json" for s in ("lsm", "memory")}
    want |= {f"results/synthetic-tiny-cuda/baselines/{s}-{mode}-r0.json"
             for s in ("lsm-d2-c0.1", "isolated-d2-c0.1", "direct-d2-c0", "memory-d2-c0") for mode in ("a100", "real")}
    assert trained == want, sorted(trained ^ want)
    assert {out for out in runs if "distdgl" in out} and all("train.device" not in runs[o] for o in runs if "distdgl" in o)
    assert all(out.startswith("results/synthetic-tiny-cuda/") for out in runs)
    # the dataset is the CPU run's (generated once, its log beside it); nothing else of it is touched
    assert not re.search(r"results/synthetic-tiny/(train|baselines|owners)", proc.stdout)



def test_the_training_runs_are_chained_rotated_and_seeded_per_round(tmp_path):
    """train_repeats rounds of both one-device systems: one chain, the systems rotated (AB, BA, AB),
    round r of both with run_seed(seed, r); the report waits for every run."""
    from lsm_gnn.utils.seeds import run_seed

    proc = snakemake(tmp_path, "-n", "-p", "results/synthetic-tiny/train/summary.csv",
                     config=["size=tiny", "seed=3", "train_repeats=3"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    after = {o: set(i.split(", ")) for o, i in re.findall(
        r"Missing output files: (\S+?); Input files updated by another job: ([^\n]+)", out)}
    base = "results/synthetic-tiny/train"
    chain = [f"{base}/{['lsm', 'memory'][(r + i) % 2]}-r{r}.json" for r in range(3) for i in range(2)]
    for prev, run in zip(chain, chain[1:]):
        assert prev in after[run], f"{run} does not wait for {prev}"
    assert set(chain) <= after[f"{base}/summary.csv"]
    seeds = {o: int(s) for s, o in re.findall(r"--seed (\d+)[^\n]*--record (\S+)", proc.stdout)}
    assert sorted(seeds) == sorted(chain)
    for run, seed in seeds.items():
        assert seed == run_seed(3, int(re.search(r"-r(\d+)\.json$", run)[1])), run


# ---- two runs, the same hardware-independent figures -----------------------------------------------
# Only the rules figures.json needs (dataset, traces, simulator replays, PVP study): no timed job.
# 10 jobs per run (generate, 2 traces, a sweep, 2 two-device replays, the PVP study, 3 report steps).
FIGURES_RUN = ["dataset=synthetic-2000", "synthetic_dim=8", "batch_size=16", "fanouts=5,5", "cache_fraction=0.2",
               "cache_windows=[4]", "cache_fractions=[0.1,0.2]", "cache_max_batches=20", "ratio_batch_sizes=[]",
               "hetero_size=null", "pvp_host_shares=[0.2]", "pvp_windows=[8]", "pvp_batch_sizes=[16]",
               "paper_batch_size=16"]


@pytest.mark.slow
@pytest.mark.timeout(900)   # about 2 minutes on 2 idle cores; the margin is for loaded machines
def test_two_runs_of_the_figures_agree_exactly_and_a_changed_setting_is_not_comparable(tmp_path):
    runs = [tmp_path / "first", tmp_path / "second"]
    for wd in runs:
        proc = snakemake(wd, "figures", config=FIGURES_RUN)
        assert proc.returncode == 0, _fail(proc, wd)
    a, b = (wd / "reports/synthetic-2000-d8" for wd in runs)
    env = dict(os.environ, DGLBACKEND="pytorch")
    cmp = subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "report", "compare", str(a), str(b), "--json"],
                         capture_output=True, text=True, env=env)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    res = json.loads(cmp.stdout)
    assert res["agree"] and res["figures"]["equal"] > 50
    figs = json.loads((a / "figures.json").read_text())
    assert figs["figures"]["dataset"]["pagerank_normalisation"] == "in-degree"
    assert {"hybrid m0.2 W4", "static m0.2 W4"} <= set(figs["figures"]["policies"])
    assert figs["figures"]["pvp"]["points"] and figs["verdicts"]["d"]["verdict"]
    # the same figures under another seed's settings: refused as not comparable (exit status 2)
    other = json.loads((b / "figures.json").read_text())
    other["settings"]["seed"] = 1
    (b / "figures.json").write_text(json.dumps(other))
    cmp = subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "report", "compare", str(a), str(b)],
                         capture_output=True, text=True, env=env)
    assert cmp.returncode == 2 and "not comparable" in cmp.stdout


# ---- download, prepare, verify and describe: the other layouts ------------------------------------
@pytest.mark.parametrize("name", ["igbh-tiny", "mag240m"])
def test_dataset_rules_on_checksummed_layouts(server, tmp_path, name):
    """Download (tarball / zip, MD5-checked), prepare, verify and describe, through the `dataset` target."""
    if name == "igbh-tiny":
        src = tmp_path / "src"
        fx.write_igb(src, "tiny", hetero=True)
        data = fx.tar_gz(src, "tiny")
        server.add("/mirror/igb_heterogeneous_tiny.tar.gz", data)
        catalog = {"IGB_TARBALL_MD5": {"igbh:tiny": fx.md5_of(data)}}
    else:
        data, _ = fx.mag240m_zip()
        server.add("/mirror/mag240m_kddcup2021.zip", data)
        catalog = {"MAG240M_MD5": fx.md5_of(data)}
    proc = snakemake(tmp_path, "dataset", config=[f"dataset={name}", f"base_url={server.base}/mirror"], catalog=catalog)
    assert proc.returncode == 0, _fail(proc, tmp_path)
    section = (tmp_path / f"reports/{name}/sections/10-dataset.md").read_text()
    assert f"Real dataset `{name}`" in section and "OK (full check" in section
    # every node type is described (MAG240M: authors and institutions have no features, only edges)
    assert ("| author |" if name == "igbh-tiny" else "| author__writes__paper |") in section


def test_download_with_a_wrong_checksum_fails_the_rule(server, tmp_path):
    src = tmp_path / "src"
    fx.write_igb(src, "tiny")
    server.add("/igb_homogeneous_tiny.tar.gz", fx.tar_gz(src, "tiny"))   # the real MD5 cannot match
    proc = snakemake(tmp_path, "dataset", config=["dataset=igb-tiny", f"base_url={server.base}"])
    assert proc.returncode != 0
    log = (tmp_path / "results/igb-tiny/logs/dataset_download.log").read_text()
    assert "MD5 mismatch" in log
    assert not (tmp_path / "data/igb-tiny/metadata.json").exists()


# ---- dataset forms, the size alias, the schema (dry runs) ------------------------------------------
def _plan(tmp_path, *config) -> str:
    proc = snakemake(tmp_path, "-n", config=list(config))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_dataset_forms_and_size_alias(tmp_path, random_dataset):
    plan = _plan(tmp_path, "size=tiny")
    assert "data/synthetic-tiny/metadata.json" in plan and "reports/synthetic-tiny/report.md" in plan
    plan = _plan(tmp_path, "dataset=synthetic-hetero-small", "synthetic_dim=64")
    assert "data/synthetic-hetero-small-d64/metadata.json" in plan
    assert "baselines_distdgl" not in plan                           # heterogeneous: no Dist-DGL
    plan = _plan(tmp_path, "dataset=igb-large", "base_url=http://127.0.0.1:9/igb")
    assert "dataset_download" in plan and "dataset_prepare" in plan and "data/raw/igb/large" in plan
    ds = random_dataset(num_nodes=300)
    plan = _plan(tmp_path, f"dataset={ds.root}")
    assert "dataset_download" not in plan and "dataset_prepare" not in plan
    assert f"reports/{Path(ds.root).name}/report.md" in plan
    assert f"{ds.root}/metadata.json" not in re.findall(r"output: (\S+)", plan)


@pytest.mark.parametrize("config, message", [
    (["dataset=nosuch"], "neither a dataset name nor a prepared dataset"),
    (["batch_size=0"], "batch_size"),
    (["cache_fraction=1.5"], "cache_fraction"),
    (["no_such_key=1"], "no_such_key"),
    (["fanouts=ten"], "fanouts"),
    (["device=tpu"], "device"),
])
def test_bad_config_is_refused_naming_the_key(tmp_path, config, message):
    proc = snakemake(tmp_path, "-n", config=config)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr


def test_config_file_and_schema_agree():
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert set(cfg) == set(schema["properties"])
    assert schema["additionalProperties"] is False
    import jsonschema

    jsonschema.validate(cfg, schema)


def test_every_rule_has_log_and_message_and_includes_are_explicit():
    wf = REPO / "workflow"
    snakefile = (wf / "Snakefile").read_text()
    assert "glob(" not in snakefile
    included = re.findall(r'^include: "([^"]+)"', snakefile, flags=re.M)
    assert included[0] == "rules/common.smk"
    assert sorted(included[1:]) == sorted(f"rules/{p.name}" for p in (wf / "rules").glob("[0-9]*.smk"))
    for path in [wf / "Snakefile", *(wf / p for p in included)]:
        # each rule's body runs to the next rule (or the end of the file)
        blocks = re.split(r"^\s*(?:rule|checkpoint) (\w+):", path.read_text(), flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2]):
            assert "message:" in body, f"{path.name}: rule {name} has no message"
            if name not in ("all", "dataset"):   # targets that run nothing
                assert "log:" in body, f"{path.name}: rule {name} has no log"
    # one command for every job, from the environment the job runs in (no absolute path: a finished
    # run planned from another environment has nothing to do), and no helper outside common.smk
    common = (wf / "rules/common.smk").read_text()
    assert 'CLI = "python -m lsm_gnn.cli"' in common
    for p in (wf / "rules").glob("[0-9]*.smk"):
        text = p.read_text()
        assert "sys.executable" not in text, f"{p.name} puts the Python's path in a job"
        assert not re.search(r"^def ", text, flags=re.M), f"{p.name} defines a function outside common.smk"


# ---- a run starts by removing what killed writers left ---------------------------------------------
def test_a_run_removes_the_temporary_siblings_killed_writers_left_and_names_them(tmp_path):
    """A run killed while a job wrote a figure leaves its hidden `.NAME.XXXXXXXX.partial.png` (the kill
    test found one); the next run removes every such sibling under its results and reports, naming it,
    and leaves anything else there alone."""
    res, rep = tmp_path / "results/synthetic-tiny-d64", tmp_path / "reports/synthetic-tiny-d64"
    png = rep / "figures/.cache_pvp.png.szlkyf_l.partial.png"
    folder = res / "cache/.regime.abcd1234.partial"          # a killed directory builder's
    rec = res / "train/.lsm-r0.json.k2_9xq0a.partial"
    kept = [rep / "figures/.gitignore", res / "notes.partial.txt", rep / "figures/cache_pvp.png"]
    for p in [png, rec, folder / "sub/x.npz", *kept]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"\x89PNG" if p.suffix == ".png" else b"{")
    proc = snakemake(tmp_path, "dataset", config=["size=tiny", "synthetic_dim=64"])
    assert proc.returncode == 0, _fail(proc, tmp_path)
    out = proc.stdout + proc.stderr
    for p in (png, rec, folder):   # named relative to the working directory, as Snakemake names outputs
        assert not p.exists() and f"removed {p.relative_to(tmp_path)}" in out, out[-3000:]
    assert "left by an interrupted writer of reports/synthetic-tiny-d64/figures/cache_pvp.png" in out
    assert all(p.exists() for p in kept)
