"""Chapter 2 settings. Every UPPER_CASE name can be changed from the command line: `train.py --N_LAYER=6`.

The defaults are GPT-2 small where a laptop can afford them; what it cannot afford (the size of the model, the
length of training) the presets at the bottom set, and every run prints what it used. GPT-2's paper gives the
architecture and the data but no optimiser settings; where it is silent we use GPT-3's (Brown et al. 2020,
Appendix B), the same family trained the same way, and say so.
"""

from common.files import REPO_ROOT

# --- data -------------------------------------------------------------------------------------------------
CORPUS = "wiki-sample"  # embedded, no download; wikitext-103 downloads 200 times more
TEXT_FILE = None  # your own UTF-8 text file or folder of .txt files; wins over CORPUS
TOKENIZER = "bpe"  # bpe: a byte-level BPE trained on the corpus; gpt2: GPT-2's released vocabulary
VOCAB_SIZE = 0  # bpe only: 0 = sized to the corpus (see download_data.py); PAPER: GPT-2 §2.2 has 50,257
VAL_FRACTION = 0.05  # share of documents held out for validation (and for zero_shot.py)
DATA_DIR = str(REPO_ROOT / "data")  # prepared corpora, tokenizers and token files

# --- model ------------------------------------------------------------------------------------------------
N_LAYER = 12  # PAPER: GPT-2 Table 2, smallest model: 12 layers
N_HEAD = 12  # openai/gpt-2 hparams.json for the 124M model: 12 heads
N_EMBD = 768  # PAPER: GPT-2 Table 2, d_model 768 (the MLP's inner size is 4 x 768 = 3072)
BLOCK_SIZE = 1024  # PAPER: GPT-2 §2.3, context of 1,024 tokens (GPT-1 had 512)
DROPOUT = 0.1  # transformers' gpt2 config.json (resid, embd, attn); the paper and OpenAI's code have none
FAST_ATTENTION = True  # F.scaled_dot_product_attention; False = the explicit masked softmax, same numbers

# --- optimisation -----------------------------------------------------------------------------------------
BATCH_SIZE = 32  # sequences per micro-batch, summed over all GPUs of a torchrun job
GRAD_ACCUM_STEPS = 16  # micro-batches per optimizer step: 32 x 16 = PAPER: GPT-2 §2.3, batch of 512
LEARNING_RATE = 6e-4  # GPT-3 Table 2.1 for its 125M model (GPT-2 §3 tuned each model's rate by hand)
BETAS = (0.9, 0.95)  # GPT-3 Appendix B, Adam b1, b2
WEIGHT_DECAY = 0.1  # GPT-3 Appendix B, decoupled weight decay 0.1 (on matrices only)
WARMUP_ITERS = 700  # GPT-3 Appendix B warms up over 375M tokens: ~700 steps of 512 x 1024
MAX_ITERS = 5000  # optimizer steps (the presets set what a laptop can afford)
MIN_LR_RATIO = 0.1  # GPT-3 Appendix B, cosine decay to 10% of the peak
GRAD_CLIP = 1.0  # GPT-3 Appendix B, clip the global gradient norm at 1.0
COMPILE = False  # torch.compile the model (the gpu preset turns it on; on CPU it rarely pays for itself)

# --- run --------------------------------------------------------------------------------------------------
EVAL_INTERVAL = 250  # steps between validation passes (and checkpoints)
EVAL_ITERS = 20  # validation batches per pass
KEEP_CHECKPOINTS = 3  # newest checkpoints kept in OUT_DIR
RESUME = ""  # "latest" or a checkpoint path: continue that run exactly
OUT_DIR = str(REPO_ROOT / "checkpoints" / "project2")  # checkpoints, metrics.jsonl, loss curve
SEED = 1337  # one seed for weights, batches and dropout
DEVICE = "auto"  # auto = cuda > mps > cpu, or name one (under torchrun each process takes its own GPU)
PRESET = "auto"  # auto = gpu preset on a GPU, cpu preset on a CPU
DRY_RUN = False  # True: measure one step on the CPU, print memory, FLOPs, laptop-GPU time; train nothing

# --- generation (sample.py, and the sample at the end of train.py) ----------------------------------------
CHECKPOINT = "latest"  # "latest" in OUT_DIR, or a checkpoint path
HF_DIR = ""  # a folder written by transformers' GPT2LMHeadModel.save_pretrained instead of our checkpoint
PROMPT = "The"  # the text to continue
SAMPLE_TOKENS = 100  # tokens to generate
TEMPERATURE = 1.0  # <1 sharpens the distribution, >1 flattens it
TOP_K = 0  # sample among the k likeliest tokens only (0 = no limit; 1 = greedy)
TOP_P = 0.9  # nucleus (Holtzman et al. 2019): the fewest tokens holding p of the probability (0 = off)
STOP = ""  # stop when the generated text contains this string (as well as at <|endoftext|>)
USE_CACHE = True  # the KV cache: keys and values of earlier positions are kept, not recomputed

# --- zero-shot evaluation (zero_shot.py) ------------------------------------------------------------------
ZS_PASSAGES = 500  # LAMBADA-style passages built from held-out documents
ZS_CONTEXT_WORDS = 60  # words of context before the word to predict
ZS_PPL_TOKENS = 100_000  # held-out tokens scored for perplexity (0 = all)

# The four models of the paper, for reference. PAPER: GPT-2 Table 2 (layers, d_model); heads from the
# openai/gpt-2 hparams.json files; context 1,024 and vocabulary 50,257 (§2.2-2.3), tied head. The paper's
# names 117M/345M/762M/1542M are not their sizes: counted exactly they have 124,439,808 / 354,823,168 /
# 774,030,080 / 1,557,611,200 parameters.
GPT2_SIZES = {
    "gpt2": dict(N_LAYER=12, N_HEAD=12, N_EMBD=768),  # "117M", 124,439,808 parameters
    "gpt2-medium": dict(N_LAYER=24, N_HEAD=16, N_EMBD=1024),  # "345M", 354,823,168
    "gpt2-large": dict(N_LAYER=36, N_HEAD=20, N_EMBD=1280),  # "762M", 774,030,080
    "gpt2-xl": dict(N_LAYER=48, N_HEAD=25, N_EMBD=1600),  # "1542M", 1,557,611,200
}
GPT2_CONTEXT, GPT2_VOCAB = 1024, 50257

# What a laptop can afford. Only the names listed change; everything else keeps the values above.
PRESETS = {
    # A laptop GPU (RTX 3050-class, 4 GB): a 6-layer GPT-2 in minutes, short enough not to overfit the
    # default wiki-sample (README, "What your run shows").
    "gpu": dict(
        N_LAYER=6, N_HEAD=6, N_EMBD=384, BLOCK_SIZE=256, BATCH_SIZE=32, GRAD_ACCUM_STEPS=1,
        LEARNING_RATE=1e-3, WARMUP_ITERS=100, MAX_ITERS=1000, EVAL_INTERVAL=100, COMPILE=True,
    ),
    # Two CPU cores: a 4-layer GPT-2, 192 wide, in minutes; README, "Choosing the cpu preset", says why
    # this shape. A run this short reads the data too few times to overfit, so dropout is off.
    "cpu": dict(
        N_LAYER=4, N_HEAD=4, N_EMBD=192, BLOCK_SIZE=128, BATCH_SIZE=16, GRAD_ACCUM_STEPS=1, DROPOUT=0.0,
        LEARNING_RATE=3e-3, WARMUP_ITERS=50, MAX_ITERS=1200, EVAL_INTERVAL=200, EVAL_ITERS=10,
        ZS_PASSAGES=300, ZS_PPL_TOKENS=50_000,
    ),
}
