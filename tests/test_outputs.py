"""Every output path is checked before work starts (lsm_gnn.utils.outpaths), `--force` replaces only
what this project wrote, and the writer lock lives beside its output: no command of the CLI that
takes --out, --record or --force deletes or replaces a file it did not write."""

from __future__ import annotations

import os
import socket
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_gnn.utils.errors import OutputError
from lsm_gnn.utils.outpaths import check_output

REPO = Path(__file__).resolve().parents[1]


def snapshot(folder: Path) -> dict:
    """Every entry under `folder` (links not followed): its kind and content, to compare before/after."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            out[rel] = ("file", p.read_bytes())
        elif p.is_dir():
            out[rel] = ("dir", None)
        else:
            out[rel] = ("other", p.stat().st_mode)
    return out


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "lsm_gnn.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def refused(proc, *names):
    """The command ended in a named error, not a traceback."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for n in names:
        assert n in proc.stderr, proc.stderr


# ---- the rule --------------------------------------------------------------------------------------
def test_a_device_is_never_an_output_even_for_root():
    with pytest.raises(OutputError, match="character device"):
        check_output("/dev/null", "file", "run record")


def test_a_fifo_a_socket_a_symlink_and_a_folder_are_refused_as_output_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    (tmp_path / "target").write_text("the user's")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "folder").mkdir()
    try:
        for name, kind in (("fifo", "FIFO"), ("sock", "socket"), ("link", "symbolic link"), ("folder", "a folder")):
            with pytest.raises(OutputError, match=kind) as e:
                check_output(tmp_path / name, "file")
            assert name in str(e.value)
    finally:
        s.close()
    assert (tmp_path / "target").read_text() == "the user's"


def test_a_regular_file_or_nothing_is_accepted_and_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.json").write_text("{}")
    assert check_output("old.json") == tmp_path / "old.json"
    assert check_output("sub/new.json") == tmp_path / "sub" / "new.json"
    assert check_output("ds", "dir") == tmp_path / "ds"


def test_a_name_beyond_the_file_systems_limit_is_refused_naming_the_limit(tmp_path):
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    with pytest.raises(OutputError, match=f"allows {name_max} per name"):
        check_output(tmp_path / ("r" * (name_max - 5)), "file")
    with pytest.raises(OutputError, match="allows"):
        check_output(tmp_path / "/".join(["d" * 200] * 40) / "x.json", "file")


def test_a_file_in_the_way_of_the_folder_is_named(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError, match="afile.*not a folder"):
        check_output(tmp_path / "afile" / "run.json")


def _check_as_a_user(path: Path) -> str:
    """check_output(path)'s answer ("accepted" or "refused: <message>") for a user without root's
    override of permissions: root writes in any folder whatever its mode (CI runs as root), so under
    root it is asked in a forked child that has dropped to `nobody` first (the module is loaded
    already: the child imports nothing, so the checkout need not be readable by `nobody`)."""
    def ask() -> str:
        try:
            check_output(path)
        except OutputError as e:
            return f"refused: {e}"
        return "accepted"

    if os.geteuid() != 0:
        return ask()
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
        uid, gid = nobody.pw_uid, nobody.pw_gid
    except KeyError:
        uid = gid = 65534
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports through the pipe and never returns into pytest
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)  # real and effective: os.access (what check_output asks) uses the real uid
            answer = ask() if os.geteuid() != 0 else "error: still root"
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the test
            answer = f"error: {type(e).__name__}: {e}"
        os.write(w, answer.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        answer = f.read().decode()
    os.waitpid(pid, 0)
    return answer


def test_a_folder_without_write_permission_is_refused_before_any_work():
    import tempfile

    # a folder that `nobody` can reach (pytest's tmp_path lies under a root-only folder when run as root)
    with tempfile.TemporaryDirectory(prefix="lsm-gnn-outputs-") as d:
        os.chmod(d, 0o755)
        ro, rw = Path(d) / "ro", Path(d) / "rw"
        ro.mkdir(mode=0o555)
        rw.mkdir()
        os.chmod(rw, 0o777)
        answer = _check_as_a_user(ro / "run.json")
        assert answer.startswith("refused: ") and "not writable" in answer and str(ro) in answer, answer
        assert _check_as_a_user(rw / "run.json") == "accepted"  # the same user writes where the mode allows
        assert sorted(p.name for p in Path(d).rglob("*")) == ["ro", "rw"]  # nothing written while asking


def test_the_atomic_writer_replaces_no_symlink_and_no_device(tmp_path):
    from lsm_gnn.utils.atomic import write_json

    (tmp_path / "target.json").write_text("the user's")
    (tmp_path / "out.json").symlink_to("target.json")
    with pytest.raises(OutputError, match="symbolic link"):
        write_json(tmp_path / "out.json", {"a": 1})
    assert (tmp_path / "out.json").is_symlink() and (tmp_path / "target.json").read_text() == "the user's"
    with pytest.raises(OutputError, match="character device"):
        write_json("/dev/null", {"a": 1})
    assert Path("/dev/null").is_char_device()


entries = st.sampled_from(["none", "file", "dir", "link-file", "link-dir", "dangling", "fifo"])
names = st.text(alphabet=string.ascii_letters + string.digits + "._- ", min_size=1, max_size=300).filter(
    lambda n: n not in (".", ".."))


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=entries, name=names, kind=st.sampled_from(["file", "dir"]))
def test_any_output_path_is_accepted_only_when_absent_or_of_its_kind_and_nothing_is_touched(tmp_path, entry, name,
                                                                                          kind):
    folder = tmp_path / "case"
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "keep").write_text("k")
    p = folder / name
    try:
        if entry == "file":
            p.write_text("x")
        elif entry == "dir":
            p.mkdir()
        elif entry.startswith("link"):
            p.symlink_to(folder / "keep" if entry == "link-file" else folder)
        elif entry == "dangling":
            p.symlink_to(folder / "nowhere")
        elif entry == "fifo":
            os.mkfifo(p)
    except OSError:  # a name this file system refuses to create: the checker must refuse it too
        with pytest.raises(OutputError):
            check_output(p, kind)
        return
    before = snapshot(folder)
    try:
        got = check_output(p, kind)
    except OutputError as e:
        assert str(e)  # names the path (the name cut to fit) and what is there
        assert entry != "none" or len(os.fsencode(name)) > 200
    else:
        assert got == p
        assert entry == "none" or (entry == "file" and kind == "file") or (entry == "dir" and kind == "dir")
    assert snapshot(folder) == before


# ---- the lock beside the output --------------------------------------------------------------------
def test_the_lock_of_an_output_lives_beside_it_and_is_gone_after(tmp_path):
    from lsm_gnn.utils.locks import exclusive, is_locked, lock_file

    rec = tmp_path / "run.json"
    assert lock_file(rec) == tmp_path / ".run.json.lock"
    with exclusive(rec):
        assert is_locked(rec)
    assert not is_locked(rec) and list(tmp_path.iterdir()) == []


def test_two_writers_of_one_record_from_different_temporary_folders_are_refused_by_name(tmp_path):
    """The lock used to live in <tmp>/lsm-gnn-locks: two runs with different $TMPDIRs both wrote."""
    rec = tmp_path / "shared.json"
    code = ("import sys, time; from lsm_gnn.records import claim_record\n"
            "with claim_record(sys.argv[1]):\n    print('held', flush=True); time.sleep(30)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path / "t1"))
    (tmp_path / "t1").mkdir()
    first = subprocess.Popen([sys.executable, "-c", code, str(rec)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        (tmp_path / "t2").mkdir()
        second = subprocess.run([sys.executable, "-c", code, str(rec)], capture_output=True, text=True, timeout=60,
                                env=dict(env, TMPDIR=str(tmp_path / "t2")))
        assert second.returncode != 0 and "BusyError" in second.stderr and "shared.json" in second.stderr
    finally:
        first.kill()
        first.wait()


# ---- --force and every command that writes: nothing it did not write is deleted or replaced --------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "ds"
    proc = cli("dataset", "generate", "400", "--dim", "8", "--out", out, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return out


def user_files(folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("years of work")
    (folder / "notes").mkdir(exist_ok=True)
    (folder / "notes" / "a.txt").write_text("a")
    return snapshot(folder)


def test_generate_with_force_in_a_folder_of_user_files_refuses_and_deletes_nothing(tmp_path):
    before = user_files(tmp_path / "work")
    proc = cli("dataset", "generate", "tiny", "--out", ".", "--force", "--no-progress", cwd=tmp_path / "work")
    refused(proc, "--force replaces only")
    assert snapshot(tmp_path / "work") == before


def test_generate_with_force_replaces_its_own_dataset_but_not_one_with_a_user_file_in_it(tmp_path):
    ds = tmp_path / "ds"
    assert cli("dataset", "generate", "300", "--dim", "8", "--out", ds, "--no-progress").returncode == 0
    proc = cli("dataset", "generate", "300", "--dim", "8", "--seed", "1", "--out", ds, "--force", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (ds / "my-results.csv").write_text("mine")
    before = snapshot(tmp_path)
    refused(cli("dataset", "generate", "300", "--dim", "8", "--out", ds, "--force", "--no-progress"), "my-results.csv")
    assert snapshot(tmp_path) == before


def test_generate_with_force_replaces_its_own_dataset_whose_metadata_alone_snakemake_removed(tmp_path):
    # Snakemake deletes a killed job's declared output (metadata.json) before the rerun that passes
    # --force: the rest is still recognised as ours by the metadata's hash file and its names
    ds = tmp_path / "ds"
    assert cli("dataset", "generate", "300", "--dim", "8", "--out", ds, "--no-progress").returncode == 0
    (ds / "metadata.json").unlink()
    proc = cli("dataset", "generate", "300", "--dim", "8", "--out", ds, "--force", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert (ds / "metadata.json").is_file()
    # without metadata.json, a file of the user's beside ours still refuses it, and nothing goes
    (ds / "metadata.json").unlink()
    (ds / "my-results.csv").write_text("mine")
    before = snapshot(tmp_path)
    refused(cli("dataset", "generate", "300", "--dim", "8", "--out", ds, "--force", "--no-progress"), "--force")
    assert snapshot(tmp_path) == before


def test_generate_with_force_onto_a_symlinked_dataset_is_refused_without_a_traceback(tmp_path, tiny):
    (tmp_path / "link").symlink_to(tiny)
    before = snapshot(tiny)
    refused(cli("dataset", "generate", "300", "--dim", "8", "--out", tmp_path / "link", "--force", "--no-progress"),
            "symbolic link")
    assert snapshot(tiny) == before and (tmp_path / "link").is_symlink()


def test_import_with_force_over_user_files_deletes_nothing(tmp_path):
    import numpy as np

    edges = tmp_path / "e.npy"
    np.save(edges, np.array([[0, 1], [1, 2], [2, 0]], dtype=np.int64))
    before = user_files(tmp_path / "mine")
    refused(cli("dataset", "import", "--edges", edges, "--out", tmp_path / "mine", "--force", "--no-progress"),
            "mine")
    assert snapshot(tmp_path / "mine") == before


def test_prepare_into_a_folder_of_user_files_deletes_nothing(tmp_path):
    before = user_files(tmp_path / "out")
    (tmp_path / "raw").mkdir()
    proc = cli("dataset", "prepare", "igb", str(tmp_path / "raw"), str(tmp_path / "out"), "--size", "tiny",
               "--no-progress")
    refused(proc)
    assert snapshot(tmp_path / "out") == before


def test_owners_out_onto_a_symlinked_owner_file_replaces_nothing(tmp_path, tiny):
    (tmp_path / "owners-2").mkdir()
    (tmp_path / "keep.bin").write_text("k")
    (tmp_path / "owners-2" / "owner-1.bin").symlink_to(tmp_path / "keep.bin")
    before = snapshot(tmp_path)
    refused(cli("dataset", "owners", tiny, "--devices", "2", "--out", tmp_path, "--no-progress"), "symbolic link")
    assert snapshot(tmp_path) == before


def test_train_record_onto_a_symlink_or_a_fifo_replaces_nothing(tmp_path, tiny):
    (tmp_path / "target.json").write_text("the user's")
    (tmp_path / "run.json").symlink_to("target.json")
    os.mkfifo(tmp_path / "fifo.json")
    before = snapshot(tmp_path)
    for rec, what in (("run.json", "symbolic link"), ("fifo.json", "FIFO")):
        refused(cli("train", "--config", "memory", "--dataset", tiny, "--epochs", "1", "--quiet",
                    "--record", tmp_path / rec), what)
    assert snapshot(tmp_path) == before


def test_simulate_record_out_and_trace_onto_links_replace_nothing(tmp_path, tiny):
    (tmp_path / "target").write_text("the user's")
    for name in ("rec.json", "out.csv", "t.npz"):
        (tmp_path / name).symlink_to("target")
    before = snapshot(tmp_path)
    base = ["simulate", tiny, "--trace-only", "--max-batches", "1", "--batch-size", "32", "--fanouts", "2,2"]
    for opt, name in (("--record", "rec.json"), ("--out", "out.csv"), ("--save-trace", "t.npz")):
        refused(cli(*base, opt, tmp_path / name), "symbolic link")
    assert snapshot(tmp_path) == before


def test_report_compare_out_onto_a_symlink_replaces_nothing(tmp_path):
    (tmp_path / "target.md").write_text("the user's")
    (tmp_path / "out.md").symlink_to("target.md")
    before = snapshot(tmp_path)
    proc = cli("report", "compare", REPO / "reports" / "reference", REPO / "reports" / "reference", "--out",
               tmp_path / "out.md")
    refused(proc, "symbolic link")
    assert snapshot(tmp_path) == before


def test_a_sweep_removes_a_killed_writers_lock_file_but_not_a_held_one(tmp_path):
    from lsm_gnn.utils.atomic import is_leftover, sweep_leftovers
    from lsm_gnn.utils.locks import exclusive

    (tmp_path / "results").mkdir()
    stale = tmp_path / "results" / ".old.json.lock"   # what a SIGKILL of its holder leaves
    stale.write_text("")
    (tmp_path / "results" / "keep.lock.txt").write_text("x")
    with exclusive(tmp_path / "results" / "live.json") as held:
        removed = sweep_leftovers(tmp_path)
        assert held.exists()
    assert removed == [stale] and not stale.exists() and (tmp_path / "results" / "keep.lock.txt").exists()
    assert is_leftover(".old.json.lock") and not is_leftover("old.json")


@pytest.mark.parametrize("args", [
    ["bench", "device", "{ds}", "--output", "{link}"],
    ["check", "faults", "-k", "nothing-matches", "--json", "{link}"],
    ["check", "compile", "--json", "{link}"],
])
def test_a_command_with_an_output_option_refuses_a_symlink_before_any_work(tmp_path, tiny, args):
    (tmp_path / "target").write_text("the user's")
    (tmp_path / "link").symlink_to("target")
    before = snapshot(tmp_path)
    refused(cli(*[a.format(ds=tiny, link=tmp_path / "link") for a in args]), "symbolic link")
    assert snapshot(tmp_path) == before


def test_a_folder_written_into_may_be_a_symlink_to_a_folder_but_not_to_a_file(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "to-dir").symlink_to(tmp_path / "real")
    (tmp_path / "f").write_text("x")
    (tmp_path / "to-file").symlink_to(tmp_path / "f")
    assert check_output(tmp_path / "to-dir", "into") == tmp_path / "to-dir"
    with pytest.raises(OutputError, match="symbolic link"):
        check_output(tmp_path / "to-dir", "dir")   # a dataset folder is replaced whole: never through a link
    with pytest.raises(OutputError, match="no folder"):
        check_output(tmp_path / "to-file", "into")


def test_a_baseline_run_record_onto_a_symlink_replaces_nothing(tmp_path, tiny):
    (tmp_path / "target.json").write_text("the user's")
    (tmp_path / "run.json").symlink_to("target.json")
    before = snapshot(tmp_path)
    refused(cli("run", "--system", "memory", "--dataset", tiny, "--record", tmp_path / "run.json", "--no-progress"),
            "symbolic link")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("args", [["check", "gpu", "--out", "{link}"],
                                  ["bench", "compare", "--records", "{link}"]])
def test_a_folder_option_onto_a_symlink_to_a_file_is_refused_as_the_line_is_parsed(tmp_path, args):
    (tmp_path / "target").write_text("the user's")
    (tmp_path / "link").symlink_to("target")
    before = snapshot(tmp_path)
    proc = cli(*[a.format(link=tmp_path / "link") for a in args])
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert snapshot(tmp_path) == before
