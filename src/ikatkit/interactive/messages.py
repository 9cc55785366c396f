"""The simulation API's messages, as the organizers' server defines them (``api/messages.py`` of
``marcel-gohsen/user-simulation-api``): the local simulator validates requests with these; the client
(:mod:`ikatkit.interactive.client`) builds its ``start`` and ``continue`` bodies with them and reads every user
message through :class:`UserMessage`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, StrictStr, field_validator

from ikatkit.runs.tokens import MAX_TOKENS, count_tokens


class RunMeta(BaseModel):
    """``POST /run/start``: the run's id, description and free ``extra`` (e.g. ``track_persona``)."""

    run_id: StrictStr
    description: StrictStr
    extra: dict[StrictStr, Any] | None = None
    team_id: StrictStr | None = None


class AssistantResponse(BaseModel):
    """``POST /run/continue``: the response to the last user message, its citations and free ``meta``."""

    run_id: StrictStr
    response: StrictStr
    citations: dict[StrictStr, float] | None = None
    meta: dict[StrictStr, Any] | None = None

    @field_validator("response", mode="before")
    @classmethod
    def within_limit(cls, value: Any) -> Any:
        if isinstance(value, str) and (n := count_tokens(value)) > MAX_TOKENS:
            raise ValueError(f"Response is too long ({n} tokens). Response exceeds limit of {MAX_TOKENS} tokens.")
        return value


class UserMessage(BaseModel):
    """What ``/run/start``, ``/run/continue`` and ``/run/session`` answer: the user's next utterance."""

    timestamp: StrictStr
    run_id: StrictStr
    topic_id: StrictStr
    user_id: StrictStr
    utterance: StrictStr
    history: list[dict[StrictStr, StrictStr]]
    last_response_of_session: bool
    last_response_of_run: bool
    user_meta: dict[StrictStr, Any] | None = None  # 2026: {"ptkb": [statement, ...]}, the user's PTKB
