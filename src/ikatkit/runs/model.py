"""One run model; every file format is a view of it."""

from __future__ import annotations

from dataclasses import dataclass, field

RUN_TYPES = ("automatic", "manual", "only_response", "generation-only")


@dataclass
class PassageRef:
    """A passage in a response's provenance: ``used`` marks the ones the response was built from."""

    id: str
    score: float
    text: str = ""
    used: bool = False


@dataclass
class PtkbRef:
    """A PTKB statement in a response's provenance, by its key in the conversation's PTKB."""

    key: str
    score: float
    text: str = ""


@dataclass
class Response:
    """One ranked response of a turn."""

    rank: int
    text: str
    passages: list[PassageRef] = field(default_factory=list)
    ptkb: list[PtkbRef] = field(default_factory=list)


@dataclass(frozen=True)
class UserTurn:
    """What a simulated user said at an interactive turn and how it judged the answer: the rubric question it was
    pursuing and its 0-5 score of the answer to it (None where the run does not record them)."""

    utterance: str = ""
    rubric: str | None = None
    rubric_score: int | None = None
    user_type: str | None = None  # the simulator's type of the user (a 2026 rehearsal's dump records it)


def user_turn_key(user_id: str | None, turn_id: str) -> str:
    """The key of an interactive turn: ``{user_id}/{topic}_{n}`` where several users play one topic (2026), else
    the turn id."""
    return f"{user_id}/{turn_id}" if user_id else turn_id


def split_turn_key(key: str) -> tuple[str | None, str]:
    """``(user_id, turn_id)`` of a :func:`user_turn_key` (user None for a plain turn id)."""
    user, sep, turn = key.rpartition("/")
    return (user, turn) if sep else (None, key)


@dataclass
class TurnResult:
    """The responses of one turn, ``turn_id`` being the query id (``9-1_3``); ``user`` for interactive turns and
    ``user_id`` where several simulated users play one topic (2026: a turn is keyed by user, topic and turn)."""

    turn_id: str
    responses: list[Response] = field(default_factory=list)
    user: UserTurn | None = None
    user_id: str | None = None

    @property
    def key(self) -> str:
        """The turn's unique id in its run: :func:`user_turn_key`."""
        return user_turn_key(self.user_id, self.turn_id)

    def ranking(self) -> list[tuple[str, float]]:
        """Passages of all responses in rank order, first occurrence wins: what gets scored."""
        seen: dict[str, float] = {}
        for response in sorted(self.responses, key=lambda r: r.rank):
            for passage in response.passages:
                seen.setdefault(passage.id, passage.score)
        return list(seen.items())


@dataclass
class Run:
    """A whole run. ``year`` picks the official format; ``team_id`` is needed for 2025."""

    run_name: str
    run_type: str = "automatic"
    turns: list[TurnResult] = field(default_factory=list)
    year: int = 2023
    team_id: str = ""
    eval_response: bool = True
    description: str = ""  # interactive runs: as given to the simulation API
    track_persona: int | None = None  # interactive runs: 1 when the system tracked the persona

    def turn(self, turn_id: str) -> TurnResult:
        """The turn of ``turn_id`` (its :attr:`TurnResult.key`)."""
        for result in self.turns:
            if result.key == turn_id:
                return result
        raise KeyError(turn_id)

    def trec_ranking(self) -> dict[str, dict[str, float]]:
        """``{qid: {passage_id: score}}`` as the organizers derive the TREC run from the JSON."""
        return {t.key: dict(t.ranking()) for t in self.turns}


def ranking_run(name: str, run_type: str, rankings: dict[str, list[tuple[str, float]]]) -> Run:
    """A run of one response per turn whose provenance is the turn's ranking ``[(id, score), ...]`` (a TREC run)."""
    return Run(name, run_type, [TurnResult(qid, [Response(1, "", [PassageRef(pid, float(score)) for pid, score in
                                                                     ranked])]) for qid, ranked in rankings.items()])


def strictly_decreasing(ranking: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The ranking with strictly decreasing scores, its order kept: a score that ties or exceeds the one above
    is lowered to the next float32 below it (the organizers read scores as float32; trec_eval re-sorts ties by
    id, so a tie would let it evaluate another order than the run's)."""
    import numpy as np

    result: list[tuple[str, float]] = []
    above = np.float32(np.inf)
    for pid, score in ranking:
        single = np.float32(score)
        if single >= above:
            single = np.nextafter(above, np.float32(-np.inf))
            score = float(single)
        result.append((pid, score))
        above = single
    return result
