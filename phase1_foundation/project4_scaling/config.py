"""Chapter 4 settings. Every UPPER_CASE name can be changed from the command line: `train.py --SEED=1`.

Each run reads the tokens its budget buys, D = C / (FLOPs per token), under both papers' countings
(COUNTINGS): Kaplan's at BUDGETS, Chinchilla's (every parameter, App. F FLOPs) at CHINCHILLA_BUDGETS. Every
shape of SHAPES whose D lies between MIN_STEPS steps and MAX_EPOCHS passes over the corpus is trained at every
budget. The presets set what a laptop CPU and GPU can afford; every run prints what it used.
"""

from common.files import REPO_ROOT

# --- data -------------------------------------------------------------------------------------------------
CORPUS = "wiki-sample"  # embedded, no download; wikitext-103 downloads
TEXT_FILE = None  # your own UTF-8 text file or folder of .txt files; wins over CORPUS
VAL_FRACTION = 0.05  # share of documents held out; every run is scored on the same validation tokens
DATA_DIR = str(REPO_ROOT / "data")  # prepared corpora and token files
MIN_CHAR_COUNT = 50  # a rarer character becomes <unk>: as tokens, rare ones outweigh a tiny model's blocks
# PAPER: Muennighoff et al. 2023 (abstract): up to about 4 epochs, repeated data is worth almost as much as
# fresh. A cap only: D counts every token read, without their effective-data correction
MAX_EPOCHS = 4.0  # a run may read the training text at most this many times

# --- the sweep --------------------------------------------------------------------------------------------
COUNTINGS = ("kaplan", "chinchilla")  # which sweeps to train (results.COUNTINGS says what each counts)
# A factor of 4 in each counting, where the smallest model can still be fed (README, "Choosing the cpu sweep")
BUDGETS = (1e10, 2e10, 4e10)  # FLOPs as Kaplan counts them, C = 6ND with N non-embedding (Table 1)
CHINCHILLA_BUDGETS = (3e10, 6e10, 1.2e11)  # FLOPs as Hoffmann et al. count them: every matmul (App. F)
SHAPES = ("1x8", "1x16", "2x16", "1x32", "2x32", "2x48", "2x64")  # n_layer x d_model
HEAD_SIZE = 8  # dimensions per attention head
BLOCK_SIZE = 64  # context, in characters (why 64 and not 128: README, "Choosing the cpu sweep")
BATCH_SIZE = 8  # sequences per optimizer step: 512 tokens
MIN_STEPS = 200  # a shorter run is left out: a few dozen batches say nothing of where the best size lies
# The seeds' noise: at these budgets (Kaplan's counting) every shape is trained NOISE_SEEDS times, seeds SEED,
# SEED + 1, ...; the fits use the SEED runs, the bootstrap the spread. Two budgets: short runs and long ones
NOISE_BUDGETS = (1e10, 2e10)
NOISE_SEEDS = 3  # 1: no noise measurement (the bootstrap then resamples a fit's residuals)
ONLY = ""  # train only these runs (comma-separated names, as in results.jsonl), again if already done

# --- optimisation -----------------------------------------------------------------------------------------
# PAPER: Kaplan App. D.6, eq. D.1: LR(N) ≈ 0.003239 - 0.0001395 log N, fitted to runs of 250k steps; these
# take a few thousand (README, "Choosing the cpu sweep")
LR_SCALE = 3.0  # PAPER: Kaplan eq. D.1 times this (1.0: the rule as printed)
BETAS = (0.9, 0.95)  # GPT-3 App. B, as in chapter 2
WEIGHT_DECAY = 0.1  # GPT-3 App. B, on matrices only
WARMUP_FRACTION = 0.05  # share of each run spent warming up (Kaplan warmed up for 3,000 of 250k steps)
MIN_LR_RATIO = 0.1  # PAPER: Chinchilla §3 / App. B, cosine decay by 10x...
COSINE_STRETCH = 1.0  # ... over a cycle this many times the run's length (1.0: the floor exactly at D)
GRAD_CLIP = 1.0  # GPT-3 App. B

# --- run --------------------------------------------------------------------------------------------------
VAL_TOKENS = 65_536  # validation tokens scored after each run (the same for every run)
OUT_DIR = str(REPO_ROOT / "checkpoints" / "project4")  # results.jsonl, plots
SEED = 1337  # the data order and the first weights of every run (the noise measurement adds others)
DEVICE = "auto"  # auto = cuda > mps > cpu, or name one
PRESET = "auto"  # auto = gpu preset on a GPU, cpu preset on a CPU
DRY_RUN = False  # True: measure one step on the CPU, print memory, FLOPs, laptop-GPU time; train nothing

# --- fitting and planning (laws.py) -------------------------------------------------------------------------
DATA = "sweep"  # sweep: your runs in OUT_DIR; chinchilla: 240 of Hoffmann et al.'s runs (chinchilla_runs.csv)
RESAMPLES = 100  # bootstrap resamples for each exponent's interval
PLAN_AHEAD = 4.0  # laws.py predicts the best run at this many times the sweep's largest budget (Kaplan's)
PLAN_MINUTES = 0.0  # > 0: also plan a compute-optimal run of this many minutes on this device
# epoch-2024 (Besiroglu et al.'s refit, which the paper's runs support: README), paper-unrounded,
# paper-rounded (Chinchilla as printed), or ours: the sweep's own Approach 3 fit
PLAN_CONSTANTS = "epoch-2024"
PLAN_ASPECT_RATIO = 32  # d_model / n_layer of the planned shape (GPT-2 small's is 64; tiny models want less)

# --- emergence (emergence.py) ----------------------------------------------------------------------------
# Multi-digit addition as text, "123+045=0168", learned by a sweep of model sizes from a stream of random
# problems; every size of both variants trains on the same EM_TOKENS tokens, so C = 6·N·EM_TOKENS.
EM_DIGITS = 3  # digits per operand, the answer one more (PAPER: Wei et al. 2022, Table 1: 3-digit addition)
EM_SHOTS = 1  # solved problems before each query; each one more is new positions to learn (README)
EM_SHAPES = ("1x8", "1x16", "2x32", "2x48", "2x64", "2x96")  # "n_layer x d_model": 888 to 224k N
EM_VARIANTS = ("plain", "scratchpad")  # the answer alone, or its column sums first (PAPER: Nye et al. 2021)
EM_TOKENS = 1_000_000  # training tokens per model, every size and both variants: equal compute per size
EM_BATCH_SIZE = 32  # rows per optimizer step
EM_HEAD_SIZE = 8  # dimensions per attention head (a 1x8 model has one head)
EM_LR = 5e-3  # peak learning rate, warmup and cosine as the sweep's
EM_EVAL_PROBLEMS = 500  # held-out problems scored per model, never drawn for training
EM_EVAL_SEED = 0  # draws the held-out problems: the same ones for every model, whatever its training seed
EM_SEEDS = 3  # training seeds per model: SEED, SEED + 1, ...; the report gives each size's mean and range

PRESETS = {
    # Two CPU cores: 3 budgets under each counting and the noise measurement, on the embedded corpus
    # (runs and time: README)
    "cpu": dict(),
    # A laptop GPU, on the same corpus (README, "Running it"): context 128 and batches of 16 feed a GPU better
    # than 64 and 8; the budgets stop where the text, read MAX_EPOCHS times, still feeds four to six shapes
    # each. Larger budgets need --CORPUS=wikitext-103 and your own --BUDGETS
    "gpu": dict(
        BUDGETS=(1e11, 3e11, 1e12, 3e12), CHINCHILLA_BUDGETS=(3e11, 1e12, 3e12),
        BLOCK_SIZE=128, BATCH_SIZE=16, NOISE_BUDGETS=(1e11, 3e11),
        SHAPES=("1x16", "2x16", "1x32", "2x32", "2x48", "2x64", "3x64", "3x96", "4x128"),
        # emergence.py: nearly twice the sizes, closer around the jump, 4x the held-out problems
        EM_SHAPES=("1x8", "1x16", "2x24", "2x32", "2x40", "2x48", "2x56", "2x64", "2x72", "2x80", "2x96"),
        EM_EVAL_PROBLEMS=2000,
    ),
}
