"""Chapter 3 settings. Every UPPER_CASE name can be changed from the command line: `train.py --MLM_PROB=0.5`.

The defaults are BERT's where a laptop can afford them. The presets at the bottom set what a laptop cannot
afford (the size of the model, the length of training) and four choices that learn more in a laptop's
budget (measured); every run prints what its preset changed.
"""

from common.files import REPO_ROOT

# --- data -------------------------------------------------------------------------------------------------
# PAPER: BERT §3.1 pre-trains on Wikipedia + BooksCorpus; wiki-sample is 101 Wikipedia articles
CORPUS = "wiki-sample"  # embedded, no download; wikitext-2 / wikitext-103 download
TEXT_FILE = None  # your own UTF-8 text file or folder of .txt files; wins over CORPUS
VOCAB_SIZE = 8192  # PAPER: BERT §3 used a 30,000-token WordPiece vocabulary; scaled down to our data
VAL_FRACTION = 0.05  # share of documents held out for validation
DATA_DIR = str(REPO_ROOT / "data")  # prepared corpora, tokenizers and token files

# --- model ------------------------------------------------------------------------------------------------
N_LAYER = 12  # PAPER: BERT §3, BERT-base L = 12
N_HEAD = 12  # PAPER: BERT §3, BERT-base A = 12
N_EMBD = 768  # PAPER: BERT §3, BERT-base H = 768 (the feed-forward size is 4H = 3072)
BLOCK_SIZE = 512  # PAPER: BERT §A.2, sequences of at most 512 tokens (90% of steps used 128)
POSITIONS = "learned"  # PAPER: BERT §3, a learned table; "rotary": RoFormer §3.4 (see PRESETS and the README)
DROPOUT = 0.1  # PAPER: BERT §A.2, dropout 0.1 on all layers
FAST_ATTENTION = True  # F.scaled_dot_product_attention; False = the explicit softmax to read, same numbers

# --- pre-training tasks -----------------------------------------------------------------------------------
USE_NSP = True  # PAPER: BERT §3.1 Task #2, next sentence prediction; False = MLM only (RoBERTa's finding)
SHORT_SEQ_PROB = 0.0  # share of training pairs made shorter than the block; BERT's code used 0.1 (see below)
MLM_PROB = 0.15  # PAPER: BERT §3.1, share of (non-special) tokens chosen for prediction
MASK_TOKEN_SHARE = 0.8  # PAPER: BERT §3.1, of the chosen tokens: replaced by [MASK]
RANDOM_TOKEN_SHARE = 0.1  # PAPER: BERT §3.1, of the chosen tokens: replaced by a random token (10% unchanged)

# --- optimisation -----------------------------------------------------------------------------------------
BATCH_SIZE = 256  # PAPER: BERT §A.2, 256 sequences per batch
GRAD_ACCUM_STEPS = 1  # micro-batches per optimizer step (effective batch = BATCH_SIZE x this)
LEARNING_RATE = 1e-4  # PAPER: BERT §A.2, Adam with learning rate 1e-4
BETAS = (0.9, 0.999)  # PAPER: BERT §A.2, beta1 = 0.9, beta2 = 0.999
WEIGHT_DECAY = 0.01  # PAPER: BERT §A.2, L2 weight decay 0.01 (not on biases and LayerNorm)
WARMUP_ITERS = 10_000  # PAPER: BERT §A.2, warmup over the first 10,000 steps, then linear decay
MAX_ITERS = 1_000_000  # PAPER: BERT §A.2, 1,000,000 steps (see PRESETS for what a laptop runs)
GRAD_CLIP = 1.0  # BERT's released code clips the global gradient norm at 1.0

# --- run --------------------------------------------------------------------------------------------------
EVAL_INTERVAL = 500  # steps between validation passes (and checkpoints)
EVAL_ITERS = 20  # validation batches per pass, the same ones every time
KEEP_CHECKPOINTS = 3  # newest checkpoints kept in OUT_DIR
RESUME = ""  # "latest" or a checkpoint path: continue that run exactly
OUT_DIR = str(REPO_ROOT / "checkpoints" / "project3")  # checkpoints, metrics.jsonl, loss curve
SEED = 1337  # one seed for weights, pairs, masks and dropout
DEVICE = "auto"  # auto = cuda > mps > cpu, or name one
PRESET = "auto"  # auto = gpu preset on a GPU, cpu preset on a CPU
DRY_RUN = False  # True: measure one step on the CPU, print memory, FLOPs, laptop-GPU time; train nothing

# --- embed.py ---------------------------------------------------------------------------------------------
CHECKPOINT = "latest"  # "latest" in OUT_DIR, or a checkpoint path
HF_DIR = ""  # a transformers-layout BERT folder (e.g. bert-base-uncased) instead of our checkpoint
TEXT = "The river flowed past the old [MASK] of the town."  # fill-in-the-blank: a sentence with [MASK]
TOP_K = 5  # predictions shown for each [MASK]
WORD = "bank"  # contextual embeddings: the word compared across contexts (a frequent one if it is rare)
CONTEXTS = 8  # sentences containing WORD to compare

# --- finetune.py ------------------------------------------------------------------------------------------
TASK = "polarity"  # polarity: 200 labelled sentences, offline; sst2, mrpc: downloads (finetune_data.py)
TASK_FILE = None  # your own labelled file, text<TAB>label or text<TAB>text_b<TAB>label a line; wins over TASK
FT_FOLDS = 5  # a task without a test split is scored by k-fold cross-validation: every example tested once
FT_DEV_FRACTION = 0.2  # of each split's training examples, held out to choose the learning rate
FT_TRAIN_EXAMPLES = 2000  # training examples taken from a downloaded task (0 = all of them)
FT_LEARNING_RATES = (5e-5, 4e-5, 3e-5, 2e-5)  # PAPER: BERT §4.1, the grid searched on dev for every GLUE task
FT_EPOCHS = 3  # PAPER: BERT §4.1, 3 epochs for every GLUE task
FT_BATCH_SIZE = 32  # PAPER: BERT §4.1, batch 32
FT_WARMUP_RATIO = 0.1  # google-research/bert run_classifier.py, warmup_proportion 0.1, then linear decay
FT_DROPOUT = 0.1  # PAPER: BERT §A.3, dropout kept at 0.1 (here on the classifier's input)
FT_MAX_TOKENS = 128  # google-research/bert run_classifier.py, max_seq_length 128
FT_SEEDS = (1337, 1, 2)  # one run per seed: the classifier's weights, dropout and the order of examples
FT_FROM = ("pretrained", "scratch")  # the checkpoint, and the same architecture from random weights

# BERT's own training, which the presets change (below): sweep.py's candidates and bench.py start from it.
BERT_TRAINING = dict(DROPOUT=0.1, USE_NSP=True, MLM_PROB=0.15)  # PAPER: BERT §3.1, §A.2

# The models of the paper, for reference (BERT §3; FFN 4H, 512 positions, 2 segments).
BERT_BASE = dict(N_LAYER=12, N_HEAD=12, N_EMBD=768, BLOCK_SIZE=512, VOCAB_SIZE=30522)  # 110M parameters
BERT_LARGE = dict(N_LAYER=24, N_HEAD=16, N_EMBD=1024, BLOCK_SIZE=512, VOCAB_SIZE=30522)  # 340M parameters

# Where every run departs from BERT, whatever the settings (the README lists them too):
# - Optimizer: torch's AdamW, eps 1e-8 with bias correction; BERT's AdamWeightDecayOptimizer used eps 1e-6 and
#   no bias correction (google-research/bert optimization.py), so its steps were larger by
#   (1 - beta1^t) / sqrt(1 - beta2^t).
# - Pairs and masks are drawn afresh for every batch (RoBERTa's dynamic masking); BERT wrote 10 fixed
#   maskings of its corpus to disk (create_pretraining_data.py, dupe_factor = 10).
# - Sequences are filled to the block unless SHORT_SEQ_PROB says otherwise: BERT made 10% of them shorter,
#   of a random length (create_pretraining_data.py, short_seq_prob = 0.1), so that fine-tuning's short inputs
#   were not new to the model.
# - A random replacement is an ordinary token; BERT drew it from the whole vocabulary, specials included.
# - One sequence length, BLOCK_SIZE, for every step; BERT used 128 for 90% of its steps and 512 for the rest.

# What a laptop can afford; only the names listed change. The presets depart from BERT four more ways: rotary
# positions (RoFormer), no dropout (Cramming, Geiping & Goldstein 2022), MLM only (RoBERTa, §4.2), 30% chosen
# (Wettig et al. 2023); README, "The cpu preset", gives the runs that chose them (exercises 4 and 6 too).
# Their fine-tuning searches larger learning rates, as BERT-Tiny's authors did (Turc et al. 2019: up to 3e-4),
# for 5 epochs of batches of 16 (BERT §A.3 also tried 16). Released BERT-base (--HF_DIR) fine-tunes with the
# paper's recipe: --FT_LEARNING_RATES=5e-5,4e-5,3e-5,2e-5 --FT_EPOCHS=3 --FT_BATCH_SIZE=32.
PRESETS = {
    # A laptop GPU (RTX 3050-class, 4 GB): 10,000 steps of a 6-layer BERT in minutes.
    "gpu": dict(
        N_LAYER=6, N_HEAD=6, N_EMBD=384, BLOCK_SIZE=128, BATCH_SIZE=32, LEARNING_RATE=5e-4, WARMUP_ITERS=500,
        MAX_ITERS=10_000, POSITIONS="rotary", DROPOUT=0.0, USE_NSP=False, MLM_PROB=0.3,
        FT_LEARNING_RATES=(1e-3, 3e-4), FT_EPOCHS=5, FT_BATCH_SIZE=16,
    ),
    # Two CPU cores: BERT-Tiny's shape (Turc et al. 2019: 2 layers, 128 wide, 2 heads), the shape that learned
    # most of those sweep.py tried in the same time.
    "cpu": dict(
        N_LAYER=2, N_HEAD=2, N_EMBD=128, BLOCK_SIZE=128, BATCH_SIZE=32, VOCAB_SIZE=4096, LEARNING_RATE=2e-3,
        WARMUP_ITERS=200, MAX_ITERS=2000, EVAL_INTERVAL=400, EVAL_ITERS=20, POSITIONS="rotary", DROPOUT=0.0,
        USE_NSP=False, MLM_PROB=0.3, FT_LEARNING_RATES=(1e-3, 3e-4), FT_EPOCHS=5, FT_BATCH_SIZE=16,
    ),
}
