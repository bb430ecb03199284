"""What tests share beyond fixtures: the CLI run in this process (``cli``), the synthetic
logs and the deterministic summarizer (``logs``), the S3 test bucket (``storage``) and the
learnings' labelled cases (``learning_labels``). Benchmarks import these from here too: no
test depends on ``bench/``."""
