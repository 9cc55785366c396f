"""``ikatkit index verify``: passages (an index or a passages JSONL) against the organizers' passage hashes; the
organizers' SPLADE index against itself and, given its model, against the passages it encoded."""

from __future__ import annotations

import argparse

from ikatkit.errors import IkatError


def add(isub: argparse._SubParsersAction) -> None:
    """Register ``verify`` under ``ikatkit index``."""
    p = isub.add_parser("verify", help="check an index's or a passages file's passages against the official hashes; "
                                       "check the organizers' SPLADE index",
                        description="Stream the passages of INDEX_OR_PASSAGES (a Lucene index storing its texts, or "
                                    "a passages JSONL in document id order) and the organizers' hash file "
                                    "(doc_id<TAB>passage_number<TAB>md5 of the text as UTF-8, sorted by doc id) side "
                                    "by side; report matched / different text / missing / extra passages. Over the "
                                    "organizers' SPLADE index (array_index.h5py, doc_ids.pkl): its counts, ids unique "
                                    "and of ClueWeb22's form, every posting list's rows ascending and in range, and, "
                                    "with --model and --texts, a sample of passages re-encoded and compared with their "
                                    "stored weights (a wrong model, length or dtype shows). Exit 0 only when all "
                                    "checks pass.")
    p.add_argument("source", metavar="INDEX_OR_PASSAGES")
    p.add_argument("--hashes", metavar="FILE[.bz2]", help="2023_passages_hashes.tsv or .tsv.bz2 (needed but for the "
                                                          "organizers' SPLADE index)")
    p.add_argument("--model", help="the organizers' SPLADE index: the model to re-encode a sample with (e.g. "
                                   "naver/splade-cocondenser-ensembledistil, in the local Hugging Face cache)")
    p.add_argument("--texts", metavar="INDEX_OR_PASSAGES",
                   help="with --model: the sampled passages' texts (the organizers' BM25 index, or passage JSONL)")
    p.add_argument("--sample", type=int, default=32, help="with --model: passages re-encoded")
    p.add_argument("--max-length", type=int, default=512, help="with --model: the tokens a passage was cut at")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ikatkit.artifact import HDF5_ARRAY

    from pathlib import Path

    if (Path(args.source) / HDF5_ARRAY).exists():
        return _sparse_hdf5(args)
    if args.model or args.texts:
        raise IkatError("--model and --texts verify the organizers' SPLADE index", where="--model",
                        fix="leave them out, or pass the folder holding array_index.h5py")
    if not args.hashes:
        raise IkatError("verifying passages needs the organizers' hash file", where="--hashes",
                        fix="add --hashes 2023_passages_hashes.tsv.bz2")
    from ikatkit.index.verify import verify

    report = verify(args.source, args.hashes)
    print(report)
    return 0 if report.ok else 1


def _sparse_hdf5(args: argparse.Namespace) -> int:
    from ikatkit.index.sparse_hdf5 import open_hdf5_index

    if args.hashes:
        raise IkatError("the organizers' SPLADE index holds no text to hash", where="--hashes",
                        fix="verify their BM25 index (or the collection) against the hashes instead")
    if bool(args.model) != bool(args.texts):
        raise IkatError("re-encoding a sample needs both the model and the passages' texts",
                        where="--model" if not args.model else "--texts",
                        fix="pass --model MODEL --texts BM25_INDEX (or passage JSONL), or neither")
    encoder = texts = None
    if args.model:
        from ikatkit.index.sparse_encoder import SparseEncoder
        from ikatkit.index.texts import jsonl_texts, passage_texts
        from ikatkit.index.lucene import is_lucene_folder

        texts = passage_texts(index=args.texts, why="verifying the SPLADE index") if is_lucene_folder(args.texts) \
            else jsonl_texts([args.texts])
        encoder = SparseEncoder(args.model)
    report = open_hdf5_index(args.source).verify(encoder, texts, sample=args.sample, max_length=args.max_length)
    print(report)
    return 0 if report.ok else 1
