"""The numba kernels of the organizers' SPLADE index (:mod:`ikatkit.index.sparse_hdf5`, its searcher): compiled at
run time for the CPU at hand and cached beside this file; imported only when such an index is opened."""

from __future__ import annotations

import numba
import numpy as np

_STR1, _STR4, _STR8 = 0x8C, 0x58, 0x8D
_PROTO, _FRAME, _STOP, _EMPTY_LIST, _BINPUT, _LONG_BINPUT = 0x80, 0x95, 0x2E, 0x5D, 0x71, 0x72


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
        elif op == _EMPTY_LIST:
            lists += 1
            pos += 1
        elif op == _BINPUT:
            pos += 2
        elif op == _LONG_BINPUT:
            pos += 5
        elif op == _STOP and pos == end - 1:
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


@numba.njit(cache=True, nogil=True)
def _worse(score_a: float, row_a: int, score_b: float, row_b: int) -> bool:
    """Whether hit a ranks below hit b: a lower score, or the same score and a later row."""
    return score_a < score_b or (score_a == score_b and row_a > row_b)


@numba.njit(cache=True, nogil=True)
def _sift_down(scores: np.ndarray, rows: np.ndarray, size: int) -> None:
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and _worse(scores[child + 1], rows[child + 1], scores[child], rows[child]):
            child += 1
        if not _worse(scores[child], rows[child], scores[i], rows[i]):
            return
        scores[i], scores[child] = scores[child], scores[i]
        rows[i], rows[child] = rows[child], rows[i]
        i = child


@numba.njit(cache=True, nogil=True)
def _sift_up(scores: np.ndarray, rows: np.ndarray, i: int) -> None:
    while i:
        parent = (i - 1) // 2
        if not _worse(scores[i], rows[i], scores[parent], rows[parent]):
            return
        scores[i], scores[parent] = scores[parent], scores[i]
        rows[i], rows[parent] = rows[parent], rows[i]
        i = parent


@numba.njit(cache=True, nogil=True, parallel=True)
def top_k(words: np.ndarray, floats: np.ndarray, starts: np.ndarray, lengths: np.ndarray, weights: np.ndarray,
          count: int, k: int, block: int, spans: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` best rows of each of ``spans`` row ranges (run in parallel) by the float32 dot product with the
    query's ``weights``; term ``t``'s rows are ``words[starts[t, 0]:][:lengths[t]]``, its weights
    ``floats[starts[t, 1]:][:lengths[t]]``. Each row's sum is taken term by term in the order given (ascending term
    ids: the organizers' scatter-add's order, so the same float32 bits); rows scoring 0 are left out; ties go to the
    earlier row.

    Each range is walked in blocks of ``block`` rows: every term's postings falling in the block (a cursor per term,
    rows ascending) are added into one block-local float32 array that stays in cache, then the block's positive
    scores enter a k-heap (root: the worst kept hit) when they beat its root. Returns ``(scores, rows, kept)``:
    ``spans x k`` arrays and the hits kept per range."""
    terms = len(weights)
    width = ((count + spans - 1) // spans + block - 1) // block * block
    top_scores = np.zeros((spans, k), np.float32)
    top_rows = np.zeros((spans, k), np.int64)
    kept = np.zeros(spans, np.int64)
    for span in numba.prange(spans):
        low, high = span * width, min(count, (span + 1) * width)
        if low >= high:
            continue
        cursor = np.zeros(terms, np.int64)
        for t in range(terms):
            cursor[t] = starts[t, 0] + np.searchsorted(words[starts[t, 0]:starts[t, 0] + lengths[t]], low)
        local = np.zeros(block, np.float32)
        scores, rows = top_scores[span], top_rows[span]
        size = 0
        for start in range(low, high, block):
            end = min(high, start + block)
            for t in range(terms):
                first = cursor[t]
                cursor[t] = last = first + np.searchsorted(words[first:starts[t, 0] + lengths[t]], end)
                # the block's postings of the term as views: the loop reads two arrays in step (2x faster than
                # indexing the whole file's arrays with an offset, measured at 2M passages)
                found, values = words[first:last], floats[first + starts[t, 1] - starts[t, 0]:last + starts[t, 1]
                                                           - starts[t, 0]]
                weight = weights[t]
                for j in range(last - first):
                    local[found[j] - start] += weight * values[j]
            for i in range(end - start):
                score = local[i]
                if score > 0:
                    local[i] = 0
                    if size < k:
                        scores[size], rows[size] = score, start + i
                        _sift_up(scores, rows, size)
                        size += 1
                    elif _worse(scores[0], rows[0], score, start + i):
                        scores[0], rows[0] = score, start + i
                        _sift_down(scores, rows, size)
        kept[span] = size
    return top_scores, top_rows, kept
