"""The compiled xxh3_64 (lsm_gnn/utils/xxh3.py) equals the `xxhash` package's at every length, one
row or a batch of padded rows, and the row checks built on it still name the first bad row."""

from __future__ import annotations

import numpy as np
import pytest
import xxhash

from lsm_gnn.datasets import checksums
from lsm_gnn.utils import xxh3
from lsm_gnn.utils.errors import DataError

pytestmark = pytest.mark.skipif(not xxh3.NATIVE, reason="the kernel reads little-endian words natively")

# every length class of the specification: 0, 1-3, 4-8, 9-16, 17-128, 129-240, then over 240:
# a partial last block, exactly one block (1024), more than one (every length to 2100), many blocks
# with the last stripe overlapping the previous block (4097, 65543)
LENGTHS = list(range(0, 2101)) + [4096, 4096 + 1, 65536 + 7]


def reference(data: bytes) -> int:
    return xxhash.xxh3_64_intdigest(data)


def test_the_kernel_equals_the_xxhash_package_at_every_length_on_random_bytes():
    rng = np.random.default_rng(44)
    blob = rng.integers(0, 256, max(LENGTHS) + 64, dtype=np.uint8).tobytes()
    for n in LENGTHS:
        start = int(rng.integers(0, 64))   # and at any alignment of the input
        data = blob[start: start + n]
        assert xxh3.xxh3_64(data) == reference(data), n


def test_the_kernel_equals_the_xxhash_package_on_inputs_that_stress_the_arithmetic():
    # all-ones words make every lane's product and the 128-bit folds carry as far as they can
    for n in (0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 4096):
        for fill in (b"\x00", b"\xff", b"\x80"):
            assert xxh3.xxh3_64(fill * n) == reference(fill * n), (n, fill)


def test_one_batch_call_hashes_every_row_of_a_padded_array_as_the_package_does_row_by_row():
    rng = np.random.default_rng(7)
    for row_bytes in (0, 1, 2, 3, 5, 8, 12, 16, 31, 100, 128, 200, 240, 241, 700, 1024, 1500, 4096, 4097, 65536 + 7):
        stride = row_bytes + int(rng.integers(0, 24))   # padded to a longer row stride
        rows = rng.integers(0, 256, (37, max(stride, 1)), dtype=np.uint8)
        got = checksums.row_checksums(rows, row_bytes)
        want = [reference(rows[i, :row_bytes].tobytes()) for i in range(len(rows))]
        assert got.dtype == np.uint64 and got.tolist() == want, row_bytes
        assert checksums.row_checksums_per_call(rows, row_bytes).tolist() == want, row_bytes


def test_row_checksums_hash_rows_of_any_dtype_by_their_bytes():
    rng = np.random.default_rng(3)
    feats = rng.standard_normal((50, 96)).astype(np.float32)   # 384-byte rows
    got = checksums.row_checksums(feats, 96 * 4)
    assert got.tolist() == [reference(r.tobytes()) for r in feats]
    assert checksums.row_checksums(feats[:0], 96 * 4).shape == (0,)


def test_row_checksums_refuse_a_row_longer_than_the_array_holds():
    with pytest.raises(ValueError, match="row_bytes 65 exceed the 64 bytes"):
        checksums.row_checksums(np.zeros((4, 64), np.uint8), 65)


def test_check_rows_passes_sound_rows_read_in_any_order_from_a_strided_view():
    rng = np.random.default_rng(11)
    file_rows = rng.integers(0, 256, (64, 520), dtype=np.uint8)
    sums = checksums.row_checksums(file_rows, 512)
    owner, owners = 1, 3
    view = sums[owner::owners]                     # an owner file's checksums, never copied
    local = np.array([5, 0, 5, 20, 3], np.int64)
    checksums.check_rows("owner-1.bin", file_rows[owner::owners][local], local, view, 512)


def test_check_rows_names_the_first_bad_row_and_counts_the_others():
    rng = np.random.default_rng(12)
    file_rows = rng.integers(0, 256, (40, 300), dtype=np.uint8)
    sums = checksums.row_checksums(file_rows, 300)
    ids = np.array([9, 2, 31, 17, 4], np.int64)
    read = file_rows[ids].copy()
    read[2, 299] ^= 1    # row 31: the last byte
    read[4, 0] ^= 0x80   # row 4
    with pytest.raises(DataError) as e:
        checksums.check_rows("features.bin", read, ids, sums, 300)
    msg = str(e.value)
    assert "row 31 fails its xxh3_64 checksum" in msg and "2 rows of this read differ" in msg
    assert f"{int(sums[31]):016x}" in msg and f"{reference(read[2].tobytes()):016x}" in msg


def test_check_rows_ignores_the_padding_and_calls_an_owner_row_by_its_node():
    rng = np.random.default_rng(13)
    file_rows = rng.integers(0, 256, (8, 64), dtype=np.uint8)
    sums = checksums.row_checksums(file_rows, 60)
    read = file_rows[[3, 6]].copy()
    read[:, 60:] = 0xAA   # padding beyond row_bytes is not hashed
    checksums.check_rows("x", read, np.array([3, 6]), sums, 60)
    read[1, 10] ^= 4
    with pytest.raises(DataError, match=r"row 6 \(node 19\) fails"):
        checksums.check_rows("owner.bin", read, np.array([3, 6]), sums, 60, names=np.array([10, 19]))


def test_check_rows_refuses_row_numbers_outside_the_checksums():
    sums = np.zeros(4, np.uint64)
    with pytest.raises(ValueError, match="outside the 4 checksums"):
        checksums.check_rows("f", np.zeros((1, 8), np.uint8), np.array([4]), sums, 8)
    with pytest.raises(ValueError, match="2 rows but 1 row numbers"):
        checksums.check_rows("f", np.zeros((2, 8), np.uint8), np.array([0]), sums, 8)


def _bench(args):
    from click.testing import CliRunner

    from lsm_gnn.cli import cli

    res = CliRunner().invoke(cli, ["bench", "checksums", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_the_checksum_bench_reports_both_paths_on_every_point_in_json():
    import json

    obj = json.loads(_bench(["--json", "--rows", "64,96", "--row-bytes", "256", "--repeats", "2",
                             "--gil-seconds", "0.02"]))
    assert obj["baseline"] == "row_checksums_per_call" and obj["algorithm"] == "xxh3_64"
    assert [(p["rows"], p["row_bytes"]) for p in obj["points"]] == [(64, 256), (96, 256)]
    for p in obj["points"]:
        assert p["hash_ratio"]["runs"] == 2 and p["check_ratio"]["median"] > 0
        assert p["check_ms"]["before"] == p["check_old_ms"]["median"]
        assert set(p["main_thread_wait_ms"]) == {"alone", "before", "after"}
        assert p["main_thread_wait_ms"]["after"]["runs"] == 2


def test_the_checksum_bench_prints_a_table_and_refuses_bad_sizes():
    out = _bench(["--rows", "32", "--row-bytes", "4096", "--repeats", "1", "--gil-seconds", "0"])
    assert "hash old/new" in out and "4096" in out
    from click.testing import CliRunner

    from lsm_gnn.cli import cli

    res = CliRunner().invoke(cli, ["bench", "checksums", "--rows", "0"])
    assert res.exit_code != 0 and "--rows must be positive integers" in res.output
