"""One record from the ranks' training records: counts summed over devices, per epoch too."""

from lsm_gnn.config import parse_config
from lsm_gnn.ranks.launch import run_head
from lsm_gnn.ranks.merge import merge_records


def rank_result(rank: int, storage: tuple[int, int]) -> dict:
    """Rank `rank`'s result: 2 epochs whose timed windows read storage[0] and storage[1] rows."""
    epochs = [{"epoch": i, "iterations": 5, "epoch_s": 10.0 + rank,
               "rows": {"requests": 100, "distinct": 100, "local_hits": 100 - s, "peer_hits": 0,
                        "victim_hits": 0, "storage_rows": s},
               "io": {"bytes_read": 4096 * s, "io_ops": s}} for i, s in enumerate(storage)]
    rows = {k: sum(e["rows"][k] for e in epochs) for k in epochs[0]["rows"]}
    io = {k: sum(e["io"][k] for e in epochs) for k in epochs[0]["io"]}
    record = {"kind": "train", "status": "complete", "epochs": epochs,
              "metrics": {"rows": rows, "traffic": {"storage_bytes": io["bytes_read"], "storage_io_ops": io["io_ops"],
                                                    "host_to_device_bytes": 0},
                          "time": {"epoch_cold_s": 10.0 + rank, "epoch_steady_s": 10.0 + rank},
                          "ranks": {str(rank): {"rows": rows}}}}
    memory = {"cache_bytes": 1, "victim_bytes": 0, "total_bytes": 1, "fraction_of_features": 0.1}
    return {"record": record, "source": {"rows": rows, "stats": {}, "memory": memory}}


def test_epochs_count_every_device_like_the_totals():
    cfg = parse_config({"dataset": {"path": "."}, "distributed": {"devices": 2, "mode": "isolated"}})
    rec = merge_records(run_head(cfg), [rank_result(0, (10, 30)), rank_result(1, (20, 40))], "train", 1.0)
    assert [e["rows"]["storage_rows"] for e in rec["epochs"]] == [30, 70]
    assert [e["io"]["io_ops"] for e in rec["epochs"]] == [30, 70]
    assert sum(e["rows"]["storage_rows"] for e in rec["epochs"]) == rec["metrics"]["rows"]["storage_rows"] == 100
    assert sum(e["io"]["bytes_read"] for e in rec["epochs"]) == rec["metrics"]["traffic"]["storage_bytes"]
    # times stay rank 0's per epoch; the run's epoch times are the slowest rank's
    assert rec["epochs"][0]["epoch_s"] == 10.0 and rec["metrics"]["time"]["epoch_steady_s"] == 11.0


def test_the_record_says_why_the_rows_fell_back_to_the_collective():
    cfg = parse_config({"dataset": {"path": "."}, "distributed": {"devices": 2, "mode": "shared"}})
    ranks = [rank_result(0, (10, 30)), rank_result(1, (20, 40))]
    for r in ranks:
        r["source"]["row_transport"] = "collective"
    ranks[1]["source"]["row_transport_note"] = "rank 1 does not map its peers' /dev/shm segments (not one host?)"
    md = merge_records(run_head(cfg), ranks, "train", 1.0)["metrics"]["multidevice"]
    assert md["row_transport"] == "collective"
    assert md["row_transport_note"] == ranks[1]["source"]["row_transport_note"]
    for r in ranks:
        r["source"].pop("row_transport_note", None)
    assert "row_transport_note" not in merge_records(run_head(cfg), ranks, "train", 1.0)["metrics"]["multidevice"]
