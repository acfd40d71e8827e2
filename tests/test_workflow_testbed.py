"""The paper-testbed rules (workflow/rules/65-testbed.smk) and their report script: the chain the
dry run plans, and summary.json's figures (medians, spreads, ratios, validation flags) from a
fabricated, seeded set of run summaries."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow" / "scripts"))
import testbed_report as tb  # noqa: E402

SNAKEMAKE = Path(sys.executable).parent / "snakemake"


def _run(system, batch, profile, scale, rnd, epoch, *, late=0.001, au=0.5, cpu=0.9, parts_late=None):
    """One run as load_runs gives it (the summary fields the report reads)."""
    ok = (late is None or late <= 0.01) and all(x <= 0.01 for x in (parts_late or {}).values())
    return {"system": system, "batch": batch, "profile": profile, "scale": scale, "round": rnd,
            "path": f"{system}-b{batch}-{profile}-s{scale:g}-r{rnd}.json", "late_fraction": late,
            "parts_late": parts_late or {},
            "summary": {"epoch_steady_s": epoch, "au": au, "cpu_share": cpu, "valid": ok,
                        "invalid_causes": [] if ok else ["late"], "bound": "fetch_storage",
                        "per_iteration": {}, "round": rnd, "first_epoch_s": epoch, "samples_per_s": 1.0,
                        "storage_emulation": {"lateness_fraction": late}}}


def _matrix(seed=0):
    rng = np.random.default_rng(seed)
    base = {"lsm": 2.0, "isolated": 3.0, "direct": 4.0, "distdgl": 6.0}
    runs = []
    for b in (128, 1024):
        for r in range(3):
            for s, e in base.items():
                runs.append(_run(s, b, "paper", 16.0, r, e * (1 + 0.01 * rng.standard_normal()) * (b / 128)))
    for r in range(3):  # dilation at 2 S: lsm 10 % slower, the others the same
        for s, e in base.items():
            runs.append(_run(s, 128, "paper", 32.0, r, e * (1.10 if s == "lsm" else 1.0)))
        for s in ("lsm", "isolated", "direct"):  # vm within 5 % of the real disk
            runs.append(_run(s, 128, "vm", 1.0, r, base[s] * 1.05))
            runs.append(_run(s, 128, "real", 1.0, r, base[s], late=None))
    return runs


def _projection(lsm_s=10.0, distdgl_s=30.0, errors=None, valid=True):
    """bench validate's JSON over claim (a)'s records (lsm_gnn.project.emulated.check): one run a
    system projected at `*_s`, its emulated epoch off by `errors[system]` (default 2 %)."""
    from lsm_gnn.project.emulated import check

    rows = []
    for system, projected in (("lsm", lsm_s), ("distdgl", distdgl_s)):
        err = (errors or {}).get(system, 0.02)
        rows.append({"system": system, "source": f"{system}.json", "profile": "paper", "error": err,
                     "projected_epoch_s": projected, "emulated_epoch_s": projected / (1 + err), "valid": valid,
                     "invalid_causes": [] if valid else ["late"],
                     "projected_bound": {"bottleneck": "ssd", "stage": "fetch_storage"},
                     "emulated_bound": {"stage": "fetch_storage", "part": "ssd", "seconds": 0.01}})
    return {"projection_vs_emulation": check(rows)}


def _summary(runs, projection=None):
    return tb.summarise(runs, projection, scale=16.0, accelerator="a100", devices=2, fraction=0.1,
                        dataset="synthetic-tiny", batches=[128, 1024], validation_batch=128)


def test_the_summary_has_the_medians_spreads_and_paired_ratio_range_of_the_runs():
    runs = _matrix()
    s = _summary(runs, _projection())
    assert (s["kind"], s["storage_profile"], s["time_scale"], s["accelerator"], s["devices"], s["memory_fraction"]) == \
        ("emulated", "paper", 16.0, "a100", 2, 0.1)
    for b in ("128", "1024"):
        e = {x["system"]: {} for x in runs}
        for x in runs:
            if x["batch"] == int(b) and x["profile"] == "paper" and x["scale"] == 16.0:
                e[x["system"]][x["round"]] = x["summary"]["epoch_steady_s"]
        for sys_, v in s["batches"][b]["systems"].items():
            vals = list(e[sys_].values())
            assert v["median_s"] == pytest.approx(np.median(vals))
            assert v["spread"] == pytest.approx((max(vals) - min(vals)) / np.median(vals))
            assert (v["runs"], v["valid_runs"]) == (3, 3)
        paired = [e["distdgl"][r] / e["lsm"][r] for r in range(3)]
        got = s["batches"][b]["distdgl_vs_lsm"]
        assert got["median"] == pytest.approx(np.median(list(e["distdgl"].values())) / np.median(list(e["lsm"].values())))
        assert (got["min"], got["max"]) == (pytest.approx(min(paired)), pytest.approx(max(paired)))
    measured = s["batches"]["1024"]["distdgl_vs_lsm"]["median"]
    assert s["projection"]["relative_error"] == pytest.approx(3.0 / measured - 1)
    assert s["projection"]["met"] is (abs(3.0 / measured - 1) <= 0.10)
    assert s["projection"]["by_system"] == {"lsm": pytest.approx(0.02), "distdgl": pytest.approx(0.02)}
    assert s["projection"]["hardware"] == "paper"


def test_the_projection_is_met_only_when_each_system_and_the_ratio_are_within_its_limit():
    runs = _matrix()
    measured = _summary(runs)["batches"]["1024"]["distdgl_vs_lsm"]["median"]
    p = _summary(runs, _projection(10.0, 10.0 * measured, {"distdgl": -0.15}))["projection"]
    assert p["relative_error"] == pytest.approx(0.0, abs=1e-9) and p["met"] is False  # Dist-DGL's epoch 15 % off
    assert p["by_system"]["distdgl"] == pytest.approx(-0.15)
    p = _summary(runs, _projection(10.0, 12.0 * measured))["projection"]
    assert p["relative_error"] == pytest.approx(0.2) and p["met"] is False  # each system within, the ratio not
    assert _summary(runs, _projection(10.0, 10.0 * measured))["projection"]["met"] is True
    # no valid run: no projected ratio, nothing met or failed
    p = _summary(runs, _projection(valid=False))["projection"]
    assert p["distdgl_vs_lsm"] is None and p["met"] is None
    assert "each system's projected epoch against its emulated one: lsm" in tb.fragment(
        _summary(runs, _projection()), "charged")


def test_the_validation_flags_follow_the_three_checks_and_the_pacing():
    runs = _matrix()
    v = _summary(runs)["validation"]
    assert v["replication"]["met"] is True  # 1 % noise on 3 runs
    lsm_s = np.median([r["summary"]["epoch_steady_s"] for r in runs
                       if (r["system"], r["batch"], r["profile"], r["scale"]) == ("lsm", 128, "paper", 16.0)])
    assert v["dilation"]["met"] is False and v["dilation"]["by_system"]["lsm"] == pytest.approx(2.2 / lsm_s - 1)
    assert abs(v["dilation"]["by_system"]["isolated"]) < 0.05 and v["dilation"]["scales"] == [16.0, 32.0]
    assert v["emulator_vs_real"]["met"] is True
    assert v["emulator_vs_real"]["by_system"]["direct"] == pytest.approx(0.05)
    assert v["pacing"]["met"] is True and v["pacing"]["worst_late_fraction"] == pytest.approx(0.001)
    # the emulator check's vm runs at S = 1 have no slack: a late one is left out of that check, by
    # name, and does not fail the pacing of the paper profile's runs
    vm_late = _matrix()
    i = next(k for k, r in enumerate(vm_late) if (r["system"], r["profile"], r["round"]) == ("lsm", "vm", 0))
    vm_late[i] = _run("lsm", 128, "vm", 1.0, 0, 2.1, late=0.04)
    v = _summary(vm_late)["validation"]
    assert v["pacing"]["met"] is True and v["pacing"]["worst_late_fraction"] == pytest.approx(0.001)
    assert v["pacing"]["paper_runs"] == 36 and v["emulator_vs_real"]["left_out"] == {"lsm": ["late"]}
    assert "`vm` runs left out (their pacing fell behind at S = 1): lsm (late)" in tb.fragment(_summary(vm_late), "charged")
    late = _matrix()
    late[0] = _run("lsm", 128, "paper", 16.0, 0, 2.0, late=0.03)
    v = _summary(late)["validation"]
    assert v["pacing"]["met"] is False and v["pacing"]["worst_late_fraction"] == pytest.approx(0.03)
    assert v["pacing"]["worst_part"] == "ssd"
    # a run late on another part than the SSD (its reads on time) fails the pacing too, by that part
    gpu_late = _matrix()
    gpu_late[0] = _run("lsm", 128, "paper", 16.0, 0, 2.0, parts_late={"gpu": 0.05, "pcie": 0.002})
    v = _summary(gpu_late)["validation"]
    assert v["pacing"]["met"] is False and v["pacing"]["worst_part"] == "gpu"
    assert v["pacing"]["worst_late_fraction"] == pytest.approx(0.05) and v["pacing"]["valid_runs"] == 35
    assert "the latest part 5.00 % (gpu), 35 of 36 runs valid" in tb.fragment(_summary(gpu_late), "charged")
    assert _summary(late)["batches"]["128"]["systems"]["lsm"]["valid_runs"] == 2


def test_a_system_at_its_own_scale_is_summarised_and_checked_for_dilation_at_its_own_two_scales():
    runs = []
    for r in range(3):
        for b in (128, 1024):
            runs.append(_run("lsm", b, "paper", 256.0, r, 2.0 * (1 + 0.01 * r)))
            runs.append(_run("distdgl", b, "paper", 16.0, r, 6.0 * (1 + 0.01 * r)))
        runs.append(_run("lsm", 128, "paper", 512.0, r, 2.0 * (1 + 0.01 * r)))
        runs.append(_run("distdgl", 128, "paper", 32.0, r, 6.6))  # 10 % off at its 2 S
        runs.append(_run("lsm", 128, "paper", 16.0, r, 9.0))      # at the base S: not lsm's point
    s = tb.summarise(runs, None, scale=16.0, system_scales={"lsm": 256.0}, accelerator="a100", devices=2,
                     fraction=0.1, dataset="synthetic-tiny", batches=[128, 1024], validation_batch=128)
    assert s["time_scale_by_system"] == {"distdgl": 16.0, "lsm": 256.0}
    assert s["batches"]["1024"]["systems"]["lsm"]["median_s"] == pytest.approx(2.02)
    assert s["batches"]["1024"]["distdgl_vs_lsm"]["median"] == pytest.approx(6.06 / 2.02)
    d = s["validation"]["dilation"]
    assert d["by_system"]["lsm"] == pytest.approx(0.0, abs=1e-9) and d["by_system"]["distdgl"] == pytest.approx(6.6 / 6.06 - 1)
    assert d["scales_by_system"] == {"distdgl": [16.0, 32.0], "lsm": [256.0, 512.0]} and d["met"] is False
    assert "lsm at its own S = 256" in tb.fragment(s, "charged in user space")


def test_dist_dgl_at_other_host_speeds_gives_the_class_at_each_f_and_stays_out_of_the_matrix():
    runs = _matrix()
    for r in range(2):
        runs.append({**_run("distdgl", 1024, "paper", 16.0, r, 6.0 * 8 * 0.6), "host_speed": 0.5})
        runs.append({**_run("distdgl", 1024, "paper", 8.0, r, 6.0 * 8 * 2.0), "host_speed": 2.0})
    s = _summary(runs)
    plain = _summary(_matrix())
    assert s["batches"] == plain["batches"]  # the f runs are not the matrix's
    v = s["verdict_by_host_speed"]
    r1 = s["batches"]["1024"]["distdgl_vs_lsm"]["median"]
    lsm = s["batches"]["1024"]["systems"]["lsm"]["median_s"]
    assert v["by_host_speed"]["1"]["ratio"] == pytest.approx(r1)
    assert v["by_host_speed"]["0.5"]["ratio"] == pytest.approx(6.0 * 8 * 0.6 / lsm)
    assert v["by_host_speed"]["2"]["ratio"] == pytest.approx(6.0 * 8 * 2.0 / lsm)
    assert v["missing"] == [] and v["decided"] is False  # 1.8x, 3x and 6x: two classes
    assert "the claim's class by f" in tb.fragment(s, "charged")
    assert v["by_host_speed"]["2"]["source"].startswith("paper S=8 f=2 batch 1024")
    assert [v["by_host_speed"][f]["distdgl_time_scale"] for f in ("1", "0.5", "2")] == [16.0, 16.0, 8.0]
    assert "f = 2 (Dist-DGL at S = 8): " in tb.fragment(s, "charged")
    assert tb.NAME.match("distdgl-b1024-paper-s32-f0.5-r1")["host_speed"] == "0.5"
    assert tb.NAME.match("distdgl-b1024-paper-s32-r1")["host_speed"] is None


def test_a_run_whose_pacing_fell_behind_is_counted_but_left_out_of_the_figures():
    runs = _matrix()
    # round 2 of lsm at batch 128: 3 % late and 40 % slower (the machine held its copy off the CPU)
    i = next(k for k, r in enumerate(runs) if (r["system"], r["batch"], r["profile"], r["scale"], r["round"])
             == ("lsm", 128, "paper", 16.0, 2))
    good = [r["summary"]["epoch_steady_s"] for k, r in enumerate(runs) if k != i and
            (r["system"], r["batch"], r["profile"], r["scale"]) == ("lsm", 128, "paper", 16.0)]
    runs[i] = _run("lsm", 128, "paper", 16.0, 2, 1.4 * runs[i]["summary"]["epoch_steady_s"], late=0.03)
    s = _summary(runs)
    row = s["batches"]["128"]["systems"]["lsm"]
    assert (row["runs"], row["valid_runs"]) == (3, 2) and row["late_fraction_max"] == pytest.approx(0.03)
    assert row["median_s"] == pytest.approx(np.median(good)) and row["max_s"] == pytest.approx(max(good))
    assert row["invalid_causes"] == ["late"]
    assert s["validation"]["replication"]["by_system"]["lsm"] < 0.05  # the slow invalid run is not a spread
    assert s["validation"]["pacing"]["met"] is False                   # but the pacing check still fails
    r = s["batches"]["128"]["distdgl_vs_lsm"]
    assert len(r["paired_by_round"]) == 2  # paired only over rounds where both runs are valid


def test_checks_without_their_runs_are_null():
    runs = [r for r in _matrix() if r["profile"] == "paper" and r["scale"] == 16.0]
    v = _summary(runs)["validation"]
    assert v["dilation"]["met"] is None and v["emulator_vs_real"]["met"] is None
    assert _summary(runs)["projection"]["met"] is None


def test_a_rate_only_dist_dgl_link_gets_its_ratio_with_the_left_out_delay_added_back():
    runs = _matrix()
    for r in runs:  # Dist-DGL's links shaped to the rate alone: 0.5 s per epoch of delay left out
        if r["system"] == "distdgl":
            r.update(network_mode="rate", missing_delay_epoch_s=0.5)
    s = _summary(runs, _projection())
    got = s["batches"]["1024"]["distdgl_vs_lsm"]
    e = {k: {x["round"]: x["summary"]["epoch_steady_s"] for x in runs
             if (x["system"], x["batch"], x["profile"], x["scale"]) == (k, 1024, "paper", 16.0)} for k in ("distdgl", "lsm")}
    assert got["missing_delay_epoch_s"] == 0.5
    assert got["median_with_delay"] == pytest.approx((np.median(list(e["distdgl"].values())) + 0.5)
                                                     / np.median(list(e["lsm"].values())))
    assert got["max_with_delay"] == pytest.approx(max((e["distdgl"][k] + 0.5) / e["lsm"][k] for k in range(3)))
    # the projection charges the NIC's latency: it is compared with the ratio the delay added back
    assert s["projection"]["relative_error"] == pytest.approx(3.0 / got["median_with_delay"] - 1)
    assert tb.network_mode(runs, "auto") == "rate"
    assert tb.network_mode([r for r in runs if r["system"] != "distdgl"], "auto") == "auto"
    text = tb.fragment(s, tb.NETWORK_WORDS["rate"])
    assert "Dist-DGL's delay left out (rate-only link) at batch 1024: at most 0.500 s per epoch" in text
    # an emulated link (or the records of before the field): no delay added, no second figure
    assert "median_with_delay" not in _summary(_matrix())["batches"]["1024"]["distdgl_vs_lsm"]


@pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake is not installed next to this Python")
def test_the_dry_run_plans_the_testbed_chain_rotated_with_its_validation_runs(tmp_path):
    ds = tmp_path / "data" / "tb"
    subprocess.run([sys.executable, "-m", "lsm_gnn.cli", "dataset", "generate", "300", "--dim", "8",
                    "--out", str(ds)], check=True, capture_output=True, env=dict(os.environ, DGLBACKEND="pytorch"))
    proc = subprocess.run(
        [str(SNAKEMAKE), "--snakefile", str(REPO / "workflow/Snakefile"), "--directory", str(tmp_path), "-n",
         "--cores", "2", "--until", "testbed_report", "--config", f"dataset={ds}", "testbed=true",
         "testbed_repeats=2", "testbed_validation_repeats=1", "testbed_time_scale=8"],
        capture_output=True, text=True, env=dict(os.environ, DGLBACKEND="pytorch"), timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    counts = dict(re.findall(r"^((?:testbed|distdgl)_\w+)\s+(\d+)$", out, re.M))
    # 4 systems x 2 batches x 2 rounds, 4 at 2 S, 3 storage systems x (vm, real)
    # and Dist-DGL at batch 1024 at f = 0.5 and 2 (testbed_host_speeds), one round
    assert counts == {"testbed_run": "26", "testbed_run_host_speed": "2", "distdgl_partition": "1",
                      "testbed_vm_profile": "1", "testbed_project": "1", "testbed_report": "1"}, out
    after = dict(re.findall(r"Missing output files: (\S+?\.json); Input files updated by another job: ([^\n]+)", out))
    base = "results/tb/testbed/runs"
    sy = ["lsm", "isolated", "direct", "distdgl"]
    # a system of testbed_system_scales at its own S (and 2 S), the others at testbed_time_scale
    own = yaml.safe_load((REPO / "config/config.yaml").read_text()).get("testbed_system_scales") or {}

    def S(system, k):
        return f"{k * float(own.get(system, 8)):g}"

    chain = [f"{base}/{sy[(r + k + i) % 4]}-b{b}-paper-s{S(sy[(r + k + i) % 4], 1)}-r{r}.json"
             for r in range(2) for k, b in enumerate((128, 1024)) for i in range(4)]
    # f = 2 at S / 2: its host charge S x f x CPU takes the matrix's wall time
    chain += [f"{base}/distdgl-b1024-paper-s{S('distdgl', 1)}-f0.5-r0.json",
              f"{base}/distdgl-b1024-paper-s{S('distdgl', 0.5)}-f2-r0.json"]
    chain += [f"{base}/{sy[i]}-b128-paper-s{S(sy[i], 2)}-r0.json" for i in range(4)]
    for prev, run in zip(chain, chain[1:]):
        assert prev in after[run], f"{run} does not wait for {prev}"
    assert "testbed_vm_profile" in out and f"{base}/lsm-b128-vm-s1-r0.json" in out
    assert f"{base}/direct-b128-real-s1-r0.json" in out


def test_a_system_without_a_valid_run_keeps_an_empty_labelled_slot_in_the_figure_and_table(tmp_path):
    runs = _matrix()
    for i, r in enumerate(runs):
        if (r["system"], r["batch"], r["profile"]) == ("distdgl", 1024, "paper"):
            runs[i] = _run("distdgl", 1024, "paper", 16.0, r["round"], 50.0, late=0.2)
    s = _summary(runs)
    assert s["batches"]["1024"]["systems"]["distdgl"]["median_s"] is None
    tb.figure(s, tmp_path / "testbed_epoch.png")
    assert (tmp_path / "testbed_epoch.png").stat().st_size > 0
    assert "| 1024 | distdgl | n/a (no valid run) |" in tb.fragment(s, "charged")
