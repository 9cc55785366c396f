"""``ikatkit finetune``: LoRA/QLoRA training on topics and rewrite evaluation."""

from __future__ import annotations

import argparse
import json


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("finetune", help="LoRA/QLoRA fine-tuning on training topics; rewrite evaluation")
    fsub = p.add_subparsers(dest="finetune_command", required=True)
    t = fsub.add_parser("train", help="train a LoRA adapter (QLoRA with a GPU) on supervised examples from topics")
    t.add_argument("--topics", required=True, help="training topics")
    t.add_argument("--passages", nargs="*", default=[], help="provenance passage texts (JSONL), for response examples")
    t.add_argument("--task", choices=["rewrite", "response", "both"], default="both")
    t.add_argument("--out", required=True, help="adapter folder (load it with adapter = DIR in an llm resource)")
    from ikatkit.finetune.train import TrainSettings

    defaults = TrainSettings()
    for name in ("model", "steps", "batch_size", "micro_batch", "lr", "r", "alpha", "dropout", "max_length", "seed"):
        value = getattr(defaults, name)
        t.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value, help=f"default {value}")
    t.add_argument("--checkpoint-every", type=int, default=10,
                   help="save a checkpoint every N steps (beside --out), from which a stopped training goes on when "
                        "run again (default %(default)s)")
    t.add_argument("--restart", action="store_true", help="discard the checkpoint beside --out and start over")
    e = fsub.add_parser("eval", help="ROUGE-L and exact match of LLM rewrites against resolved utterances")
    e.add_argument("--topics", required=True)
    e.add_argument("--model", default="bundled:smollm2")
    e.add_argument("--adapter", help="a LoRA adapter folder")
    e.add_argument("--conversations", nargs="+", help="only these conversations")
    e.add_argument("--max-new-tokens", type=int, default=64)

    def run(args: argparse.Namespace) -> int:
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics)
        if args.finetune_command == "eval":
            from ikatkit.finetune.rewrite_eval import evaluate_rewrites
            from ikatkit.llm import make_llm

            if args.conversations:
                topics = topics.subset(args.conversations)
            llm = make_llm({"backend": "transformers", "model": args.model, "adapter": args.adapter,
                            "max_new_tokens": args.max_new_tokens})
            print(json.dumps(evaluate_rewrites(llm, topics), indent=2))
            return 0
        from ikatkit.collection.readers import passage_texts
        from ikatkit.finetune.data import response_examples, rewrite_examples
        from ikatkit.finetune.train import TrainSettings, train_lora

        examples = rewrite_examples(topics) if args.task in ("rewrite", "both") else []
        if args.task in ("response", "both"):
            examples += response_examples(topics, passage_texts(args.passages))
        settings = TrainSettings(**{k: getattr(args, k) for k in TrainSettings.__dataclass_fields__})
        train_lora(examples, args.out, settings, checkpoint_every=args.checkpoint_every, restart=args.restart)
        return 0

    p.set_defaults(func=run)
