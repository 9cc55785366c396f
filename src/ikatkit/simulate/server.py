"""The local simulator: the organizers' endpoints, messages, status codes and run bookkeeping.

Runs and their recorded requests live in memory and, with ``store``, in a JSON file rewritten after each change:
a simulator restarted on the same store knows the runs, but no run is active and no session open (the server's
status ``inactive``); the next ``/run/continue`` recovers the run on its first topic without requests, as the
organizers' server does. Where the organizers' server answers 500 (``/run/session`` when no session is open),
this one answers 404 with a detail.

``unavailable`` (Python API) makes the next so many requests answer 503: the outage a client must survive.
"""

from __future__ import annotations

import datetime
import json
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response

from ikatkit.atomic import write_json
from ikatkit.interactive.messages import AssistantResponse, RunMeta, UserMessage
from ikatkit.simulate.users import User, Utterance


@dataclass
class Session:
    topic_id: str
    user_id: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    history: list[dict[str, str]] = field(default_factory=list)
    user_meta: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ActiveRun:
    meta: dict[str, Any]
    open_topics: list[str]
    session: Session | None = None


class Simulator:
    """The API's state: topics in order with their users, runs, recorded requests, budgets."""

    def __init__(self, users: dict[str, User], tokens: dict[str, str], *, store: str | Path | None = None,
                 run_limit: int = 100, session_limit: int = 100) -> None:
        self.users, self.tokens, self.topics = users, tokens, list(users)
        self.run_limit, self.session_limit = run_limit, session_limit
        self.store = Path(store) if store else None
        self.lock = threading.RLock()
        self.active: dict[str, dict[str, ActiveRun]] = {"run": {}, "debug": {}}
        self.runs: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.unavailable = 0
        if self.store and self.store.exists():
            saved = json.loads(self.store.read_text(encoding="utf-8"))
            self.runs, self.requests = saved["runs"], saved["requests"]

    def _save(self) -> None:
        if self.store:
            write_json(self.store, {"runs": self.runs, "requests": self.requests}, indent=None)

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
        return recorded or run_id in self.active["run"]

    def status(self, run_id: str) -> dict[str, Any]:
        run = self.active["run"].get(run_id)
        if run is None:
            done = list(dict.fromkeys(r["topic_id"] for r in self.run_requests(run_id)))
            progress = {"status": "inactive", "done_topics": done,
                        "open_topics": [t for t in self.topics if t not in done]}
        else:
            progress = {"status": "active", "done_topics": [t for t in self.topics if t not in run.open_topics],
                        "open_topics": list(run.open_topics)}
        if not progress["open_topics"]:
            progress["status"] = "complete"
        return progress

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
                done = {r["topic_id"] for r in self.run_requests(run_id)}
                run = ActiveRun(self.runs[run_id], [t for t in self.topics if t not in done])
                self.active[api][run_id] = run
            else:
                raise HTTPException(428, f'Run with the name "{run_id}" does not exist or was completed.')
        if run.meta["team_id"] != team:
            raise HTTPException(403, f'Run with the name "{run_id}" does not belong to team "{team}".')
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
        if not run.open_topics:
            return None
        topic = run.open_topics.pop(0)
        run.session = Session(topic, self.users[topic].id)
        return run.session

    @staticmethod
    def say(session: Session, utterance: Utterance) -> None:
        session.history.append({"role": "user", "content": utterance.content})
        session.user_meta.append(dict(utterance.meta))

    def message(self, run: ActiveRun, session: Session, utterance: str, end: bool = False) -> UserMessage:
        return UserMessage(timestamp=datetime.datetime.now().isoformat(), run_id=run.meta["run_id"],
                           topic_id=session.topic_id, user_id=session.user_id, utterance=utterance,
                           history=list(session.history), last_response_of_session=end,
                           last_response_of_run=end and not run.open_topics)

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
            run = ActiveRun(record, list(self.topics))
            self.active[api][meta.run_id] = run
            if api == "run":
                self.runs[meta.run_id] = record
                self._save()
            session = self.open_session(run)
            assert session is not None
            utterance = self.users[session.topic_id].initiate(session.topic_id)
            self.say(session, utterance)
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
                utterance = self.users[session.topic_id].initiate(session.topic_id)
                self.say(session, utterance)  # the response to the previous topic's farewell is ignored
                return self.message(run, session, utterance.content)
            asked = session.history[-1]["content"]
            session.history.append({"role": "assistant", "content": answer.response})
            utterance = self.users[session.topic_id].respond(session.topic_id, session.history, session.user_meta)
            self.record(run, api, asked, answer.response, answer.citations, session.user_meta[-1], answer.meta)
            self.say(session, utterance)
            if utterance.end_of_session:
                self.record(run, api, utterance.content, None, {}, utterance.meta, {})
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
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for r in self.run_requests(run_id):
                by_topic.setdefault(r["topic_id"], []).append(r)
            rows: list[dict[str, Any]]
            rows = [{"metadata": {**head, "topic_id": f"{topic}_{i}"},
                     "responses": [{"rank": 1, "user_utterance": r["user_utterance"], "user_meta": r["user_meta"],
                                    "assistant_text": r["assistant_response"],
                                    "assistant_citations": r["assistant_citations"],
                                    "assistant_meta": r["assistant_meta"]}]}
                    for topic, requests in by_topic.items() for i, r in enumerate(requests, start=1)]
            return "\n".join(json.dumps(row) for row in rows)


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
