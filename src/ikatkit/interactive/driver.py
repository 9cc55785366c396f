"""Take part in an interactive run: each user message becomes a one-turn record that the config's stages answer.

The stages and resources load once (as ``ikatkit run`` loads them), on the first turn that needs computing. Per
message: a :class:`TurnRecord` from the message's history, topic and user ids; the stages; the response cut at a
sentence boundary to the server's 250 tokens; the ranking's top ``k`` as citations; in ``meta`` the PTKB
statements used (``ptkb_provenance``) and the passages the response was built from (``used_passages``). Before
each request the turn and the state are saved (:mod:`ikatkit.interactive.state`), so a rerun of
the same command after a kill, a network failure or a server restart continues the server's open run from
``/run/session`` and ``/run/status``: it never starts a second run, never answers one utterance twice, and does
not recompute a turn it already computed. A completed run is reported, not restarted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ikatkit import jsonl
from ikatkit.atomic import atomic_open, write_json
from ikatkit.errors import IkatError
from ikatkit.interactive.client import TOKEN_FIX, ApiClient, Unavailable
from ikatkit.interactive.state import RunState, load_turn, save_turn
from ikatkit.paths import cache_at, cache_root
from ikatkit.pipelines.config import RunConfig, load_config, with_stages
from ikatkit.pipelines.fingerprint import fingerprint, fingerprint_parts
from ikatkit.pipelines.pipeline import Pipeline, tally
from ikatkit.pipelines.record import TurnRecord
from ikatkit.lock import run_lock
from ikatkit.pipelines.runner import package_versions
from ikatkit.runs.io import from_records, write_run
from ikatkit.runs.model import strictly_decreasing
from ikatkit.runs.tokens import MAX_CITATIONS, fit_response

PTKB_STAGES = ("rank_ptkb", "gold_ptkb", "classify_ptkb")
GOLD_STAGES = {"manual_query": "the manual rewrite (resolved_utterance)", "gold_ptkb": "the gold PTKB"}


def with_persona_tracking(config: RunConfig) -> RunConfig:
    """The config with a ``track_persona`` stage before its PTKB stages (first, without any), unless it has one."""
    names = config.names()
    if "track_persona" in names:
        return config
    at = min((names.index(n) for n in PTKB_STAGES if n in names), default=0)
    return with_stages(config, [*config.stages[:at], {"stage": "track_persona"}, *config.stages[at:]])


def gold_readers(config: RunConfig) -> list[str]:
    """``stage reads what`` for each of the config's stages that reads what only topic files have (the manual
    rewrite, the gold PTKB): the interactive task's messages have neither."""
    return [f"{spec.name} reads {GOLD_STAGES[spec.name]}" for spec in config.stages if spec.name in GOLD_STAGES]


def record_of(message: dict[str, Any]) -> TurnRecord:
    """The one-turn record of a user message: its history as (utterance, response) pairs, the topic's turn number."""
    pairs: list[tuple[str, str]] = []
    asked = ""
    for m in message["history"][:-1]:
        if m["role"] == "user":
            asked = m["content"]
        else:
            pairs.append((asked, m["content"]))
    topic = message["topic_id"]
    qid = f"{topic}_{len(pairs) + 1}"
    return TurnRecord(qid, message["utterance"], pairs, {}, history_ids=[f"{topic}_{i}" for i in
                                                                           range(1, len(pairs) + 1)],
                      user_id=message["user_id"])


def turn_number(message: dict[str, Any]) -> int:
    return sum(m["role"] == "user" for m in message["history"])


class Answerer:
    """The config's pipeline over one user message at a time, built (resources loaded) on the first call; stages
    that keep files of their own (``track_persona``'s store) keep them under ``out``."""

    def __init__(self, config: RunConfig, index: str | Path | None, k: int, out: Path) -> None:
        self.config, self.index, self.k, self.out = config, index, k, out
        self.pipeline: Pipeline | None = None

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.pipeline is None:
            self.pipeline = Pipeline.from_config(self.config, self.index, self.out)
        batch = [record_of(message)]
        self.pipeline.check(batch)
        [record] = self.pipeline(batch)
        response, cut = fit_response(record.response)
        if cut:
            record.notes.append("response cut at a sentence boundary to the API's 250 tokens")
        citations = dict(strictly_decreasing(record.ranking[: self.k]))
        meta = {"ptkb_provenance": [record.ptkb_all[key] for key in record.ptkb_used if key in record.ptkb_all],
                "used_passages": [pid for pid in record.used if pid in citations]}
        return {"qid": record.qid, "topic_id": message["topic_id"], "user_id": message["user_id"],
                "utterance": message["utterance"], "history_len": len(message["history"]),
                "record": record.to_json(), "seconds": self.pipeline.seconds, "cut": cut,
                "sent": {"response": response, "citations": citations, "meta": meta}}


@dataclass
class Outcome:
    run_id: str
    out: Path
    turns: int
    computed_now: int
    dump_file: Path
    trec_file: Path
    manifest_file: Path
    already_complete: bool

    def summary(self) -> str:
        manifest = json.loads(self.manifest_file.read_text(encoding="utf-8"))
        head = (f"run {self.run_id} was already complete" if self.already_complete else
                f"run {self.run_id} complete")
        lines = [f"{head}: {self.turns} turns over {manifest['topics']} topics ({self.computed_now} computed now), "
                 f"{manifest['seconds_per_turn']['p50']} s/turn p50",
                 f"  dump:     {self.dump_file} ({manifest['dump']['source']})", f"  TREC run: {self.trec_file}",
                 f"  manifest: {self.manifest_file}"]
        if manifest["notes"]:
            lines.append("  notes: " + "; ".join(f"{n} x{c}" for n, c in manifest["notes"].items()))
        return "\n".join(lines)


class InteractiveRun:
    """One run against one API, kept under ``out``."""

    def __init__(self, config: RunConfig, client: ApiClient, run_id: str, out: Path, *, index: str | Path | None,
                 debug: bool, description: str, extra: dict[str, Any], k: int, tries: int = 4,
                 backoff: float = 1.0, progress: bool = True) -> None:
        self.config, self.client, self.run_id, self.out, self.debug = config, client, run_id, out, debug
        self.description, self.extra, self.index = description, extra, index
        self.tries, self.backoff, self.progress = tries, backoff, progress
        self.parts = fingerprint_parts(config.raw, [], 0, index, cache_root() / "digests")  # models too, as `run`
        self.answerer = Answerer(config, index, k, out)
        self.computed = 0
        state = RunState.load(out)
        if state is not None:
            state.check(run_id, client.base_url, debug, fingerprint(self.parts), out)
        self.state = state or RunState(run_id, client.base_url, debug, fingerprint(self.parts))

    def _save(self) -> None:
        self.state.save(self.out)

    def _arrived(self, message: dict[str, Any] | None) -> dict[str, Any] | None:
        if message is not None:
            self.state.message = message
            self._save()
        return message

    # ------------------------------------------------------------ where the run stands

    def sync(self) -> dict[str, Any] | None:
        """The message to answer now, from the server's view of the run; None when the run is complete."""
        state = self.state
        if state.complete:
            return None
        if not state.started:
            if state.start_sent and (found := self.client.session(self.run_id)) is not None:
                state.started = True
                return self._arrived(found)
            state.start_sent = True
            self._save()
            message = self.client.start(self.run_id, self.description, self.extra)
            state.started = True
            return self._arrived(message)
        found = self.client.session(self.run_id)
        if found is not None:
            return self._arrived(found)
        if not self.debug:
            status = self.client.status(self.run_id)
            if status is not None and status["status"] == "complete":
                return None
            if status is None:  # started, never answered, and the server lost it (a restart): start it again
                state.started = state.start_sent = False
                return self.sync()
        elif state.message and state.message.get("last_response_of_run"):
            return None
        return self.send(None, state.message or {})  # the session ended: the next message opens the next topic

    def send(self, turn: dict[str, Any] | None, pending: dict[str, Any]) -> dict[str, Any] | None:
        """Send a turn's answer (None: the empty response after a farewell) and return the next message.

        After a failed request the open session shows whether the server took the answer, so it is never sent
        twice: a longer history means it was taken, no session means it was taken and the session ended."""
        payload = turn["sent"] if turn else {"response": "", "citations": {}, "meta": {}}
        failure: Unavailable | None = None
        for attempt in range(self.tries):
            try:
                start = time.perf_counter()
                message = self.client.continue_(self.run_id, **payload)
                if turn is not None:
                    turn["http_seconds"] = round(time.perf_counter() - start, 4)
                    save_turn(self.out, turn["qid"], turn)
                return self._arrived(message) if message is not None else None
            except Unavailable as err:
                failure = err
            time.sleep(self.backoff * 2 ** attempt)
            found = self.client.session(self.run_id)
            if turn is None:
                if found is not None:
                    return self._arrived(found)
                continue
            if found is not None and len(found["history"]) > turn["history_len"]:
                return self._arrived(found)
            if found is None:
                return self._arrived({**pending, "history": [], "last_response_of_session": True,
                                      "last_response_of_run": False, "ended_unseen": True})
        assert failure is not None
        raise failure

    # ------------------------------------------------------------ the turns

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """The turn's answer: the one computed before (same utterance and history), else computed now."""
        qid = f"{message['topic_id']}_{turn_number(message)}"
        kept = load_turn(self.out, qid)
        if kept and "sent" in kept and kept["utterance"] == message["utterance"] and \
                kept["history_len"] == len(message["history"]):
            return kept
        turn = self.answerer.answer(message)
        self.computed += 1
        save_turn(self.out, qid, turn)
        if qid not in self.state.turns:
            self.state.turns.append(qid)
        self._save()
        if self.progress:
            split = ", ".join(f"{k} {v:.2f}" for k, v in turn["seconds"].items())
            print(f"topic {message['topic_id']} turn {turn_number(message)}: {sum(turn['seconds'].values()):.2f} s "
                  f"({split})" + (" [response cut]" if turn["cut"] else ""), file=sys.stderr, flush=True)
        return turn

    def farewell(self, message: dict[str, Any]) -> None:
        if message.get("ended_unseen"):
            return
        qid = f"{message['topic_id']}_{turn_number(message)}"
        save_turn(self.out, qid, {"qid": qid, "topic_id": message["topic_id"], "user_id": message["user_id"],
                                  "utterance": message["utterance"], "farewell": True})
        if qid not in self.state.turns:
            self.state.turns.append(qid)
        self._save()

    def run(self) -> Outcome:
        already = self.state.complete
        if not self.state.team_id:
            self.state.team_id = self.client.verify()
        message = self.sync()
        while message is not None:
            if message["last_response_of_session"]:
                self.farewell(message)
                if message["last_response_of_run"]:
                    break
                message = self.send(None, message)
                continue
            message = self.send(self.answer(message), message)
        return self.finish(already)

    # ------------------------------------------------------------ the files

    def local_rows(self) -> list[dict[str, Any]]:
        """The run in the dump's format from the turn files (``user_meta`` is the server's: left empty)."""
        head: dict[str, Any] = {"team_id": self.state.team_id, "run_id": self.run_id, "description": self.description,
                "extra": self.extra}
        rows: list[dict[str, Any]] = []
        for qid in self.state.turns:
            turn = load_turn(self.out, qid) or {}
            sent = turn.get("sent") or {"response": None, "citations": {}, "meta": {}}
            rows.append({"metadata": {**head, "topic_id": qid}, "responses": [{
                "rank": 1, "user_utterance": turn.get("utterance", ""), "user_meta": {},
                "assistant_text": sent["response"], "assistant_citations": sent["citations"],
                "assistant_meta": sent["meta"]}]})
        return rows

    def finish(self, already: bool) -> Outcome:
        local = self.local_rows()
        if self.debug:  # /run/dump has only evaluated runs
            rows, source, matches = local, "local (debug runs have no server dump)", None
        else:
            rows, source = self.client.dump(self.run_id), "server /run/dump"
            strip = [[{k: v for k, v in r.items() if k != "user_meta"} for r in row["responses"]] for row in rows]
            mine = [[{k: v for k, v in r.items() if k != "user_meta"} for r in row["responses"]] for row in local]
            matches = strip == mine and [r["metadata"] for r in rows] == [r["metadata"] for r in local]
        dump_file = self.out / f"{self.run_id}.jsonl"
        with atomic_open(dump_file) as handle:
            jsonl.write(handle, rows)
        trec_file = self.out / f"{self.run_id}.trec"  # the citations as the server recorded them
        write_run(from_records([(f"line {n}", row) for n, row in enumerate(rows, start=1)], "interactive"), trec_file,
                  "trec")
        turns = [t for t in (load_turn(self.out, q) for q in self.state.turns) if t and "sent" in t]
        manifest_file = self.out / "manifest.json"
        write_json(manifest_file, self.manifest(turns, rows, source, matches))
        self.state.complete = True
        self._save()
        answered = sum(r["responses"][0]["assistant_text"] is not None for r in rows)
        return Outcome(self.run_id, self.out, answered, self.computed, dump_file, trec_file, manifest_file, already)

    def manifest(self, turns: list[dict[str, Any]], rows: list[dict[str, Any]], source: str,
                 matches: bool | None) -> dict[str, Any]:
        import numpy as np

        per_turn = [sum(t["seconds"].values()) for t in turns]
        http = [t["http_seconds"] for t in turns if "http_seconds" in t]
        stages: dict[str, float] = {}
        for turn in turns:
            for name, value in turn["seconds"].items():
                stages[name] = stages.get(name, 0.0) + value
        notes, guarded = tally(TurnRecord.from_json(turn["record"]) for turn in turns)

        def pct(values: list[float]) -> dict[str, float | None]:
            if not values:
                return {"p50": None, "p95": None, "mean": None}
            return {"p50": round(float(np.percentile(values, 50)), 4),
                    "p95": round(float(np.percentile(values, 95)), 4), "mean": round(float(np.mean(values)), 4)}

        return {
            "run_id": self.run_id, "api": self.client.base_url, "debug": self.debug, "team_id": self.state.team_id,
            "description": self.description, "extra": self.extra, "config": self.config.raw,
            "config_file": str(self.config.path) if self.config.path else None,
            "fingerprint": fingerprint(self.parts), "fingerprint_parts": self.parts,
            "index": str(self.index) if self.index else None,
            "turns": sum(r["responses"][0]["assistant_text"] is not None for r in rows),
            "topics": len({r["metadata"]["topic_id"].rpartition("_")[0] for r in rows}),
            "farewells": sum(1 for r in rows if r["responses"][0]["assistant_text"] is None),
            "responses_cut": sum(t["cut"] for t in turns),
            "seconds_per_stage": {k: round(v, 3) for k, v in stages.items()},
            "seconds_per_turn": pct(per_turn), "http_seconds_per_turn": pct(http),
            "notes": notes, "guarded_llm_outputs": guarded,
            "resource_stats": self.answerer.pipeline.stats if self.answerer.pipeline else {},
            "dump": {"file": f"{self.run_id}.jsonl", "source": source, "rows": len(rows), "matches_local": matches},
            "trec": f"{self.run_id}.trec", "versions": package_versions(),
        }


def run_interactive(config: str | Path | RunConfig, api: str, run_id: str, out: str | Path, *,
                    index: str | Path | None = None, debug: bool = False, description: str | None = None,
                    track_persona: bool = False, cache_dir: str | Path | None = None, k: int = MAX_CITATIONS,
                    retries: int = 4, backoff: float = 1.0, timeout: float = 300.0, progress: bool = True) -> Outcome:
    """Take part in run ``run_id`` at ``api`` with ``config``, keeping everything under ``out``; the token only
    from ``$IKAT_API_TOKEN``. ``cache_dir``: the cache root (:func:`ikatkit.paths.cache_at`)."""
    token = os.environ.get("IKAT_API_TOKEN", "").strip()
    if not token:
        raise IkatError("IKAT_API_TOKEN is not set", fix=TOKEN_FIX)
    if not 1 <= k <= MAX_CITATIONS:
        raise IkatError(f"--citations {k} is outside 1..{MAX_CITATIONS}",
                        fix=f"the API takes up to {MAX_CITATIONS} citations")
    if not run_id or any(c.isspace() for c in run_id):
        raise IkatError(f"run id {run_id!r} is empty or has spaces", where="--run-id",
                        fix="choose a run id without spaces (it is also the TREC run's tag)")
    config = config if isinstance(config, RunConfig) else load_config(config)
    if track_persona:
        config = with_persona_tracking(config)
    if progress and (gold := gold_readers(config)):
        print(f"warning: {config.path or config.name}: {'; '.join(gold)}, and the interactive task has no gold "
              "rewrites or PTKB: the raw utterance is used and no PTKB statement is chosen (for a real run pick an "
              "automatic config, e.g. configs/demo.toml)", file=sys.stderr, flush=True)
    description = description or config.description or config.name
    extra = {"ikatkit_config": config.name, "track_persona": track_persona}
    out = Path(out)
    client = ApiClient(api, token, debug=debug, retries=retries, backoff=backoff, timeout=timeout)
    try:
        with cache_at(cache_dir), run_lock(out):
            run = InteractiveRun(config, client, run_id, out, index=index, debug=debug, description=description,
                                 extra=extra, k=k, tries=retries, backoff=backoff, progress=progress)
            return run.run()
    finally:
        client.close()
