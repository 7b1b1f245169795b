"""atomic_path / atomic_open: what is written is fsynced before the rename, the folder after it."""

import errno
import os
import stat

import pytest

from dcsr.data.download import fetch
from dcsr.fsutil import atomic_open, atomic_path


@pytest.fixture
def events(monkeypatch):
    """Every os.fsync (as ("fsync", path, "file" or "dir")) and os.replace, in order."""
    out = []
    fsync, replace = os.fsync, os.replace

    def record_fsync(fd):
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        out.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"), kind))
        return fsync(fd)

    def record_replace(src, dst):
        out.append(("replace", str(src), str(dst)))
        return replace(src, dst)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "replace", record_replace)
    return out


def test_a_file_is_fsynced_before_the_rename_and_its_folder_after(tmp_path, events):
    final = tmp_path / "out" / "a.txt"
    with atomic_open(final) as fh:
        fh.write("hello")
        tmp = fh.name
    assert final.read_text() == "hello"
    assert events == [("fsync", tmp, "file"), ("replace", tmp, str(final)), ("fsync", str(final.parent), "dir")]


def test_every_file_of_a_directory_is_fsynced_before_the_rename(tmp_path, events):
    final = tmp_path / "index"
    final.mkdir()
    (final / "old").write_text("replaced")
    with atomic_path(final) as tmp:
        (tmp / "sub").mkdir(parents=True)
        for name in ("a.npy", "sub/b.json"):
            (tmp / name).write_text(name)
    renamed = [i for i, e in enumerate(events) if e[0] == "replace" and e[2] == str(final)]
    assert len(renamed) == 1
    before, after = events[:renamed[0]], events[renamed[0] + 1:]
    assert {e[1] for e in before if e[0] == "fsync"} == {str(tmp / "a.npy"), str(tmp / "sub" / "b.json"),
                                                         str(tmp / "sub"), str(tmp)}
    assert after == [("fsync", str(tmp_path), "dir")]
    assert sorted(p.name for p in final.iterdir()) == ["a.npy", "sub"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_a_folder_that_cannot_be_fsynced_is_no_error(tmp_path, monkeypatch):
    fsync = os.fsync

    def no_dirs(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", no_dirs)
    with atomic_open(tmp_path / "x.txt") as fh:
        fh.write("x")
    assert (tmp_path / "x.txt").read_text() == "x"


def test_a_failed_write_leaves_nothing_and_fsyncs_nothing(tmp_path, events):
    with pytest.raises(RuntimeError):
        with atomic_open(tmp_path / "x.txt") as fh:
            fh.write("half")
            raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == [] and events == []


def test_a_download_is_fsynced_before_it_is_renamed_into_place(tmp_path, events):
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 1000)
    dest = tmp_path / "dl" / "file.bin"
    fetch(src.as_uri(), dest, progress=False)
    part = str(dest) + ".part"
    i = events.index(("replace", part, str(dest)))
    assert events[i - 1] == ("fsync", part, "file") and events[i + 1] == ("fsync", str(dest.parent), "dir")


def test_a_second_run_on_the_same_results_folder_is_refused(tmp_path, repo):
    """Two Snakemake runs started from two directories, naming one absolute results: folder:
    the second stops at once, naming the folder and the holder; the lock goes with the process."""
    import subprocess
    import sys

    import yaml

    from dcsr.fsutil import ResultsLocked, lock_results

    results = tmp_path / "shared results"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from dcsr.fsutil import lock_results; "
                               f"h = lock_results({str(results)!r}); print('locked', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(repo / "src")})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ResultsLocked, match="another run is writing these results"):
            lock_results(results)
        over = tmp_path / "over.yaml"
        over.write_text(yaml.safe_dump({"results": str(results)}))
        work = tmp_path / "elsewhere"
        work.mkdir()
        from test_workflow import snakemake

        r = snakemake(repo, work, "--cores", "1", str(results / "data" / "demo" / "psgs_w100.tsv"),  # target first
                      "--configfile", str(repo / "config" / "generated.yaml"), str(over), timeout=300)
        assert r.returncode != 0 and "another run is writing these results" in r.stdout + r.stderr
        assert not (results / "data").exists()
    finally:
        holder.kill()
        holder.wait()
    lock_results(results).close()  # the holder's end freed it


def test_a_full_disk_is_one_line_naming_the_file(capsys):
    """A script that meets ENOSPC (or any OSError) says so in one line with the file, exit 2."""
    from dcsr.cli import script

    @script
    def main():
        raise OSError(errno.ENOSPC, "No space left on device", "/results/index/shard-0.faiss.tmp")

    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1
    assert err[0] == ("error: /results/index/shard-0.faiss.tmp: No space left on device; free space on that disk (or "
                      "point results: or TMPDIR elsewhere) and run again: no partial output was kept")


def test_a_lock_file_planted_as_a_link_out_of_results_is_refused_and_its_target_untouched(tmp_path):
    """A ``.dcsr-run.lock`` that is a symbolic link (to a user's file outside results:) is not
    opened through: the run stops with one line, and the file it points to keeps its bytes."""
    from dcsr.errors import InputError
    from dcsr.fsutil import lock_results

    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    results = tmp_path / "results"
    results.mkdir()
    (results / ".dcsr-run.lock").symlink_to(victim)
    with pytest.raises(InputError) as e:
        lock_results(results)
    assert str(e.value) == (f"{results / '.dcsr-run.lock'}: is a symbolic link; the lock file of a results folder "
                            "is never opened through a link: remove it and run again")
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("link", ["tables", "tables/deep"])
def test_an_output_under_a_results_link_to_outside_is_refused(tmp_path, monkeypatch, link):
    """A folder under results: planted as a link to another folder: no write goes through it
    (the table would land in the other folder); nothing is written there, not even a temp file."""
    from dcsr.errors import InputError
    from dcsr.fsutil import RESULTS_ENV

    results, outside = tmp_path / "results", tmp_path / "elsewhere"
    outside.mkdir()
    (results / link).parent.mkdir(parents=True, exist_ok=True)
    (results / link).symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv(RESULTS_ENV, str(results))
    final = results / "tables" / "deep" / "t.md"
    with pytest.raises(InputError) as e:
        with atomic_open(final) as fh:
            fh.write("| forged |\n")
    assert str(e.value) == (f"{final}: {results / link} is a symbolic link to {outside}, outside the results folder "
                            f"{results}; no output is written through a link out of results: (remove the link)")
    assert list(outside.rglob("*")) == []


def test_links_inside_results_and_a_linked_results_folder_are_written_through(tmp_path, monkeypatch):
    """What stays legal: results: itself a link (to scratch space, say), and a link under results:
    to another folder under it."""
    from dcsr.fsutil import RESULTS_ENV

    scratch = tmp_path / "scratch"
    (scratch / "real").mkdir(parents=True)
    results = tmp_path / "results"
    results.symlink_to(scratch, target_is_directory=True)
    (scratch / "alias").symlink_to(scratch / "real", target_is_directory=True)
    monkeypatch.setenv(RESULTS_ENV, str(results))
    with atomic_open(results / "alias" / "t.md") as fh:
        fh.write("ok")
    with atomic_open(tmp_path / "not-under-results.txt") as fh:  # outside results: is not this check's business
        fh.write("ok")
    assert (scratch / "real" / "t.md").read_text() == "ok"


def test_a_results_folder_holding_a_link_out_of_it_or_a_dangling_one_is_refused(tmp_path):
    from dcsr.errors import InputError
    from dcsr.fsutil import check_no_link_out

    outside = tmp_path / "outside"
    (outside / "keys").mkdir(parents=True)
    real = tmp_path / "scratch" / "results"
    (real / "tables").mkdir(parents=True)
    (real / "tables" / "t.md").write_text("# t\n")
    results = tmp_path / "results"
    results.symlink_to(real)  # the results folder itself may be a link (to scratch space)
    (real / "latest").symlink_to(real / "tables")  # and a link from one place in it to another is fine
    (real / "t.md").symlink_to("tables/t.md")
    check_no_link_out(results)
    check_no_link_out(tmp_path / "not made yet")
    (real / "tables" / "data").symlink_to(outside / "keys")
    with pytest.raises(InputError) as e:
        check_no_link_out(results)
    assert str(e.value) == (f"{results / 'tables' / 'data'}: is a symbolic link to {outside / 'keys'}, outside the "
                            f"results folder {results}; nothing is read or written through a link out of results: "
                            "(Snakemake would delete or write files there): remove the link, or copy what it points to")
    (real / "tables" / "data").unlink()
    (real / "tables" / "log.txt").symlink_to(tmp_path / "gone.txt")
    with pytest.raises(InputError, match=r"log.txt: is a symbolic link to .*gone.txt, which does not exist"):
        check_no_link_out(results)


def test_snakemake_deletes_and_writes_nothing_through_a_link_planted_in_results(repo, tmp_path):
    """A folder of results: planted as a link to a user's folder: Snakemake would make the job's
    output folder there, write its log there and delete an old output there, before any of our
    writes could check. The run stops at its start, naming the link, and the user's folders
    keep exactly what they held."""
    import yaml

    from test_workflow import snakemake

    victim_data, victim_logs = tmp_path / "user" / "data", tmp_path / "user" / "logs"
    (victim_data / "demo").mkdir(parents=True)
    victim_logs.mkdir(parents=True)
    (victim_data / "demo" / "questions.txt").write_text("keep me\n")
    results = tmp_path / "results"
    results.mkdir()
    (results / "data").symlink_to(victim_data)
    (results / "logs").symlink_to(victim_logs)
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"results": str(results)}))
    r = snakemake(repo, tmp_path, "--cores", "1", str(results / "data" / "demo" / "psgs_w100.tsv"),
                  "--configfile", str(repo / "config" / "generated.yaml"), str(over), timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "is a symbolic link to" in out and "outside the results folder" in out, out[-3000:]
    assert sorted(p.relative_to(tmp_path / "user").as_posix() for p in (tmp_path / "user").rglob("*")) == [
        "data", "data/demo", "data/demo/questions.txt", "logs"]
    assert (victim_data / "demo" / "questions.txt").read_text() == "keep me\n"
