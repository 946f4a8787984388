"""A second correct implementation of each of chapter 1's tasks, written differently from the course's.

tests/test_learn.py checks that `learn check` accepts each of them: a check must not insist on the course's
way of writing a function, only on what it computes.
"""

SECOND_WAYS = {
    "1.train_step": {"finetune": '''
def finetune(model, data, steps, cfg, device, seed, desc):
    ids, extract_at, answers = data
    per_epoch = math.ceil(len(answers) / cfg.FT_BATCH_SIZE)
    warmup = max(1, round(cfg.FT_WARMUP_RATIO * steps))
    optimizer = adamw(model, cfg.FT_LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    shuffler = torch.Generator().manual_seed(seed)
    model.train()
    for step in range(steps):
        epoch_step = step % per_epoch
        if epoch_step == 0:
            order = torch.randperm(len(answers), generator=shuffler)
        batch = order[epoch_step * cfg.FT_BATCH_SIZE : (epoch_step + 1) * cfg.FT_BATCH_SIZE]
        x = trim(ids[batch], extract_at[batch]).to(device)
        e, y = extract_at[batch].to(device), answers[batch].to(device)
        if step < warmup:  # linear warmup, then linear decay to 0 at the last step
            lr = cfg.FT_LEARNING_RATE * (step + 1) / warmup
        else:
            lr = cfg.FT_LEARNING_RATE * (1 - min(1.0, (step - warmup) / max(1, steps - warmup)))
        for group in optimizer.param_groups:
            group["lr"] = lr
        scores, logits = model(x, e)
        loss = F.cross_entropy(scores, y)
        if cfg.FT_LM_WEIGHT:
            loss = loss + cfg.FT_LM_WEIGHT * lm_loss(logits, x, e)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        for g in grads:  # clipped to a total norm of GRAD_CLIP, as clip_grad_norm_ does
            g.mul_(torch.clamp(cfg.GRAD_CLIP / (norm + 1e-6), max=1.0))
        optimizer.step()
'''},
    "1.forward": {
        "GPT.hidden_states": '''
def hidden_states(self, idx):
    T = idx.size(1)
    if T > self.wpe.num_embeddings:
        raise ValueError(f"{T} tokens: longer than block_size {self.wpe.num_embeddings}")
    x = self.wte.weight[idx] + self.wpe.weight[:T]  # (B, T, C): rows of the tables, read directly
    x = self.drop(x)
    for block in self.blocks:
        x = block(x)
    return self.ln_f(x)
''',
        "GPT.forward": '''
def forward(self, idx, targets=None):
    logits = self.hidden_states(idx) @ self.wte.weight.T  # (B, T, V): the head is the token table
    if targets is None:
        return logits, None
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    kept = targets != IGNORE  # (B, T)
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
    return logits, -(picked * kept).sum() / kept.sum()
''',
    },
    "1.attention": {"CausalSelfAttention.forward": '''
def forward(self, x):
    B, T, C = x.shape
    hs = C // self.n_head
    qkv = self.c_attn(x).reshape(B, T, 3, self.n_head, hs)  # (B, T, 3, nh, hs)
    q, k, v = qkv.unbind(dim=2)  # 3 x (B, T, nh, hs)
    if self.fast:
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=self.causal).transpose(1, 2)  # (B, T, nh, hs)
    else:
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * hs ** -0.5  # (B, nh, T, T)
        if self.causal:
            future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
            scores = torch.where(future, torch.finfo(scores.dtype).min, scores)
        weights = self.attn_dropout(scores.softmax(dim=-1))
        y = torch.einsum("bhqk,bkhd->bqhd", weights, v)  # (B, T, nh, hs)
    return self.resid_dropout(self.c_proj(y.reshape(B, T, C)))
'''},
    "1.block": {"Block.forward": '''
def forward(self, x):
    sublayers = ((self.ln_1, self.attn), (self.ln_2, self.mlp))
    for norm, sublayer in sublayers:
        x = x + sublayer(norm(x)) if self.pre_ln else norm(x + sublayer(x))
    return x
'''},
    "1.loss": {"lm_loss": '''
def lm_loss(logits, ids, extract_at):
    ids = ids.reshape(-1, ids.size(-1))  # (B*K, T)
    total, count = logits.new_zeros(()), 0
    for row, end in enumerate(extract_at.reshape(-1).tolist()):
        # positions 0 .. end-1 predict tokens 1 .. end; nothing after <|extract|> is a target
        total = total + F.cross_entropy(logits[row, :end], ids[row, 1 : end + 1], reduction="sum")
        count += end
    return total / count
'''},
    "1.sampling": {"generate": '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None):
    for _ in range(max_new_tokens):
        logits = model(idx[:, max(0, idx.size(1) - model.config.block_size) :])[0][:, -1]  # (B, V)
        logits = logits / temperature
        if top_k is not None:
            keep = torch.zeros_like(logits, dtype=torch.bool)
            keep.scatter_(1, logits.topk(min(top_k, logits.size(-1)), dim=-1).indices, True)
            logits = torch.where(keep, logits, float("-inf"))
        nxt = torch.distributions.Categorical(logits=logits).sample()  # (B,)
        idx = torch.cat([idx, nxt[:, None]], dim=1)
    return idx
'''},
    "1.input_transform": {"encode": '''
def encode(questions, tokenizer, block_size):
    start = tokenizer.token_to_id("<|start|>")
    delim = tokenizer.token_to_id("<|delim|>")
    extract = tokenizer.token_to_id("<|extract|>")
    rows, ends = [], []
    for q in questions:
        for candidate in q.candidates:
            ending = tokenizer.encode(" " + candidate)[: block_size // 2]
            context = tokenizer.encode(q.context)
            keep = block_size - 3 - len(ending)
            context = context[len(context) - keep :] if len(context) > keep else context
            rows.append([start] + context + [delim] + ending + [extract])
            ends.append(len(rows[-1]) - 1)
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    K = len(questions[0].candidates)
    return (ids.reshape(len(questions), K, width), torch.tensor(ends).reshape(len(questions), K),
            torch.tensor([q.answer for q in questions]))
'''},
}
