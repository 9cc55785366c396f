"""Rankers (bi-encoder, cross-encoder), PTKB ranking against NIST's PTKB qrels, and fusion."""

from __future__ import annotations

import copy

import pytest

from ikatkit.errors import IkatError
from ikatkit.evaluate.ptkb import evaluate_ptkb
from ikatkit.rank import make_ranker, rank_ptkb
from ikatkit.rank.standalone import rank_topics_ptkb
from ikatkit.retrieve.fusion import interleave, normalize, rrf
from ikatkit.topics import load_topics


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    return make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path_factory.mktemp("embeddings"))


def test_bi_encoder_ranks_and_caches(minilm):
    ranked = minilm.rank("I eat no meat", {"a": "I'm vegetarian.", "b": "I'm an Android user.", "c": "I like pizza."})
    assert [pid for pid, _ in ranked][0] == "a"
    assert ranked == sorted(ranked, key=lambda x: -x[1])
    before = dict(minilm.stats)
    again = minilm.score([("I eat no meat", "I'm vegetarian."), ("I eat no meat", "I'm vegetarian.")])
    assert again[0] == ranked[0][1] and minilm.stats["scored"] == before["scored"]
    assert minilm.stats["cache_hits"] == before["cache_hits"] + 2


def test_bi_encoder_batches_give_each_text_its_own_bits(minilm, ikat2023):
    """Real passages and queries, and short texts of 8 tokens, encoded in length-sorted batches get the very bits
    each gets alone on the ranker's threads, whatever they are batched with. On Intel CPUs with AVX-512/AMX batches
    of 8 tokens (and of 12, 66, ...) give other bits than one text at a time: the first batch of each shape is
    checked and such shapes are encoded one text at a time. (One text's bits also change with the thread count
    there, which is why the thread count is part of the cache's identity.)"""
    import json

    import numpy as np

    passages = [json.loads(line)["passage_text"]
                for line in (ikat2023 / "test_provenance_passages.jsonl").read_text().splitlines()[:8]]
    topics = load_topics(ikat2023 / "test_topics.json")
    queries = list(topics.queries("manual").values())[:8]
    words = "apple banana cherry river mountain protein runner vegetarian".split()
    short = [" ".join(words[i:i + 6]) for i in range(3)]
    texts = list(dict.fromkeys(passages + queries + short))
    lengths = [len(ids) for ids in minilm.model.tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    assert lengths.count(256) == 6 and lengths.count(8) == 3  # 6 truncated passages, 3 short texts share a batch
    alone = {t: minilm._run([t])[0] for t in texts}
    for mixed in (texts, texts[::-1], texts[5:] + texts[:5]):
        batched = minilm.encode_new(mixed)
        assert all(np.array_equal(batched[t], alone[t]) for t in texts)
    assert minilm.batch_size == 32


def test_bi_encoder_embeddings_persist_on_disk(tmp_path):
    """A second ranker on the same cache folder encodes nothing and scores the same bits."""
    pairs = [("I eat no meat", "I'm vegetarian."), ("Which phone?", "I'm an Android user.")]
    first = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path)
    scores = first.score(pairs)
    assert first.stats["encoded"] == 4 and first.stats["embedding_cache_hits"] == 0
    second = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path)
    assert second.score(pairs) == scores
    assert second.stats["encoded"] == 0 and second.stats["embedding_cache_hits"] == 4
    assert len(list(tmp_path.glob("*.sqlite"))) == 1


def test_bi_encoder_openvino_backend(minilm, tmp_path):
    """``backend = "openvino"``: PyTorch's embeddings to 1e-6, each text its own bits in any batch, and a cache
    of its own (its bits are not PyTorch's)."""
    import numpy as np

    texts = ["I eat no meat", "I'm vegetarian.", "Which phone should I buy?", "I'm an Android user.",
             "Lentils, beans and tofu give a vegetarian marathon runner enough protein.", "x"]
    ov = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path, backend="openvino")
    torch_ranker = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path)
    assert ov.backend == "openvino" and ov.batch_size == 32
    alone = {t: ov._run([t])[0] for t in texts}
    for mixed in (texts, texts[::-1]):
        batched = ov.encode_new(mixed)
        assert all(np.array_equal(batched[t], alone[t]) for t in texts)
    reference = minilm.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(np.stack([alone[t] for t in texts]) - reference).max() < 1e-6
    pairs = [("I eat no meat", t) for t in texts[1:]]
    assert np.argsort(ov.score(pairs)).tolist() == np.argsort(torch_ranker.score(pairs)).tolist()
    assert len(list(tmp_path.glob("*.sqlite"))) == 2


def ptkb_figures(ranker, topics, kind, qrels, history_weight=0.0, turns=3, judged=98):
    """Every statement ranked against each turn's query of ``kind``, with the previous raw utterances as
    history, as the rank_ptkb stage reads them."""
    rankings = {qid: dict(ranked) for qid, ranked in rank_topics_ptkb(
        topics, topics.queries(kind), ranker, history_turns=turns, history_weight=history_weight,
        history=topics.queries("raw")).items()}
    result = evaluate_ptkb(rankings, qrels)
    assert len(result.evaluated) == judged
    return result.mean


def reference_ptkb(minilm, topics, kind, qrels_file, judged):
    """The reference of a ranking without history: each statement's cosine with the turn's query from the model's
    own normalised embeddings (numpy), ranked (ties by key), scored by ir-measures itself on the qrels file."""
    import ir_measures

    queries = topics.queries(kind)
    encoded = dict(zip(queries.values(), minilm.model.encode(list(queries.values()), normalize_embeddings=True)))
    run = {}
    for conversation in topics.conversations:
        keys = list(conversation.ptkb)
        statements = minilm.model.encode([conversation.ptkb[k] for k in keys], normalize_embeddings=True)
        for turn in conversation.turns:
            scores = statements @ encoded[queries[turn.qid]]
            order = sorted(range(len(keys)), key=lambda i: (-float(scores[i]), keys[i]))
            run[turn.qid] = {keys[i]: float(len(keys) - rank) for rank, i in enumerate(order)}
    qrels = list(ir_measures.read_trec_qrels(str(qrels_file)))
    assert len({q.query_id for q in qrels} & set(run)) == judged
    measures = [ir_measures.parse_measure(m) for m in ("nDCG@5", "P@5", "R@5", "AP")]
    return {str(m): value for m, value in ir_measures.calc_aggregate(measures, qrels, run).items()}


def test_ptkb_ranking_on_nist_qrels(minilm, ikat2023):
    """all-MiniLM-L6-v2, zero-shot, scored as the reference scores it; resolved utterances rank the PTKB better
    than raw ones (the seed paper reports nDCG@5 0.7645 with MiniLM-L12 on resolved utterances)."""
    topics, qrels = load_topics(ikat2023 / "test_topics.json"), ikat2023 / "ptkb_qrels.nist.txt"
    manual, raw = (ptkb_figures(minilm, topics, kind, qrels) for kind in ("manual", "raw"))
    for kind, figures in (("manual", manual), ("raw", raw)):
        reference = reference_ptkb(minilm, topics, kind, qrels, 98)
        assert figures == pytest.approx(reference, abs=1e-4), kind
    assert manual["nDCG@5"] > raw["nDCG@5"] and manual["AP"] > raw["AP"]


def test_ptkb_history_chosen_on_train_helps_raw_utterances_on_test(minilm, ikat2023):
    """The stage's default history setting (2 turns, weight 0.8) was chosen on the train topics' PTKB labels
    (their ptkb_provenance) for raw utterances: there it beats no history and the former 3 turns / 0.3, and on
    the test topics' NIST qrels it beats no history too (bench/tune_ptkb_history.py prints the whole grid)."""
    from ikatkit.stages.core import RankPtkb

    assert RankPtkb(minilm).history_weight == 0.8
    train = load_topics(ikat2023 / "train_topics.json")
    labels = {t.qid: {key: int(key in t.ptkb_provenance) for key in train.conversation_of(t.qid).ptkb}
              for t in train if t.ptkb_provenance}
    on_train = [ptkb_figures(minilm, train, "raw", labels, w, n, judged=42)["nDCG@5"] for n, w in ((1, 0), (2, 0.8),
                                                                                                  (3, 0.3))]
    assert on_train[1] > on_train[0] > on_train[2]
    test, nist = load_topics(ikat2023 / "test_topics.json"), ikat2023 / "ptkb_qrels.nist.txt"
    assert ptkb_figures(minilm, test, "raw", nist, 0.8, 2)["nDCG@5"] > ptkb_figures(minilm, test, "raw", nist)["nDCG@5"]


def test_ptkb_ranking_on_organizers_labels(minilm, ikat2023):
    """The same ranker against the organizers' labels (the topics' ptkb_provenance, 112 turns), as the reference
    scores it."""
    topics, qrels = load_topics(ikat2023 / "test_topics.json"), ikat2023 / "ptkb_qrels.organizers.txt"
    for kind in ("manual", "raw"):
        figures = ptkb_figures(minilm, topics, kind, qrels, judged=112)
        assert figures == pytest.approx(reference_ptkb(minilm, topics, kind, qrels, 112), abs=1e-4), kind


def test_rank_ptkb_stage_with_history(minilm, ikat2023):
    """The stage's history option: the previous raw utterances (at most ``history_turns``) as rank_ptkb's history."""
    from ikatkit.pipelines.record import records_for
    from ikatkit.stages.core import RankPtkb

    topics = load_topics(ikat2023 / "test_topics.json")
    records = [r for r in records_for(topics) if r.qid.startswith("9-1_")][:5]
    plain = RankPtkb(minilm, k=3).transform([copy.deepcopy(r) for r in records])
    context = RankPtkb(minilm, k=3, history_turns=3).transform([copy.deepcopy(r) for r in records])
    conversation = topics.conversation("9-1")
    for before, after, turn in zip(plain, context, conversation.turns):
        history = [t.utterance for t in conversation.history(turn.turn_id)][-3:]
        assert after.ptkb == rank_ptkb(minilm, turn.utterance, dict(conversation.ptkb), 3, history, 0.8)
        assert before.ptkb == minilm.rank(turn.utterance, dict(conversation.ptkb), 3)
    assert plain[0].ptkb == context[0].ptkb and plain[4].ptkb != context[4].ptkb  # the first turn has no history


def test_rank_ptkb_with_earlier_responses(minilm, ikat2023):
    """``history_responses``: the previous canonical responses join the history texts. The stage, the topic-file
    ranking (``ikatkit ptkb --history-responses``) and numpy over the model's own normalised embeddings agree:
    each statement's cosine with the query plus 0.8 x its best cosine with the last 2 responses."""
    from ikatkit.pipelines.record import records_for
    from ikatkit.stages.core import RankPtkb

    topics = load_topics(ikat2023 / "test_topics.json")
    conversation = topics.conversation("9-1")
    records = [r for r in records_for(topics) if r.qid.startswith("9-1_")][:5]
    staged = RankPtkb(minilm, k=None, history_responses=2).transform([copy.deepcopy(r) for r in records])
    whole = rank_topics_ptkb(topics, topics.queries("raw"), minilm, history_responses=2)
    keys = list(conversation.ptkb)
    statements = minilm.model.encode([conversation.ptkb[k] for k in keys], normalize_embeddings=True)
    changed = 0
    for record, turn in zip(staged, conversation.turns):
        responses = [t.response for t in conversation.history(turn.turn_id)][-2:]
        assert all(responses)  # 2023 test turns carry their canonical responses
        texts = minilm.model.encode([turn.utterance, *responses], normalize_embeddings=True)
        scores = statements @ texts[0] + (0.8 * (statements @ texts[1:].T).max(axis=1) if responses else 0.0)
        expected = sorted(zip(keys, scores.tolist()), key=lambda item: (-item[1], item[0]))
        assert [k for k, _ in record.ptkb] == [k for k, _ in expected] == [k for k, _ in whole[turn.qid]]
        assert [s for _, s in record.ptkb] == pytest.approx([s for _, s in expected], abs=1e-5)
        changed += [k for k, _ in record.ptkb] != [k for k, _ in minilm.rank(turn.utterance, dict(conversation.ptkb))]
    assert changed >= 1  # the responses reorder some turn's statements
    with pytest.raises(IkatError, match="history_responses and classifier"):
        RankPtkb.check({"history_responses": 2, "classifier": "model.json"})


@pytest.fixture(scope="module")
def cross_encoder_folder(tmp_path_factory):
    """A cross-encoder built here from the bundled MiniLM with an untrained head: its scores are meaningless, so
    the tests below check plumbing only. Real runs use e.g. cross-encoder/ms-marco-MiniLM-L-12-v2."""
    import torch
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model

    torch.manual_seed(0)  # the same head each run, so the ranking checked below has no near-ties by chance
    folder = tmp_path_factory.mktemp("ce") / "ce"
    CrossEncoder(resolve_model("bundled:minilm"), num_labels=1).save(str(folder))
    return str(folder)


def cross_encoder_pairs():
    """Thirty pairs of varied length over three queries; the longest passages pass 128 tokens (truncated)."""
    words = "protein vegetarian runner knee marathon training diet tofu lentils beans japan rail pass".split()
    passages = [" ".join(words[(i * 7 + j) % len(words)] for j in range(2 + 15 * i)) for i in range(10)]
    return [(query, passage) for query in ("vegetarian protein for runners", "japan rail pass price", "knee")
            for passage in passages]


@pytest.mark.parametrize("backend, threads", [("torch", None), ("openvino", None), ("openvino", 1)])
def test_cross_encoder_matches_naive_predict(cross_encoder_folder, backend, threads, tmp_path, monkeypatch):
    """Each backend's scores (OpenVINO on its own threads or on one) equal naive ``CrossEncoder.predict`` to 1e-4,
    and so does the ranking; with OpenVINO the ONNX export is written once into the cache and reused."""
    from sentence_transformers import CrossEncoder

    monkeypatch.setenv("IKATKIT_CACHE", str(tmp_path))
    pairs = cross_encoder_pairs()
    ranker = make_ranker("cross-encoder", cross_encoder_folder, max_length=128, device="cpu", backend=backend,
                         threads=threads)
    assert ranker.backend == backend
    naive_model = CrossEncoder(cross_encoder_folder, max_length=128)
    naive = [float(s) for s in naive_model.predict(pairs, batch_size=32)]
    assert ranker.score(pairs) == pytest.approx(naive, abs=1e-4)
    query = pairs[0][0]
    candidates = {f"p{i}": passage for i, (q, passage) in enumerate(pairs) if q == query}
    expected = sorted(((f"p{i}", s) for i, ((q, _), s) in enumerate(zip(pairs, naive)) if q == query),
                      key=lambda item: (-item[1], item[0]))
    assert [pid for pid, _ in ranker.rank(query, candidates)] == [pid for pid, _ in expected]
    exports = list(tmp_path.glob("openvino/*/model.xml"))
    assert len(exports) == (backend == "openvino")
    if exports:
        stamp = exports[0].stat().st_mtime_ns
        make_ranker("cross-encoder", cross_encoder_folder, max_length=128, device="cpu", backend=backend)
        assert list(tmp_path.glob("openvino/*")) == [exports[0].parent] and exports[0].stat().st_mtime_ns == stamp


def test_cross_encoder_dedupes_within_a_call(cross_encoder_folder, tmp_path, monkeypatch):
    """Duplicate pairs in one call are scored once; no cache across calls (scores depend on the batch)."""
    monkeypatch.setenv("IKATKIT_CACHE", str(tmp_path))
    with pytest.raises(IkatError) as err:
        make_ranker("cross-encoder", cross_encoder_folder, device="cpu", backend="torch", threads=1)
    assert err.value.where == "threads"
    ranker = make_ranker("cross-encoder", cross_encoder_folder, device="cpu")
    assert ranker.backend == "openvino"  # the default on the CPU
    pairs = [("q1", "short"), ("q1", "a much longer passage " * 20), ("q1", "short"), ("q2", "medium text here")]
    scores = ranker.score(pairs)
    assert scores[0] == scores[2]
    assert ranker.stats == {"pairs": 4, "scored": 3, "cache_hits": 1}
    ranker.score(pairs[:1])
    assert ranker.stats["scored"] == 4


def test_fusion():
    a = [("p1", 9.0), ("p2", 8.0), ("p3", 7.0)]
    b = [("p2", 5.0), ("p4", 4.0)]
    assert interleave([a, b], 10) == [("p1", 1.0), ("p2", 0.5), ("p4", 1 / 3), ("p3", 0.25)]
    assert [pid for pid, _ in interleave([a, b], 2)] == ["p1", "p2"]
    fused = rrf([a, b], 10)
    assert fused[0][0] == "p2" and fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert normalize(a) == [("p1", 1.0), ("p2", 0.5), ("p3", 0.0)]
    z = normalize(a, "zscore")
    assert z[1][1] == pytest.approx(0.0) and z[0][1] == pytest.approx(-z[2][1])


def test_rerank_depth_scores_only_the_head(minilm):
    """``depth`` re-ranks the first candidates only (what the ``rerank`` stage's ``depth`` option does); the tail keeps
    its retrieval order below them. The head's order is the ranker's own over those passages alone."""
    from ikatkit.rank.rerank import rerank_lists

    ranker = minilm
    texts = {"p1": "Bananas are yellow fruit.", "p2": "Paris is the capital of France.",
             "p3": "The Eiffel Tower stands in Paris.", "p4": "Apples grow on trees."}
    query = "capital city of France"
    ids = ["p1", "p2", "p3", "p4"]
    head = ranker.rank(query, {pid: texts[pid] for pid in ids[:2]})
    got = rerank_lists(ranker, {"q": (query, ids)}, texts, depth=2)["q"]
    assert [pid for pid, _ in got] == [pid for pid, _ in head] + ["p3", "p4"] == ["p2", "p1", "p3", "p4"]
    assert [score for _, score in got[:2]] == pytest.approx([score for _, score in head])
    assert got[2][1] == pytest.approx(head[-1][1] - 1) and got[3][1] == pytest.approx(head[-1][1] - 2)
    full = rerank_lists(ranker, {"q": (query, ids)}, texts)["q"]
    assert [pid for pid, _ in full][:2] == ["p2", "p3"]  # without depth, p3 (Paris) overtakes p1
    assert rerank_lists(ranker, {"q": (query, ids)}, texts, k=3, depth=2)["q"] == got[:3]


def test_rerank_stage_refuses_a_depth_below_one():
    from ikatkit.stages.core import Rerank

    Rerank.check({"depth": 20, "k": None})
    with pytest.raises(IkatError) as err:
        Rerank.check({"depth": 0})
    assert err.value.where == "depth"
