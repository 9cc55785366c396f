"""The numba kernels of the organizers' SPLADE index (:mod:`ikatkit.index.sparse_hdf5`, its searcher): compiled at
run time for the CPU at hand and cached beside this file; imported only when such an index is opened."""

from __future__ import annotations

import numba
import numpy as np

# the pickle opcodes doc_ids.pkl may hold (pickle.dump of a list of str)
_STR1, _STR4, _STR8 = 0x8C, 0x58, 0x8D  # SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
_PROTO, _FRAME, STOP, EMPTY_LIST, _BINPUT, _LONG_BINPUT = 0x80, 0x95, 0x2E, 0x5D, 0x71, 0x72


@numba.njit(cache=True, nogil=True)
def _little(buf: np.ndarray, at: int, width: int) -> int:
    value = np.int64(0)
    for i in range(width):
        value |= np.int64(buf[at + i]) << (8 * i)
    return int(value)


@numba.njit(cache=True, nogil=True)
def frames(buf: np.ndarray) -> tuple[np.ndarray, int]:
    """``[start, end)`` of each frame body of a pickle (protocol 4+; one body before protocol 4), and the position
    of the first malformed byte or -1."""
    size = len(buf)
    if size < 3 or buf[0] != _PROTO:
        return np.zeros((1, 2), np.int64), 0
    pos = 2
    if buf[pos] != _FRAME:
        out = np.zeros((1, 2), np.int64)
        out[0, 0], out[0, 1] = pos, size
        return out, -1
    n = 0
    walk = pos
    while walk < size:
        if buf[walk] != _FRAME or walk + 9 > size:
            return np.zeros((1, 2), np.int64), walk
        walk += 9 + _little(buf, walk + 1, 8)
        n += 1
    if walk > size:
        return np.zeros((1, 2), np.int64), size
    out = np.zeros((n, 2), np.int64)
    for i in range(n):
        out[i, 0] = pos + 9
        out[i, 1] = pos + 9 + _little(buf, pos + 1, 8)
        pos = out[i, 1]
    return out, -1


@numba.njit(cache=True, nogil=True)
def _scan(buf: np.ndarray, start: int, end: int, out: np.ndarray, fill: bool) -> tuple[int, int, int]:
    """Strings (count), the first byte not of a list of strings (or -1), and EMPTY_LIST opcodes in ``[start, end)``;
    ``fill``: write each string's opcode position into ``out``."""
    pos, n, lists = start, 0, 0
    while pos < end:
        op = buf[pos]
        if op == _STR1 or op == _STR4 or op == _STR8:
            width = 1 if op == _STR1 else (4 if op == _STR4 else 8)
            if pos + 1 + width > end:
                return n, pos, lists
            step = 1 + width + _little(buf, pos + 1, width)
            if pos + step > end:
                return n, pos, lists
            if fill:
                out[n] = pos
            n += 1
            pos += step
        elif op == 0x94 or op == 0x28 or op == 0x65 or op == 0x61:
            pos += 1
        elif op == EMPTY_LIST:
            lists += 1
            pos += 1
        elif op == _BINPUT:
            pos += 2
        elif op == _LONG_BINPUT:
            pos += 5
        elif op == STOP and pos == end - 1:
            pos += 1
        else:
            return n, pos, lists
    return n, -1, lists


@numba.njit(cache=True, nogil=True, parallel=True)
def count_strings(buf: np.ndarray, bodies: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame body: strings, first bad byte (-1: none), EMPTY_LIST opcodes."""
    n = len(bodies)
    counts, errors, lists = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    nothing = np.zeros(0, np.int64)
    for i in numba.prange(n):
        counts[i], errors[i], lists[i] = _scan(buf, bodies[i, 0], bodies[i, 1], nothing, False)
    return counts, errors, lists


@numba.njit(cache=True, nogil=True, parallel=True)
def string_offsets(buf: np.ndarray, bodies: np.ndarray, firsts: np.ndarray, total: int) -> np.ndarray:
    """The opcode position of every string, in order (``firsts``: the first string's row of each body)."""
    out = np.zeros(total, np.int64)
    for i in numba.prange(len(bodies)):
        end = total if i == len(bodies) - 1 else firsts[i + 1]
        _scan(buf, bodies[i, 0], bodies[i, 1], out[firsts[i]:end], True)
    return out


@numba.njit(cache=True, nogil=True)
def string_at(buf: np.ndarray, at: int) -> tuple[int, int]:
    """``(start, length)`` of the UTF-8 bytes of the string whose opcode is at ``at``."""
    op = buf[at]
    width = 1 if op == _STR1 else (4 if op == _STR4 else 8)
    return at + 1 + width, _little(buf, at + 1, width)


@numba.njit(cache=True, nogil=True)
def strings_at(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``[start, length]`` of the UTF-8 bytes of each string whose opcode is at ``offsets``."""
    out = np.zeros((len(offsets), 2), np.int64)
    for i in range(len(offsets)):
        out[i, 0], out[i, 1] = string_at(buf, offsets[i])
    return out


@numba.njit(cache=True, nogil=True)
def joined_strings(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The UTF-8 bytes of the strings whose opcodes are at ``offsets``, joined by newlines."""
    places = strings_at(buf, offsets)
    out = np.empty(places[:, 1].sum() + len(offsets) - 1, np.uint8)
    at = 0
    for i in range(len(offsets)):
        if i:
            out[at] = 10
            at += 1
        start, length = places[i, 0], places[i, 1]
        out[at:at + length] = buf[start:start + length]
        at += length
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def id_hashes(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """FNV-1a (64 bits) of every id's bytes."""
    out = np.zeros(len(offsets), np.uint64)
    for i in numba.prange(len(offsets)):
        start, length = string_at(buf, offsets[i])
        h = np.uint64(14695981039346656037)
        for j in range(start, start + length):
            h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
        out[i] = h
    return out


@numba.njit(cache=True, nogil=True)
def _digits(buf: np.ndarray, at: int, n: int) -> bool:
    for j in range(at, at + n):
        if buf[j] < 48 or buf[j] > 57:
            return False
    return True


@numba.njit(cache=True, nogil=True, parallel=True)
def clueweb22_form(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Whether each id is ``clueweb22-en`` 4 digits ``-`` 2 digits ``-`` 5 digits ``:`` digits."""
    prefix = np.frombuffer(b"clueweb22-en", np.uint8)
    out = np.zeros(len(offsets), np.bool_)
    for i in numba.prange(len(offsets)):
        s, n = string_at(buf, offsets[i])
        ok = n >= 27
        if ok:
            for j in range(12):
                ok = ok and buf[s + j] == prefix[j]
            ok = (ok and _digits(buf, s + 12, 4) and buf[s + 16] == 45 and _digits(buf, s + 17, 2)
                  and buf[s + 19] == 45 and _digits(buf, s + 20, 5) and buf[s + 25] == 58
                  and _digits(buf, s + 26, n - 26))
        out[i] = ok
    return out


@numba.njit(cache=True, nogil=True)
def check_list(rows: np.ndarray, values: np.ndarray, count: int) -> tuple[bool, bool, bool]:
    """One posting list: rows not strictly ascending, rows outside ``[0, count)``, weights not positive finite."""
    order = outside = weights = False
    for j in range(len(rows)):
        if j and rows[j] <= rows[j - 1]:
            order = True
        if rows[j] < 0 or rows[j] >= count:
            outside = True
        if not (values[j] > 0 and values[j] < np.inf):
            weights = True
    return order, outside, weights


CHECK, PART = 256, 32  # rows a block's scores are checked by (a vectorised max), and a hit's part re-read by
FIRST_ROWS = 1024  # rows of each range scored before the ranges' candidates first set a shared floor


@numba.njit(cache=True, nogil=True)
def _bits(value: float) -> int:
    """The int32 bits of a float32: for scores >= 0 they order as the floats do."""
    one = np.zeros(1, np.float32)
    one[0] = value
    return int(one.view(np.int32)[0])


@numba.njit(cache=True, nogil=True)
def _keep_best(scores: np.ndarray, rows: np.ndarray, n: int, k: int) -> tuple[int, float]:
    """Keep the best ``k`` of the first ``n`` candidates (rows ascending: of equal scores the earlier are kept),
    in order; returns how many are kept and the ``k``-th score (a later row must beat it)."""
    kth = -np.partition(-scores[:n], k - 1)[k - 1]
    ties = k
    for j in range(n):
        ties -= scores[j] > kth
    kept = 0
    for j in range(n):
        score = scores[j]
        if score > kth or (score == kth and ties > 0):
            ties -= score == kth
            scores[kept], rows[kept] = score, rows[j]
            kept += 1
    return kept, kth


@numba.njit(cache=True, nogil=True, parallel=True)
def _score_rows(words: np.ndarray, floats: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                weights: np.ndarray, count: int, k: int, block: int, width: int, first: int, last: int,
                cursor: np.ndarray, found_scores: np.ndarray, found_rows: np.ndarray, kept: np.ndarray,
                floors: np.ndarray) -> None:
    """Rows ``[first, last)`` of every range of ``width`` rows, the ranges in parallel, in blocks of ``block`` rows:
    every term's postings in the block (``cursor``: each range's next posting of each term) are added into a
    block-local float32 array (in cache), then the rows scoring above the range's floor (``floors``: int32 bits;
    a vectorised max of ``CHECK`` rows, then of ``PART``) are appended to the range's candidates; a full candidate
    array keeps its best ``k``."""
    terms = len(weights)
    room = found_scores.shape[1]
    for span in numba.prange(len(kept)):
        low = span * width + first
        high = min(count, span * width + last, (span + 1) * width)
        if low >= high:
            continue
        local = np.zeros(block, np.float32)
        bits = local.view(np.int32)
        scores, rows = found_scores[span], found_rows[span]
        n, floor = kept[span], floors[span]
        for start in range(low, high, block):
            end = min(high, start + block)
            for t in range(terms):
                at = cursor[span, t]
                cursor[span, t] = stop = at + np.searchsorted(words[at:starts[t, 0] + lengths[t]], end)
                # the block's postings of the term as views: the loop reads two arrays in step (2x faster than
                # indexing the whole file's arrays with an offset, measured at 2M passages)
                shift = starts[t, 1] - starts[t, 0]
                found, values = words[at:stop], floats[at + shift:stop + shift]
                weight = weights[t]
                for j in range(stop - at):
                    local[found[j] - start] += weight * values[j]
            for i in range(0, end - start, CHECK):
                if bits[i:i + CHECK].max() > floor:
                    for part in range(i, i + CHECK, PART):
                        if bits[part:part + PART].max() > floor:
                            if n + PART > room:
                                n, kth = _keep_best(scores, rows, n, k)
                                floor = max(floor, _bits(kth))
                            for j in range(part, part + PART):
                                scores[n], rows[n] = local[j], start + j
                                n += bits[j] > floor
            local[:end - start] = 0
        kept[span], floors[span] = n, floor


@numba.njit(cache=True, nogil=True)
def _shared_floor(found_scores: np.ndarray, kept: np.ndarray, k: int) -> float:
    """The ``k``-th best score of every range's candidates (no hit of the top ``k`` scores below it), or 0."""
    total = kept.sum()
    if total < k:
        return 0.0
    pool = np.empty(total, np.float32)
    at = 0
    for span in range(len(kept)):
        pool[at:at + kept[span]] = -found_scores[span, :kept[span]]
        at += kept[span]
    return -np.partition(pool, k - 1)[k - 1]


@numba.njit(cache=True, nogil=True)
def top_k(words: np.ndarray, floats: np.ndarray, starts: np.ndarray, lengths: np.ndarray, weights: np.ndarray,
          count: int, k: int, block: int, spans: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best rows by the float32 dot product with the query's ``weights`` (rows scoring 0 left out),
    best first, ties to the earlier row: ``(rows, scores)``. Term ``t``'s rows are
    ``words[starts[t, 0]:][:lengths[t]]``, its weights ``floats[starts[t, 1]:][:lengths[t]]``; each row's sum is taken
    term by term in the order given (ascending term ids: the organizers' scatter-add's order, so the same float32
    bits).

    The rows are cut into ``spans`` ranges scored in parallel, in rounds of doubling size (``FIRST_ROWS`` rows of each
    range, then twice as many, ...); after each round the ``k``-th best of all ranges' candidates becomes every
    range's floor, so few rows past the first rounds are candidates (a range's own top k alone would let in
    ``k ln(rows / k)`` a range)."""
    if k < 1 or count == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    terms = len(weights)
    width = ((count + spans - 1) // spans + block - 1) // block * block
    cursor = np.zeros((spans, terms), np.int64)
    for span in range(spans):
        for t in range(terms):
            cursor[span, t] = starts[t, 0] + np.searchsorted(words[starts[t, 0]:starts[t, 0] + lengths[t]],
                                                             span * width)
    room = 2 * k + PART
    found_scores = np.zeros((spans, room), np.float32)
    found_rows = np.zeros((spans, room), np.int64)
    kept = np.zeros(spans, np.int64)
    floors = np.zeros(spans, np.int32)
    first, size = 0, FIRST_ROWS
    while first < width:
        last = min(width, first + size)
        _score_rows(words, floats, starts, lengths, weights, count, k, block, width, first, last, cursor,
                    found_scores, found_rows, kept, floors)
        floor = _shared_floor(found_scores, kept, k)
        if floor > 0:
            for span in range(spans):
                floors[span] = max(floors[span], _bits(floor) - 1)  # a score equal to it may still win on its row
                n = 0
                for j in range(kept[span]):
                    if found_scores[span, j] >= floor:
                        found_scores[span, n], found_rows[span, n] = found_scores[span, j], found_rows[span, j]
                        n += 1
                kept[span] = n
        first, size = last, 2 * size
    keys = np.empty(kept.sum(), np.int64)  # best first: descending score bits, then ascending row
    at = 0
    for span in range(spans):
        bits = found_scores[span].view(np.int32)
        for j in range(kept[span]):
            keys[at] = (np.int64(2**31 - 1 - bits[j]) << 32) | found_rows[span, j]
            at += 1
    keys.sort()
    keys = keys[:k]
    rows = keys & 0xFFFFFFFF
    scores = (2**31 - 1 - (keys >> 32)).astype(np.int32).view(np.float32)
    return rows, scores
