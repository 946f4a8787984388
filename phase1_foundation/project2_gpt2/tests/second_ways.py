"""A second correct implementation of each of chapter 2's tasks, written differently from the course's.

tests/test_learn.py checks that `learn check` accepts each of them: a check must not insist on the course's
way of writing a function, only on what it computes.
"""

SECOND_WAYS = {
    "2.kv_cache": {"KVCache.append": '''
def append(self, k, v):
    new = k.shape[2]
    if self.length > 0 and new > 1:
        raise ValueError(f"{new} new positions after {self.length} cached ones: one at a time")
    positions = torch.arange(self.length, self.length + new, device=k.device)
    self.k.index_copy_(2, positions, k)
    self.v.index_copy_(2, positions, v)
    self.length += new
    return self.k.narrow(2, 0, self.length), self.v.narrow(2, 0, self.length)
'''},
    "2.bpe_train": {"ByteBPETokenizer.train": '''
@classmethod
def train(cls, texts, vocab_size):
    if vocab_size < 257:
        raise CourseError(f"error: --VOCAB_SIZE={vocab_size}: the bytes and {END_OF_TEXT} need at least 257")
    words = Counter()
    for text in texts:
        for piece in PRETOKENIZE.findall(text):
            words[tuple(to_symbols(piece))] += 1
    tokens = set(BYTE_TO_CHAR.values()) | {END_OF_TEXT}
    merges = []
    while len(merges) < vocab_size - 257:  # the textbook way: recount every pair before each merge
        counts = Counter()
        for symbols, n in words.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += n
        candidates = [pair for pair in counts if pair[0] + pair[1] not in tokens]
        if not candidates:
            break
        best = min(candidates, key=lambda pair: (-counts[pair], pair))
        merges.append(best)
        tokens.add(best[0] + best[1])
        merged = Counter()
        for symbols, n in words.items():
            merged[tuple(_merge_pair(list(symbols), best))] += n
        words = merged
    vocabulary = [*BYTE_TO_CHAR.values(), *(left + right for left, right in merges), END_OF_TEXT]
    if len(vocabulary) < vocab_size:
        print(f"tokenizer: this corpus supports {len(vocabulary):,} tokens, not {vocab_size:,}")
    return cls({token: i for i, token in enumerate(vocabulary)}, merges)
'''},
    "2.pre_ln": {
        "Block.forward": '''
def forward(self, x):
    C = x.size(-1)
    h = x + self.attn(F.layer_norm(x, (C,), self.ln_1.weight, self.ln_1.bias, self.ln_1.eps))
    return h + self.mlp(F.layer_norm(h, (C,), self.ln_2.weight, self.ln_2.bias, self.ln_2.eps))
''',
        "GPT.hidden_states": '''
def hidden_states(self, idx, start=0):
    T = idx.size(1)
    if T + start > self.config.block_size:
        raise ValueError(f"{start} + {T} positions do not fit in block_size {self.config.block_size}")
    x = self.wte(idx) + self.wpe.weight[start : start + T]  # (B, T, C) + (T, C)
    x = self.drop(x)
    for i in range(len(self.blocks)):
        x = self.blocks[i](x)
    return self.ln_f(x)
'''},
    "2.kv_attention": {"CausalSelfAttention.forward": '''
def forward(self, x):
    B, T, C = x.shape
    hs = C // self.n_head
    q, k, v = self.c_attn(x).reshape(B, T, 3, self.n_head, hs).permute(2, 0, 3, 1, 4)  # 3 x (B, nh, T, hs)
    if self.cache is not None:
        k, v = self.cache.append(k, v)
    S = k.size(2)
    # query i sits at position S - T + i and sees the keys up to there: a triangle shifted right by S - T
    allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)  # (T, S)
    if self.fast:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                           dropout_p=self.dropout if self.training else 0.0)
    else:
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * hs ** -0.5  # (B, nh, T, S)
        scores = torch.where(allowed, scores, torch.finfo(scores.dtype).min)
        y = self.attn_dropout(scores.softmax(dim=-1)) @ v  # (B, nh, T, hs)
    return self.resid_dropout(self.c_proj(y.permute(0, 2, 1, 3).reshape(B, T, C)))
'''},
    "2.top_p": {"filter_logits": '''
def filter_logits(logits, top_k=None, top_p=None):
    out = logits.clone()
    if top_k is not None:
        keep = torch.zeros_like(out, dtype=torch.bool)
        keep.scatter_(-1, out.topk(min(top_k, out.size(-1)), dim=-1).indices, True)
        out = torch.where(keep, out, float("-inf"))
    if top_p is not None and top_p < 1:
        probs = out.softmax(dim=-1)
        for row in range(out.size(0)):
            mass = 0.0  # the probability of the tokens kept so far, likeliest first
            for token in probs[row].argsort(descending=True).tolist():
                if mass >= top_p:
                    out[row, token] = float("-inf")
                mass += probs[row, token].item()
    return out
'''},
    "2.bpe": {
        "_merge_pair": '''
def _merge_pair(symbols, pair):
    rest, merged = list(symbols), []
    while rest:
        if len(rest) > 1 and (rest[0], rest[1]) == pair:
            merged.append(rest[0] + rest[1])
            del rest[:2]
        else:
            merged.append(rest.pop(0))
    return merged
''',
        "ByteBPETokenizer._bpe": '''
def _bpe(self, symbols):
    # Every merge, in the order learned, everywhere it applies: merging a pair only ever creates pairs with
    # the new token, learned later, so this replays training exactly like "the lowest rank first".
    parts = list(symbols)
    for pair in self.merges:
        if len(parts) == 1:
            break
        if pair in zip(parts, parts[1:]):
            parts = _merge_pair(parts, pair)
    return parts
'''},
    "2.scaled_init": {
        "GPT._init_weights": '''
@staticmethod
def _init_weights(module):
    if isinstance(module, nn.Embedding):
        torch.nn.init.normal_(module.weight, std=0.02)
    elif isinstance(module, nn.Linear):
        with torch.no_grad():
            module.weight.copy_(torch.randn_like(module.weight) * 0.02)
            if module.bias is not None:
                module.bias.zero_()
''',
        "GPT.init_weights": '''
def init_weights(self):
    for module in self.modules():
        self._init_weights(module)
    residual_layers = 2 * len(self.blocks)  # attention and MLP each add to the stream once per block
    with torch.no_grad():
        for block in self.blocks:
            for projection in (block.attn.c_proj, block.mlp.c_proj):
                projection.weight.normal_(0.0, 0.02 * residual_layers ** -0.5)
'''},
}
