"""The local simulator: the organizers' endpoints, messages, status codes and run bookkeeping.

A run is a list of sessions, one per (simulated user, topic) pair in play order. The 2025 server (``edition``
2025, the default) has one user per topic and answers ``/run/status`` with ``done_topics`` and ``open_topics``;
the 2026 server (``edition`` 2026) lets several users play one topic (``users`` as ``(topic, user)`` pairs), sends
each message with ``user_meta = {"ptkb": [the topic's PTKB statements]}`` (``ptkb``), answers ``/run/status`` with
``{"status", "open_user_topic_pairs", "done_user_topic_pairs"}`` (each pair an object ``{"user_id", "topic_id"}``;
the 2026 Sim.API page names the fields, not the pairs' shape), refuses more than 10 citations a turn (HTTP 422:
the guidelines assess the top 10; the API page says up to 1000, the stricter is kept) and keys its dump by user:
``metadata.user_id`` beside ``metadata.topic_id = {topic}_{n}`` (the user's n-th utterance in that topic), with the
user's rubric and 0-5 judgement as the released runs name them (``user_rubrik``, ``user_rubrik_score``) and the
user's type in ``user_meta.user_type`` (``user_types``: user id -> type).

Runs and their recorded requests live in memory and, with ``store``, in a JSON file rewritten after each change.
A 2025 simulator restarted on the same store knows the runs, but no run is active and no session open (the
server's status ``inactive``); the next ``/run/continue`` recovers the run on its first topic without requests, as
the organizers' server does (the open session is lost). A 2026 simulator also keeps the open session of each run in
the store: restarted, it continues that session where it stood (``/run/session`` answers it), so a run whose
simulator was killed ends with the dump of an uninterrupted run. Where the organizers' server answers 500
(``/run/session`` when no session is open), this one answers 404 with a detail.

``unavailable`` (Python API) makes the next so many requests answer 503: the outage a client must survive.
"""

from __future__ import annotations

import datetime
import json
import secrets
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response

from ikatkit.atomic import write_json
from ikatkit.errors import IkatError
from ikatkit.interactive.messages import AssistantResponse, RunMeta, UserMessage
from ikatkit.runs.tokens import interactive_rules
from ikatkit.simulate.users import User, Utterance


Pair = tuple[str, str]  # (user id, topic id): one session of a run


@dataclass
class Session:
    topic_id: str
    user_id: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    history: list[dict[str, str]] = field(default_factory=list)
    user_meta: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pair(self) -> Pair:
        return self.user_id, self.topic_id


@dataclass
class ActiveRun:
    meta: dict[str, Any]
    open_pairs: list[Pair]
    session: Session | None = None


class Simulator:
    """The API's state: sessions (user, topic) in order with their users, runs, recorded requests, budgets.

    ``users``: topic id -> its one user (2025), or ``(topic id, user)`` pairs in play order (several users per
    topic); ``ptkb``: topic id -> its PTKB statements, sent as every message's ``user_meta.ptkb`` (2026);
    ``edition``: the status, citation and dump rules (2025 or 2026); ``user_types``: user id -> type, noted in
    the dump."""

    def __init__(self, users: Mapping[str, User] | Sequence[tuple[str, User]], tokens: dict[str, str], *,
                 store: str | Path | None = None, run_limit: int = 100, session_limit: int = 100,
                 ptkb: Mapping[str, list[str]] | None = None, edition: int = 2025,
                 user_types: Mapping[str, str] | None = None) -> None:
        plays = list(users.items()) if isinstance(users, Mapping) else list(users)
        self.users: dict[Pair, User] = {(user.id, topic): user for topic, user in plays}
        if len(self.users) != len(plays):
            raise IkatError("a user plays one topic twice", fix="give each (user, topic) pair one session")
        self.plan: list[Pair] = list(self.users)
        self.topics = list(dict.fromkeys(topic for _, topic in self.plan))
        self.tokens, self.ptkb, self.edition = tokens, dict(ptkb or {}), edition
        self.user_types = dict(user_types or {})
        self.max_citations = interactive_rules(edition).max_citations
        self.run_limit, self.session_limit = run_limit, session_limit
        self.store = Path(store) if store else None
        self.lock = threading.RLock()
        self.active: dict[str, dict[str, ActiveRun]] = {"run": {}, "debug": {}}
        self.runs: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.open_sessions: dict[str, dict[str, Any]] = {}  # 2026: run id -> its open session, kept in the store
        self.unavailable = 0
        if self.store and self.store.exists():
            saved = json.loads(self.store.read_text(encoding="utf-8"))
            self.runs, self.requests = saved["runs"], saved["requests"]
            self.open_sessions = saved.get("sessions", {}) if edition >= 2026 else {}

    def _save(self) -> None:
        if self.store:
            if self.edition >= 2026:
                self.open_sessions = {run_id: asdict(run.session) for run_id, run in self.active["run"].items()
                                      if run.session is not None}
            write_json(self.store, {"runs": self.runs, "requests": self.requests, "sessions": self.open_sessions},
                       indent=None)

    def team(self, authorization: str | None) -> str:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
        for known, team in self.tokens.items():
            if secrets.compare_digest(known.encode(), token.encode()):
                return team
        raise HTTPException(401, "Token is invalid.")

    # ------------------------------------------------------------ bookkeeping as the organizers' server keeps it

    def run_requests(self, run_id: str, api: str = "run") -> list[dict[str, Any]]:
        return [r for r in self.requests if r["run_id"] == run_id and r["api"] == api]

    def run_exists(self, run_id: str, team: str | None = None) -> bool:
        known = self.runs.get(run_id)
        recorded = known is not None and (team is None or known["team_id"] == team) and bool(self.run_requests(run_id))
        return recorded or run_id in self.active["run"] or run_id in self.open_sessions

    def _worked(self, run_id: str) -> list[Pair]:
        """The pairs a run worked on, as the requests (and a kept open session) show."""
        pairs = [(r["user_id"], r["topic_id"]) for r in self.run_requests(run_id)]
        kept = self.open_sessions.get(run_id)
        return list(dict.fromkeys(pairs + ([(kept["user_id"], kept["topic_id"])] if kept else [])))

    def status(self, run_id: str) -> dict[str, Any]:
        run = self.active["run"].get(run_id)
        if run is None:
            worked = self._worked(run_id)
            state, done, open_ = "inactive", worked, [p for p in self.plan if p not in worked]
        else:
            state, open_ = "active", list(run.open_pairs)
            done = [p for p in self.plan if p not in open_]
        in_session = run.session is not None if run is not None else run_id in self.open_sessions
        if not open_ and not (self.edition >= 2026 and in_session):  # 2025: the last topic counts once opened
            state = "complete"
        if self.edition >= 2026:
            return {"status": state, "open_user_topic_pairs": [{"user_id": u, "topic_id": t} for u, t in open_],
                    "done_user_topic_pairs": [{"user_id": u, "topic_id": t} for u, t in done]}
        return {"status": state, "done_topics": list(dict.fromkeys(t for _, t in done)),
                "open_topics": list(dict.fromkeys(t for _, t in open_))}

    def remaining(self, team: str, api: str) -> int:
        if api == "debug":
            used = len({r["session_id"] for r in self.requests if r["team_id"] == team and r["api"] == "debug"})
            return max(0, self.session_limit - used)
        used = sum(meta["team_id"] == team for meta in self.runs.values())
        return max(0, self.run_limit - used)

    def check_budget(self, team: str, api: str) -> None:
        if self.remaining(team, api) == 0:
            raise HTTPException(403, "You exceeded the maximum number of "
                                     f"{'requests' if api == 'debug' else 'runs'} you can submit.")

    def existing_run(self, team: str, run_id: str, api: str) -> ActiveRun:
        run = self.active[api].get(run_id)
        if run is None:
            if api == "run" and self.run_exists(run_id, team) and self.status(run_id)["status"] != "complete":
                run = self._recover(run_id)
            else:
                raise HTTPException(428, f'Run with the name "{run_id}" does not exist or was completed.')
        if run.meta["team_id"] != team:
            raise HTTPException(403, f'Run with the name "{run_id}" does not belong to team "{team}".')
        return run

    def _recover(self, run_id: str) -> ActiveRun:
        """An inactive run made active again: on its kept open session (2026), else on its first pair without
        requests."""
        worked = self._worked(run_id)
        run = ActiveRun(self.runs[run_id], [p for p in self.plan if p not in worked])
        kept = self.open_sessions.pop(run_id, None)
        if kept is not None:
            run.session = Session(**kept)
        self.active["run"][run_id] = run
        return run

    def record(self, run: ActiveRun, api: str, utterance: str, response: str | None, citations: Any,
               user_meta: dict[str, Any], assistant_meta: Any) -> None:
        session = run.session
        assert session is not None
        self.requests.append({
            "timestamp": datetime.datetime.now().isoformat(), "run_id": run.meta["run_id"],
            "team_id": run.meta["team_id"], "session_id": session.id, "topic_id": session.topic_id,
            "user_id": session.user_id, "api": api, "user_utterance": utterance, "user_meta": user_meta,
            "assistant_response": response, "assistant_meta": assistant_meta, "assistant_citations": citations})

    def open_session(self, run: ActiveRun) -> Session | None:
        if not run.open_pairs:
            return None
        user, topic = run.open_pairs.pop(0)
        run.session = Session(topic, user)
        return run.session

    def user(self, session: Session) -> User:
        return self.users[session.pair]

    def say(self, session: Session, utterance: Utterance) -> None:
        session.history.append({"role": "user", "content": utterance.content})
        kind = self.user_types.get(session.user_id)
        session.user_meta.append({**utterance.meta, **({"user_type": kind} if kind else {})})

    def message(self, run: ActiveRun, session: Session, utterance: str, end: bool = False) -> UserMessage:
        ptkb = self.ptkb.get(session.topic_id) if self.edition >= 2026 else None
        return UserMessage(timestamp=datetime.datetime.now().isoformat(), run_id=run.meta["run_id"],
                           topic_id=session.topic_id, user_id=session.user_id, utterance=utterance,
                           history=list(session.history), last_response_of_session=end,
                           last_response_of_run=end and not run.open_pairs,
                           user_meta={"ptkb": list(ptkb)} if ptkb is not None else None)

    # ------------------------------------------------------------ endpoints

    def start(self, team: str, meta: RunMeta, api: str) -> UserMessage:
        with self.lock:
            self.check_budget(team, api)
            if not meta.run_id:
                raise HTTPException(400, "Run name cannot be empty. Please provide a meaningful name.")
            if not meta.description:
                raise HTTPException(400, "Run description cannot be empty. Please provide a meaningful description.")
            if meta.run_id in self.active[api] or (api == "run" and self.run_exists(meta.run_id)):
                raise HTTPException(412, f'Active run with the name "{meta.run_id}" already exists or '
                                         "a run with that name was already completed before.")
            if meta.team_id is not None and meta.team_id != team:
                raise HTTPException(403, f"Team name {meta.team_id} does not match token")
            record = {"run_id": meta.run_id, "team_id": team, "description": meta.description, "extra": meta.extra}
            run = ActiveRun(record, list(self.plan))
            self.active[api][meta.run_id] = run
            if api == "run":
                self.runs[meta.run_id] = record
            session = self.open_session(run)
            assert session is not None
            utterance = self.user(session).initiate(session.topic_id)
            self.say(session, utterance)
            if api == "run":
                self._save()
            return self.message(run, session, utterance.content)

    def continue_(self, team: str, answer: AssistantResponse, api: str) -> UserMessage:
        with self.lock:
            run = self.existing_run(team, answer.run_id, api)
            if api == "debug" and run.session is None:
                self.check_budget(team, api)  # a session under way may finish on an exhausted budget
            session = run.session
            if session is None:
                session = self.open_session(run)
                if session is None:
                    raise HTTPException(400, f'No more open topics for run "{answer.run_id}". Run was finished!')
                utterance = self.user(session).initiate(session.topic_id)
                self.say(session, utterance)  # the response to the previous topic's farewell is ignored
                self._save()
                return self.message(run, session, utterance.content)
            if answer.citations is not None and len(answer.citations) > self.max_citations:
                raise HTTPException(422, f"Too many citations ({len(answer.citations)}): the {self.edition} rules "
                                         f"take at most {self.max_citations}.")
            asked = session.history[-1]["content"]
            session.history.append({"role": "assistant", "content": answer.response})
            utterance = self.user(session).respond(session.topic_id, session.history, session.user_meta)
            self.record(run, api, asked, answer.response, answer.citations, session.user_meta[-1], answer.meta)
            self.say(session, utterance)
            if utterance.end_of_session:
                self.record(run, api, utterance.content, None, {}, session.user_meta[-1], {})
                run.session = None
            self._save()
            return self.message(run, session, utterance.content, utterance.end_of_session)

    def session(self, team: str, run_id: str, api: str) -> UserMessage:
        with self.lock:
            run = self.existing_run(team, run_id, api)
            if run.session is None:
                raise HTTPException(404, f'Run "{run_id}" has no open session: the next /{api}/continue opens one.')
            return self.message(run, run.session, run.session.history[-1]["content"])

    def dump(self, team: str, run_id: str) -> str:
        with self.lock:
            if not self.run_exists(run_id, team) or not self.run_requests(run_id):
                raise HTTPException(404, f'Run "{run_id}" does not exist.')
            meta = self.runs[run_id]
            head: dict[str, Any] = {"team_id": meta["team_id"], "run_id": run_id,
                                    "description": meta["description"], "extra": meta["extra"]}
            by_pair: dict[Pair, list[dict[str, Any]]] = {}
            for r in self.run_requests(run_id):
                by_pair.setdefault((r["user_id"], r["topic_id"]), []).append(r)
            rows = [self._row(head, user, topic, i, r, requests[i:])
                    for (user, topic), requests in by_pair.items() for i, r in enumerate(requests, start=1)]
            return "\n".join(json.dumps(row) for row in rows)

    def _row(self, head: dict[str, Any], user: str, topic: str, n: int, r: dict[str, Any],
             after: list[dict[str, Any]]) -> dict[str, Any]:
        """One dump row; 2026: keyed by user, with the user's rubric and its judgement of the answer (which the
        user's next utterance carries, ``after[0]``)."""
        response: dict[str, Any] = {"rank": 1, "user_utterance": r["user_utterance"], "user_meta": r["user_meta"]}
        metadata = {**head, "topic_id": f"{topic}_{n}"}
        if self.edition >= 2026:
            metadata = {**head, "user_id": user, "topic_id": f"{topic}_{n}"}
            judged = after[0]["user_meta"] if after else {}
            farewell = r["assistant_response"] is None
            response["user_rubrik"] = None if farewell else r["user_meta"].get("rubric")
            response["user_rubrik_score"] = None if farewell else judged.get("rubric_score")
        response.update({"assistant_text": r["assistant_response"], "assistant_citations": r["assistant_citations"],
                         "assistant_meta": r["assistant_meta"]})
        return {"metadata": metadata, "responses": [response]}


def create_app(sim: Simulator) -> FastAPI:
    """The FastAPI app of a simulator: /run/*, /debug/*, /budget/check, /auth/verify."""
    app = FastAPI(title="ikatkit local simulation API")

    @app.middleware("http")
    async def outage(request: Request, call_next: Any) -> Any:
        if sim.unavailable > 0:
            sim.unavailable -= 1
            return JSONResponse({"detail": "Service unavailable (simulated outage)."}, status_code=503)
        return await call_next(request)

    def team(authorization: str | None = Header(default=None)) -> str:
        return sim.team(authorization)

    for api in ("run", "debug"):
        def bind(api: str = api) -> None:
            @app.post(f"/{api}/start", response_model=UserMessage)
            def start(meta: RunMeta, team_id: str = Depends(team)) -> UserMessage:
                return sim.start(team_id, meta, api)

            @app.post(f"/{api}/continue", response_model=UserMessage)
            def continue_(answer: AssistantResponse, team_id: str = Depends(team)) -> UserMessage:
                return sim.continue_(team_id, answer, api)

            @app.get(f"/{api}/session", response_model=UserMessage)
            def session(run_id: str, team_id: str = Depends(team)) -> UserMessage:
                return sim.session(team_id, run_id, api)
        bind()

    @app.get("/run/status")
    def status(run_id: str, team_id: str = Depends(team)) -> JSONResponse:
        with sim.lock:
            if not sim.run_exists(run_id):
                raise HTTPException(404, f'Run "{run_id}" does not exist.')
            return JSONResponse(sim.status(run_id))

    @app.get("/run/dump")
    def dump(run_id: str, team_id: str = Depends(team)) -> Response:
        return Response(sim.dump(team_id, run_id), media_type="application/x-ndjson")

    @app.get("/budget/check")
    def budget(team_id: str = Depends(team)) -> JSONResponse:
        with sim.lock:
            return JSONResponse({"remaining": {
                "debug": {"remaining": sim.remaining(team_id, "debug"), "unit": "sessions"},
                "run": {"remaining": sim.remaining(team_id, "run"), "unit": "runs"}}})

    @app.get("/auth/verify")
    def verify(team_id: str = Depends(team)) -> JSONResponse:
        return JSONResponse({"team_id": team_id})

    return app
