"""Fine-tuning the LLM on training topics (LoRA on CPU, QLoRA on a GPU), and rewrite evaluation."""
