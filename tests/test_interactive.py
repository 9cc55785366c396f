"""The interactive task over real HTTP on loopback: the local simulator (FastAPI + uvicorn in a thread) and
`ikatkit interactive` (in-process, and as a subprocess killed mid-run), on the embedded demo collection."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import spacy

from ikatkit.errors import IkatError
from ikatkit.interactive.client import ApiClient, Unavailable
from ikatkit.interactive.driver import run_interactive
from ikatkit.runs.tokens import count_tokens, fit_response
from ikatkit.runs.io import read_run
from ikatkit.runs.validate import validate_run
from ikatkit.simulate.server import Simulator
from ikatkit.simulate.users import FAREWELL, ReplayUser, replay_users
from ikatkit.topics import load_topics

from bm25_config import BM25_EXTRACTIVE
from cli_options import missing
from serving import serve

TOKEN = "local-test-token"
SRC = Path(__file__).resolve().parents[1] / "src"

# manual-like, no model: resolved utterance (raw here: the API sends none) -> gold PTKB (none) -> BM25 -> top passage
CONFIG = BM25_EXTRACTIVE.replace('task = "extractive"', 'task = "extractive"\npassages = 2')


@pytest.fixture()
def demo_topics(demo_dir):
    return load_topics(demo_dir / "topics.json")


@pytest.fixture()
def token(monkeypatch):
    monkeypatch.setenv("IKAT_API_TOKEN", TOKEN)
    return TOKEN


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("configs") / "interactive.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def sim_of(topics, **kwargs) -> Simulator:
    return Simulator(replay_users(topics), {TOKEN: "team-a"}, **kwargs)


def answered(rows: list[dict]) -> list[tuple]:
    """The dump's content apart from the run's own id: user, topic turn, utterance, response, citations, meta."""
    return [(r["metadata"].get("user_id"), r["metadata"]["topic_id"], r["metadata"]["description"],
             r["responses"][0]["user_utterance"], r["responses"][0]["assistant_text"],
             r["responses"][0]["assistant_citations"], r["responses"][0]["assistant_meta"]) for r in rows]


def read_dump(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- the 250-token rule


def test_tokens_count_as_spacy_blank_english():
    assert count_tokens("Hello, world! It's here.") == 8  # Hello , world ! It 's here .
    text = "The sky is blue (mostly)."
    assert count_tokens(text) == len(spacy.blank("en")(text))


def test_fit_response_cuts_at_a_sentence_boundary():
    sentence = " ".join(["word"] * 99) + "."  # 100 tokens
    text = " ".join([sentence] * 3)
    kept, cut = fit_response(text)
    assert cut and kept == " ".join([sentence] * 2) and count_tokens(kept) == 200
    assert fit_response(sentence) == (sentence, False)
    long_one = " ".join(["word"] * 400) + "."
    kept, cut = fit_response(long_one)
    assert cut and count_tokens(kept) == 250 and long_one.startswith(kept)


# ---------------------------------------------------------------- the simulator speaks the protocol


def test_simulator_protocol(demo_topics):
    sim = sim_of(demo_topics, run_limit=2)
    first, second = demo_topics.conversations
    with serve(sim) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        assert httpx.get(f"{url}/auth/verify").status_code == 401
        assert httpx.get(f"{url}/auth/verify", headers={"Authorization": "Bearer nope"}).json() == {
            "detail": "Token is invalid."}
        assert http.get("/auth/verify").json() == {"team_id": "team-a"}
        message = http.post("/run/start", json={"run_id": "r1", "description": "d", "extra": {"x": 1}}).json()
        assert (message["topic_id"], message["utterance"]) == (first.id, first.turns[0].utterance)
        assert message["history"] == [{"role": "user", "content": first.turns[0].utterance}]
        assert not message["last_response_of_session"] and not message["last_response_of_run"]
        assert http.post("/run/start", json={"run_id": "r1", "description": "d"}).status_code == 412
        assert http.get("/run/status", params={"run_id": "r1"}).json() == {  # the open topic counts as done
            "status": "active", "done_topics": [first.id], "open_topics": [second.id]}
        assert http.get("/run/status", params={"run_id": "nope"}).status_code == 404
        too_long = " ".join(["word"] * 251)
        refused = http.post("/run/continue", json={"run_id": "r1", "response": too_long})
        assert refused.status_code == 422 and "251 tokens" in json.dumps(refused.json()["detail"])
        turns = 0
        while not message["last_response_of_run"]:
            reply = "" if message["last_response_of_session"] else f"answer {turns}"
            message = http.post("/run/continue", json={"run_id": "r1", "response": reply,
                                                       "citations": {"p1": 2.0, "p2": 1.0}, "meta": {}}).json()
            turns += 1
            if message["topic_id"] == first.id and not message["last_response_of_session"]:
                assert http.get("/run/session", params={"run_id": "r1"}).json()["history"] == message["history"]
            if message["last_response_of_session"]:
                assert message["utterance"] == FAREWELL
                assert http.get("/run/session", params={"run_id": "r1"}).status_code == 404
        assert turns == 6 + 1 + 6  # six answers, the ignored response after the farewell, six answers
        assert http.post("/run/continue", json={"run_id": "r1", "response": ""}).status_code == 400
        assert http.get("/run/status", params={"run_id": "r1"}).json() == {
            "status": "complete", "done_topics": [first.id, second.id], "open_topics": []}
        rows = [json.loads(line) for line in http.get("/run/dump", params={"run_id": "r1"}).text.splitlines()]
        assert [r["metadata"]["topic_id"] for r in rows] == [f"{c.id}_{i}" for c in (first, second)
                                                            for i in range(1, 8)]
        assert rows[0]["metadata"] == {"team_id": "team-a", "run_id": "r1", "description": "d", "extra": {"x": 1},
                                       "topic_id": f"{first.id}_1"}
        assert rows[0]["responses"][0]["assistant_text"] == "answer 0"
        farewell = rows[6]["responses"][0]
        assert (farewell["user_utterance"], farewell["assistant_text"], farewell["assistant_citations"]) == (
            FAREWELL, None, {})
        http.post("/run/start", json={"run_id": "r2", "description": "d"})
        exhausted = http.post("/run/start", json={"run_id": "r3", "description": "d"})
        assert exhausted.status_code == 403 and "exceeded" in exhausted.json()["detail"]
        assert http.get("/budget/check").json()["remaining"]["run"] == {"remaining": 0, "unit": "runs"}


# ---------------------------------------------------------------- the driver


def test_full_run_validated_and_read(demo_topics, demo_index, config, token, tmp_path):
    sim = sim_of(demo_topics)
    with serve(sim) as url:
        outcome = run_interactive(config, url, "full", tmp_path / "out", index=demo_index, progress=False)
        assert outcome.turns == 12 and outcome.computed_now == 12 and not outcome.already_complete
        rows = read_dump(outcome.dump_file)
        assert rows == [json.loads(line) for line in sim.dump("team-a", "full").splitlines()]
        manifest = json.loads(outcome.manifest_file.read_text())
        assert manifest["dump"]["matches_local"] is True and manifest["turns"] == 12
        assert set(manifest["seconds_per_stage"]) == {"manual_query", "gold_ptkb", "retrieve", "respond"}
        assert TOKEN not in "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
        requests = len(sim.requests)
        again = run_interactive(config, url, "full", tmp_path / "out", index=demo_index, progress=False)
        assert again.already_complete and again.computed_now == 0 and len(sim.requests) == requests
        assert "already complete" in again.summary()
    report = validate_run(outcome.dump_file, demo_topics)
    assert report.ok, str(report)
    run = read_run(outcome.dump_file)
    assert [t.turn_id for t in run.turns] == demo_topics.qids
    first = json.loads((tmp_path / "out" / "turns" / f"user-{demo_topics.conversations[0].id}" /
                        f"{demo_topics.qids[0]}.json").read_text())
    assert run.turns[0].responses[0].text == first["sent"]["response"] == first["record"]["response"]
    assert [p.id for p in run.turns[0].responses[0].passages] == [p for p, _ in first["record"]["ranking"]]
    trec = (tmp_path / "out" / "full.trec").read_text().splitlines()
    assert trec[0].split()[:4] == [demo_topics.qids[0], "Q0", first["record"]["ranking"][0][0], "1"]


def test_validate_flags_an_over_long_interactive_response(demo_topics, tmp_path):
    row = {"metadata": {"team_id": "t", "run_id": "r", "description": "d", "extra": None, "topic_id":
                        demo_topics.qids[0]},
           "responses": [{"rank": 1, "user_utterance": "u", "user_meta": {}, "assistant_text": "word " * 260,
                          "assistant_citations": {"clueweb22-en0000-00-00000:0": 1.0}, "assistant_meta": {}}]}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(row) + "\n")
    report = validate_run(path, demo_topics)
    assert not report.ok and report.find("over-token-limit")


def _cli(config: Path, url: str, run_id: str, out: Path, index: Path) -> list[str]:
    return [sys.executable, "-m", "ikatkit.cli", "interactive", str(config), "--api", url, "--run-id", run_id,
            "--out", str(out), "--index", str(index)]


@pytest.mark.parametrize("edition", ["2025", "2026", "simulate-2026"])
def test_kill_and_resume_equals_an_uninterrupted_run(edition, demo_dir, demo_topics, demo_index, config, token,
                                                     tmp_path, capsys):
    """SIGKILL a subprocess run mid-way (its process group, as a terminal would), rerun it (here in-process): the
    dump is an uninterrupted run's. 2026: a server that sends user_meta and plays each topic with two users (our
    middleware around the 2025 server), and `ikatkit simulate`'s own 2026 server with four user types."""
    from api2026 import As2026, several_users
    from test_simulate_cli import local_simulator, simulate_args

    def server() -> tuple[Simulator, Callable[[Any], Any] | None]:
        if edition == "2025":
            return sim_of(demo_topics), None
        if edition == "simulate-2026":  # u1..u4 (clean, typos, terse+impatient, cooperative) on both topics, seed 3
            return local_simulator(simulate_args(demo_dir)), None
        sim = Simulator(several_users(demo_topics, ["u1", "u2"]), {TOKEN: "team-a"})
        return sim, lambda app: As2026(app, sim, demo_topics)

    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    sim, wrap = server()
    with serve(sim, wrap=wrap) as url:
        whole = run_interactive(config, url, "whole", tmp_path / "whole", index=demo_index, progress=False)
        answers, sessions = whole.turns, whole.manifest["sessions"]
        # the demo's 2 topics of 6 turns played to the end by each user (1, 2, 4); u3 (impatient) stays: the demo's
        # two-passage answers are short enough for it to read
        assert (answers, sessions) == {"2025": (12, 2), "2026": (24, 4), "simulate-2026": (48, 8)}[edition]
        out = tmp_path / "killed"
        process = subprocess.Popen(_cli(config, url, "killed", out, demo_index), env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while len(list((out / "turns").glob("*/*.json"))) < answers // 3:
            assert process.poll() is None, "the run ended before it could be killed"
            time.sleep(0.01)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        computed = [json.loads(p.read_text()) for p in (out / "turns").glob("*/*.json")]
        before = sum("sent" in t for t in computed)
        assert before < answers
        capsys.readouterr()
        resumed = run_interactive(config, url, "killed", out, index=demo_index)
        assert resumed.computed_now == answers - before  # no turn computed before the kill is computed again
    assert f"resuming run killed: {before} turns kept" in capsys.readouterr().err  # said at start
    assert answered(read_dump(out / "killed.jsonl")) == answered(read_dump(whole.dump_file))
    assert len(read_dump(out / "killed.jsonl")) == answers + sessions  # every utterance answered once, farewells
    users = {(r["metadata"].get("user_id"), r["metadata"]["topic_id"]) for r in read_dump(out / "killed.jsonl")}
    assert len(users) == answers + sessions  # every (user, topic, turn) once: no session lost or overwritten


# ---------------------------------------------------------------- errors, each one line with its fix


def test_resume_after_a_model_changed_is_refused(demo_topics, demo_index, token, tmp_path):
    """As `ikatkit run`, the interactive run's fingerprint covers each resource's model by content: a model file
    changed between two calls of the same command stops the second one (before, it went on with the new model)."""
    model = tmp_path / "encoder"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"first")
    config = tmp_path / "with-model.toml"  # the encoder is declared, never built: no stage takes a ranker
    config.write_text(CONFIG + f'\n[resources.encoder]\nkind = "bi-encoder"\nmodel = "{model}"\n', encoding="utf-8")
    with serve(sim_of(demo_topics.subset(["demo-1"]))) as url:
        first = run_interactive(config, url, "model", tmp_path / "out", index=demo_index, progress=False)
        assert first.turns and not first.already_complete
        assert run_interactive(config, url, "model", tmp_path / "out", index=demo_index,
                               progress=False).already_complete
        (model / "weights.bin").write_bytes(b"second")
        with pytest.raises(IkatError, match="holds turns of another resource encoder") as refused:
            run_interactive(config, url, "model", tmp_path / "out", index=demo_index, progress=False)
    assert refused.value.fix and "--out" in refused.value.fix and missing(refused.value.fix, ("interactive",)) == []


def test_wrong_address_says_to_check_it_or_start_the_server(config, token, tmp_path):
    """#37: nothing listening at --api is not a resumable stop of a run but a wrong address or a server down."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Unavailable) as err:
        run_interactive(config, f"http://127.0.0.1:{port}", "r", tmp_path / "out", retries=0, progress=False)
    assert "cannot connect" in err.value.message and "check --api" in err.value.fix
    assert "start the server" in err.value.fix


def test_a_manual_config_warns_before_the_first_turn(config, token, tmp_path, capsys):
    """#37: gold rewrites and PTKB do not exist in the interactive task: said before anything is sent."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Unavailable):
        run_interactive(config, f"http://127.0.0.1:{port}", "r", tmp_path / "out", retries=0)
    err = capsys.readouterr().err
    assert "manual_query reads the manual rewrite (resolved_utterance)" in err and "gold_ptkb" in err
    assert "no gold rewrites" in err


def test_token_missing_or_rejected(demo_topics, config, demo_index, monkeypatch, tmp_path):
    monkeypatch.delenv("IKAT_API_TOKEN", raising=False)
    with pytest.raises(IkatError, match="IKAT_API_TOKEN is not set.*fix: export IKAT_API_TOKEN"):
        run_interactive(config, "http://127.0.0.1:9", "r", tmp_path / "a", index=demo_index)
    assert not (tmp_path / "a").exists()  # the config checked first, then the token; no folder left behind
    monkeypatch.setenv("IKAT_API_TOKEN", "wrong-token")
    with serve(sim_of(demo_topics)) as url:
        with pytest.raises(IkatError, match="refused the token \\(401: Token is invalid.\\)") as err:
            run_interactive(config, url, "r", tmp_path / "b", index=demo_index)
    assert "wrong-token" not in str(err.value)


def test_run_id_taken_or_complete(demo_topics, config, demo_index, token, tmp_path):
    sim = sim_of(demo_topics)
    with serve(sim) as url:
        run_interactive(config, url, "done", tmp_path / "a", index=demo_index, progress=False)
        with pytest.raises(IkatError, match="run id 'done' is taken or already complete \\(412: .*fix: choose"):
            run_interactive(config, url, "done", tmp_path / "b", index=demo_index)


def test_a_response_the_protocol_refuses_is_not_sent(demo_topics):
    """The client checks its bodies with the server's own models (messages.py): the server's words, nothing sent."""
    with serve(sim_of(demo_topics)) as url:
        client = ApiClient(url, TOKEN)
        first = client.start("r", "d", {})
        with pytest.raises(IkatError, match="not sent: response: Value error, Response is too long \\(300 tokens\\)"):
            client.continue_("r", " ".join(["w"] * 300), {}, {})
        assert client.session("r")["history"] == first["history"]  # the server saw no answer
        client.close()


def test_budget_exhausted_shows_the_figures(demo_topics, config, demo_index, token, tmp_path):
    with serve(sim_of(demo_topics, run_limit=0)) as url:
        with pytest.raises(IkatError, match="budget exhausted .*run: 0 runs left"):
            run_interactive(config, url, "r", tmp_path / "a", index=demo_index)


class OutageAfter(ReplayUser):
    """A replay user whose server goes down (503) once the user has said ``turn`` utterances."""

    def __init__(self, conversation, sim_box: list, turn: int, outage: int) -> None:
        super().__init__(conversation)
        self.box, self.turn, self.outage = sim_box, turn, outage

    def respond(self, topic_id, history, metas):
        if sum(m["role"] == "user" for m in history) == self.turn and self.outage:
            self.box[0].unavailable, self.outage = self.outage, 0
        return super().respond(topic_id, history, metas)


def outage_sim(topics, store: Path | None = None, at: tuple[int, int] = (3, 2), lengths: tuple[int, int] = (2, 100)):
    """A simulator whose server answers 503 to the next ``lengths[i]`` requests once conversation i's user has
    said ``at[i]`` utterances."""
    box: list = []
    first, second = topics.conversations
    users = {first.id: OutageAfter(first, box, at[0], lengths[0]), second.id: OutageAfter(second, box, at[1],
                                                                                          lengths[1])}
    sim = Simulator(users, {TOKEN: "team-a"}, store=store)
    box.append(sim)
    return sim


def test_server_errors_retried_then_a_resumable_stop(demo_topics, demo_index, config, token, tmp_path):
    with serve(sim_of(demo_topics)) as url:
        reference = run_interactive(config, url, "r", tmp_path / "ref", index=demo_index, progress=False)
    sim = outage_sim(demo_topics)
    with serve(sim) as url:
        out = tmp_path / "out"
        with pytest.raises(Unavailable, match="503.*fix: rerun the same command to resume"):
            run_interactive(config, url, "r", out, index=demo_index, retries=2, backoff=0.01, progress=False)
        assert sim.unavailable > 0  # survived the 2-request outage in conversation 1, stopped in the long one
        sim.unavailable = 0
        outcome = run_interactive(config, url, "r", out, index=demo_index, retries=2, backoff=0.01,
                                  progress=False)
    assert answered(read_dump(outcome.dump_file)) == answered(read_dump(reference.dump_file))


def test_server_restart_continues_the_inactive_run(demo_topics, demo_index, config, token, tmp_path):
    store, out = tmp_path / "server.json", tmp_path / "out"
    first, second = demo_topics.conversations
    sim = outage_sim(demo_topics, store, at=(3, 99), lengths=(100, 0))
    with serve(sim) as url:
        with pytest.raises(Unavailable):
            run_interactive(config, url, "r", out, index=demo_index, retries=1, backoff=0.01, progress=False)
    port = int(url.rsplit(":", 1)[1])
    restarted = sim_of(demo_topics, store=store)  # the runs and requests are kept; no run is active
    with serve(restarted, port) as again:
        assert httpx.get(f"{again}/run/status", params={"run_id": "r"},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["status"] == "inactive"
        outcome = run_interactive(config, again, "r", out, index=demo_index, progress=False)
        assert restarted.status("r")["status"] == "complete"
    rows = read_dump(outcome.dump_file)
    ids = [r["metadata"]["topic_id"] for r in rows]
    # conversation 1 stopped after its third answer (the session was lost with the server); 2 ran in full
    assert ids == [f"{first.id}_{i}" for i in (1, 2, 3)] + [f"{second.id}_{i}" for i in range(1, 8)]
    assert [r["responses"][0]["user_utterance"] for r in rows[3:9]] == [t.utterance for t in second.turns]


# ---------------------------------------------------------------- LLM users


def test_personas_of_the_2025_simulation_data(ikat2023):
    from ikatkit.simulate.users import load_personas

    personas = load_personas(ikat2023.parent / "2025-simulation")
    first = personas["1-1"][0]
    assert first.id == "1_1" and first.statements[0] == "You enjoy apple, kiwi, and watermelon."
    assert first.questions[0] == "What  food is good for stomach acid reflux and some that I should avoid?"
    assert len(first.questions) == 6 and first.questions[-1] == "How do medication for stomach acid reflux work?"


@pytest.mark.slow  # SmolLM2 says and grades each turn: ~4 min on the loaded 2-core machine
def test_llm_users_ask_and_leave_within_the_turn_limit(demo_topics):
    from ikatkit.llm import make_llm
    from ikatkit.simulate.users import llm_users

    topics = demo_topics.subset([demo_topics.conversations[0].id])
    llm = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 24})
    sim = Simulator(llm_users(topics, {}, llm, max_turns=2), {TOKEN: "team-a"})
    with serve(sim) as url:
        client = ApiClient(url, TOKEN)
        message, said = client.start("llm", "d", {}), 1
        while not message["last_response_of_session"]:
            assert message["utterance"].strip()
            message = client.continue_("llm", "Lentils and tofu are good protein sources.", {}, {})
            said += 1
        assert message["last_response_of_run"] and message["utterance"] == FAREWELL and said <= 3
        rows = client.dump("llm")
        client.close()
    question = topics.conversations[0].turns[0].resolved_utterance or topics.conversations[0].turns[0].utterance
    assert rows[0]["responses"][0]["user_meta"]["rubric"] == question  # the persona's first question, from its topic


def test_llm_users_of_the_real_2025_simulation_data(ikat2023, tmp_path):
    """The first simulated user of the organizers' simulation-data.csv (topic 1-1) asking through the bundled
    SmolLM2 on a llama.cpp server (1 thread), over real HTTP, with a turn limit of 2."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    from ikatkit.llm import make_llm
    from ikatkit.llm.server import llama_cpp_server
    from ikatkit.simulate.users import llm_users, load_personas
    from ikatkit.topics import parse_topics

    personas = load_personas(ikat2023.parent / "2025-simulation")
    persona = personas["1-1"][0]
    # the 2025 topics are not in ../shared/ikat: topic 1-1 stands in, titled after its user's first question
    topics = parse_topics([{"number": "1-1", "title": "Food for stomach acid reflux", "ptkb": {}, "turns": [
        {"turn_id": 1, "utterance": "x", "resolved_utterance": "x", "response": "x", "ptkb_provenance": [],
         "response_provenance": []}]}], 2023)
    answer = "Oatmeal, bananas, melons and green vegetables are gentle on acid reflux; avoid citrus, coffee and fat."
    with llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as llm_url:
        llm = make_llm({"backend": "openai", "model": "smollm2", "base_url": llm_url, "max_new_tokens": 24})
        sim = Simulator(llm_users(topics, personas, llm, max_turns=2), {TOKEN: "team-a"})
        with serve(sim) as url:
            client = ApiClient(url, TOKEN)
            messages = [client.start("persona", "d", {})]
            while not messages[-1]["last_response_of_session"]:
                messages.append(client.continue_("persona", answer, {"clueweb22-en0000-00-00000:0": 1.0}, {}))
            rows = client.dump("persona")
            client.close()
    assert {(m["topic_id"], m["user_id"]) for m in messages} == {("1-1", "1_1")}  # the file's topic and user
    said = [m["utterance"] for m in messages[:-1]]
    assert len(said) == 2 and messages[-1]["utterance"] == FAREWELL and messages[-1]["last_response_of_run"]
    persona_text = " ".join(persona.statements).lower()
    for utterance in said:  # its own words: not empty, not a persona statement, not the system prompt
        assert len(utterance.split()) >= 3 and utterance.lower() not in persona_text
        assert not any(s.lower().rstrip(".") in utterance.lower() for s in persona.statements)
        assert "what is true of you" not in utterance.lower()
    metas = [r["responses"][0]["user_meta"] for r in rows]
    assert metas[0]["rubric"] == "What  food is good for stomach acid reflux and some that I should avoid?"
    assert all(0 <= m["rubric_score"] <= 5 for m in metas[1:] if m.get("rubric_score") is not None)
    dump = tmp_path / "persona.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = validate_run(dump, topics)
    assert report.ok, str(report)
    assert [r["responses"][0]["user_utterance"] for r in rows] == [*said, FAREWELL]


# ---------------------------------------------------------------- --track-persona


def test_track_persona_runs_the_stage_before_the_ptkb_stages(demo_topics, demo_index, config, token, tmp_path):
    from ikatkit.interactive.driver import with_persona_tracking
    from ikatkit.pipelines.config import load_config

    tracked = with_persona_tracking(load_config(config))
    assert [s["stage"] for s in tracked.stages] == ["manual_query", "track_persona", "gold_ptkb", "retrieve",
                                                    "respond"]
    assert with_persona_tracking(tracked).stages == tracked.stages
    with serve(sim_of(demo_topics)) as url:
        outcome = run_interactive(config, url, "persona", tmp_path / "out", index=demo_index, progress=False,
                                  track_persona=True)
    assert outcome.turns == 12
    assert "track_persona" in json.loads(outcome.manifest_file.read_text())["seconds_per_stage"]
    users = {json.loads(p.read_text())["user_id"] for p in (tmp_path / "out" / "turns").glob("*/*.json")}
    store = json.loads((tmp_path / "out" / "persona" / "persona.json").read_text())
    assert users and "" not in users and set(store["users"]) == users  # kept per simulated user, under --out
