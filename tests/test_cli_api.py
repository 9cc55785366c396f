"""The CLI is argument parsing over the library: choices and defaults come from it, ``NAME=PATH`` has one parser,
caches one root, and ``search``/``rerank`` go through the functions the retrieve/rerank/fuse stages use."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ikatkit.cli import build_parser, main
from ikatkit.errors import IkatError


def _trec(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_choices_and_defaults_are_the_librarys():
    from ikatkit.collection.readers import FORMATS
    from ikatkit.stages.core import RankPtkb

    parser = build_parser()
    ptkb = parser.parse_args(["ptkb", "t.json", "--out", "x"])
    assert ptkb.history_weight == RankPtkb(ranker=None).history_weight == 0.8  # the stage's tuned weight, not 0.3
    assert "provenance" in FORMATS
    for command in (["index", "dense", "c"], ["index", "partition", "c", "--strategy", "random", "--partitions", "2"]):
        assert parser.parse_args([*command, "--out", "o", "--format", "provenance"]).format == "provenance"
    assert parser.parse_args(["compare", "a", "b"]).test == "ttest"


def test_one_name_path_parser(tmp_path):
    from ikatkit.runs.io import named_path

    assert named_path("base=runs/a=b.trec") == ("base", "runs/a=b.trec")
    assert named_path("runs/a.trec") == (None, "runs/a.trec")
    odd = tmp_path / "k=v.trec"  # a file whose name holds '=' is a path
    odd.write_text("")
    assert named_path(str(odd)) == (None, str(odd))


def test_compare_and_eval_responses_name_runs_alike(tmp_path, capsys):
    """NAME=PATH names the run in both commands (one parser): the tables list the given names."""
    references = tmp_path / "refs.json"
    references.write_text('{"1-1_1": "a cat sat on a mat"}')
    trec = tmp_path / "x.trec"
    trec.write_text("1-1_1 Q0 d:1 1 2.0 x\n")
    assert main(["eval-responses", f"mine={trec}", "--references", str(references), "--measures", "Words"]) == 0
    assert capsys.readouterr().out.startswith("mine\t")


def test_cache_at_scopes_the_cache_without_the_environment(tmp_path):
    from ikatkit.paths import cache_at, cache_folder, cache_root

    before, environment = cache_root(), dict(os.environ)
    with cache_at(tmp_path / "c") as root:
        assert root == cache_root() == (tmp_path / "c").resolve()
        assert cache_folder("llm") == (tmp_path / "c" / "llm").resolve()
    assert cache_root() == before and dict(os.environ) == environment
    assert cache_folder("llm", tmp_path) == tmp_path.resolve() / "llm"


def test_the_judge_llm_caches_where_a_runs_llm_does(tmp_path):
    from ikatkit.commands.evaluate import _response_options

    config = tmp_path / "judge.toml"
    config.write_text('backend = "openai"\nmodel = "judge"\nbase_url = "http://127.0.0.1:9/v1"\n')
    args = build_parser().parse_args(["eval-responses", "run.json", "--matcher", "llm", "--llm-config", str(config),
                                      "--cache", str(tmp_path / "cache")])
    judge = _response_options(args)["scorers"].matcher.llm
    assert judge.cache.folder == (tmp_path / "cache" / "llm").resolve()  # as Resources puts a run's llm cache


def test_fusion_methods_are_checked_in_one_place():
    from ikatkit.stages.core import Fuse
    from ikatkit.retrieve.fusion import fuser, weighted

    with pytest.raises(IkatError, match="unknown fusion method"):
        Fuse("borda")  # an IkatError, not a KeyError
    with pytest.raises(IkatError, match="unknown normalisation"):
        fuser("weighted", normalisation="rank")
    lists = [[("a", 3.0), ("b", 1.0)], [("b", 10.0), ("c", 0.0)]]
    assert fuser("weighted", [0.25, 0.75])(lists, k=3) == weighted(lists, 3, [0.25, 0.75])
    # hand-computed: min-max a 1, b 0 | b 1, c 0 -> a 0.25, b 0.75, c 0
    assert weighted(lists, 3, [0.25, 0.75]) == [("b", 0.75), ("a", 0.25), ("c", 0.0)]


def test_search_and_rerank_commands_equal_the_stages(demo_index, demo_dir, tmp_path):
    """`ikatkit search` and `ikatkit rerank` write what the retrieve and rerank stages rank, ids and scores."""
    from ikatkit.pipelines.record import records_for
    from ikatkit.stages.core import RawQuery, Rerank, Retrieve
    from ikatkit.rank import make_ranker
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.topics import load_topics

    topics_file = demo_dir / "topics.json"
    bm25, reranked = tmp_path / "bm25.trec", tmp_path / "reranked.trec"
    assert main(["search", "--index", str(demo_index), "--topics", str(topics_file), "--queries", "raw", "--k", "20",
                 "--out", str(bm25)]) == 0
    assert main(["rerank", str(bm25), "--index", str(demo_index), "--topics", str(topics_file), "--queries", "raw",
                 "--kind", "bi-encoder", "--depth", "5", "--out", str(reranked)]) == 0
    searcher = Bm25Searcher(demo_index)
    records = RawQuery().transform(records_for(load_topics(topics_file)))
    Retrieve(searcher, k=20, expand_ptkb=False).transform(records)
    searched = {r.qid: r.ranking for r in records}
    for record in records:  # the command re-ranks each turn's top 5
        record.candidates = {key: hits[:5] for key, hits in record.candidates.items()}
    Rerank(make_ranker("bi-encoder", "bundled:minilm"), searcher.texts).transform(records)
    for path, stage in ((bm25, searched), (reranked, {r.qid: r.ranking for r in records})):
        rows = _trec(path)
        assert {q for q, *_ in rows} == set(stage)
        for qid, ranking in stage.items():
            mine = [(r[2], float(r[4])) for r in rows if r[0] == qid]
            assert [pid for pid, _ in mine] == [pid for pid, _ in ranking]
            assert [s for _, s in mine] == pytest.approx([s for _, s in ranking], abs=1e-4)


def test_index_dense_checks_its_input_before_loading_a_model_or_starting_ray(tmp_path, capsys):
    started = time.perf_counter()
    assert main(["index", "dense", str(tmp_path / "nonexistent"), "--out", str(tmp_path / "dense")]) == 2
    assert time.perf_counter() - started < 10  # 18 s before: the model loaded first (and Ray started, 33 s)
    assert "input not found" in capsys.readouterr().err
    ray = __import__("sys").modules.get("ray")
    assert ray is None or not ray.is_initialized()
    assert not (tmp_path / "dense").exists()

