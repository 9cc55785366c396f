"""The simulation API's client: one method per endpoint, each failure one IkatError naming its fix.

Reads (``/run/session``, ``/run/status``, ``/run/dump``, ``/budget/check``, ``/auth/verify``) are retried on
server errors and timeouts with exponential backoff; ``start`` and ``continue`` are not (a retry could answer one
utterance twice): they raise :class:`Unavailable` and the driver re-synchronises from ``/run/session`` first.
Requests are built from the protocol's pydantic models and user messages read through them
(:mod:`ikatkit.interactive.messages`), so a message of another shape is one IkatError.
The token is held in memory only and never appears in an error or a log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx2 as httpx
from pydantic import BaseModel, ValidationError

from ikatkit.errors import IkatError
from ikatkit.interactive.messages import AssistantResponse, RunMeta, UserMessage

TOKEN_FIX = "export IKAT_API_TOKEN=<the token the organizers issued your team> (never in a file or a command line)"


class Unavailable(IkatError):
    """The server did not answer (5xx, timeout, connection refused) after the retries: a resumable stop."""


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(detail, list):  # FastAPI's validation errors
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg', '')}" for d in detail)
    return str(detail)


def _body(model: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """A request's JSON body, checked by the protocol's ``model`` before it is sent (as the server would check it)."""
    try:
        return model(**fields).model_dump(exclude_none=True)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
        raise IkatError(f"the {model.__name__} breaks the protocol, not sent: {problems}",
                        fix="report this as an ikatkit bug with the turn file under --out/turns") from None


class ApiClient:
    """The endpoints of one API base URL for one team token; ``debug`` uses ``/debug/*`` (not evaluated)."""

    def __init__(self, base_url: str, token: str, *, debug: bool = False, timeout: float = 300.0, retries: int = 4,
                 backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.base_url, self.api = base_url.rstrip("/"), "debug" if debug else "run"
        self.retries, self.backoff, self.sleep = retries, backoff, sleep
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout,
                                 headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, path: str, *, retry: bool, accept: tuple[int, ...] = (),
              **kwargs: Any) -> httpx.Response:
        tries = self.retries + 1 if retry else 1
        fix = "rerun the same command to resume: the run and every computed turn are kept"
        for attempt in range(tries):
            try:
                response = self.http.request(method, path, **kwargs)
                if response.status_code < 500 or response.status_code in accept:
                    return response
                problem = f"HTTP {response.status_code}: {_detail(response)}"
            except httpx.TimeoutException:
                problem = "timed out"
            except httpx.ConnectError as err:  # nothing listens there: a wrong address, or the server is down
                problem = f"cannot connect ({type(err).__name__})"
                fix = (f"check --api (scheme, host and port of {self.base_url}), or start the server (`ikatkit "
                       "simulate` serves one locally); then rerun the same command: every computed turn is kept")
            except httpx.TransportError as err:
                problem = f"unreachable ({type(err).__name__})"
            if attempt + 1 < tries:
                self.sleep(self.backoff * 2 ** attempt)
        raise Unavailable(f"{method} {path} failed: {problem}" + (f" ({tries} tries)" if tries > 1 else ""),
                          where=self.base_url, fix=fix)

    def _message(self, response: httpx.Response, what: str) -> dict[str, Any]:
        """The user message the server answered, read through :class:`UserMessage`."""
        try:
            return UserMessage.model_validate(response.json()).model_dump()
        except (ValueError, ValidationError) as err:
            raise IkatError(f"the server's {what} is not a user message: {str(err)[:300]}", where=self.base_url,
                            fix="check --api: it must be the iKAT simulation API (or `ikatkit simulate`)") from None

    def _check(self, response: httpx.Response, what: str, run_id: str | None = None) -> None:
        code = response.status_code
        if code == 200:
            return
        detail = _detail(response)
        if code == 401 or (code == 400 and "token" in detail.lower()):
            raise IkatError(f"the API refused the token ({code}: {detail})", where=self.base_url, fix=TOKEN_FIX)
        if code == 412:
            raise IkatError(f"run id {run_id!r} is taken or already complete (412: {detail})", where=self.base_url,
                            fix="choose another --run-id; to continue your own run, rerun with the --out that "
                                "started it")
        if code == 422:
            raise IkatError(f"the server refused the {what} (422: {detail})", where=self.base_url,
                            fix="report this as an ikatkit bug with the turn file under --out/turns")
        if code == 403 and "exceeded" in detail:
            raise IkatError(f"budget exhausted (403: {detail}); /budget/check: {self.budget_line()}",
                            where=self.base_url, fix="ask the organizers to reset the budget, or use the local "
                                                     "simulator (`ikatkit simulate`) for development")
        if code == 428:
            raise IkatError(f"run {run_id!r} does not exist or was completed (428: {detail})", where=self.base_url,
                            fix="start it with a fresh --out, or check `/run/status`")
        raise IkatError(f"{what} failed (HTTP {code}: {detail})", where=self.base_url,
                        fix="check --api (the base URL, e.g. https://trec-ikat25.webis.de/simulation)")

    def budget_line(self) -> str:
        try:
            remaining = self.budget()["remaining"]
        except IkatError as err:
            return f"unavailable ({err.message})"
        return ", ".join(f"{api}: {v['remaining']} {v['unit']} left" for api, v in remaining.items())

    # ------------------------------------------------------------ endpoints

    def verify(self) -> str:
        """The team id the token stands for."""
        response = self._send("GET", "/auth/verify", retry=True)
        self._check(response, "token check")
        return str(response.json()["team_id"])

    def budget(self) -> dict[str, Any]:
        response = self._send("GET", "/budget/check", retry=True)
        self._check(response, "budget check")
        return response.json()

    def start(self, run_id: str, description: str, extra: dict[str, Any]) -> dict[str, Any]:
        response = self._send("POST", f"/{self.api}/start", retry=False,
                              json=_body(RunMeta, run_id=run_id, description=description, extra=extra))
        self._check(response, "run start", run_id)
        return self._message(response, "answer to the run start")

    def continue_(self, run_id: str, response: str, citations: dict[str, float],
                  meta: dict[str, Any]) -> dict[str, Any] | None:
        """The next user message; None when the run has no open topic left (the server's 400)."""
        answer = self._send("POST", f"/{self.api}/continue", retry=False, json=_body(
            AssistantResponse, run_id=run_id, response=response, citations=citations, meta=meta))
        if answer.status_code == 400 and "no more open topics" in _detail(answer).lower():
            return None
        self._check(answer, "response", run_id)
        return self._message(answer, "answer to the response")

    def session(self, run_id: str) -> dict[str, Any] | None:
        """The open session's last user message; None when no session is open (404 here, 500 at the organizers')."""
        response = self._send("GET", f"/{self.api}/session", retry=True, accept=(500,), params={"run_id": run_id})
        if response.status_code in (404, 428, 500):
            return None
        self._check(response, "session query", run_id)
        return self._message(response, "open session")

    def status(self, run_id: str) -> dict[str, Any] | None:
        """``{status, done_topics, open_topics}`` (2025) or ``{status, open_user_topic_pairs,
        done_user_topic_pairs}`` (2026; read with :func:`status_pairs`); None for a run the server does not know."""
        response = self._send("GET", "/run/status", retry=True, params={"run_id": run_id})
        if response.status_code == 404:
            return None
        self._check(response, "status query", run_id)
        return response.json()

    def dump(self, run_id: str) -> list[dict[str, Any]]:
        """The run as the organizers keep it: one JSON object per answered utterance and per farewell."""
        import json

        response = self._send("GET", "/run/dump", retry=True, params={"run_id": run_id})
        self._check(response, "dump", run_id)
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def status_pairs(status: dict[str, Any]) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The open and the done (user, topic) pairs of a ``/run/status`` answer. 2026 lists pairs, whose shape the
    organizers do not publish: a ``{"user_id", "topic_id"}`` object becomes ``(user, topic)``, a two-item list is
    kept as it came (match it with :func:`has_pair`, by value); 2025 lists topics: ``("", topic)``."""
    def pairs(key: str, topics: str) -> list[tuple[str, ...]]:
        if key in status:
            return [(str(p.get("user_id", "")), str(p.get("topic_id", ""))) if isinstance(p, dict) else
                    tuple(str(v) for v in p) for p in status[key] or []]
        return [("", str(t)) for t in status.get(topics) or []]

    return pairs("open_user_topic_pairs", "open_topics"), pairs("done_user_topic_pairs", "done_topics")


def has_pair(pairs: list[tuple[str, ...]], user: str, topic: str) -> bool:
    """Whether ``pairs`` holds the session of ``user`` on ``topic`` (either order; a topic alone in 2025)."""
    return any(pair in ((user, topic), (topic, user), ("", topic)) for pair in pairs)


def is_complete(status: dict[str, Any]) -> bool:
    """Whether ``/run/status`` says the run is over (``complete``; 2026's page says ``completed``)."""
    return status.get("status") in ("complete", "completed")
