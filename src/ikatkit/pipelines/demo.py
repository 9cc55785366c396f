"""The demo: index the embedded collection, run a pipeline over the demo topics, validate and evaluate."""

from __future__ import annotations

import shlex
from importlib.resources import files
from pathlib import Path

from ikatkit.atomic import write_json
from ikatkit.paths import cache_at
from ikatkit.pipelines.record import TurnRecord

SHOWN_BY = "nDCG@3"  # the turn shown end to end: the median of this measure (representative_turn)
REAL_MODEL = """The bundled SmolLM2-135M only exercises the plumbing: its rewrites and responses are weak, and the
guards cut or replace the degenerate ones (notes above).
For a real model, change two lines of [resources.llm] in the config:
    backend = "openai"
    model = "gpt-4o-mini"          # an OpenAI-compatible server: its model name, plus base_url = "http://HOST:PORT/v1"
  or on a GPU:
    backend = "transformers"
    model = "meta-llama/Llama-2-7b-chat-hf"   # with quantization = "4bit" as configs/rtg_llama_zeroshot.toml"""


def demo_data() -> Path:
    """The folder of the embedded demo collection, topics and judgements (written by us)."""
    return Path(str(files("ikatkit") / "data" / "demo"))


def demo_config() -> Path:
    """The demo's pipeline config as the package ships it (equal to the checkout's ``configs/demo.toml``)."""
    return Path(str(files("ikatkit") / "data" / "configs" / "demo.toml"))


def run_demo(config: str | Path, out: str | Path) -> int:
    """Build (or reuse) the demo index, run ``config`` on the demo topics, print and save the evaluation."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.ptkb import evaluate_ptkb
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.index.build import build_index
    from ikatkit.pipelines.config import load_config
    from ikatkit.pipelines.runner import run_pipeline

    data, out = demo_data(), Path(out)
    index = out / "index"
    with cache_at(out / "cache"):  # everything the demo caches (Java helpers and OpenVINO models too) under out
        manifest = build_index([data / "clueweb22"], index, fmt="clueweb22")
        print(f"index {index}: {manifest['counts']['passages']} passages from {manifest['counts']['documents']} "
              "documents")
        outcome = run_pipeline(config, data / "topics.json", out / "run", index=index)
    print(outcome.summary())
    passages = evaluate(outcome.run, load_qrels(data / "qrels.txt"))
    ranked_ptkb = any(response.ptkb for turn in outcome.run.turns for response in turn.responses)
    ptkb = evaluate_ptkb(outcome.run, load_qrels(data / "ptkb_qrels.txt")).mean if ranked_ptkb else None
    write_json(out / "evaluation.json", {"passages": passages.mean, "ptkb": ptkb,
                                         "per_query": passages.per_query})
    print("passage ranking: " + ", ".join(f"{m} {v:.4f}" for m, v in passages.mean.items()))
    print("PTKB ranking:    " + (", ".join(f"{m} {v:.4f}" for m, v in ptkb.items()) if ptkb is not None
                                 else "(the config ranks no PTKB statements)"))
    print(f"evaluation: {out / 'evaluation.json'}\n")
    shown, why = representative_turn(outcome.records, passages.per_query)
    scores = passages.per_query.get(shown.qid, {})
    print(f"{why}\n" + explain_turn(shown, {m: scores[m] for m in passages.mean if m in scores}))  # means' order
    print("\n" + rerun_commands(outcome.run_file, outcome.trec_file, index, data, ptkb is not None))
    if any(spec.get("kind") == "llm" for spec in load_config(config).resources.values()):
        print("\n" + REAL_MODEL)
    return 0 if outcome.valid else 1


def representative_turn(records: list[TurnRecord], per_query: dict[str, dict[str, float]]) -> tuple[TurnRecord, str]:
    """The turn with the median nDCG@3 (the lower median, the first in topic order on ties) among the judged turns
    whose response the guards passed as written (else those cut before a loop, else all judged turns), and a line
    saying why: neither the best nor the worst turn, and not one cut or answered by the fallback."""
    from ikatkit.llm.guards import CUT_NOTE

    judged = [r for r in records if SHOWN_BY in per_query.get(r.qid, {})] or records
    passed = [r for r in judged if "respond" not in r.rejected]
    own = passed or [r for r in judged if any(n.endswith(CUT_NOTE) for n in r.notes)]
    pool = own or judged
    ranked = sorted(pool, key=lambda r: per_query.get(r.qid, {}).get(SHOWN_BY, 0.0))  # stable: topic order on ties
    shown = ranked[(len(ranked) - 1) // 2]
    among = (f"the {len(pool)} judged turns whose response the guards passed as the model wrote it" if passed else
             f"the {len(pool)} judged turns whose response is the model's own, cut before a loop" if own else
             f"all {len(pool)} judged turns (the fallback answered every one)")
    value = per_query.get(shown.qid, {}).get(SHOWN_BY)
    return shown, (f"one turn end to end, chosen as typical: {shown.qid} has the median {SHOWN_BY}"
                   f"{f' ({value:.4f})' if value is not None else ''} among {among}")


def rerun_commands(run_file: Path, trec_file: Path, index: Path, data: Path, ptkb: bool) -> str:
    """The ``ikatkit`` commands that check and score this output again, with the bundled topics' and qrels' paths."""
    def q(path: Path | str) -> str:
        return shlex.quote(str(path))

    lines = ["to check and score this output again:",
             f"  ikatkit validate {q(run_file)} --topics {q(data / 'topics.json')} --index {q(index)}",
             f"  ikatkit eval {q(trec_file)} --qrels {q(data / 'qrels.txt')}"]
    if ptkb:
        lines.append(f"  ikatkit eval-ptkb {q(run_file)} --qrels {q(data / 'ptkb_qrels.txt')}")
    return "\n".join(lines)


def explain_turn(record: TurnRecord, scores: dict[str, float], width: int = 60) -> str:
    """One turn end to end: utterance, query (rewrite), PTKB, top passage, response, guard notes, its scores."""
    def cut(text: str, words: int) -> str:
        parts = text.split()
        return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")

    top = record.ranking[0][0] if record.ranking else None
    lines = [f"{record.qid}:",
             f"  utterance:   {record.utterance}",
             f"  query:       {record.query or record.utterance}",
             f"  PTKB:        {'; '.join(record.ptkb_texts()) or '(none)'}",
             f"  top passage: {top} {cut(record.passage_texts.get(top, ''), 30)!r}" if top else "  top passage: (none)",
             f"  response:    {cut(record.response, width)}"]
    lines += [f"  guarded:     the {stage} stage's output, set aside (the note below says what was used instead):\n"
              f"               \"{cut(output, 20)}\"" for stage, output in record.rejected.items()]
    lines += [f"  note:        {note}" for note in record.notes]
    if scores:
        lines.append("  this turn:   " + ", ".join(f"{m} {v:.4f}" for m, v in scores.items()))
    return "\n".join(lines)
