"""Exercise 7: freeze the encoder. How much of what fine-tuning reaches is the encoder's own change?

finetune.py trains every weight, as BERT does (§4). Here BERT, its pooler included, stays as pre-training left
it, and only the new layer on the pooled [CLS] state learns: the same sentences, folds, seeds and recipe as
finetune.py's default run, but learning rates ten times larger (one layer on fixed features takes larger
steps than a whole network), done for the pre-trained model and for the same architecture from random weights
(a random encoder's features). BERT §5.3 asked a like question on NER of a frozen BERT-base: its last four
layers, concatenated and fed to a two-layer BiLSTM, came within 0.3 F1 of fine-tuning.

    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex7_frozen_encoder.py

It uses the model train.py saved (the newest checkpoint in checkpoints/project3, or --CHECKPOINT=...) and
trains one first if there is none (the cpu preset: minutes). It prints the same table as finetune.py, for the
frozen encoders. After the run's numbers the script prints what the course has measured.

Predict before you run it: frozen, will the pre-trained encoder score above, at, or below finetune.py's
fine-tuned pre-trained model? Above or below naive Bayes? And will the random encoder's features score at
chance?
"""

from common.course.exercises import print_measured
from common.errors import run_main
from common.training.config import load_config
from phase1_foundation.project3_contextual_embeddings import config, finetune
from phase1_foundation.project3_contextual_embeddings.exercises import find_or_train, parse_args

# One layer on fixed features takes larger steps than a whole network: ten times the rates finetune.py tries.
PROBE_SCALE = 10


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex7_frozen_encoder")
    cfg = load_config(config, settings)
    checkpoint = find_or_train(cfg, settings, out_dir)
    rates = ",".join(f"{PROBE_SCALE * lr:g}" for lr in cfg.FT_LEARNING_RATES)
    results = finetune.main([*settings, f"--FT_LEARNING_RATES={rates}", f"--CHECKPOINT={checkpoint}",
                             f"--OUT_DIR={out_dir}"], train_encoder=False)
    print_measured(WHAT_WE_MEASURED)
    return results


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
Measured on the checkpoint of the chapter's default run (train.py, cpu preset; the README's fine-tuning
section), with this command. Frozen, the pre-trained encoder scores 47.8% (seeds 47.0% to 49.0%) and the
random one 49.8% (49.5% to 50.0%), against 52.0% and 49.3% when every weight is fine-tuned and naive Bayes'
56.0%. A linear layer on this model's pooled [CLS] state finds no polarity in 128 sentences. Why was not
measured; one candidate is the pooler, which the MLM-only preset never trained (probing the [CLS] state itself
would tell). BERT's paper asked the same question of BERT-base on named entities (section 5.3, Table 7): its
frozen last four layers, concatenated, came within 0.3 F1 of fine-tuning.
"""


if __name__ == "__main__":
    run_main(main)
