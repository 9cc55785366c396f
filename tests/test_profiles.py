"""Behaviour profiles of simulated users: `ikatkit topics perturb` on the real topics of every year in
../shared/ikat (2023 test, 2025 released; no 2024 topic file is there) and the embedded demo topics, and
`ikatkit simulate --profile` over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.interactive.client import ApiClient
from ikatkit.simulate import profiles as pr
from ikatkit.simulate.users import FAREWELL
from ikatkit.studies.robustness import sessions
from ikatkit.topics import load_topics

from serving import simulate_process

SRC = Path(__file__).resolve().parents[1] / "src"
TOKEN = "local-test-token"
YEAR_FILES = {"2023": ("2023", "test_topics.json"), "2025": ("2025-released", "2025_test_topics.json")}


@pytest.fixture(scope="module", params=["2023", "2025", "demo"])
def topics_file(request, demo_dir) -> Path:
    if request.param == "demo":
        return demo_dir / "topics.json"
    folder, name = YEAR_FILES[request.param]
    path = Path(os.environ.get("IKAT_DATA", SRC.parents[1] / "shared" / "ikat")) / folder / name
    if not path.exists():
        pytest.skip(f"{path} not found (set IKAT_DATA)")
    return path


def perturbed(topics_file: Path, tmp_path: Path, profile: str, seed: int = 0) -> tuple[list, list, dict]:
    out = tmp_path / f"{profile}-{seed}.json"
    assert main(["topics", "perturb", str(topics_file), "--profile", profile, "--seed", str(seed),
                 "--out", str(out)]) == 0
    manifest = json.loads(out.with_suffix(".manifest.json").read_text(encoding="utf-8"))
    return (json.loads(topics_file.read_text(encoding="utf-8")), json.loads(out.read_text(encoding="utf-8")),
            manifest)


def turn_pairs(source: list, said: list):
    """(conversation, source turn, said turn) for every turn kept, matched by turn_id."""
    key = "responses" if "responses" in source[0] else "turns"
    for conversation, changed in zip(source, said, strict=True):
        by_id = {t["turn_id"]: t for t in conversation[key]}
        for turn in changed[key]:
            yield conversation, by_id[turn["turn_id"]], turn


def utterance_of(turn: dict) -> str:
    return turn.get("user_utterance", turn.get("utterance"))


# ---------------------------------------------------------------- topics perturb: what is kept


@pytest.mark.parametrize("profile", ["typos", "nonnative+cooperative+impatient"])
def test_same_seed_same_bytes_other_seed_other_typos(topics_file, tmp_path, profile):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    for out in (a, b):
        assert main(["topics", "perturb", str(topics_file), "--profile", profile, "--seed", "7", "--out",
                     str(out)]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert main(["topics", "perturb", str(topics_file), "--profile", profile, "--seed", "8", "--out",
                 str(tmp_path / "c.json")]) == 0
    assert (tmp_path / "c.json").read_bytes() != a.read_bytes()
    manifest = json.loads((tmp_path / "a.manifest.json").read_text(encoding="utf-8"))
    assert (manifest["profile"], manifest["seed"]) == (profile, 7)
    assert manifest["command"].endswith(f"--profile {profile} --seed 7 --out {a}")


@pytest.mark.parametrize("profile", ["typos", "nonnative", "terse", "cooperative"])
def test_only_the_utterances_change(topics_file, tmp_path, profile):
    source, said, manifest = perturbed(topics_file, tmp_path, profile)
    field = "user_utterance" if "responses" in source[0] else "utterance"
    assert [{k: v for k, v in c.items() if k not in ("turns", "responses")} for c in said] == [
        {k: v for k, v in c.items() if k not in ("turns", "responses")} for c in source]  # number, title, PTKB
    pairs = list(turn_pairs(source, said))
    assert len(pairs) == sum(len(c.get("turns", c.get("responses"))) for c in source)  # every turn, same ids
    for _, before, after in pairs:
        assert {k: v for k, v in after.items() if k != field} == {k: v for k, v in before.items() if k != field}
    assert manifest["changed"] == sum(b[field] != a[field] for _, b, a in pairs)
    assert manifest["changed"] > 0 or profile == "cooperative"  # the demo's responses ask nothing
    topics = load_topics(tmp_path / f"{profile}-0.json")  # still a topic file of its year
    assert topics.qids == load_topics(topics_file).qids


# ---------------------------------------------------------------- topics perturb: what each profile does


def one_edit(before: str, after: str) -> str | None:
    """Which of the four typo edits turns ``before`` into ``after`` (None if none does)."""
    if len(after) == len(before) - 1 and any(before[:i] + before[i + 1:] == after for i in range(len(before))):
        return "deletion"
    if len(after) == len(before) + 1 and any(after[:i] + after[i + 1:] == before and after[i] == after[i - 1]
                                             for i in range(1, len(after))):
        return "doubling"
    if len(after) == len(before):
        diff = [i for i in range(len(before)) if before[i] != after[i]]
        if len(diff) == 1 and after[diff[0]].lower() in pr.adjacent_keys()[before[diff[0]].lower()]:
            return "adjacent"
        if len(diff) == 2 and diff[1] == diff[0] + 1 and before[diff[0]] == after[diff[1]] \
                and before[diff[1]] == after[diff[0]]:
            return "transposition"
    return None


def test_the_keyboard_neighbours_of_a_staggered_qwerty():
    # by hand from the rows qwertyuiop / asdfghjkl / zxcvbnm shifted by half a key each
    assert set(pr.adjacent_keys()["g"]) == set("tyfhvb")
    assert set(pr.adjacent_keys()["a"]) == set("qwsz")
    assert set(pr.adjacent_keys()["m"]) == set("jkn")


def test_typos_one_edit_per_word_at_the_published_rate(topics_file, tmp_path):
    source, said, _ = perturbed(topics_file, tmp_path, "typos")
    words = edited = 0
    edits = set()
    for _, before, after in turn_pairs(source, said):
        old, new = utterance_of(before), utterance_of(after)
        assert re.sub(r"[A-Za-z]", "", old) == re.sub(r"[A-Za-z]", "", new)  # punctuation and spaces untouched
        runs = list(zip(re.findall(r"[A-Za-z]+", old), re.findall(r"[A-Za-z]+", new), strict=True))
        words += sum(len(a) >= pr.TYPO_MIN_LETTERS for a, _ in runs)
        for a, b in runs:
            if a != b:  # one of the four edits, in a word of three or more letters
                kind = one_edit(a, b)
                assert kind and len(a) >= pr.TYPO_MIN_LETTERS, (a, b)
                edits.add(kind)
                edited += 1
    if words > 1000:  # the real topics: the rate within four binomial standard deviations
        assert abs(edited / words - pr.TYPO_RATE) < 4 * (pr.TYPO_RATE * (1 - pr.TYPO_RATE) / words) ** 0.5
        assert edits == set(pr.TYPO_EDITS)


def test_nonnative_drops_articles_and_punctuation_and_simplifies(topics_file, tmp_path):
    source, said, _ = perturbed(topics_file, tmp_path, "nonnative")
    simpler = pr.simpler_words()
    for _, before, after in turn_pairs(source, said):
        text = utterance_of(after)
        tokens = [w.lower() for w in text.split()]
        assert not set(tokens) & {"a", "an", "the"} and not re.search(r"[?.,!;:]", text)
        for word in re.findall(r"\w+(?:'\w+)*", utterance_of(before).lower()):
            if word in simpler and simpler[word] not in word:
                assert word not in tokens and simpler[word].split()[0] in tokens


def test_terse_keeps_only_content_words_in_order(topics_file, tmp_path):
    source, said, _ = perturbed(topics_file, tmp_path, "terse")
    for _, before, after in turn_pairs(source, said):
        original = re.findall(r"\w+(?:'\w+)*", utterance_of(before))
        kept = utterance_of(after).split()
        content = [w for w in original if w.lower() not in pr.stop_words() or w.lower() in pr.NEGATIONS]
        assert kept == (content or original)


def test_cooperative_answers_the_canonical_questions_with_a_ptkb_statement(topics_file, tmp_path):
    source, said, manifest = perturbed(topics_file, tmp_path, "cooperative")
    key = "responses" if "responses" in source[0] else "turns"
    answered = 0
    for conversation, changed in zip(source, said):
        ptkb = conversation["ptkb"]
        statements = ({str(i): s for i, s in enumerate(ptkb, 1)} if isinstance(ptkb, list) else ptkb)
        for previous, before, after in zip(conversation[key], conversation[key][1:], changed[key][1:]):
            qid = f"{conversation['number']}_{before['turn_id']}"
            if qid in manifest["answered"]:
                answered += 1
                assert "?" in previous["response"]  # the system asked something
                statement = statements[manifest["answered"][qid]].strip().rstrip(".")
                assert utterance_of(after) == f"{statement}. {utterance_of(before)}"
            else:
                assert utterance_of(after) == utterance_of(before)
    assert answered == len(manifest["answered"])


def test_impatient_leaves_after_six_turns_or_two_long_or_off_topic_answers(topics_file, tmp_path):
    source, said, manifest = perturbed(topics_file, tmp_path, "impatient")
    key = "responses" if "responses" in source[0] else "turns"
    for conversation, changed in zip(source, said):
        kept = changed[key]
        assert kept == conversation[key][:len(kept)] and 1 <= len(kept) <= pr.IMPATIENT_TURNS
        left = manifest["left"].get(str(conversation["number"]))
        if len(kept) < len(conversation[key]):
            assert left and left["after_turn"] == kept[-1]["turn_id"]
            if left["reason"] == "unserved":
                for turn in kept[-pr.UNSERVED_IN_A_ROW:]:
                    need = turn.get("resolved_utterance") or utterance_of(turn)
                    assert len(turn["response"].split()) > pr.READ_WORDS or not (
                        pr.content_stems(need) & pr.content_stems(turn["response"]))
            else:
                assert len(kept) == pr.IMPATIENT_TURNS
        else:
            assert left is None


def test_unknown_and_clashing_profiles_are_one_clear_error(ikat2023, tmp_path, capsys):
    topics = str(ikat2023 / "test_topics.json")
    assert main(["topics", "perturb", topics, "--profile", "typo", "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown profile part(s) ['typo']" in capsys.readouterr().err
    assert main(["topics", "perturb", topics, "--profile", "cooperative+uncooperative",
                 "--out", str(tmp_path / "x.json")]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main(["topics", "perturb", topics, "--profile", "typos"]) == 2
    assert "needs TOPICS, --profile and --out" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_first_person_of_the_simulation_datas_second_person():
    assert pr.first_person("You are a vegetarian and your sister visits you.") == \
        "I am a vegetarian and my sister visits me."
    assert pr.first_person("I'm allergic to soybeans.") == "I'm allergic to soybeans."


def test_llm_users_get_the_behaviour_in_their_prompt(ikat2023):
    from ikatkit.simulate.users import LlmUser, load_personas

    persona = load_personas(ikat2023.parent / "2025-simulation")["1-1"][0]
    plain = LlmUser(persona, "Acid reflux", llm=None)._system()
    user = LlmUser(persona, "Acid reflux", llm=None, profile=pr.parse_profile("terse+uncooperative", 2))
    assert user._system() == (f"{plain}\n\nHow you behave: {pr.PROMPTS['terse']} {pr.PROMPTS['uncooperative']}")
    assert "How you behave" not in plain


# ---------------------------------------------------------------- simulate --profile over real HTTP


def test_simulate_profile_cooperative_answer_then_impatient_leave(ikat2023, tmp_path):
    """`ikatkit simulate --profile cooperative+impatient` replaying conversation 9-1 of the 2023 test topics: the
    system asks about allergies, the user answers from its PTKB (statement 7, "I'm allergic to soybeans.") before
    its recorded turn 2; two answers in a row that share no word with its need make it leave."""
    args = ["--topics", str(ikat2023 / "test_topics.json"), "--conversations", "9-1", "--profile",
            "cooperative+impatient", "--seed", "3"]
    with simulate_process(args, tmp_path, TOKEN, 90) as url:
        client = ApiClient(url, TOKEN)
        first = client.start("profiled", "d", {})
        assert first["utterance"] == "Can you help me find a diet for myself?"
        second = client.continue_("profiled", "Gladly. Do you have any food allergies?", {}, {})
        assert second["utterance"] == ("I'm allergic to soybeans. Ok, good. Can you tell me what diet is the "
                                       "fastest way to lose some weight?")
        third = client.continue_("profiled", "Paris is the capital of France.", {}, {})
        assert third["utterance"] == "What about the DASH diet? I heard it is a healthy diet."
        last = client.continue_("profiled", "The Eiffel tower opened in 1889.", {}, {})
        assert last["utterance"] == FAREWELL and last["last_response_of_session"] and last["last_response_of_run"]
        rows = client.dump("profiled")
        client.close()
    metas = [r["responses"][0]["user_meta"] for r in rows]
    assert [m["profile"] for m in metas] == ["cooperative+impatient"] * 4 and {m["seed"] for m in metas} == {3}
    assert metas[1]["answered_with_ptkb"] == "7" and "answered_with_ptkb" not in metas[0]
    assert metas[3]["left"] == "unserved" and rows[3]["responses"][0]["user_utterance"] == FAREWELL
    assert sessions(rows) == {"cooperative+impatient": {"sessions": 1, "answers": 3, "left_early": 1,
                                                        "reasons": {"unserved": 1}, "answers_per_session": 3.0}}


# ---------------------------------------------------------------- ikatkit robustness


def test_robustness_report_compares_each_profile_with_the_clean_run(demo_dir, demo_index, tmp_path):
    """The raw-BM25 robustness config on the demo topics: one run per profile over its perturbed topics, compared
    with the clean run; the deltas and wins/losses are recomputed here with ir-measures from the TREC runs."""
    import csv

    import ir_measures

    out = tmp_path / "robustness"
    config = SRC.parent / "configs" / "robustness_raw_bm25.toml"
    assert main(["robustness", str(config), "--topics", str(demo_dir / "topics.json"), "--qrels",
                 str(demo_dir / "qrels.txt"), "--profiles", "clean", "terse", "--seed", "5", "--index",
                 str(demo_index), "--out", str(out), "--measures", "nDCG@3", "--cache", str(tmp_path / "cache")]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["profiles"], manifest["seed"], manifest["baseline"]) == (["clean", "terse"], 5, "clean")
    assert "--profiles clean terse --seed 5" in manifest["command"]
    assert main(["topics", "perturb", str(demo_dir / "topics.json"), "--profile", "terse", "--seed", "5", "--out",
                 str(tmp_path / "terse.json")]) == 0
    assert (out / "topics" / "terse.json").read_bytes() == (tmp_path / "terse.json").read_bytes()
    qrels = list(ir_measures.read_trec_qrels(str(demo_dir / "qrels.txt")))
    per_turn = {}
    for name in ("clean", "terse"):
        run = list(ir_measures.read_trec_run(str(out / "runs" / name / "raw-bm25.trec")))
        per_turn[name] = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 3], qrels, run)}
    rows = {r["run"]: r for r in csv.DictReader((out / "comparison.csv").open(encoding="utf-8"))}
    common = sorted(set(per_turn["clean"]) & set(per_turn["terse"]))
    mean = {n: sum(per_turn[n][q] for q in common) / len(common) for n in per_turn}
    assert float(rows["terse"]["delta"]) == pytest.approx(mean["terse"] - mean["clean"], abs=1e-9)
    assert int(rows["terse"]["wins"]) == sum(per_turn["terse"][q] > per_turn["clean"][q] for q in common)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count("<img") >= 2 * 4 and "Responses" in page  # two plots per measure, ranking and responses
