"""``--llm-config`` of ``ikatkit simulate --users llm`` and ``ikatkit eval-matcher --matcher llm``: an ikatkit LLM
backend, here a real llama.cpp server on loopback serving the bundled SmolLM2 GGUF, driven over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.interactive.client import ApiClient
from ikatkit.llm.server import free_port, llama_cpp_server
from ikatkit.simulate.users import FAREWELL

from serving import simulate_process, wait_until_serving

SRC = Path(__file__).resolve().parents[1] / "src"
TOKEN = "local-test-token"


def test_the_users_llm_config_is_checked_before_serving(demo_dir, tmp_path, capsys):
    config = tmp_path / "users.toml"
    config.write_text('backend = "openai"\nmodel = "smollm2"\napi_key = "sk-in-a-file"\n', encoding="utf-8")
    code = main(["simulate", "--topics", str(demo_dir / "topics.json"), "--users", "llm", "--token", TOKEN,
                 "--llm-config", str(config)])
    assert code == 2 and "API keys are not read from configs" in capsys.readouterr().err


@pytest.fixture(scope="module")
def llm_url():
    """A real llama.cpp server (one thread) serving the bundled SmolLM2 GGUF on loopback."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    with llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as url:
        yield url


def test_eval_matcher_llm_judge_through_a_llama_cpp_server(llm_url, nuggets_2024, tmp_path, capsys):
    labels = tmp_path / "labels.txt"  # four real dev labels of ksu-1 (mapped by name): two supported
    labels.write_text("16_1_7_1_ksu-1\t0\n16_1_7_2_ksu-1\t0\n88_0_2_5_ksu-1\t1\n88_0_2_6_ksu-1\t1\n")
    config = tmp_path / "judge.toml"
    config.write_text(f'backend = "openai"\nmodel = "smollm2"\nbase_url = "{llm_url}"\n', encoding="utf-8")
    code = main(["eval-matcher", str(labels), "--nuggets", str(nuggets_2024 / "gold_nuggets_human.json"),
                 "--responses", str(nuggets_2024 / "automatic_responses.json"), "--matcher", "llm",
                 "--llm-config", str(config), "--cache", str(tmp_path / "cache"), "--bootstrap", "10",
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["pairs"] == 4 and out["tags"]["ksu-1"]["run"] == "ksu"
    assert out["llm"]["calls"] == 4 and out["llm"]["misses"] == 4  # one judge request per pair, none cached yet
    assert 0 <= out["llm"]["parse_fallbacks"] <= 4


def test_llm_users_talk_through_the_configured_llama_cpp_server(llm_url, demo_dir, tmp_path):
    config = tmp_path / "users.toml"
    config.write_text(f'[llm]\nbackend = "openai"\nmodel = "smollm2"\nbase_url = "{llm_url}"\n'
                      'max_new_tokens = 24\n', encoding="utf-8")
    args = ["--topics", str(demo_dir / "topics.json"), "--conversations", "demo-1", "--users", "llm", "--llm-config",
            str(config), "--max-turns", "1"]
    with simulate_process(args, tmp_path, TOKEN, 60) as url:
        client = ApiClient(url, TOKEN)
        first = client.start("cfg", "d", {})
        assert first["utterance"].strip() and not first["last_response_of_session"]
        last = client.continue_("cfg", "Lentils and tofu are good protein sources.", {}, {})
        assert last["utterance"] == FAREWELL and last["last_response_of_run"]  # --max-turns 1
        rows = client.dump("cfg")
        client.close()
    meta = rows[0]["responses"][0]["user_meta"]
    assert meta["rubric"] and "fallback" not in meta  # the first utterance came from the server's model


# ---------------------------------------------------------------- rehearsing 2026: several user types per topic

TYPES = ["u1=clean", "u2=typos", "u3=terse+impatient", "u4=cooperative"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def simulate_args(demo_dir: Path, *extra: str) -> list[str]:
    return ["simulate", "--topics", str(demo_dir / "topics.json"), "--user-types", *TYPES, "--token", TOKEN,
            "--seed", "3", *extra]


def local_simulator(argv: list[str]):
    from ikatkit.cli import build_parser
    from ikatkit.commands.simulate import simulator

    return simulator(build_parser().parse_args(argv), TOKEN)


def answer_of(message: dict) -> dict:
    """A deterministic answer (the utterance echoed, ten citations): the same message, the same answer."""
    said = message["utterance"]
    return {"response": f"About {said}: here is what I found.",
            "citations": {f"clueweb22-en0000-00-0000{i}:{len(said) % 7}": 10.0 - i for i in range(10)},
            "meta": {"ptkb_provenance": message["user_meta"]["ptkb"][:1]}}


def play(http, run_id: str, message: dict | None, stop_after: int | None = None) -> tuple[dict | None, list[dict]]:
    """Answer the run's messages from ``message`` (None: /run/start) to its end or for ``stop_after`` requests;
    returns the last message and every message seen."""
    seen = []
    if message is None:
        message = http.post("/run/start", json={"run_id": run_id, "description": "rehearsal"}).json()
        seen.append(message)
    sent = 0
    while not message["last_response_of_run"] and (stop_after is None or sent < stop_after):
        body = {"run_id": run_id, "response": ""} if message["last_response_of_session"] else {
            "run_id": run_id, **answer_of(message)}
        reply = http.post("/run/continue", json=body)
        assert reply.status_code == 200, reply.text
        message, sent = reply.json(), sent + 1
        seen.append(message)
    return message, seen


def dump_rows(http, run_id: str) -> list[dict]:
    return [json.loads(line) for line in http.get("/run/dump", params={"run_id": run_id}).text.splitlines()]


def test_four_user_types_play_every_topic_over_http(demo_dir, tmp_path):
    import httpx2 as httpx

    from ikatkit.simulate.plan import user_id
    from ikatkit.topics import load_topics
    from serving import serve

    topics = load_topics(demo_dir / "topics.json")
    ptkb = {c.id: list(c.ptkb.values()) for c in topics.conversations}
    ids = {name.split("=")[0]: user_id(name.split("=")[0]) for name in TYPES}
    user_map = tmp_path / "users.json"
    sim = local_simulator(simulate_args(demo_dir, "--user-map", str(user_map)))
    pairs = [{"user_id": ids[t], "topic_id": c.id} for c in topics.conversations for t in ("u1", "u2", "u3", "u4")]
    with serve(sim) as url, httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
        first, seen = play(http, "r", None, stop_after=0)
        assert http.get("/run/status", params={"run_id": "r"}).json() == {
            "status": "active", "open_user_topic_pairs": pairs[1:], "done_user_topic_pairs": pairs[:1]}
        too_many = {"run_id": "r", **answer_of(first)}
        too_many["citations"]["clueweb22-en0000-00-00099:0"] = 0.5
        refused = http.post("/run/continue", json=too_many)
        assert refused.status_code == 422 and "at most 10" in refused.text
        last, rest = play(http, "r", first)
        seen += rest
        assert last["last_response_of_run"]
        assert http.get("/run/status", params={"run_id": "r"}).json() == {
            "status": "complete", "open_user_topic_pairs": [], "done_user_topic_pairs": pairs}
        rows = dump_rows(http, "r")
    # every message carries the topic's PTKB as user_meta.ptkb; each type is one user id across both topics
    assert all(m["user_meta"] == {"ptkb": ptkb[m["topic_id"]]} for m in seen)
    assert [(m["user_id"], m["topic_id"]) for m in seen if len(m["history"]) == 1] == [
        (p["user_id"], p["topic_id"]) for p in pairs]
    assert json.loads(user_map.read_text()) == {v: k for k, v in ids.items()}
    # every (user, topic) session is complete in the dump: its turns numbered from 1, then the farewell
    sessions: dict = {}
    for row in rows:
        pair = row["metadata"]["user_id"], row["metadata"]["topic_id"].rsplit("_", 1)[0]
        sessions.setdefault(pair, []).append(row)
    assert list(sessions) == [(p["user_id"], p["topic_id"]) for p in pairs]
    for (user, topic), session in sessions.items():
        assert [r["metadata"]["topic_id"] for r in session] == [f"{topic}_{n}" for n in range(1, len(session) + 1)]
        *answered, farewell = [r["responses"][0] for r in session]
        assert farewell["user_utterance"] == FAREWELL and farewell["assistant_text"] is None
        assert all(a["assistant_text"] and a["user_meta"]["user_type"] == {v: k for k, v in ids.items()}[user]
                   for a in answered)
        # a replay user pursues turn n's need (its resolved utterance) at its turn n
        turns = topics.conversation(topic).turns
        assert [a["user_rubrik"] for a in answered] == [t.resolved_utterance or t.utterance for t in turns][
            :len(answered)]
    by_type = {t: sum(len(s) - 1 for (u, _), s in sessions.items() if u == ids[t]) for t in ids}
    assert by_type == {"u1": 12, "u2": 12, "u3": 12, "u4": 12}  # 6 turns x 2 topics; the echo serves u3's need
    u1, u2 = (sessions[(ids[t], "demo-1")] for t in ("u1", "u2"))
    said = [(a["responses"][0]["user_utterance"], b["responses"][0]["user_utterance"]) for a, b in zip(u1, u2)]
    assert said[0][0] == topics.conversation("demo-1").turns[0].utterance and any(x != y for x, y in said)


def test_an_allocation_chooses_who_plays_what(demo_dir, tmp_path, capsys):
    from ikatkit.simulate.plan import user_id

    allocation = tmp_path / "allocation.toml"
    allocation.write_text('u1 = 1\nu2 = ["demo-2"]\nu3 = "all"\nu4 = ["demo-1", "demo-2"]\n', encoding="utf-8")
    sim = local_simulator(simulate_args(demo_dir, "--allocation", str(allocation)))
    assert sim.plan == [(user_id("u1"), "demo-1"), (user_id("u3"), "demo-1"), (user_id("u4"), "demo-1"),
                        (user_id("u2"), "demo-2"), (user_id("u3"), "demo-2"), (user_id("u4"), "demo-2")]
    for text, message in (('u1 = 3\nu2 = 1\nu3 = 1\nu4 = 1\n', "3 conversations for u1, but the topics have 2"),
                          ('u1 = ["nope"]\nu2 = 1\nu3 = 1\nu4 = 1\n', "conversations not in the topics: ['nope']"),
                          ('u1 = 1\nu2 = 1\nu3 = 1\n', "user type u4 plays no conversation"),
                          ('u1 = 1\nu2 = 1\nu3 = 1\nu4 = 1\nu9 = 1\n', "names user types that --user-types does not"),
                          ('u1 = 1.5\nu2 = 1\nu3 = 1\nu4 = 1\n', "is not a list of conversations"),
                          ('u1 = [\n', "not JSON or TOML")):
        allocation.write_text(text, encoding="utf-8")
        assert main(simulate_args(demo_dir, "--allocation", str(allocation), "--port", str(free_port()))) == 2
        assert message in capsys.readouterr().err
    assert main(["simulate", "--topics", str(demo_dir / "topics.json"), "--user-types", "u1=typo", "--token", TOKEN,
                 "--port", str(free_port())]) == 2
    assert "unknown profile part" in capsys.readouterr().err


def test_a_killed_simulator_resumes_to_the_dump_of_an_uninterrupted_run(demo_dir, tmp_path):
    """``ikatkit simulate --store`` killed with SIGKILL (to its process group) in the middle of a session, started
    again on the same store: the run is inactive, its open session goes on where it stood, and the dump equals an
    uninterrupted run's."""
    import signal

    import httpx2 as httpx

    from serving import serve

    with serve(local_simulator(simulate_args(demo_dir))) as url, httpx.Client(base_url=url, headers=AUTH,
                                                                              timeout=120) as http:
        play(http, "r", None)
        expected = dump_rows(http, "r")
    store, port = tmp_path / "store.json", free_port()
    argv = [sys.executable, "-m", "ikatkit.cli", *simulate_args(demo_dir, "--store", str(store), "--port", str(port))]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    url = f"http://127.0.0.1:{port}"

    def start() -> subprocess.Popen:
        server = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  start_new_session=True)
        wait_until_serving(server, url, 60, lambda: server.stderr.read().decode())  # type: ignore[union-attr]
        return server

    server = start()
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
            stopped, _ = play(http, "r", None, stop_after=17)  # in the third session (u3 on demo-1)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
        server = start()
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
            status = http.get("/run/status", params={"run_id": "r"}).json()
            assert status["status"] == "inactive" and len(status["done_user_topic_pairs"]) == 3
            again = http.get("/run/session", params={"run_id": "r"}).json()
            assert {k: again[k] for k in ("user_id", "topic_id", "utterance", "history", "user_meta")} == {
                k: stopped[k] for k in ("user_id", "topic_id", "utterance", "history", "user_meta")}
            play(http, "r", again)
            assert dump_rows(http, "r") == expected
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
