"""Checks of the pipeline config beyond its JSON schema: cross-references between sections.

The schema (config/schema.yaml) checks types and shapes; this checks that every name a
section uses is defined in another, and reports the offending key as ``config: a.b.c``.
"""

from __future__ import annotations

from dcsr.models.checkpoints import check_encoder
from dcsr.errors import InputError
from dcsr.settings import SECTIONS, SEED_MAX, closest

#: The most training runs of one model (``models.<name>.seeds``): each is a whole training run, and
#: the claims ledger's seed-level bootstrap needs a handful (the papers' claims rest on 3).
MAX_SEEDS = 100


def _key(*parts) -> str:
    return "config: " + ".".join(str(p) for p in parts)


def _dataset_list(value: str | list[str]) -> list[str]:
    """A model's ``train_on`` or ``dev_on``, one dataset or a list of them, as a list."""
    return [value] if isinstance(value, str) else list(value)


def train_datasets(model: dict) -> list[str]:
    """The datasets a model trains on: ``train_on`` as a list (empty for an untrained model)."""
    return _dataset_list(model.get("train_on", []))


def dev_datasets(model: dict) -> list[str]:
    """The datasets whose dev sets a model validates on: ``dev_on`` as a list, else those it
    trains on (DCSR's Multi validates on SQuAD's alone: ``dev_on: squad``)."""
    on = model.get("dev_on")
    return train_datasets(model) if on is None else _dataset_list(on)


def _follow(section: dict, name: str, key: str, sub: str | None, where) -> list[str]:
    """The chain ``name``, its ``key`` (``corpora.<c>.subset.of``, ``datasets.<d>.like``), ...;
    an undefined name or a cycle is an error naming ``where`` (the key of the first link)."""
    chain = [name]
    while True:
        entry = section[chain[-1]]
        link = (entry.get(sub) or {}).get(key) if sub else entry.get(key)
        if link is None:
            return chain
        if link not in section:
            raise InputError(where, f"names {link!r}, which is not defined ({', '.join(section)})")
        if link in chain:
            raise InputError(where, f"goes round in a circle: {' -> '.join(chain + [link])}")
        chain.append(link)


def variant_root(cfg: dict, dataset: str) -> str:
    """The dataset whose question files a variant (``like``, possibly of a variant) uses."""
    return _follow(cfg["datasets"], dataset, "like", None, _key("datasets", dataset, "like"))[-1]


def _inherited(cfg: dict, dataset: str, key: str):
    for d in _follow(cfg["datasets"], dataset, "like", None, _key("datasets", dataset, "like")):
        if key in cfg["datasets"][d]:
            return cfg["datasets"][d][key]
    return None


def dataset_match(cfg: dict, dataset: str) -> str:
    """A dataset's answer matching: its own ``match``, else its ``like`` dataset's, else string."""
    return _inherited(cfg, dataset, "match") or "string"


def dataset_questions(cfg: dict, dataset: str) -> str:
    """``test`` or ``dev``: whose questions a dataset's test set is (a variant inherits it)."""
    return _inherited(cfg, dataset, "questions") or "test"


def variant_settings(cfg: dict) -> dict[str, dict]:
    """``{variant: {match, bad_patterns, paper_name}}``: what a ``like`` dataset takes from the
    dataset it is like, unless it gives it itself (a variant of NQ over a subset corpus is still NQ
    in a table)."""
    out = {}
    for name, ds in cfg["datasets"].items():
        if "like" in ds:
            inherited = {k: _inherited(cfg, name, k) for k in ("match", "bad_patterns", "paper_name")}
            if inherited["match"] != "regex" and "bad_patterns" not in ds:
                inherited["bad_patterns"] = None  # a variant matched as strings has no patterns
            out[name] = {k: v for k, v in inherited.items() if v is not None}
    return out


#: The depth a BEIR test set's runs need: R@100 (dcsr.evaluation.trec_eval.QRELS_MEASURES) over
#: 100 documents after a hit that is the query itself is left out (ArguAna, Quora: a query is a
#: document too), as BEIR's exact search fetches top_k + 1 to leave it out.
BEIR_DEPTH = 101


def beir_datasets(cfg: dict) -> list[str]:
    """The datasets that are test sets of a BEIR folder (``datasets.<name>.beir``): judged by
    qrels, without answers, dev questions or a training set."""
    return [d for d, ds in cfg["datasets"].items() if "beir" in ds]


#: The suffix of the dev-question variant of a dataset that ``dcsr.temperature: dev`` searches.
DEV_VARIANT = ".dev"


def chooses_on_dev(cfg: dict) -> bool:
    """Whether something is chosen on each dataset's dev questions (its ``<dataset>.dev``): DCSR's
    HasAns temperature (``dcsr.temperature: dev``) or a hybrid row's linear weight."""
    hybrid = any(row.get("retriever") == "hybrid" and row.get("fusion", "linear") == "linear"
                 for table in cfg.get("tables", {}).values() for row in table.get("rows", []))
    return cfg.get("dcsr", {}).get("temperature") == "dev" or hybrid


def dev_variants(cfg: dict) -> dict[str, dict]:
    """``{name: dataset}``: each dataset whose test set is test questions gets a variant
    ``<dataset>.dev`` whose test set is its dev questions, when something is chosen on dev
    questions: DCSR's HasAns temperature (``dcsr.temperature: dev``) or the weight of a hybrid
    row's linear fusion. (A dataset searched with dev questions already gets none: choosing on
    them would choose on its test set.)"""
    if not chooses_on_dev(cfg):
        return {}
    out = {}
    for name, ds in cfg["datasets"].items():
        if "beir" in ds:  # a BEIR test set has no dev questions (a DCSR run on it keeps temperature 1)
            continue
        if dataset_questions(cfg, name) == "test" and name + DEV_VARIANT not in cfg["datasets"]:
            # dev_of marks the split as the dataset's own (its overlap with the test questions is
            # the publisher's, warned about); a user's own <name>.dev must not overlap at all
            out[name + DEV_VARIANT] = {"like": name, "questions": "dev", "corpus": ds["corpus"], "dev_of": name}
    return out


def check_seeds(cfg: dict) -> None:
    """The config's seeds within numpy's range, 0..2**32-1 (:data:`SEED_MAX`; a negative seed failed
    in a job, or gave a traceback), and each model's ``seeds`` (runs) within 1..:data:`MAX_SEEDS`
    (a million seeds hung the DAG build). ``train.seed`` is a setting, checked with the others."""
    def bad(where, value, bounds, why):
        raise InputError(where, f"must be {bounds} ({why}), found {value!r}")

    seeds = [(("seed",), cfg.get("seed"))]
    seeds += [(("corpora", name, "subset", "seed"), (c.get("subset") or {}).get("seed"))
              for name, c in cfg["corpora"].items() if isinstance(c.get("subset"), dict)]
    seeds += [(("attribution", "sweep", "seed"), ((cfg.get("attribution") or {}).get("sweep") or {}).get("seed"))]
    for where, value in seeds:
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= SEED_MAX:
            bad(_key(*where), value, f">= 0 and <= {SEED_MAX}", "numpy's seed limit")
    for name, m in cfg["models"].items():
        n = m.get("seeds", 1)
        if isinstance(n, int) and not isinstance(n, bool) and not 1 <= n <= MAX_SEEDS:
            bad(_key("models", name, "seeds"), n, f">= 1 and <= {MAX_SEEDS}", "each seed is a whole training run")


def check_config(cfg: dict) -> None:
    check_seeds(cfg)
    corpora, datasets, models, encoders = cfg["corpora"], cfg["datasets"], cfg["models"], cfg["encoders"]
    for name, encoder in encoders.items():
        check_encoder(encoder, _key("encoders", name))
    for name, c in corpora.items():
        if "subset" in c:
            _follow(corpora, name, "of", "subset", _key("corpora", name, "subset", "of"))
    for name, ds in datasets.items():
        if "like" in ds:
            variant_root(cfg, name)
        if ds["corpus"] not in corpora:
            raise InputError(_key("datasets", name, "corpus"), f"names corpus {ds['corpus']!r}, which is not under 'corpora' ({', '.join(corpora)})")
        if "generated" in ds and "generate" not in corpora[ds["corpus"]]:
            raise InputError(_key("datasets", name, "generated"), f"corpus {ds['corpus']!r} is not generated, so the dataset cannot be")
        if "squad" in ds and "squad" not in corpora[ds["corpus"]]:
            raise InputError(_key("datasets", name, "squad"), f"corpus {ds['corpus']!r} has no 'squad' block")
        if ds.get("squad") is True and name != ds["corpus"]:
            raise InputError(_key("datasets", name, "squad"), "a dataset of all SQuAD questions must have the name "
                                                               "of its corpus (a group of articles: squad: {articles: START:STOP})")
        if isinstance(ds.get("squad"), dict) and name == ds["corpus"]:
            raise InputError(_key("datasets", name, "squad"), "the corpus's own name is its dataset of all questions "
                                                               "(squad: true); name a group of articles otherwise")
        check_beir_dataset(cfg, name)
        if "bad_patterns" in ds and dataset_match(cfg, name) != "regex":
            raise InputError(_key("datasets", name, "bad_patterns"), "says what a regex answer that does not compile "
                             f"does, but the dataset's answers are matched as {dataset_match(cfg, name)} (match: regex, "
                             "or remove bad_patterns)")
    for name, m in models.items():
        check_init(m["init"], encoders, name)
        on = train_datasets(m)
        for i, ds in enumerate(on):
            if ds not in datasets:
                where = _key("models", name, "train_on", *([] if isinstance(m["train_on"], str) else [i]))
                raise InputError(where, f"names dataset {ds!r}, which is not under 'datasets'")
        if len(on) > 1:
            # one training set, one answer matching: DCSR picks positive sentences with it (DPR's
            # training reads no answers: its multiset mixes CuratedTREC's patterns with strings)
            matches = {ds: dataset_match(cfg, ds) for ds in on}
            if m["method"] == "dcsr" and len(set(matches.values())) > 1:
                raise InputError(_key("models", name, "train_on"), "mixes answer matching "
                                 f"({', '.join(f'{d}: {t}' for d, t in matches.items())}); train on datasets of one match type")
            corpora_of = {ds: datasets[ds]["corpus"] for ds in on}
            if m["method"] == "dcsr" and len(set(corpora_of.values())) > 1:
                raise InputError(_key("models", name, "train_on"), "DCSR reads the sentence table of one corpus, but "
                                 f"these datasets are over several ({', '.join(f'{d}: {c}' for d, c in corpora_of.items())})")
            if m.get("train_fraction", 1.0) != 1.0:
                raise InputError(_key("models", name, "train_fraction"), "a fraction of a training set needs a single "
                                 "train_on dataset, not a list")
        if "dev_on" in m:
            listed = not isinstance(m["dev_on"], str)
            for i, ds in enumerate(dev_datasets(m)):
                if ds not in on:
                    raise InputError(_key("models", name, "dev_on", *([i] if listed else [])),
                                     f"names dataset {ds!r}, which the model does not train on "
                                     f"(train_on: {', '.join(on) or 'none'}); it validates on dev sets of its own datasets")
        if "negatives_from" in m:
            check_negatives_from(models, name)
    for tname, table in cfg["tables"].items():
        for i, ts in enumerate(table["test_sets"]):
            if ts not in datasets:
                raise InputError(_key("tables", tname, "test_sets", i), f"names dataset {ts!r}, which is not under 'datasets'")
        check_beir_hybrids(cfg, tname)
        for i, row in enumerate(table["rows"]):
            # a per-column mapping may name columns the table lacks (one YAML anchor serves
            # several tables), but must fill at least one of them
            for col, ds in row.get("datasets", {}).items():
                if ds not in datasets:
                    raise InputError(_key("tables", tname, "rows", i, "datasets", col), f"names dataset {ds!r}, which is not under 'datasets'")
            if row.get("retriever") == "bm25":
                continue
            for side in ("question", "passage"):
                if side not in row:
                    raise InputError(_key("tables", tname, "rows", i), f"needs 'retriever: bm25' or both 'question' and 'passage' (missing {side!r})")
                per_column = row[side] if isinstance(row[side], dict) else {None: row[side]}
                if None not in per_column and not set(per_column) & set(table["test_sets"]):
                    raise InputError(_key("tables", tname, "rows", i, side), "maps none of the table's test_sets "
                                                                              f"({', '.join(table['test_sets'])})")
                for col, model in per_column.items():
                    where = _key("tables", tname, "rows", i, side) + (f".{col}" if col is not None else "")
                    if model not in models:
                        raise InputError(where, f"names model {model!r}, which is not under 'models'")
            q, p = row["question"], row["passage"]
            if isinstance(q, dict) != isinstance(p, dict) or (isinstance(q, dict) and set(q) != set(p)):
                raise InputError(_key("tables", tname, "rows", i), "'question' and 'passage' must both name one model, "
                                                                    "or both map the same test sets to models")
            for col in (q if isinstance(q, dict) else [None]):
                qm, pm = (q[col], p[col]) if col is not None else (q, p)
                check_one_method(_key("tables", tname, "rows", i), qm, pm, models)
    if "attribution" in cfg:
        check_attribution(cfg)
    check_depths(cfg)
    for i, claim in enumerate(cfg.get("claims", [])):
        if claim["test_set"] not in datasets:
            raise InputError(_key("claims", i, "test_set"), f"names dataset {claim['test_set']!r}, which is not under 'datasets'")
        if "beir" in datasets[claim["test_set"]]:
            raise InputError(_key("claims", i, "test_set"), f"{claim['test_set']!r} is a BEIR test set, judged by qrels: a "
                             "claim compares top-k answer recall, which needs answers; compare it in a table "
                             "(nDCG@10 (qrels) and so on)")
        for key in ("metric", "scaled_metric"):
            if key in claim and claim[key] != "auto" and int(claim[key][3:]) not in scored_ks(cfg):
                raise InputError(_key("claims", i, key), f"{claim[key]} is not among evaluate.ks")
        for side in ("baseline", "method"):
            for model in claim_pair(claim[side]):
                if model != "bm25" and model not in models:
                    raise InputError(_key("claims", i, side), f"names model {model!r}, which is not under 'models' (or bm25)")
            qm, pm = claim_pair(claim[side])
            if "bm25" not in (qm, pm):
                check_one_method(_key("claims", i, side), qm, pm, models)


def check_beir_dataset(cfg: dict, name: str) -> None:
    """A BEIR test set (``datasets.<name>.beir``) is over a corpus with a ``beir`` folder, has no
    answer matching, and has no variants (``like``) of it."""
    ds, corpora = cfg["datasets"][name], cfg["corpora"]
    if "beir" in ds:
        if "beir" not in corpora[ds["corpus"]]:
            raise InputError(_key("datasets", name, "beir"), f"corpus {ds['corpus']!r} has no 'beir' folder; a BEIR test "
                                                             "set's queries and qrels belong to its corpus's folder")
        if "match" in ds:
            raise InputError(_key("datasets", name, "match"), "a BEIR test set is judged by its qrels, not by answer "
                                                              "matching (its queries have no answers); remove match")
    if "like" in ds and "beir" in cfg["datasets"][variant_root(cfg, name)]:
        raise InputError(_key("datasets", name, "like"), f"{variant_root(cfg, name)!r} is a BEIR test set; a variant of "
                                                         "one is not supported (add its folder as another corpus)")


def check_beir_hybrids(cfg: dict, table: str) -> None:
    """A hybrid row with linear fusion chooses its weight on the dev questions of each column's
    dataset, which a BEIR test set does not have."""
    from dcsr.evaluation.tables import table_cells

    for cell in table_cells(cfg["tables"][table]):
        if cell.fusion == "linear" and "beir" in cfg["datasets"].get(cell.dataset, {}):
            raise InputError(_key("tables", table, "rows", cell.row), f"a hybrid row with linear fusion chooses its "
                             f"weight on dev questions, and {cell.dataset!r} (a BEIR test set) has none: use "
                             "fusion: rrf for it")


def beir_training_refusal(dataset: str, has_train_qrels: bool) -> str:
    """Why a model cannot train on the BEIR test set ``dataset`` (the message of the config check)."""
    if has_train_qrels:
        return (f"dataset {dataset!r} is a BEIR collection; its training qrels (qrels/train.tsv) name relevant "
                "passages but no answers, and training here reads question, answers and positive passages (DPR's "
                "biencoder files): DCSR needs answer spans to pick its positive sentences, and DPR training from "
                "qrels is not implemented. Train on a dataset with answers and test on this one (tables, "
                "attribution.test_sets)")
    return (f"dataset {dataset!r} is a BEIR collection judged by qrels alone, with no training set: DCSR needs answer "
            "spans to pick its positive sentences, and a qrels-only collection has neither answers nor training "
            "questions. Train on a dataset with answers and test on this one (tables, attribution.test_sets)")


def check_depths(cfg: dict) -> None:
    """Every depth the pipeline reads within the depth its runs hold: top-k and the pooled
    measures' judgments (:func:`dcsr.evaluation.trec_eval.judged_depth`) within ``search.k``
    (dense runs, and so a hybrid's dense side) and ``bm25.k`` (BM25's runs, where a table or
    claim reads them); hard negatives within the hits mined. A run shorter than the depth
    read would score its missing ranks as misses: the table's top-100 would repeat top-20."""
    from dcsr.evaluation.trec_eval import judged_depth

    def setting(key):
        section, sub = key.split(".")
        return cfg.get(section, {}).get(sub, SECTIONS[section][sub].default)

    ks = setting("evaluate.ks")
    need = judged_depth(ks)
    what = (f"top-{max(ks)} (evaluate.ks)" if need == max(ks) else
            f"hits to rank {need} (the pooled measures' cutoff; evaluate.ks goes to {max(ks)})")
    lower = " or lower evaluate.ks"
    if beir_datasets(cfg) and need < BEIR_DEPTH:  # R@100 (qrels) of a BEIR test set
        need, what, lower = BEIR_DEPTH, (f"hits to rank {BEIR_DEPTH} (R@100 against a BEIR test set's qrels, over "
                                         "100 documents once a hit that is the query itself is left out, as BEIR "
                                         "fetches top_k + 1)"), ""
    rows = [row for table in cfg["tables"].values() for row in table["rows"]]
    dense = any(row.get("retriever") != "bm25" for row in rows) or "attribution" in cfg or any(
        side != "bm25" for claim in cfg.get("claims", []) for side in (claim["baseline"], claim["method"]))
    bm25 = any(row.get("retriever") in ("bm25", "hybrid") for row in rows) or any(
        side == "bm25" for claim in cfg.get("claims", []) for side in (claim["baseline"], claim["method"]))
    for used, key in ((dense, "search.k"), (bm25, "bm25.k")):
        if used and setting(key) < need:
            raise InputError(_key(*key.split(".")), f"is {setting(key)}, but the tables read {what}: a run of {setting(key)} hits "
                             f"would count every deeper rank as a miss; raise {key} to at least {need}{lower}")
    for section in ("bm25", "mining"):
        negatives, depth = setting(f"{section}.negatives"), setting(f"{section}.depth")
        if negatives > depth:
            raise InputError(_key(section, "negatives"), f"is {negatives}, more than the {depth} hits mined per "
                             f"question ({section}.depth)")


def check_init(init, encoders: dict, model: str) -> None:
    """``models.<model>.init``: an encoder name, or ``{question: ENCODER, passage: ENCODER}``,
    each under ``encoders`` (whose checkpoints :func:`check_encoder` checked)."""
    sides = [((), init)] if isinstance(init, str) else [((side,), init[side]) for side in ("question", "passage")]
    for sub, encoder in sides:
        if encoder not in encoders:
            raise InputError(_key("models", model, "init", *sub), f"names encoder {encoder!r}, which is not under "
                                                                  f"'encoders' ({', '.join(encoders)})")


def model_init(cfg: dict, model: str):
    """The checkpoint(s) a model starts from: the ``encoders`` entry its ``init`` names, or
    ``{"question": checkpoint, "passage": checkpoint}`` for an init of two encoders."""
    init, encoders = cfg["models"][model]["init"], cfg["encoders"]
    if isinstance(init, str):
        return encoders[init]
    return {side: encoders[init[side]] for side in ("question", "passage")}


def json_arg(value, sort_keys: bool = False) -> str:
    """``value`` as a JSON command-line argument (a rule's param), with ``<``, ``>``
    and ``&`` written as ``\\u003c``-style escapes, the same JSON to any reader. A job's params
    are embedded in ``snakemake --report``'s HTML inside a ``<script>`` element, where a config
    text holding ``</script>`` would otherwise end the element and run what follows."""
    import json

    text = json.dumps(value, sort_keys=sort_keys)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def init_param(cfg: dict, model: str) -> str:
    """The value of the scripts' ``--init`` option for a model (export_encoder.py,
    train_biencoder.py): its checkpoint as it is (as before pairs existed, so that the recorded
    params of existing models do not change), or, for two encoders, the JSON
    ``{"passage": CKPT, "question": CKPT}`` (the rules quote it)."""
    init = model_init(cfg, model)
    return init if isinstance(init, str) else json_arg(init, sort_keys=True)


def check_one_method(where: str, question: str, passage: str, models: dict) -> None:
    """A question encoder searches the index of a passage encoder of its own method: a DPR question
    vector against DCSR's sentence index (or a DCSR question, with its marker, against passage
    vectors) is a pairing neither paper makes, and the run would mix the two methods' question
    formats, indexes and scoring (HasAns follows the passage model) without a word."""
    mq, mp = models[question]["method"], models[passage]["method"]
    if mq != mp:
        raise InputError(where, f"pairs question encoder {question!r} (method {mq}) with passage encoder {passage!r} "
                                f"(method {mp}); a question encoder searches the index of a passage encoder of its "
                                "own method")


def claim_pair(side) -> tuple[str, str]:
    """``(question model, passage model)`` of one side of a claim (``bm25`` is BM25's pair)."""
    return (side, side) if isinstance(side, str) else (side["question"], side["passage"])


def check_negatives_from(models: dict, name: str) -> None:
    """``models.<name>.negatives_from``: a model of the config, not trained (in turn) on
    negatives that ``name`` itself mined."""
    where, miner = _key("models", name, "negatives_from"), models[name]["negatives_from"]
    if "train_on" not in models[name]:
        raise InputError(where, "only a trained model (with train_on) trains on mined negatives")
    if miner not in models:
        raise InputError(where, f"names model {miner!r}, which is not under 'models'")
    if models[name].get("train_fraction", 1.0) != 1.0:
        raise InputError(where, "a model trained on a fraction of its training set cannot also train on mined negatives")
    if not isinstance(models[name]["train_on"], str):
        raise InputError(where, "mined negatives are for a model trained on one dataset (train_on is a list)")
    chain, current = [name], miner
    while current is not None and current not in chain:
        chain.append(current)
        current = models.get(current, {}).get("negatives_from")
    if current == name:
        raise InputError(where, f"{' -> '.join(chain + [name])}: the miner trains on negatives that "
                                f"{name!r} mines (a cycle)")


#: The rules whose threads are bm25.threads, not resources.<rule>.threads (rules/bm25.smk)
BM25_RULES = ("index_bm25", "mine_bm25_negatives", "search_bm25")
#: attribution.metrics unset: the papers' (config/schema.yaml)
ATTRIBUTION_METRICS = ("top20", "top100")


def scored_ks(cfg: dict) -> list[int]:
    """The k of every top-k a run is scored at (``evaluate.ks``, or its default)."""
    return cfg.get("evaluate", {}).get("ks", SECTIONS["evaluate"]["ks"].default)


def check_resource_names(cfg: dict, rules) -> None:
    """Each ``resources:`` entry names one of ``rules`` (or ``default``): a misspelled rule's
    resources would be taken by no job."""
    for name, entry in (cfg.get("resources") or {}).items():
        if name != "default" and name not in rules:
            raise InputError(_key("resources", name), "is not the name of a rule (or default), so no job would take "
                                                      f"these resources{closest(name, rules)}")
        if name in BM25_RULES and "threads" in (entry or {}):
            raise InputError(_key("resources", name, "threads"), "is not read: the BM25 rules run Anserini with "
                                                                 "bm25.threads; set that")


def check_attribution(cfg: dict) -> None:
    """The ``attribution`` section: families of in-domain bi-encoders, test sets, sweep, comparison."""
    a, datasets, models = cfg["attribution"], cfg["datasets"], cfg["models"]
    ks = scored_ks(cfg)
    for i, metric in enumerate(a.get("metrics", ATTRIBUTION_METRICS)):
        if int(metric[3:]) not in ks:
            where = _key("attribution", "metrics", i) if "metrics" in a else _key("attribution", "metrics")
            raise InputError(where, f"{metric} is not among evaluate.ks ({', '.join(map(str, ks))}): every run is "
                                    "scored at evaluate.ks only, so the attribution tables would find no "
                                    f"{metric}; add {metric[3:]} to evaluate.ks or set attribution.metrics")
    for i, t in enumerate(a["test_sets"]):
        if t not in datasets:
            raise InputError(_key("attribution", "test_sets", i), f"names dataset {t!r}, which is not under 'datasets'")
    for fam, members in a["families"].items():
        first = None
        for ds, model in members.items():
            where = _key("attribution", "families", fam, ds)
            if ds not in datasets:
                raise InputError(where, f"{ds!r} is not under 'datasets'")
            if model not in models:
                raise InputError(where, f"names model {model!r}, which is not under 'models'")
            m = models[model]
            if len(train_datasets(m)) > 1:
                raise InputError(where, f"model {model!r} is trained on several datasets "
                                        f"({', '.join(train_datasets(m))}); a family holds one in-domain model per dataset")
            if train_datasets(m) != [ds]:
                raise InputError(where, f"model {model!r} must be trained on {ds!r} (its train_on is "
                                        f"{m.get('train_on')!r}): a family holds one in-domain model per dataset")
            if m.get("train_fraction", 1.0) != 1.0:
                raise InputError(where, f"model {model!r} is trained on a fraction of {ds!r}; the prior holds 100% encoders")
            # Eq. 7's prior: encoders trained the same way (same method and initial checkpoint)
            if first is None:
                first = (model, m)
            elif (m["method"], m["init"]) != (first[1]["method"], first[1]["init"]):
                raise InputError(where, f"model {model!r} ({m['method']}, init {m['init']}) differs from "
                                        f"{first[0]!r} ({first[1]['method']}, init {first[1]['init']}): the models "
                                        "of a family must share method and initial checkpoint")
        if not any(ds in a["test_sets"] for ds in members):
            raise InputError(_key("attribution", "families", fam), "has no dataset among attribution.test_sets, "
                                                                   "so nothing is in-domain")
    sweep = a.get("sweep")
    if sweep:
        fam = sweep["family"]
        if fam not in a["families"]:
            raise InputError(_key("attribution", "sweep", "family"), f"{fam!r} is not under attribution.families")
        for ds in sweep["datasets"]:
            if "negatives_from" in models.get(a["families"][fam].get(ds), {}):
                raise InputError(_key("attribution", "sweep", "family"), f"the model of {ds!r} in {fam!r} trains on "
                                 "mined negatives (negatives_from); the sweep samples the BM25 training set")
        for i, ds in enumerate(sweep["datasets"]):
            if ds not in a["families"][fam]:
                raise InputError(_key("attribution", "sweep", "datasets", i), f"{ds!r} has no model in family {fam!r}")
            if ds not in a["test_sets"]:
                raise InputError(_key("attribution", "sweep", "datasets", i), f"{ds!r} is not a test set, so its "
                                                                              "sweep has no in-domain marginal")
    compare = a.get("compare")
    if compare:
        for key in ("baseline", "method"):
            if compare[key] not in a["families"]:
                raise InputError(_key("attribution", "compare", key), f"{compare[key]!r} is not under attribution.families")
        shared = set(a["families"][compare["baseline"]]) & set(a["families"][compare["method"]]) & set(a["test_sets"])
        if not shared:
            raise InputError(_key("attribution", "compare"), "the two families share no in-domain test set")


def sweep_models(cfg: dict) -> dict[str, dict]:
    """The models of the data-efficiency sweep, ``{name: model config}``: each in-domain model of
    the sweep family retrained on every fraction below 1 of its training set (same settings,
    ``train_fraction`` added; trained once: a base model's ``seeds`` is for its claims, and no
    table, claim or figure reads a sweep model's other seeds). A name that is already taken by a
    different model is an error."""
    from dcsr.attribution.analysis import sweep_model_name

    sweep = cfg.get("attribution", {}).get("sweep")
    if not sweep:
        return {}
    family = cfg["attribution"]["families"][sweep["family"]]
    out = {}
    for ds in sweep["datasets"]:
        base = family[ds]
        for f in sweep["fractions"]:
            if f == 1.0:
                continue
            name = sweep_model_name(base, f)
            model = {**{k: v for k, v in cfg["models"][base].items() if k != "seeds"}, "train_fraction": f}
            if name in cfg["models"] and cfg["models"][name] != model:
                raise InputError(_key("models", name), f"is also the name of the sweep's {f:g} sample of {base!r}")
            out[name] = model
    return out


def corpus_size(cfg: dict, corpus: str) -> int | None:
    """Passages of ``corpus`` as the config knows them before any data exists: its
    ``passages`` (a size stated for a downloaded corpus), a generated corpus's ``passages``, a subset's ``first`` (capped by its
    parent's size) or its ``fraction`` of the parent (rounded as the sample is drawn). None
    when the config cannot tell."""
    from dcsr.data.subsets import sample_size

    c = cfg["corpora"][corpus]
    if "passages" in c:
        return int(c["passages"])
    if "passages" in c.get("generate", {}):
        return int(c["generate"]["passages"])
    sub = c.get("subset")
    if not sub:
        return None
    parent = corpus_size(cfg, sub["of"])
    if "first" in sub:
        return int(sub["first"]) if parent is None else min(int(sub["first"]), parent)
    return None if parent is None else sample_size(parent, float(sub["fraction"]))


def corpus_shards(cfg: dict, corpus: str) -> int:
    """Embedding/index/search shards of ``corpus``: enough shards of at most
    ``embed.passages_per_shard`` passages (the memory budget of one shard job) when the corpus
    size is known, else ``embed.shards``."""
    per_shard = cfg["embed"].get("passages_per_shard")
    size = corpus_size(cfg, corpus)
    if per_shard and size:
        return max(1, -(-size // int(per_shard)))
    return int(cfg["embed"]["shards"])


def seed_name(model: str, k: int) -> str:
    """The name of training run ``k`` (1-based) of a model with ``seeds: n``: the model itself
    for k = 1, ``<model>.seed<k>`` for the others."""
    return model if k == 1 else f"{model}.seed{k}"


def seed_replicas(cfg: dict) -> dict[str, dict]:
    """The extra training runs of models with ``seeds: n`` (n > 1): ``<model>.seed<k>`` for
    k = 2..n, the same model trained with ``train.seed`` + k - 1 (the order of questions, the
    negatives drawn and dropout all follow it). A name already taken is an error."""
    out = {}
    for name, m in cfg["models"].items():
        n = int(m.get("seeds", 1))
        if n > 1 and "train_on" not in m:
            raise InputError(_key("models", name, "seeds"), "an untrained model has nothing to seed: seeds needs train_on")
        base = (m.get("train") or {}).get("seed", cfg.get("train", {}).get("seed", SECTIONS["train"]["seed"].default))
        if int(base) + n - 1 > SEED_MAX:
            raise InputError(_key("models", name, "seeds"), f"run {n} would train with seed {int(base) + n - 1} "
                             f"(train.seed {int(base)} + {n - 1}), above {SEED_MAX} (numpy's seed limit); lower "
                             "train.seed or seeds")
        for k in range(2, n + 1):
            replica = seed_name(name, k)
            if replica in cfg["models"]:
                raise InputError(_key("models", replica), f"is also the name of {name!r}'s training run {k} (seeds: {n})")
            out[replica] = {**{key: v for key, v in m.items() if key != "seeds"},
                            "train": {**(m.get("train") or {}), "seed": int(base) + k - 1}}
    return out


def model_seeds(cfg: dict, model: str) -> list[str]:
    """A model's training runs (itself first), from its ``seeds`` (1 when not given)."""
    m = cfg["models"].get(model, {})
    return [seed_name(model, k) for k in range(1, int(m.get("seeds", 1)) + 1)]
