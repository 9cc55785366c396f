"""``ikatkit configs``: the shipped run configs, what each needs, and a copy of one to edit."""

from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "configs", help="list the shipped run configs: what each needs, which run offline on a CPU; copy one",
        description="The run configs ikatkit ships (configs/ in a checkout, inside the package for a wheel), each "
                    "with what it needs beyond ikatkit (a GPU, Hugging Face hub models, an LLM server, an index, "
                    "files, extras) and whether it runs offline on a CPU. `ikatkit configs copy NAME DIR` copies "
                    "one (or all) to edit. See docs/configs.md.")
    p.set_defaults(func=_list)
    csub = p.add_subparsers(dest="action")
    c = csub.add_parser("copy", help="copy shipped configs into a folder",
                        description="Copy a shipped config (its name, e.g. manual_biencoder, or all) into DIR.")
    c.add_argument("name", help="a config's name (file name without .toml) or all")
    c.add_argument("dir", help="the folder to copy into (made when missing)")
    c.set_defaults(func=_copy)


def _list(args: argparse.Namespace) -> int:
    from ikatkit.catalogue import text_listing

    print(text_listing())
    return 0


def _copy(args: argparse.Namespace) -> int:
    from ikatkit.catalogue import copy_configs

    for path in copy_configs([args.name], args.dir):
        print(path)
    return 0
