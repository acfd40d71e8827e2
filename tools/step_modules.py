"""Which lsm_gnn modules one training step of `lsm` on 2 devices touches, and how often it enters
the contract module: rank r's profiler (sys.setprofile + threading.setprofile, so the sampling
thread counts) is on from the start of the source's 4th fetch to the start of its 5th, i.e. one
whole step after three warm-up steps (lazy imports done): fetch t (split, exchange, the owner's
cache), the train step t, advance(t+1's window), the sampling thread's work meanwhile.

Counted: the lsm_gnn modules with at least one Python or C call in that step; the contract's
entries, calls into lsm_gnn.contract from a frame outside it (the public fetch calling
its own check_ids is one entry), and the calls of the id check (check_feature_ids)."""
import json, os, sys, threading, collections

STATE = {"on": False, "calls": collections.Counter(), "funcs": collections.Counter(), "entries": collections.Counter()}
CONTRACT = "lsm_gnn.contract"


def _prof(frame, event, arg):
    if not STATE["on"]:
        return
    if event == "call":
        mod = frame.f_globals.get("__name__", "")
        name = frame.f_code.co_name
    elif event == "c_call":
        mod = getattr(arg, "__module__", None) or ""
        name = getattr(arg, "__name__", "?")
    else:
        return
    if mod.startswith("lsm_gnn"):
        STATE["calls"][mod] += 1
        STATE["funcs"][f"{mod}.{name}"] += 1
        caller = frame.f_back if event == "call" else frame
        if mod == CONTRACT and (caller is None or caller.f_globals.get("__name__") != CONTRACT):
            STATE["entries"][f"{mod}.{name}"] += 1


def prof_worker(cfg, rank, world_size, heartbeat, args):
    from lsm_gnn.ranks.workers import train_worker
    from lsm_gnn.sources import shared

    orig = shared.SharedCacheFeatureSource.fetch
    n = {"fetch": 0}

    def fetch(self, ids):
        n["fetch"] += 1
        if n["fetch"] == 4:
            STATE["on"] = True
        elif n["fetch"] == 5:
            STATE["on"] = False
        return orig(self, ids)

    shared.SharedCacheFeatureSource.fetch = fetch
    sys.setprofile(_prof)
    threading.setprofile(_prof)
    try:
        out = train_worker(cfg, rank, world_size, heartbeat, args)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    with open(os.path.join(args["out"], f"rank{rank}.json"), "w") as f:
        json.dump({"calls": STATE["calls"], "funcs": STATE["funcs"], "entries": STATE["entries"], "fetches": n["fetch"]}, f, indent=1)
    return out


if __name__ == "__main__":
    import tempfile
    from pathlib import Path
    sys.path.insert(0, str(Path.cwd() / "tests"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the ranks import this module by name
    from conftest import _build_random_dataset
    from lsm_gnn.config import load_config
    from lsm_gnn.ranks.launch import run_multi_device

    tmp = Path(tempfile.mkdtemp(prefix="i34m-"))
    ds = _build_random_dataset(tmp / "ds", num_nodes=2000, dim=32)
    cfg = load_config(None, {"dataset.path": str(ds.root), "storage.reader": "buffered", "storage.drop_page_cache": False,
                             "cache.enabled": True, "cache.capacity_fraction": 0.1, "distributed.devices": 2,
                             "distributed.mode": "shared", "sampler.batch_size": 64, "sampler.fanouts": [4, 4],
                             "model.hidden": 16, "train.epochs": 1, "train.eval": False, "train.threads": 1})
    run_multi_device(cfg, worker="step_modules:prof_worker", worker_args={"out": str(tmp)}, progress=False)
    for r in (0, 1):
        d = json.load(open(tmp / f"rank{r}.json"))
        mods = sorted(d["calls"])
        entries = d["entries"]
        checks = d["funcs"].get(f"{CONTRACT}.check_feature_ids", 0)
        print(f"rank {r}: {len(mods)} lsm_gnn modules, contract entered {sum(entries.values())} times {entries}, "
              f"ids checked {checks} times")
        print("  " + ", ".join(m.replace("lsm_gnn.", "") for m in mods))
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
