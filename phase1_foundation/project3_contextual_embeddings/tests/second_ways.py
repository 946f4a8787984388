"""A second correct implementation of each of chapter 3's tasks, written differently from the course's.

`learn check` must accept each of them: a check must not insist on the course's way of writing a function
(or on its order of random draws), only on what it computes.
"""

SECOND_WAYS = {
    "3.mlm_loss": {"BERT.forward": '''
def forward(self, input_ids, segment_ids=None, attention_mask=None, chosen=None):
    h = self.hidden_states(input_ids, segment_ids, attention_mask)  # (B, T, C)
    pooled = torch.tanh(h[:, 0] @ self.pooler.dense.weight.T + self.pooler.dense.bias)  # (B, C)
    nsp = pooled @ self.nsp_head.weight.T + self.nsp_head.bias  # (B, 2)
    if chosen is not None:
        rows, cols = chosen.nonzero(as_tuple=True)  # row-major, as labels[chosen]
        h = h[rows, cols]  # (N, C)
    head = self.mlm_head
    t = head.norm(head.act(head.dense(h)))
    return t @ self.embeddings.token.weight.T + head.decoder.bias, nsp
'''},
    "3.attention": {"BidirectionalSelfAttention.forward": '''
def forward(self, x, mask=None, rotary=None):
    B, T, C = x.shape
    hs = C // self.n_head
    q, k, v = self.c_attn(x).reshape(B, T, 3, self.n_head, hs).permute(2, 0, 3, 1, 4)  # 3 x (B, nh, T, hs)
    if rotary is not None:
        q, k = (rotate(t, *rotary) for t in (q, k))
    if self.fast:
        bias = None if mask is None else torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                           dropout_p=self.dropout if self.training else 0.0)
    else:
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * hs ** -0.5  # (B, nh, T, T)
        if mask is not None:
            scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        y = torch.einsum("bhqk,bhkd->bhqd", self.attn_dropout(scores.softmax(-1)), v)  # (B, nh, T, hs)
    return self.resid_dropout(self.c_proj(y.permute(0, 2, 1, 3).reshape(B, T, C)))
'''},
    "3.rotary": {
        "rotary_angles": '''
def rotary_angles(block_size, head_size):
    i = torch.arange(head_size // 2, dtype=torch.float32)
    theta = torch.exp(-math.log(ROTARY_BASE) * 2 * i / head_size)  # (hs/2,)
    angles = torch.arange(block_size, dtype=torch.float32)[:, None] * theta[None, :]  # (T, hs/2)
    return torch.cos(angles), torch.sin(angles)
''',
        "rotate": '''
def rotate(x, cos, sin):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())  # (B, nh, T, hs/2)
    turned = torch.view_as_real(pairs * torch.complex(cos, sin))  # (B, nh, T, hs/2, 2)
    return turned.reshape(x.shape).to(x.dtype)
'''},
    "3.mask_tokens": {"mask_tokens": '''
def mask_tokens(input_ids, *, vocab_size, mlm_prob=0.15, mask_share=0.8, random_share=0.1, generator=None):
    masked = input_ids.clone().cpu()
    labels = torch.full_like(masked, IGNORE)
    for row in range(masked.size(0)):
        words = (masked[row] >= N_SPECIAL).nonzero().flatten()  # the ordinary positions of this row
        if len(words) == 0:
            continue
        count = max(1, round(len(words) * mlm_prob))
        picked = words[torch.randperm(len(words), generator=generator)[:count]]
        labels[row, picked] = masked[row, picked]
        u = torch.rand(count, generator=generator)
        draws = torch.randint(N_SPECIAL, vocab_size, (count,), generator=generator)
        new = torch.where(u < mask_share, MASK_ID, torch.where(u < mask_share + random_share, draws,
                                                                masked[row, picked]))
        masked[row, picked] = new
    return masked.to(input_ids.device), labels.to(input_ids.device)
'''},
    "3.pair_layout": {"pair_layout": '''
def pair_layout(tokens, a, b, block_size):
    ids, segments, attention = [], [], []
    for (a0, a1), (b0, b1) in zip(a.tolist(), b.tolist()):
        row = [CLS_ID, *tokens[a0:a1].tolist(), SEP_ID, *tokens[b0:b1].tolist(), SEP_ID]
        pad = block_size - len(row)
        ids.append(row + [PAD_ID] * pad)
        segments.append([0] * (a1 - a0 + 2) + [1] * (b1 - b0 + 1) + [0] * pad)
        attention.append([1] * len(row) + [0] * pad)
    return torch.tensor(ids), torch.tensor(segments), torch.tensor(attention)
'''},
    "3.nsp_pairs": {"PairBatches._draw_pairs": '''
def _draw_pairs(self):
    off, full = self.sentences, self.block_size - 3
    u = torch.rand(self.batch_size, 5, generator=self.generator).double().numpy()  # all the draws at once
    targets = [full] * self.batch_size
    if self.short_seq_prob:
        short = torch.rand(self.batch_size, 2, generator=self.generator).double().numpy()
        targets = [2 + int(size * (full - 1)) if coin < self.short_seq_prob else full for coin, size in short]
    a, b, labels = [], [], []
    for (pick, cut, coin, which, where), target in zip(u, targets):
        start = int(self.starts[int(pick * len(self.starts))])
        doc = int(self.doc_of[start])
        end = int(self.doc_end[start])
        chunk_end = start + 2
        while chunk_end < end and off[chunk_end] - off[start] < target:
            chunk_end += 1
        a_end = start + 1 + int(cut * (chunk_end - start - 1))
        a.append((off[start], off[a_end]))
        if coin < 0.5 or not self.use_nsp:
            b.append((off[a_end], off[chunk_end]))
            labels.append(1)
            continue
        other = int(which * (self.n_documents - 1))
        other = other + (other >= doc)  # skip A's own document
        first, last = self.documents[other], self.documents[other + 1]
        b_start = first + int(where * (last - first))
        b_end = b_start + 1
        room = target - (off[a_end] - off[start])
        while b_end < last and off[b_end] - off[b_start] < room:
            b_end += 1
        b.append((off[b_start], off[b_end]))
        labels.append(0)
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(labels, dtype=np.int64)
'''},
    "3.classifier": {
        "pair_input": '''
def pair_input(a, b, max_tokens, cls_id, sep_id):
    texts = [list(a)] + ([] if b is None else [list(b)])
    while sum(map(len, texts)) > max_tokens - 1 - len(texts):  # [CLS] and one [SEP] per text
        longest = max(range(len(texts)), key=lambda i: (len(texts[i]), i))  # b on a tie
        texts[longest] = texts[longest][:-1]
    ids, segments = [cls_id], [0]
    for segment, text in enumerate(texts):
        ids += text + [sep_id]
        segments += [segment] * (len(text) + 1)
    return ids, segments
''',
        "BertClassifier.forward": '''
def forward(self, input_ids, segment_ids, attention_mask):
    first = self.bert.hidden_states(input_ids, segment_ids, attention_mask)[:, :1].squeeze(1)  # (B, C)
    return self.classifier(self.dropout(torch.tanh(self.bert.pooler.dense(first))))
''',
        "classifier_loss": '''
def classifier_loss(logits, labels):
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, K)
    return -log_probs.gather(1, labels[:, None]).mean()
'''},
}
