"""The projection against the emulated testbed: a run record of the emulated testbed (storage.device
emulated, the paper's parts charged at scale S, the epoch divided back in `metrics.emulation`)
projected onto the hardware profile the testbed charged it at (`paper`), with the machine the
emulation really had: the emulated SSDs' figures (`metrics.storage.profile`) and the host core
the host stages were charged at, f x this machine's core (the host figures of `this-machine`, put at
this machine's speed now by the CPU speed index, x f). `lsm-gnn bench validate` and `bench compare`
report it as the check `projection_vs_emulation` (lsm_gnn.bench.validate); docs/projection.md,
"The projection against the emulated testbed".
"""

from __future__ import annotations

from lsm_gnn.utils.errors import DataError

LIMIT = 0.10
"""The projection of an emulated run against that run's emulated steady epoch: within 10 % (issue 43)."""

HOST_FIGURES = ("cpu.kvstore_row_s", "cpu.rpc_sample_rows_per_s", "cpu.io_cpu_s", "cpu.fault_cpu_s",
                "links.host_memory.bandwidth")
"""The paper profile's host-core figures the emulation replaces by this machine's core x f."""


def is_emulated(rec: dict) -> bool:
    m = rec.get("metrics") or {}
    return (m.get("storage") or {}).get("device") == "emulated" and \
        (m.get("emulation") or {}).get("epoch_steady_s") is not None


def emulation_sets(rec: dict, source: str, index_s: float) -> list[str]:
    """Profile overrides that make the record's hardware profile the machine its emulation had:
    the emulated SSDs, and the host figures as this machine's core now (CPU speed index `index_s`)
    x the host factor f the testbed charged (`metrics.testbed.host_speed`, else the profile's);
    Dist-DGL's from the run's own host charges where it has them (`charged_host_sets`)."""
    from lsm_gnn.project.calibrate import CPU_TIMES, speed_sets
    from lsm_gnn.project.profiles import load_profile

    m = rec["metrics"]
    sp = (m.get("storage") or {}).get("profile") or {}
    ssd = sp.get("ssd")
    if not ssd:
        raise DataError(source, "an emulated run record without its storage device profile",
                        expected="metrics.storage.profile.ssd", found="none")
    sets = [f"storage.ssd_iops={ssd['iops']!r}", f"storage.ssd_bandwidth={ssd['bandwidth']!r}",
            f"storage.latency_s={ssd['latency_s']!r}", f"storage.ssds_per_device={sp['ssds_per_device']!r}",
            f"storage.shared={'true' if sp.get('shared') else 'false'}"]
    here = load_profile("this-machine")
    speed, _ = speed_sets(here, index_s)
    now = dict(x.split("=", 1) for x in speed)
    f = host_speed(rec)
    for key in HOST_FIGURES:
        node = here.model_dump()
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        v = float(now.get(key, node))
        # seconds grow with f, rates shrink with it
        sets.append(f"{key}={(v * f if key in CPU_TIMES else v / f)!r}")
    charged = charged_host_sets(rec, source)  # this run's own charges, where it has them, win
    sets = [x for x in sets if x.partition("=")[0] not in charged]
    return sets + [f"{k}={v!r}" for k, v in charged.items()]


def charged_host_sets(rec: dict, source: str) -> dict:
    """Dist-DGL's host figures as the emulation charged them in this run (`metrics.testbed.stages`:
    each host stage's charge, S x f x its thread CPU time, divided back): the trainer's KVStore
    work per row it pulls, its sampling rate, and the servers' pull handler per row a machine sends
    (over every iteration the trainers ran: the servers are charged for every request).
    These are this machine's core x f measured in the same run (as `--storage-from` takes the SSD
    from the same run), so the check tests how the stages combine, not these constants. Empty
    where the record has no such charges."""
    from lsm_gnn.project.counts import counts_from_record

    st = ((rec.get("metrics") or {}).get("testbed") or {}).get("stages") or {}
    if rec.get("system") != "distdgl" or not st.get("exchange_rows") or not st.get("sample"):
        return {}
    c = counts_from_record(rec, source)
    n = st["exchange_rows"]["count"]  # trainer iterations charged (every trainer's timed ones)
    out = {"cpu.kvstore_row_s": st["exchange_rows"]["charged_s"] / n / c.rows,
           "cpu.rpc_sample_rows_per_s": c.rows / (st["sample"]["charged_s"] / n)}
    run = sum(int(e.get("iterations") or 0) for e in rec.get("epochs") or [])  # a trainer's, every epoch
    served = (st.get("server_pull") or {}).get("charged_s", 0.0)
    if c.network_bytes_per_machine and served and run:
        # the servers' charges hold every request of the run (they cannot tell the timed windows)
        rows_sent = c.network_bytes_per_machine / c.row_bytes  # per machine and iteration
        out["cpu.kvstore_server_row_s"] = served / run / c.machines * max(1, c.servers // c.machines) / rows_sent
    return out


def host_speed(rec: dict) -> float:
    m = rec["metrics"]
    f = (m.get("testbed") or {}).get("host_speed")
    if f is None:
        f = ((rec.get("config") or {}).get("emulation") or {}).get("host_speed")
    if f is None:
        from lsm_gnn.project.profiles import load_profile

        f = load_profile(hardware_profile(rec)).cpu.host_time_factor
    return float(f)


def hardware_profile(rec: dict) -> str:
    m = rec["metrics"]
    return (m.get("testbed") or {}).get("profile") or \
        ((rec.get("config") or {}).get("emulation") or {}).get("hardware_profile") or "paper"


def emulated_bound(rec: dict) -> dict:
    """The emulation's side: the record stage with the longest divided-back time per iteration and
    the part of the paper's testbed that runs it (lsm_gnn.testbed)."""
    from lsm_gnn.testbed import component

    pi = (rec["metrics"]["emulation"].get("per_iteration") or {})
    if not pi:
        return {"stage": None, "part": None, "seconds": None}
    stage = max(pi, key=lambda k: pi[k] or 0.0)
    return {"stage": stage, "part": component(rec["system"], stage), "seconds": pi[stage]}


def project_emulated(rec: dict, source: str, index_s: float) -> dict:
    """One emulated record projected on its testbed's profile (see the module) against its emulated
    steady epoch: the error, both sides' bound stage, whether the run was valid."""
    from lsm_gnn.project.cli import load_profile_with
    from lsm_gnn.project.counts import counts_from_record
    from lsm_gnn.project.model import project

    if not is_emulated(rec):
        raise DataError(source, "not a run of the emulated testbed",
                        expected="metrics.storage.device emulated and metrics.emulation.epoch_steady_s",
                        found=f"storage.device {((rec.get('metrics') or {}).get('storage') or {}).get('device')!r}")
    em = rec["metrics"]["emulation"]
    sets = emulation_sets(rec, source, index_s)
    prof = load_profile_with(hardware_profile(rec), sets)
    pr = project(counts_from_record(rec, source), prof)
    emu = float(em["epoch_steady_s"])
    return {"system": rec["system"], "source": source, "profile": prof.name, "time_scale": em.get("time_scale"),
            "host_speed": host_speed(rec), "profile_overrides": sets,
            "projected_epoch_s": pr.epoch_s, "emulated_epoch_s": emu, "error": pr.epoch_s / emu - 1.0,
            "projected_bound": {"bottleneck": pr.bottleneck, "stage": pr.bottleneck_stage},
            "emulated_bound": emulated_bound(rec),
            "valid": bool(em.get("valid", True)), "invalid_causes": list(em.get("invalid_causes") or [])}


def check(rows: list[dict], systems=None, limit: float = LIMIT) -> dict | None:
    """The check over projected emulated runs (`project_emulated` rows): per system its runs'
    errors, the median error of its valid runs and both sides' bound stage; `ok` when every one of
    `systems` (default: claim (a)'s, lsm_gnn.project.model.CLAIM_SYSTEMS) has a valid run and each
    median error is within `limit`; None without any row of those systems."""
    from statistics import median

    from lsm_gnn.project.model import CLAIM_SYSTEMS

    systems = tuple(systems or CLAIM_SYSTEMS)
    by = {}
    for r in rows:
        if r["system"] in systems:
            by.setdefault(r["system"], []).append(r)
    if not by:
        return None
    out = {}
    for s, rs in by.items():
        valid = [r for r in rs if r["valid"]]
        err = median(r["error"] for r in valid) if valid else None
        bad = None if valid else median(r["error"] for r in rs)
        causes = "; ".join(dict.fromkeys(c for r in rs for c in r["invalid_causes"]))
        last = (valid or rs)[-1]
        out[s] = {"error": err, "runs": [{k: r[k] for k in ("source", "error", "projected_epoch_s",
                                                             "emulated_epoch_s", "valid")} for r in rs],
                  "projected_bound": last["projected_bound"], "emulated_bound": last["emulated_bound"],
                  "valid_runs": len(valid), "error_invalid_runs": bad,
                  "why_none": None if valid else f"no valid run (the invalid runs: {100 * bad:+.1f} %): {causes}"}
    missing = [s for s in systems if s not in out]
    ok = not missing and all(v["error"] is not None and abs(v["error"]) <= limit for v in out.values())
    return {"limit": limit, "profiles": sorted({r["profile"] for r in rows}), "systems": out, "missing": missing,
            "ok": ok}
