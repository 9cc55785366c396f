"""Take part in an interactive run: each user message becomes a one-turn record that the config's stages answer.

The run folder is a :class:`~ikatkit.pipelines.session.RunSession`'s (lock, cache, preflight, fingerprint, the
turn store, the TREC run, the manifest); this driver feeds it the API's messages, and
:class:`~ikatkit.interactive.answer.Answerer` answers each: a one-turn record from the message's history, topic
and user ids and the user's PTKB (the message's ``user_meta.ptkb`` in 2026, else the conversation's of
``--topics``); the stages; the response cut at a sentence boundary to the rules' tokens; the ranking's top ``k``
as citations (the rules' maximum: 2026 10, 2025 1000); in ``meta`` the PTKB statements used (``ptkb_provenance``,
verbatim; those ``track_persona`` extracted also in ``ptkb_extracted``) and the passages the response was built
from (``used_passages``). Turns are keyed by (user, topic, turn): several users may play one topic. Before each
request the turn and the state are saved (:mod:`ikatkit.interactive.state`), so a rerun of the same command after a
kill, a network failure or a server restart continues the server's open run from ``/run/session`` and
``/run/status``: it never starts a second run, never answers one utterance twice, and does not recompute a turn it
already computed. A completed run is reported, not restarted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ikatkit import jsonl
from ikatkit.atomic import atomic_open
from ikatkit.errors import IkatError
from ikatkit.interactive.answer import Answerer, gold_readers, key_of, message_ptkb, with_persona_tracking
from ikatkit.interactive.client import TOKEN_FIX, ApiClient, Unavailable, is_complete
from ikatkit.interactive.state import RunState
from ikatkit.pipelines.config import RunConfig, load_config
from ikatkit.pipelines.record import TurnRecord
from ikatkit.runs.tokens import InteractiveRules, interactive_rules
from ikatkit.pipelines.session import Outcome, RunSession, to_run
from ikatkit.pipelines.session.manifest import percentiles
from ikatkit.pipelines.session.store import turn_unit
from ikatkit.topics import Topics, load_topics

# the fix when --out holds turns of other inputs: they were sent under this run id, which the server keeps
FRESH = "start the run anew with a new --out and a new --run-id"


def what_was_sent(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[tuple[Any, Any, Any]]]:
    """What the system sent in a dump's rows, per (user, topic, turn) key (user "" on a 2025 dump): each
    response's text, citations and meta; the server's own fields (``user_meta``, ``user_rubrik``, the run's
    description) are not the system's, so a dump and the local turn files compare on this."""
    sent: dict[tuple[str, str, str], list[tuple[Any, Any, Any]]] = {}
    for row in rows:
        meta = row.get("metadata") or {}
        key = (str(meta.get("user_id") or ""), *str(meta.get("topic_id", "")).rpartition("_")[::2])
        sent.setdefault(key, []).extend((r.get("assistant_text"), r.get("assistant_citations"),
                                         r.get("assistant_meta")) for r in row.get("responses") or [])
    return sent


class InteractiveRun:
    """One run against one API, kept in ``session``'s folder; ``rules`` None: by what the server sends."""

    def __init__(self, session: RunSession, client: ApiClient, run_id: str, *, debug: bool, description: str,
                 extra: dict[str, Any], k: int | None, rules: int | None, topics: Topics | None, tries: int = 4,
                 backoff: float = 1.0, progress: bool = True) -> None:
        assert session.out is not None and session.store is not None
        self.session, self.store, self.out = session, session.store, session.out
        self.client, self.run_id, self.debug, self.description, self.extra = client, run_id, debug, description, extra
        self.k, self.topics, self.tries, self.backoff, self.progress = k, topics, tries, backoff, progress
        ptkb = [{"topic": c.id, "ptkb": c.ptkb} for c in topics.conversations] if topics else []
        self.parts = session.parts(ptkb, topics.year if topics else 0)  # models too, as `run`
        self.store.check(self.parts)
        self.answerer = Answerer(session, topics, k, progress)
        self.computed, self.computed_seconds = 0, 0.0
        state = RunState.load(self.out)
        if state is not None:
            state.check(run_id, client.base_url, debug, rules, self.out)
        self.state = state or RunState(run_id, client.base_url, debug, rules)
        self.store.write_stamp(self.parts)

    @property
    def rules(self) -> InteractiveRules:
        return interactive_rules(self.state.rules or 2025)

    def _save(self) -> None:
        self.state.save(self.out)

    def _arrived(self, message: dict[str, Any] | None) -> dict[str, Any] | None:
        if message is not None:
            if self.state.rules is None:  # the first message says which edition's server this is
                self.state.rules = 2026 if message_ptkb(message) is not None else 2025
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
            if status is not None and is_complete(status):
                return None
            if status is None:  # started, never answered, and the server lost it (a restart): start it again
                state.started = state.start_sent = False
                return self.sync()
        elif state.message and state.message.get("last_response_of_run"):
            return None
        return self.send(None, state.message or {})  # the session ended: the next message opens the next session

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
                    self.store.save(turn_unit(*turn["key"]), turn)
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
        key = key_of(message)
        kept = self.store.load(turn_unit(*key))
        if kept and "sent" in kept and kept["utterance"] == message["utterance"] and \
                kept["history_len"] == len(message["history"]):
            return kept
        turn = self.answerer.compute(message, self.rules)
        self.computed += 1
        self.computed_seconds += sum(turn["seconds"].values())
        self._keep(key, turn)
        if self.progress:
            split = ", ".join(f"{k} {v:.2f}" for k, v in turn["seconds"].items())
            print(f"user {key[0]} topic {key[1]} turn {key[2]}: {sum(turn['seconds'].values()):.2f} s ({split})"
                  + (" [response cut]" if turn["cut"] else "")
                  + (" [no passage]" if not turn["record"]["ranking"] else ""), file=sys.stderr, flush=True)
        return turn

    def _keep(self, key: list[Any], turn: dict[str, Any]) -> None:
        self.store.save(turn_unit(*key), turn)
        if key not in self.state.turns:
            self.state.turns.append(key)
        self._save()

    def farewell(self, message: dict[str, Any]) -> None:
        if not message.get("ended_unseen"):
            self._keep(key_of(message), {"key": key_of(message), "topic_id": message["topic_id"],
                                         "user_id": message["user_id"], "utterance": message["utterance"],
                                         "farewell": True})

    def resuming(self) -> str | None:
        """What a rerun resumes (None for a fresh or a complete run)."""
        state = self.state
        if state.complete or not state.start_sent:
            return None
        # the turn files, not state.turns: a kill between a turn's file and the state's save leaves a kept turn
        # that the state does not list yet (the rerun reuses it all the same)
        kept = sum("sent" in json.loads(path.read_text(encoding="utf-8")) for path in self.store.units())
        message = state.message or {}
        open_ = ("" if not message or message.get("last_response_of_session") else
                 f", session of user {message['user_id']} topic {message['topic_id']} open")
        return f"resuming run {self.run_id}: {kept} turns kept{open_}"

    def run(self) -> Outcome:
        already = self.state.complete
        if self.progress and (line := self.resuming()):
            print(line, file=sys.stderr, flush=True)
        if not self.state.team_id:
            self.state.team_id = self.client.verify()
        message = self.sync()
        if self.k is not None and self.k > self.rules.max_citations:
            raise IkatError(f"--citations {self.k} is above the {self.rules.edition} rules' "
                            f"{self.rules.max_citations}", where="--citations",
                            fix=f"pass --citations {self.rules.max_citations} or lower; rerun to resume")
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

    def local_rows(self, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The run in the dump's format from the turn files (``user_meta`` is the server's: left empty)."""
        head: dict[str, Any] = {"team_id": self.state.team_id, "run_id": self.run_id, "description": self.description,
                                "extra": self.extra}
        rows: list[dict[str, Any]] = []
        for turn in turns:
            sent = turn.get("sent") or {"response": None, "citations": {}, "meta": {}}
            user, topic, n = turn["key"]
            ids = {"user_id": user, "topic_id": f"{topic}_{n}"} if self.rules.edition >= 2026 else {
                "topic_id": f"{topic}_{n}"}
            rows.append({"metadata": {**head, **ids}, "responses": [{
                "rank": 1, "user_utterance": turn.get("utterance", ""), "user_meta": {},
                "assistant_text": sent["response"], "assistant_citations": sent["citations"],
                "assistant_meta": sent["meta"]}]})
        return rows

    def finish(self, already: bool) -> Outcome:
        turns = [t for t in (self.store.load(turn_unit(*key)) for key in self.state.turns) if t]
        local = self.local_rows(turns)
        if self.debug:  # /run/dump has only evaluated runs
            rows, source, matches = local, "local (debug runs have no server dump)", None
        else:
            rows, source = self.client.dump(self.run_id), "server /run/dump"
            matches = what_was_sent(rows) == what_was_sent(local)
        dump_file = self.out / f"{self.run_id}.jsonl"
        with atomic_open(dump_file) as handle:
            jsonl.write(handle, rows)
        answered = [t for t in turns if "sent" in t]
        records = [TurnRecord.from_json(t["record"]) for t in answered]
        users_per_topic = {t["topic_id"]: {u["user_id"] for u in answered if u["topic_id"] == t["topic_id"]}
                           for t in answered}
        with_user = self.rules.edition >= 2026 or any(len(users) > 1 for users in users_per_topic.values())
        run = to_run(records, self.run_id, "automatic", self.rules.edition, self.state.team_id,
                     limit=self.k or self.rules.max_citations,
                     users=[t["user_id"] if with_user else None for t in answered])
        _, trec_file, valid = self.session.write_run(run, None, dump_file.name, self.topics)
        seconds: dict[str, float] = {}
        for turn in answered:
            for name, value in turn["seconds"].items():
                seconds[name] = seconds.get(name, 0.0) + value
        pairs = {(t["user_id"], t["topic_id"]) for t in turns}
        sources = [t.get("ptkb_source", "none") for t in answered]
        own = {"run_id": self.run_id, "api": self.client.base_url, "debug": self.debug, "team_id": self.state.team_id,
               "description": self.description, "extra": self.extra, "fingerprint_parts": self.parts,
               "rules": self.rules.template, "citations": self.k or self.rules.max_citations,
               "sessions": len(pairs), "users": len({u for u, _ in pairs}), "conversations": len({t for _, t in pairs}),
               "farewells": sum("sent" not in t for t in turns), "responses_cut": sum(t["cut"] for t in answered),
               "ptkb_sources": {s: sources.count(s) for s in dict.fromkeys(sources)},
               "seconds_per_turn_percentiles": percentiles([sum(t["seconds"].values()) for t in answered]),
               "http_seconds_per_turn": percentiles([t["http_seconds"] for t in answered if "http_seconds" in t]),
               "dump": {"file": dump_file.name, "source": source, "rows": len(rows), "matches_local": matches}}
        self.state.complete = True
        self._save()
        p50 = own["seconds_per_turn_percentiles"]["p50"]
        head = f"run {self.run_id} was already complete" if already else f"run {self.run_id} complete"
        return self.session.finish(
            kind="interactive", run=run, records=records, files=(dump_file, trec_file), valid=valid, seconds=seconds,
            now=(self.computed, self.computed_seconds), topics=str(self.topics.path) if self.topics and
            self.topics.path else None, parts=self.parts, own=own, already_complete=already,
            lines=[f"{head}: {len(records)} turns in {len(pairs)} sessions ({own['users']} users, "
                   f"{own['conversations']} topics; {self.computed} computed now), {p50} s/turn p50",
                   f"  dump:     {dump_file} ({source})", f"  TREC run: {trec_file}",
                   f"  manifest: {self.out / 'manifest.json'}"])


def run_interactive(config: str | Path | RunConfig, api: str, run_id: str, out: str | Path, *,
                    index: str | Path | None = None, debug: bool = False, description: str | None = None,
                    track_persona: bool = False, cache_dir: str | Path | None = None, k: int | None = None,
                    rules: int | None = None, topics: str | Path | Topics | None = None, retries: int = 4,
                    backoff: float = 1.0, timeout: float = 300.0, progress: bool = True) -> Outcome:
    """Take part in run ``run_id`` at ``api`` with ``config``, keeping everything under ``out``; the token only
    from ``$IKAT_API_TOKEN``. ``rules``: the edition (2025, 2026) whose limits apply (None: 2026 when the server's
    messages carry ``user_meta``); ``k``: citations per turn, at most the rules' (None: the rules' maximum);
    ``topics``: the conversations' PTKB for a server whose messages carry none. ``cache_dir``: the cache root
    (:func:`ikatkit.paths.cache_at`)."""
    if rules is not None:
        interactive_rules(rules)  # one error for an edition without rules
    most = interactive_rules(rules).max_citations if rules is not None else max(
        interactive_rules(e).max_citations for e in (2025, 2026))
    if k is not None and not 1 <= k <= most:
        raise IkatError(f"--citations {k} is outside 1..{most}", where="--citations",
                        fix=f"the rules take up to {most} citations")
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
    topics = load_topics(topics) if topics is not None and not isinstance(topics, Topics) else topics
    description = description or config.description or config.name
    extra = {"ikatkit_config": config.name, "track_persona": track_persona}
    with RunSession(config, out, index=index, cache_dir=cache_dir, store="turns", fresh=FRESH) as session:
        token = os.environ.get("IKAT_API_TOKEN", "").strip()
        if not token:
            raise IkatError("IKAT_API_TOKEN is not set", fix=TOKEN_FIX)
        client = ApiClient(api, token, debug=debug, retries=retries, backoff=backoff, timeout=timeout)
        try:
            return InteractiveRun(session, client, run_id, debug=debug, description=description, extra=extra, k=k,
                                  rules=rules, topics=topics, tries=retries, backoff=backoff,
                                  progress=progress).run()
        finally:
            client.close()

