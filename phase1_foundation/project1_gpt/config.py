"""Chapter 1 settings. Every UPPER_CASE name can be changed from the command line: `train.py --N_LAYER=6`.

The defaults below are GPT-1's where a laptop can afford them; what a laptop cannot afford (the size of the
model, the length of training) is set by the presets at the bottom and printed at the start of every run.
"""

from common.files import REPO_ROOT

# --- data -------------------------------------------------------------------------------------------------
CORPUS = "wiki-sample"  # embedded, no download; books downloads 8 Gutenberg novels
TEXT_FILE = None  # your own UTF-8 text file or folder of .txt files; wins over CORPUS
TOKENIZER = "bpe"  # bpe (sentencepiece, byte fallback) or char
VOCAB_SIZE = 8192  # PAPER: GPT-1 §4.1 used 40,000 BPE merges (40,478 tokens); scaled down to our data
VAL_FRACTION = 0.05  # share of documents held out for validation
DATA_DIR = str(REPO_ROOT / "data")  # prepared corpora, tokenizers and token files

# --- model ------------------------------------------------------------------------------------------------
N_LAYER = 12  # PAPER: GPT-1 §4.1, 12-layer decoder-only transformer
N_HEAD = 12  # PAPER: GPT-1 §4.1, 12 attention heads
N_EMBD = 768  # PAPER: GPT-1 §4.1, 768-dimensional states (FFN is 4x: 3072)
BLOCK_SIZE = 512  # PAPER: GPT-1 §4.1, contiguous sequences of 512 tokens
DROPOUT = 0.1  # PAPER: GPT-1 §4.1, residual, embedding and attention dropout 0.1
PRE_LN = False  # PAPER: GPT-1 is post-LN (LN after each residual add); True = GPT-2's pre-LN, for exercise 1
FAST_ATTENTION = True  # F.scaled_dot_product_attention; False = the explicit masked softmax, same numbers
CAUSAL = True  # the causal mask; False only in exercise 2, where every position also sees the future

# --- optimisation -----------------------------------------------------------------------------------------
BATCH_SIZE = 64  # PAPER: GPT-1 §4.1, minibatches of 64 sequences
GRAD_ACCUM_STEPS = 1  # micro-batches per optimizer step (effective batch = BATCH_SIZE x this)
LEARNING_RATE = 2.5e-4  # PAPER: GPT-1 §4.1, max learning rate of Adam
BETAS = (0.9, 0.999)  # PAPER: GPT-1 code (openai/finetune-transformer-lm), Adam b1, b2
WEIGHT_DECAY = 0.01  # PAPER: GPT-1 §4.1, modified L2 regularisation w = 0.01 on non-bias weights
WARMUP_ITERS = 2000  # PAPER: GPT-1 §4.1, linear warmup over the first 2000 updates
MAX_ITERS = 2000  # optimizer steps (the paper trained 100 epochs of BooksCorpus; see PRESETS)
MIN_LR_RATIO = 0.0  # PAPER: GPT-1 §4.1, cosine annealed to 0
GRAD_CLIP = 1.0  # PAPER: GPT-1 code, max_grad_norm = 1

# --- run --------------------------------------------------------------------------------------------------
EVAL_INTERVAL = 200  # steps between validation passes (and checkpoints)
EVAL_ITERS = 20  # validation batches per pass
KEEP_CHECKPOINTS = 3  # newest checkpoints kept in OUT_DIR
RESUME = ""  # "latest" or a checkpoint path: continue that run exactly
OUT_DIR = str(REPO_ROOT / "checkpoints" / "project1")  # checkpoints, metrics.jsonl, loss curve
SEED = 1337  # one seed for weights, batches and dropout
DEVICE = "auto"  # auto = cuda > mps > cpu, or name one
PRESET = "auto"  # auto = gpu preset on a GPU, cpu preset on a CPU
DRY_RUN = False  # True: measure one step on the CPU, print memory, FLOPs, laptop-GPU time; train nothing
CHECKPOINT = "latest"  # sample.py / finetune.py: "latest" in OUT_DIR, or a checkpoint path
PROMPT = "The"  # what sample.py and the end of train.py continue
SAMPLE_TOKENS = 120  # tokens to generate when sampling
TEMPERATURE = 0.8  # <1 sharpens the distribution, >1 flattens it
TOP_K = 40  # sample only among the k most likely tokens (0 = all)
HF_DIR = ""  # sample.py: a transformers-layout openai-gpt folder instead of our checkpoint

# --- fine-tuning (finetune.py) ----------------------------------------------------------------------------
FT_TASK = "shuffle"  # shuffle: the real sentence or it with its inner words shuffled; ending: exercise 4's
FT_CHOICES = 2  # candidates per question (the shuffle task has two)
FT_CONTEXT_SENTENCES = 1  # sentences of context before the candidates
FT_TRAIN_QUESTIONS = 2000  # questions built from training documents
FT_VAL_QUESTIONS = 500  # questions built from held-out documents
FT_LABELS = ()  # training questions each fine-tuning learns from (empty: all); several counts draw a curve
FT_SEEDS = (1337,)  # one fine-tuning per seed (the classifier's weights, dropout and the order of questions)
FT_FROM = ("pretrained", "scratch")  # fine-tune the checkpoint, and the same architecture from random weights
FT_BATCH_SIZE = 32  # PAPER: GPT-1 §4.1, batch size 32 for fine-tuning
FT_LEARNING_RATE = 6.25e-5  # PAPER: GPT-1 §4.1, fine-tuning learning rate
FT_EPOCHS = 3  # PAPER: GPT-1 §4.1, 3 epochs suffice for most tasks
FT_WARMUP_RATIO = 0.002  # PAPER: GPT-1 §4.1, warmup over 0.2% of training, then linear decay
FT_LM_WEIGHT = 0.5  # PAPER: GPT-1 §4.1, lambda = 0.5 in §3.2's L3 = L2 + lambda * L1
FT_CLF_DROPOUT = 0.1  # PAPER: GPT-1 §4.1, dropout 0.1 before the classifier

# The model of the paper, for reference (116,534,784 parameters with the released 40,478-token vocabulary).
GPT1_PAPER = dict(N_LAYER=12, N_HEAD=12, N_EMBD=768, BLOCK_SIZE=512, VOCAB_SIZE=40478, DROPOUT=0.1)

# What a laptop can afford. Only the names listed change; everything else keeps the values above.
PRESETS = {
    # A laptop GPU (RTX 3050-class, 4 GB): a 6-layer GPT-1 (README appendix, "Speed, and the `gpu` preset").
    "gpu": dict(
        N_LAYER=6, N_HEAD=6, N_EMBD=384, BLOCK_SIZE=256, BATCH_SIZE=32,
        WARMUP_ITERS=200, MAX_ITERS=3000, EVAL_INTERVAL=250,
    ),
    # Two CPU cores: what sweep.py chose (README appendix, "How the cpu preset was chosen").
    "cpu": dict(
        N_LAYER=4, N_HEAD=4, N_EMBD=128, BLOCK_SIZE=128, BATCH_SIZE=16, VOCAB_SIZE=4096, DROPOUT=0.0,
        LEARNING_RATE=2e-3, WARMUP_ITERS=250, MAX_ITERS=1500, EVAL_INTERVAL=250, EVAL_ITERS=10,
        FT_TRAIN_QUESTIONS=1000, FT_BATCH_SIZE=8, FT_LEARNING_RATE=3e-4,
    ),
}
