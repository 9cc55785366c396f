"""Partitioning strategies of M-RAG (section 3.1): each maps N passages to partition numbers 0..M-1.

``random``: locality-sensitive hashing, each (centred, unit) embedding goes to the nearest of M random Gaussian
directions (similar passages share a bucket with high probability). ``cluster``: spherical k-means (faiss).
``graph``: spectral clustering of the exact cosine k-nearest-neighbour graph (scikit-learn). ``category``: the
passages' categories, packed into M partitions (largest category first into the smallest partition).
Each passage belongs to exactly one partition; multi-membership (a passage in several categories) would index it
in each of its partitions, and "all partitions" would then need duplicates removed.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ikatkit.errors import IkatError

STRATEGIES = ("random", "cluster", "graph", "category")
GRAPH_NEIGHBOURS = 10


def lsh(embeddings: np.ndarray, m: int, seed: int) -> np.ndarray:
    """Bucket = argmax over M random directions of the centred embedding (cross-polytope-style LSH)."""
    directions = np.random.default_rng(seed).standard_normal((embeddings.shape[1], m)).astype(np.float32)
    return np.argmax((embeddings - embeddings.mean(axis=0)) @ directions, axis=1).astype(np.int32)


def kmeans(embeddings: np.ndarray, m: int, seed: int) -> np.ndarray:
    """Spherical k-means with faiss (25 iterations); the nearest centroid of each passage."""
    import faiss

    means = faiss.Kmeans(embeddings.shape[1], m, niter=25, seed=seed, spherical=True, verbose=False,
                         min_points_per_centroid=1)
    means.train(np.ascontiguousarray(embeddings, dtype=np.float32))
    _, nearest = means.index.search(np.ascontiguousarray(embeddings, dtype=np.float32), 1)
    return nearest[:, 0].astype(np.int32)


def spectral(embeddings: np.ndarray, m: int, seed: int, neighbours: int = GRAPH_NEIGHBOURS) -> np.ndarray:
    """Spectral clustering of the symmetrised kNN graph (edge weight = cosine, clipped at 0)."""
    import faiss
    from scipy.sparse import csr_matrix
    from sklearn.cluster import SpectralClustering

    n = len(embeddings)
    k = min(neighbours + 1, n)
    index = faiss.IndexFlatIP(embeddings.shape[1])
    index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
    sims, nearest = index.search(np.ascontiguousarray(embeddings, dtype=np.float32), k)
    rows = np.repeat(np.arange(n), k)
    graph = csr_matrix((np.clip(sims.ravel(), 1e-6, None), (rows, nearest.ravel())), shape=(n, n))
    graph = graph.maximum(graph.T)
    model = SpectralClustering(n_clusters=m, affinity="precomputed", random_state=seed, assign_labels="cluster_qr")
    return model.fit_predict(graph).astype(np.int32)


def pack_categories(codes: np.ndarray, names: list[str], m: int) -> tuple[np.ndarray, dict[str, int]]:
    """Partitions of the passages whose category numbers are ``codes``, and each category's partition."""
    if len(names) < m:
        raise IkatError(f"only {len(names)} categories for {m} partitions",
                        fix=f"use --partitions {len(names)} or fewer, or another --field/--pattern")
    sizes = Counter(codes.tolist())
    load = [0] * m
    mapping: dict[str, int] = {}
    for code in sorted(range(len(names)), key=lambda c: (-sizes[c], names[c])):
        target = min(range(m), key=lambda p: (load[p], p))
        mapping[names[code]] = target
        load[target] += sizes[code]
    table = np.array([mapping[name] for name in names], dtype=np.int32)
    return table[codes], mapping


def assign(strategy: str, m: int, seed: int, embeddings: np.ndarray) -> np.ndarray:
    """Partition numbers of the embedded passages for the embedding-based strategies."""
    if strategy == "random":
        return lsh(embeddings, m, seed)
    if strategy == "cluster":
        return kmeans(embeddings, m, seed)
    if strategy == "graph":
        return spectral(embeddings, m, seed)
    raise IkatError(f"unknown strategy {strategy!r}", fix=f"use one of {STRATEGIES}")


def centroids(embeddings: np.ndarray, labels: np.ndarray, m: int) -> np.ndarray:
    """Unit mean embedding of each partition (what the best-centroid selector compares a query with)."""
    sums = np.zeros((m, embeddings.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, embeddings)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return (sums / np.where(norms == 0, 1, norms)).astype(np.float32)
