"""iKAT 2026 as it runs, over real HTTP on loopback: the user's PTKB from each message (``user_meta.ptkb``), the
2026 rules (at most 10 citations), several users per topic keyed apart, ``--topics`` on a 2025 server, one
manifest schema for `run` and `interactive`. The 2026 server is `ikatkit simulate`'s own (four user types), or the
2025 server behind a test middleware (tests/api2026.py) that adds what 2026 sends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ikatkit.errors import IkatError

from api2026 import As2026, several_users
from ikatkit.interactive.client import has_pair, status_pairs
from ikatkit.interactive.driver import run_interactive
from ikatkit.pipelines.session import read_manifest
from ikatkit.pipelines.session.manifest import NO_PASSAGES
from ikatkit.pipelines.session.store import safe_name
from ikatkit.simulate.server import Simulator
from ikatkit.topics import load_topics, parse_topics
from serving import serve
from test_interactive import CONFIG, TOKEN, read_dump, sim_of

# raw utterance -> the user's PTKB ranked by MiniLM (top 2) -> BM25 top 20 -> the top 2 passages and 2 statements
PTKB_CONFIG = """
name = "bm25-ptkb"
run_type = "automatic"

[resources.bm25]
kind = "bm25"

[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"

[[stages]]
stage = "raw_query"

[[stages]]
stage = "rank_ptkb"
ranker = "minilm"
k = 2

[[stages]]
stage = "retrieve"
k = 20
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
passages = 2
ptkb = 2
"""


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("IKAT_API_TOKEN", TOKEN)


@pytest.fixture()
def demo_topics(demo_dir):
    return load_topics(demo_dir / "topics.json")


@pytest.fixture(scope="module")
def ptkb_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("configs") / "ptkb.toml"
    path.write_text(PTKB_CONFIG, encoding="utf-8")
    return path


def turn_files(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "turns").glob("*/*.json"))]


def personalized(turns: list[dict], topics) -> int:
    """How many answered turns sent PTKB statements, each checked to be its conversation's, verbatim."""
    sent = 0
    for turn in turns:
        statements = turn["sent"]["meta"]["ptkb_provenance"]
        assert set(statements) <= set(topics.conversation(turn["topic_id"]).ptkb.values()), turn["key"]
        sent += bool(statements)
    return sent


def test_2026_messages_personalize_and_cite_the_top_10(demo_topics, demo_index, ptkb_config, tmp_path):
    sim = sim_of(demo_topics)
    with serve(sim, wrap=lambda app: As2026(app, sim, demo_topics)) as url:
        outcome = run_interactive(ptkb_config, url, "r26", tmp_path / "out", index=demo_index, progress=False)
    turns = [t for t in turn_files(tmp_path / "out") if "sent" in t]
    assert len(turns) == outcome.turns == 12
    assert personalized(turns, demo_topics) == 12  # rank_ptkb keeps 2 of the user's 9 statements on every turn
    assert all(len(t["sent"]["meta"]["ptkb_provenance"]) == 2 for t in turns)
    assert [len(t["sent"]["citations"]) for t in turns] == [10] * 12  # 20 retrieved, the 2026 rules' top 10
    manifest = outcome.manifest
    assert (manifest["rules"], manifest["citations"], manifest["ptkb_sources"]) == ("2026-interactive", 10,
                                                                                  {"user_meta": 12})
    assert manifest["dump"]["matches_local"] is True  # user_id in the rows' metadata, as the server's
    qids = {line.split()[0] for line in outcome.trec_file.read_text().splitlines()}
    assert qids == {f"user-{q.rpartition('_')[0]}/{q}" for q in demo_topics.qids}  # one user each here
    assert json.loads((tmp_path / "out" / "state.json").read_text())["rules"] == 2026


def test_the_2026_simulator_four_user_types_each_personalized(demo_dir, demo_topics, demo_index, ptkb_config,
                                                              tmp_path):
    """`ikatkit simulate --user-types u1=clean u2=typos u3=terse+impatient u4=cooperative` plays both demo topics
    with each type; the driver answers every (user, topic) session with statements of the PTKB that user's message
    carried, at most 10 citations a turn, one turn file per (user, topic, turn)."""
    import httpx2 as httpx

    from ikatkit.simulate.plan import user_id
    from test_simulate_cli import AUTH, local_simulator, simulate_args

    sim = local_simulator(simulate_args(demo_dir))
    with serve(sim) as url:
        outcome = run_interactive(ptkb_config, url, "four", tmp_path / "out", index=demo_index, progress=False)
        status = httpx.get(f"{url}/run/status", params={"run_id": "four"}, headers=AUTH).json()
    users = [user_id(u) for u in ("u1", "u2", "u3", "u4")]
    pairs = [{"user_id": u, "topic_id": t} for t in ("demo-1", "demo-2") for u in users]
    assert status == {"status": "complete", "open_user_topic_pairs": [], "done_user_topic_pairs": pairs}
    rows = read_dump(outcome.dump_file)
    keys = [(r["metadata"]["user_id"], r["metadata"]["topic_id"]) for r in rows]
    assert len(turn_files(tmp_path / "out")) == len(rows) == len(set(keys))  # no turn file overwritten
    sessions: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        sessions.setdefault((row["metadata"]["user_id"], row["metadata"]["topic_id"].rsplit("_", 1)[0]),
                            []).append(row["responses"][0])
    assert sorted(sessions) == sorted((p["user_id"], p["topic_id"]) for p in pairs)
    assert all(s[-1]["assistant_text"] is None and all(r["assistant_text"] for r in s[:-1])
               for s in sessions.values())  # every session answered to its farewell
    answered = [r["responses"][0] for r in rows if r["responses"][0]["assistant_text"] is not None]
    # rank_ptkb keeps 2 statements on every turn, each verbatim from the PTKB the simulator sends with the topic
    turns = [t for t in turn_files(tmp_path / "out") if "sent" in t]
    assert personalized(turns, demo_topics) == len(turns) == len(answered)
    assert all(len(r["assistant_meta"]["ptkb_provenance"]) == 2 for r in answered)
    assert [len(r["assistant_citations"]) for r in answered] == [10] * len(answered)  # 20 retrieved, top 10
    assert outcome.manifest["ptkb_sources"] == {"user_meta": len(answered)} and outcome.turns == len(answered)
    assert outcome.manifest["dump"]["matches_local"] is True  # the server's extra fields are not the system's
    trec = {line.split()[0] for line in outcome.trec_file.read_text().splitlines()}
    assert trec == {f"{r['metadata']['user_id']}/{r['metadata']['topic_id']}" for r in rows
                    if r["responses"][0]["assistant_text"] is not None}


def test_the_dump_matches_the_local_turns_on_what_the_system_sent():
    """The server's dump has fields of its own (the user's meta, rubric and score); the comparison with the local
    turn files is on what the system sent per (user, topic, turn), so those fields never make it differ."""
    from ikatkit.interactive.driver import what_was_sent

    def row(user: str, qid: str, text: str | None, **server: object) -> dict:
        return {"metadata": {"run_id": "r", "user_id": user, "topic_id": qid},
                "responses": [{"rank": 1, "user_utterance": "q", "assistant_text": text,
                               "assistant_citations": {"p:1": 1.0}, "assistant_meta": {"ptkb_provenance": []},
                               **server}]}
    local = [row("u1", "t_1", "A."), row("u1", "t_2", None), row("u2", "t_1", "B.")]
    server = [row("u1", "t_1", "A.", user_meta={"ptkb": ["x"]}, user_rubrik="Why?", user_rubrik_score=4),
              row("u1", "t_2", None, user_meta={}, user_rubrik=None, user_rubrik_score=None),
              row("u2", "t_1", "B.", user_meta={"ptkb": ["x"]}, user_rubrik="Why?", user_rubrik_score=2)]
    assert what_was_sent(server) == what_was_sent(local)
    assert what_was_sent(server[::-1]) == what_was_sent(local)  # the order of the rows is not what was sent
    other_user = [row("u1", "t_1", "A."), row("u1", "t_2", None), row("u3", "t_1", "B.")]
    other_text = [row("u1", "t_1", "A."), row("u1", "t_2", None), row("u2", "t_1", "C.")]
    assert what_was_sent(server) != what_was_sent(other_user)
    assert what_was_sent(server) != what_was_sent(other_text)
    assert what_was_sent(server) != what_was_sent(server[:2])


def test_citations_above_the_rules_are_refused(demo_topics, demo_index, tmp_path):
    with pytest.raises(Exception, match="--citations 11 is outside 1..10"):
        run_interactive(CONFIG, "http://127.0.0.1:9", "r", tmp_path / "a", k=11, rules=2026)


def test_a_2025_server_with_topics_personalizes_without_them_says_so_once(demo_dir, demo_topics, demo_index,
                                                                         ptkb_config, tmp_path, capsys):
    with serve(sim_of(demo_topics)) as url:
        given = run_interactive(ptkb_config, url, "with", tmp_path / "with", index=demo_index, progress=False,
                                topics=demo_dir / "topics.json")
        bare = run_interactive(ptkb_config, url, "bare", tmp_path / "bare", index=demo_index)
    turns = [t for t in turn_files(tmp_path / "with") if "sent" in t]
    assert personalized(turns, demo_topics) == 12 and given.manifest["ptkb_sources"] == {"topics": 12}
    assert given.manifest["rules"] == "2025-interactive"
    assert max(len(t["sent"]["citations"]) for t in turns) == 20  # 2025: up to 1000, all 20 retrieved
    err = capsys.readouterr().err
    assert err.count("the server sends no user_meta.ptkb") == 1 and "no --topics was given" in err
    assert personalized([t for t in turn_files(tmp_path / "bare") if "sent" in t], demo_topics) == 0
    assert bare.manifest["ptkb_sources"] == {"none": 12}
    assert "user demo-" not in err and "user user-demo-1 topic demo-1 turn 1:" in err  # progress names the user


def test_two_users_on_one_topic_keep_their_own_turns(demo_topics, demo_index, tmp_path):
    """Two users play demo-1: each keeps its six turns and farewell (before, the second user's turn files
    overwrote the first's and its identical utterances reused the first's answers)."""
    one = demo_topics.subset([demo_topics.conversations[0].id])
    sim = Simulator(several_users(one, ["alice", "bob"]), {TOKEN: "team-a"})
    config = Path(tmp_path / "c.toml")
    config.write_text(CONFIG, encoding="utf-8")
    with serve(sim, wrap=lambda app: As2026(app, sim, one)) as url:
        outcome = run_interactive(config, url, "two", tmp_path / "out", index=demo_index, progress=False)
    assert outcome.computed_now == 12 and outcome.turns == 12
    files = sorted(p.relative_to(tmp_path / "out" / "turns").as_posix()
                   for p in (tmp_path / "out" / "turns").glob("*/*.json"))
    assert files == [f"{user}/demo-1_{n}.json" for user in ("alice", "bob") for n in range(1, 8)]
    rows = read_dump(outcome.dump_file)
    assert [(r["metadata"]["user_id"], r["metadata"]["topic_id"]) for r in rows] == [
        (user, f"demo-1_{n}") for user in ("alice", "bob") for n in range(1, 8)]
    assert outcome.manifest["dump"]["matches_local"] is True
    assert (outcome.manifest["sessions"], outcome.manifest["users"], outcome.manifest["conversations"]) == (2, 2, 1)
    trec = [line.split() for line in outcome.trec_file.read_text().splitlines()]
    assert {q for q, *_ in trec} == {f"{u}/demo-1_{n}" for u in ("alice", "bob") for n in range(1, 7)}


def test_a_turn_that_retrieves_nothing_is_counted(demo_dir, demo_index, tmp_path):
    data = json.loads((demo_dir / "topics.json").read_text())[:1]
    data[0]["turns"] = data[0]["turns"][:2]
    data[0]["turns"][1]["utterance"] = "No."  # a stop word alone: BM25 finds nothing
    topics = parse_topics(data, 2023)
    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    with serve(sim_of(topics)) as url:
        outcome = run_interactive(config, url, "empty", tmp_path / "out", index=demo_index, progress=False)
    assert outcome.manifest["turns_without_passages"] == 1 and outcome.manifest["notes"][NO_PASSAGES] == 1
    assert "WARNING: 1 of 2 turns have no passages" in outcome.summary()


def test_one_reader_reads_both_manifests(demo_topics, demo_index, tmp_path):
    from ikatkit.pipelines import run_pipeline

    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    batch = run_pipeline(config, demo_topics, tmp_path / "run", index=demo_index)
    with serve(sim_of(demo_topics)) as url:
        live = run_interactive(config, url, "live", tmp_path / "live", index=demo_index, progress=False)
    read = [read_manifest(tmp_path / "run"), read_manifest(live.manifest_file)]
    assert [(m.kind, m.run_name, m.turns, m.valid) for m in read] == [("run", "bm25-extractive", 12, True),
                                                                       ("interactive", "live", 12, None)]
    assert [m.files for m in read] == [{"run": "bm25-extractive.json", "trec": "bm25-extractive.trec"},
                                       {"run": "live.jsonl", "trec": "live.trec"}]
    assert all(set(m.seconds_per_stage) == {"manual_query", "gold_ptkb", "retrieve", "respond"} for m in read)
    assert read[0].details == batch.manifest and read[1].details == live.manifest  # the outcome's, from memory


def test_status_pairs_in_every_published_shape():
    assert status_pairs({"status": "active", "open_topics": ["t2"], "done_topics": ["t1"]}) == (
        [("", "t2")], [("", "t1")])
    shapes = [[["t1", "u1"]], [["u1", "t1"]], [{"topic_id": "t1", "user_id": "u1"}]]
    for shape in shapes:
        opened, done = status_pairs({"status": "active", "open_user_topic_pairs": shape, "done_user_topic_pairs": []})
        assert has_pair(opened, "u1", "t1") and not has_pair(opened, "u2", "t1") and done == []


def test_safe_names_stay_in_their_folder():
    assert [safe_name(s) for s in ("user-1_a", "..", "a/b", "", "é")] == [
        "user-1_a", "%2E%2E", "a%2Fb", "%", "%C3%A9"]


def test_a_user_meta_ptkb_that_is_no_list_is_one_clear_error():
    """The message's PTKB: a list keyed by position, a mapping kept, none for a 2025 server; a string (read letter by
    letter otherwise) is refused naming the message."""
    from ikatkit.interactive.answer import message_ptkb

    message = {"user_id": "u1", "topic_id": "9-1", "user_meta": {"ptkb": ["I run.", "I am vegan."]}}
    assert message_ptkb(message) == {"1": "I run.", "2": "I am vegan."}
    assert message_ptkb({**message, "user_meta": {}}) is None
    with pytest.raises(IkatError, match="message of user u1 topic 9-1: .*user_meta.ptkb is str, not a list"):
        message_ptkb({**message, "user_meta": {"ptkb": "I run."}})
