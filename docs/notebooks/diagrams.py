"""The architecture pictures of the theory pages, drawn by code.

    fig = transformer()        # 01-transformer.png: the 2017 encoder-decoder
    fig = qkv()                # 02-qkv.png: one token's query, key and value, and one row of attention
    fig = split_heads()        # 03-split-heads.png: multi-head attention, split, attend, concatenate, W^O
    fig = post_and_pre_ln()    # 05-block.png: where the LayerNorm sits in a block
    fig = gpt_and_bert()       # 07-gpt-and-bert.png: the decoder-only and the encoder-only model

Drawn by code rather than in an editor so that the pictures are regenerated with the pages' other figures
and a wrong one is corrected like code, by changing a line; and so that the five share one look: a kind of
part has the same colour in every picture (PARTS), and data flows along the arrows, from the top down. Each
figure's axes are measured in inches, so a box 1 unit wide is 1 inch wide in the saved image, and sizes and
fonts can be chosen for the page that shows it.
"""

import math
from typing import NamedTuple

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path
from matplotlib.transforms import Bbox

PARTS = {  # kind of part: (fill, edge)
    "attention": ("#fdd0a2", "#d94801"),
    "ffn": ("#c6dbef", "#2171b5"),
    "norm": ("#fff3b0", "#b8860b"),
    "embedding": ("#c7e9c0", "#238b45"),
    "head": ("#dadaeb", "#6a51a3"),
    "data": ("#f0f0f0", "#636363"),
    "layer": ("#f7f7f7", "#969696"),  # the frame around a repeated layer
}
HEADS = ("#66c2a5", "#e78ac3", "#8da0cb")  # the attention heads of 03-split-heads, one colour each
INK, NOTE = "#252525", "#525252"  # text and arrows; the grey of side notes
FONT, SMALL = 12, 11  # points: at GitHub's page width (about 880 px) a 10-inch figure shows at 80%
GAP = 0.28  # inches between a box and the next one down: room for an arrow


class Box(NamedTuple):
    """Where a drawn thing sits: its centre and size, in inches; arrows start and end on its edges."""

    x: float
    y: float
    w: float
    h: float

    @property
    def top(self) -> float:
        return self.y + self.h / 2

    @property
    def bottom(self) -> float:
        return self.y - self.h / 2

    @property
    def left(self) -> float:
        return self.x - self.w / 2

    @property
    def right(self) -> float:
        return self.x + self.w / 2


def canvas(width: float, height: float) -> tuple[Figure, plt.Axes]:
    """A figure whose one axes covers it, in inches, with no ticks or frame."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def trimmed(fig: Figure, margin: float = 0.1) -> Figure:
    """The figure cut down to what is drawn on it, so that no picture brings empty margins into the page;
    the drawing keeps its size in inches, so its fonts keep theirs."""
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    drawn = Bbox.union([a.get_window_extent(renderer) for a in ax.patches + ax.texts])
    drawn = drawn.transformed(ax.transData.inverted())
    ax.set_xlim(drawn.x0 - margin, drawn.x1 + margin)
    ax.set_ylim(drawn.y0 - margin, drawn.y1 + margin)
    fig.set_size_inches(drawn.width + 2 * margin, drawn.height + 2 * margin)
    return fig


def label(ax, x: float, y: float, text: str, size: float = FONT, **style) -> Box:
    """Text centred on (x, y), and the box it takes up, measured, so that arrows can meet it."""
    style = {"ha": "center", "va": "center", "color": INK} | style
    t = ax.text(x, y, text, size=size, zorder=4, **style)
    extent = t.get_window_extent(ax.figure.canvas.get_renderer())
    dpi = ax.figure.dpi
    return Box(x, y, extent.width / dpi + 0.08, extent.height / dpi + 0.08)


def box(ax, x: float, y: float, w: float, h: float, text: str = "", kind: str = "data", size: float = FONT,
        **style) -> Box:
    """A rounded box centred on (x, y), coloured by the kind of part it is."""
    fill, edge = PARTS[kind]
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.08",
                                fc=fill, ec=edge, lw=1.4, zorder=1 if kind == "layer" else 2))
    if text:
        label(ax, x, y, text, size, **style)
    return Box(x, y, w, h)


def stack(ax, x: float, top: float, w: float, parts: list[tuple[str, str, float]]) -> list[Box]:
    """Boxes (text, kind, height) one under the other from `top` down, each joined to the next by an arrow."""
    boxes = []
    for text, kind, h in parts:
        y = (boxes[-1].bottom - GAP if boxes else top) - h / 2
        boxes.append(box(ax, x, y, w, h, text, kind))
    for upper, lower in zip(boxes, boxes[1:], strict=False):
        down(ax, upper, lower)
    return boxes


def frame(ax, inside: list[Box], title: str, align: str = "left", side: float = 0, note: str = "") -> Box:
    """The grey frame around the parts of a repeated layer, with its title (× N) in a top corner, clear of
    the arrow that enters the layer, and under the title an optional note in plain type; side widens it to the
    left (< 0) or right (> 0) for skip connections."""
    pad, title_room = 0.2, 0.34 + (0.22 if note else 0)
    left = min(b.left for b in inside) - pad + min(side, 0)
    right = max(b.right for b in inside) + pad + max(side, 0)
    top, bottom = max(b.top for b in inside) + pad + title_room, min(b.bottom for b in inside) - pad
    x = left + 0.15 if align == "left" else right - 0.15
    label(ax, x, top - 0.17 - 0.04, title, SMALL, weight="bold", color=NOTE, ha=align)
    if note:
        label(ax, x, top - 0.17 - 0.26, note, SMALL, color=NOTE, ha=align)
    return box(ax, (left + right) / 2, (top + bottom) / 2, right - left, top - bottom, kind="layer")


def arrow(ax, *points: tuple[float, float], color: str = INK, lw: float = 1.4, head: bool = True,
          ls: str = "-") -> None:
    """A line through the points, with an arrowhead at the last one: the direction data flows."""
    path = Path(points, [Path.MOVETO] + [Path.LINETO] * (len(points) - 1))
    ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>" if head else "-", mutation_scale=14, lw=lw,
                                 color=color, ls=ls, zorder=3, joinstyle="miter", capstyle="butt"))


def down(ax, upper: Box, lower: Box) -> None:
    """An arrow from the bottom of one box straight down to the top of the next."""
    arrow(ax, (upper.x, upper.bottom), (upper.x, lower.top))


def residual(ax, sub: Box, add: Box, side: float) -> None:
    """The skip around a sub-layer: leaves the stream just above it, runs beside it, enters the add.

    side is the offset of the skip's vertical line from the stream, negative for the left.
    """
    start_y = sub.top + GAP / 2
    edge = add.left if side < 0 else add.right
    arrow(ax, (sub.x, start_y), (sub.x + side, start_y), (sub.x + side, add.y), (edge, add.y), lw=1.2)


def plus(ax, x: float, y: float) -> Box:
    """A residual addition: the node where a sub-layer's output joins the stream."""
    r = 0.15
    ax.add_patch(Circle((x, y), r, fc="white", ec=INK, lw=1.4, zorder=3))
    label(ax, x, y + 0.01, "+", 14, weight="bold")
    return Box(x, y, 2 * r, 2 * r)


def grid(ax, x: float, y: float, rows: int, colors: list[str], cell: float = 0.22) -> Box:
    """A matrix of rows × len(colors) cells centred on (x, y), each column filled with its colour."""
    w, h = cell * len(colors), cell * rows
    for j, color in enumerate(colors):
        for i in range(rows):
            ax.add_patch(Rectangle((x - w / 2 + j * cell, y + h / 2 - (i + 1) * cell), cell, cell, fc=color,
                                   ec="#737373", lw=0.8, zorder=2))
    return Box(x, y, w, h)


def transformer() -> Figure:
    """The 2017 encoder-decoder (Vaswani et al. 2017, Fig. 1), read from the top down as page 1 reads it.

    The decoder's layer starts lower than the encoder's so that the memory, the encoder's last output, runs
    straight across into the cross-attention it feeds.
    """
    fig, ax = canvas(10, 9.6)
    h, tall = 0.42, 0.66
    enc_x, enc_w, dec_x, dec_w = 2.3, 3.0, 7.2, 3.9
    add = ("add & LayerNorm", "norm", h)

    top = 9.35
    label(ax, enc_x, top, "Encoder", 14, weight="bold")
    label(ax, dec_x, top, "Decoder", 14, weight="bold")
    src = label(ax, enc_x, top - 0.5, "source tokens")
    tgt = label(ax, dec_x, top - 0.5, "target tokens so far, shifted right")
    emb_y = src.y - 0.8
    emb_text = "embedding · $\\sqrt{d_{model}}$ + sinusoids"
    enc_emb = box(ax, enc_x, emb_y, enc_w, h, emb_text, "embedding")
    dec_emb = box(ax, dec_x, emb_y, dec_w, h, emb_text, "embedding")
    down(ax, src, enc_emb)
    down(ax, tgt, dec_emb)
    arrow(ax, (enc_emb.right, emb_y), (dec_emb.left, emb_y), color=PARTS["embedding"][1], head=False, ls="--")
    label(ax, (enc_emb.right + dec_emb.left) / 2, emb_y + 0.22, "the same table", SMALL, color=NOTE)

    enc = stack(ax, enc_x, enc_emb.bottom - 0.95, enc_w, [
        ("self-attention", "attention", h), add, ("feed-forward network", "ffn", h), add])
    for sub, done in zip(enc[::2], enc[1::2], strict=True):
        residual(ax, sub, done, -(enc_w / 2 + 0.2))
    enc_frame = frame(ax, enc, "encoder layer × 6", side=-0.2)
    down(ax, enc_emb, enc[0])

    memory_y = enc[-1].bottom - 0.75
    # the decoder's cross-attention is its third box: place the first so that the third meets the memory
    dec_top = memory_y + tall / 2 + 2 * GAP + 2 * h
    dec = stack(ax, dec_x, dec_top, dec_w, [
        ("masked self-attention (causal mask)", "attention", h), add,
        ("cross-attention\nQ from the decoder; K, V from memory", "attention", tall), add,
        ("feed-forward network", "ffn", h), add])
    for sub, done in zip(dec[::2], dec[1::2], strict=True):
        residual(ax, sub, done, dec_w / 2 + 0.2)
    dec_frame = frame(ax, dec, "decoder layer × 6", side=0.2)
    down(ax, dec_emb, dec[0])

    memory = label(ax, enc_x, memory_y, "memory", weight="bold")
    down(ax, enc[-1], memory)
    cross = dec[2]
    arrow(ax, (memory.right, memory_y), (cross.left, memory_y), lw=1.8)
    label(ax, (enc_frame.right + dec_frame.left) / 2 + 0.1, memory_y + 0.35, "into every\ndecoder layer",
          SMALL, color=NOTE)

    linear = box(ax, dec_x, dec_frame.bottom - 0.55, dec_w, h, "linear (the same table) → softmax", "head")
    down(ax, dec[-1], linear)
    nxt = label(ax, dec_x, linear.bottom - 0.6, "next target token")
    down(ax, linear, nxt)
    return trimmed(fig)


def qkv() -> Figure:
    """Page 2's q = x W_Q, k = x W_K, v = x W_V for one token, then one query's row of attention.

    The row is the worked example's query "sat" (page 2: Q = [[1, 0], [0, 2], [1, 1]], K = [[1, 1], [0, 1],
    [2, 0]]), computed here, so that the numbers in the picture are the page's, rounded.
    """
    fig, ax = canvas(10, 6.3)
    d_model, d_k, cell = 8, 4, 0.3
    rows = {"q": 5.55, "k": 4.45, "v": 3.35}
    roles = {"q": "what this token looks for", "k": "what it offers to be found by", "v": "what it passes on"}
    x = grid(ax, 1.45, rows["k"], 1, [PARTS["data"][0]] * d_model, cell)
    label(ax, x.x, x.top + 0.3, "$x$: one token, 1 × $d_{model}$")
    for name, y in rows.items():
        w = grid(ax, 3.9, y, d_model, [PARTS["attention"][0]] * d_k, 0.1)
        label(ax, w.left - 0.32, y, f"$W_{name.upper()}$")
        arrow(ax, (x.right + 0.05, x.y), (w.left - 0.6, y))
        out = grid(ax, 5.2, y, 1, ["white"] * d_k, cell)
        arrow(ax, (w.right + 0.05, y), (out.left - 0.05, y))
        label(ax, out.right + 0.2, y, f"${name} = xW_{name.upper()}$:  {roles[name]}", ha="left")
    label(ax, 3.9, rows["q"] + 0.62, "$d_{model}$ × $d_k$", SMALL, color=NOTE)
    label(ax, 5.2, rows["q"] + 0.38, "1 × $d_k$", SMALL, color=NOTE)

    keys = ["the", "cat", "sat"]
    q_sat, k = (1, 1), [(1, 1), (0, 1), (2, 0)]
    scores = [sum(a * b for a, b in zip(q_sat, kj, strict=True)) / math.sqrt(len(q_sat)) for kj in k]
    weights = [math.exp(s) / sum(math.exp(t) for t in scores) for s in scores]
    label(ax, 5.0, 2.45, 'then, for one query i (here "sat" of page 2\'s worked example) and every key j:',
          SMALL, color=NOTE)
    panels = [(1.6, "$s_{ij} = q_i \\cdot k_j \\,/\\, \\sqrt{d_k}$", scores),
              (5.0, "$w_{ij}$ = softmax over the keys j", weights)]
    fill, edge = PARTS["attention"]
    for cx, title, values in panels:
        label(ax, cx, 1.95, title)
        scale = 1.0 / max(values)  # inches per unit: the tallest bar of each panel is 1 inch
        for j, (key, value) in enumerate(zip(keys, values, strict=True)):
            bx = cx + (j - 1) * 0.75
            ax.add_patch(Rectangle((bx - 0.22, 0.45), 0.44, scale * value, fc=fill, ec=edge, lw=1.2))
            label(ax, bx, 0.5 + scale * value, f"{value:.2f}", SMALL, va="bottom")
            label(ax, bx, 0.28, key, SMALL)
    arrow(ax, (2.95, 0.9), (3.65, 0.9))
    arrow(ax, (6.35, 0.9), (7.05, 0.9))
    label(ax, 8.45, 1.95, "$\\mathrm{out}_i = \\sum_j \\, w_{ij} v_j$")
    terms = [f"{w:.2f}·$v_{{{key}}}$" for key, w in zip(keys, weights, strict=True)]
    label(ax, 8.45, 1.0, f"$\\mathrm{{out}}_{{sat}}$ = {terms[0]}\n+ {terms[1]} + {terms[2]}")
    return trimmed(fig)


def split_heads() -> Figure:
    """Page 3's multi-head attention as the course's code computes it: one projection for all heads, then
    each head takes its own d_k columns of Q, K and V, attends on its own, and the heads' outputs are put back
    side by side for W^O.

    Drawn with T = 4 tokens, d_model = 6 and h = 3 heads of d_k = 2 (the base Transformer: 8 heads of 64). The
    heads are columns side by side: Q, K and V join one line over them that drops into every head, and inside
    a head Q_i and K_i run down the right of V_i, so that all three arrows reach the attention uncrossed.
    """
    fig, ax = canvas(10, 8.9)
    T, d_k, cell = 4, 2, 0.2
    bands = [color for color in HEADS for _ in range(d_k)]  # a row of d_model cells, coloured by their head
    grey = [PARTS["data"][0]] * len(bands)
    heads_x, rows = (4.3, 6.3, 8.3), {"Q": 6.95, "K": 5.85, "V": 4.75}

    x = grid(ax, 1.85, 8.5, T, grey, cell)
    label(ax, x.right + 0.2, x.y, "$x$   (T × $d_{model}$)", ha="left")
    bus, top = 8.15, 7.9  # the line that hands every head its columns; the top of the heads' frames
    for name, y in rows.items():
        w = box(ax, 0.75, y, 0.62, 0.4, f"$W^{name}$", "attention")
        arrow(ax, (x.left, x.y), (0.2, x.y), (0.2, y), (w.left, y))
        full = grid(ax, 1.85, y, T, bands, cell)
        arrow(ax, (w.right, y), (full.left - 0.05, y))
        name_box = label(ax, full.right + 0.2, y, f"${name}$")
        arrow(ax, (name_box.right, y), (3.1, y), head=False)  # Q, K and V join the bus
    arrow(ax, (3.1, rows["V"]), (3.1, bus), (heads_x[-1], bus), (heads_x[-1], top))
    for cx in heads_x[:-1]:
        arrow(ax, (cx, bus), (cx, top))
    split = "split: each head takes its $d_k$ columns of $Q$, $K$ and $V$"
    label(ax, (heads_x[0] + heads_x[1]) / 2 + 0.2, bus + 0.2, split, SMALL, color=NOTE, ha="left")
    cut = "T × $d_{model}$ each,\ncut into h heads\nof $d_k = d_{model}\\,/\\,h$ columns"
    label(ax, 1.85, rows["V"] - 0.65, cut, SMALL, color=NOTE, va="top")

    outs = []
    for i, (cx, color) in enumerate(zip(heads_x, HEADS, strict=True)):
        n = i + 1
        ax.add_patch(FancyBboxPatch((cx - 0.92, 2.0), 1.84, top - 2.0,
                                    boxstyle="round,pad=0,rounding_size=0.08", fc="white", ec=color, lw=2,
                                    zorder=1))
        label(ax, cx, 7.6, f"head {n}", weight="bold")
        parts = {}
        for name, y in rows.items():
            parts[name] = grid(ax, cx, y, T, [color] * d_k, cell)
            label(ax, cx - 0.55, y, f"${name}_{n}$", SMALL)
        attend = box(ax, cx, 3.6, 1.74, 0.74,
                     f"softmax$\\left(\\dfrac{{Q_{n}K_{n}^T}}{{\\sqrt{{d_k}}}}\\right)V_{n}$", "attention")
        for name, side in (("Q", 0.65), ("K", 0.42)):  # past V_i, on its right, into the attention
            q = parts[name]
            arrow(ax, (q.right, q.y), (cx + side, q.y), (cx + side, attend.top))
        arrow(ax, (cx, parts["V"].bottom), (cx, attend.top))
        outs.append(grid(ax, cx, 2.55, T, [color] * d_k, cell))
        arrow(ax, (cx, attend.bottom), (cx, outs[-1].top))
        label(ax, cx - 0.55, 2.55, "T × $d_k$", SMALL, color=NOTE)

    concat = grid(ax, 5.6, 0.85, T, bands, cell)
    for i, out in enumerate(outs):
        arrow(ax, (out.x, out.bottom), (concat.left + (i * d_k + d_k / 2) * cell, concat.top), color=HEADS[i],
              lw=1.4)
    label(ax, concat.left - 0.2, concat.y, "concatenate\nT × $d_{model}$", SMALL, ha="right")
    wo = box(ax, 7.3, 0.85, 0.62, 0.4, "$W^O$", "attention")
    arrow(ax, (concat.right + 0.05, wo.y), (wo.left, wo.y))
    out = grid(ax, 9.0, wo.y, T, grey, cell)
    arrow(ax, (wo.right, wo.y), (out.left - 0.05, wo.y))
    label(ax, out.x, out.bottom - 0.25, "output, T × $d_{model}$", SMALL)
    return trimmed(fig)


def post_and_pre_ln() -> Figure:
    """One block each way, F being self-attention and then the FFN: LayerNorm(x + F(x)) beside
    x + F(LayerNorm(x)). The residual path is drawn thick so that what lies on it can be seen at a glance:
    a LayerNorm per sub-layer on the left, nothing but additions on the right.
    """
    fig, ax = canvas(10, 8.6)
    pitch, h, w, thick = 0.66, 0.42, 2.1, 2.6

    def y(row: float) -> float:
        return 6.6 - row * pitch

    for cx, title, formula, pre in ((2.5, "post-LN (2017, GPT-1, BERT)", "x = LayerNorm(x + F(x))", False),
                                    (7.5, "pre-LN (GPT-2)", "x = x + F(LayerNorm(x))", True)):
        stream, branch = cx - 1.1, cx + 0.8
        label(ax, cx, 8.35, title, 14, weight="bold")
        label(ax, cx, 7.9, formula, color=NOTE)
        last = label(ax, stream, y(-1.45), "x")
        inside = [Box(stream, y(0), 0, 0)]  # the frame reaches up to the first split
        for first, text, kind in ((0, "self-attention", "attention"), (4, "feed-forward network", "ffn")):
            split = y(first)
            if pre:
                norm = box(ax, branch, y(first + 1), w, h, "LayerNorm", "norm")
                sub = box(ax, branch, y(first + 2), w, h, text, kind)
                down(ax, norm, sub)
                arrow(ax, (stream, split), (branch, split), (branch, norm.top))
                add = plus(ax, stream, y(first + 3))
            else:
                sub = box(ax, branch, y(first + 1), w, h, text, kind)
                arrow(ax, (stream, split), (branch, split), (branch, sub.top))
                add = plus(ax, stream, y(first + 2))
            arrow(ax, (branch, sub.bottom), (branch, add.y), (add.right, add.y))
            arrow(ax, (stream, last.bottom), (stream, add.top), lw=thick)
            last = add
            if not pre:
                norm = box(ax, stream, y(first + 3), 1.3, h, "LayerNorm", "norm")
                arrow(ax, (stream, add.bottom), (stream, norm.top), lw=thick)
                last = norm
            inside += [sub, add, norm]
        frame(ax, inside, "one block, × N", "right", side=-0.25)
        label(ax, stream - 0.3, y(5.5), "residual path", SMALL, color=NOTE, rotation=90)
        nxt = label(ax, stream, y(8.3), "next block")
        arrow(ax, (stream, last.bottom), (stream, nxt.top), lw=thick)
        if pre:
            final = box(ax, stream, y(9.6), 1.7, h, "final LayerNorm", "norm")
            arrow(ax, (stream, nxt.bottom), (stream, final.top), lw=thick)
            label(ax, stream + 0.2, (nxt.bottom + final.top) / 2, "after the last block only", SMALL,
                  color=NOTE, ha="left")
    return trimmed(fig)


def tokens(ax, x: float, y: float, words: list[str], cell: float) -> list[Box]:
    """A sequence as a row of small cells, one per token, centred on (x, y)."""
    left = x - cell * len(words) / 2
    return [box(ax, left + (i + 0.5) * cell, y, cell - 0.06, 0.36, word, "data", SMALL)
            for i, word in enumerate(words)]


def mask(ax, x: float, y: float, allowed: list[list[bool]], cell: float = 0.17) -> Box:
    """A small attention mask: row i is query i, column j key j, filled where the query may read the key."""
    n = len(allowed)
    colors = {True: PARTS["attention"][1], False: "white"}
    for i, row in enumerate(allowed):
        grid(ax, x, y + (n / 2 - i - 0.5) * cell, 1, [colors[a] for a in row], cell)
    return Box(x, y, n * cell, n * cell)


def gpt_and_bert() -> Figure:
    """The two halves of the Transformer that pages 7 and 8 describe, with the same parts side by side:
    what differs is the mask in the blocks, the segment embedding, and the heads on top."""
    fig, ax = canvas(10, 8.5)
    h, tall = 0.42, 0.66
    block, inside = "× N blocks", "(+ residuals, LayerNorm)"
    gpt_x, bert_x = 2.45, 7.5

    label(ax, gpt_x, 8.5, "GPT: decoder only", 14, weight="bold")
    words = ["The", "cat", "sat", "on", "the"]
    inputs = tokens(ax, gpt_x, 7.95, words, 0.8)
    emb = box(ax, gpt_x, 6.9, 4.2, h, "token + position embeddings", "embedding")
    for word in inputs:
        down(ax, word, emb)
    attn, ffn = stack(ax, gpt_x, 5.62, 4.0, [
        ("causal self-attention: each position\nsees only itself and earlier ones", "attention", tall),
        ("feed-forward network", "ffn", h)])
    layers = frame(ax, [attn, ffn], block, note=inside)
    down(ax, emb, attn)
    head = box(ax, gpt_x, layers.bottom - 0.6, 4.2, h, "linear, tied to the token table", "head")
    down(ax, ffn, head)
    outputs = tokens(ax, gpt_x, head.bottom - 0.6, words[1:] + ["mat"], 0.8)
    for out in outputs:
        arrow(ax, (out.x, head.bottom), (out.x, out.top))
    label(ax, gpt_x, outputs[0].bottom - 0.3, "the next token, at every position", SMALL, color=NOTE)

    label(ax, bert_x, 8.5, "BERT: encoder only", 14, weight="bold")
    words = ["[CLS]", "dogs", "[MASK]", "[SEP]", "cats", "purr", "[SEP]"]
    inputs = tokens(ax, bert_x + 0.1, 7.95, words, 0.66)
    for word, segment in zip(inputs, "AAAABBB", strict=True):
        label(ax, word.x, word.bottom - 0.17, segment, SMALL, color=NOTE)
    label(ax, inputs[0].left - 0.08, inputs[0].bottom - 0.17, "segment", SMALL, color=NOTE, ha="right")
    emb = box(ax, bert_x, 6.9, 4.6, h, "token + position + segment embeddings", "embedding")
    for word in inputs:
        arrow(ax, (word.x, word.bottom - 0.32), (word.x, emb.top))
    attn, ffn = stack(ax, bert_x, 5.62, 4.4, [
        ("bidirectional self-attention: every\nposition sees every position", "attention", tall),
        ("feed-forward network", "ffn", h)])
    layers = frame(ax, [attn, ffn], block, note=inside)
    down(ax, emb, attn)
    cls, masked = inputs[0], inputs[2]
    heads_y, high = layers.bottom - 0.87, 0.9
    nsp = box(ax, bert_x - 1.2, heads_y, 2.2, high, "pooler + NSP\nclassifier on [CLS]", "head")
    mlm = box(ax, bert_x + 1.25, heads_y, 2.3, high,
              "MLM head at the chosen\n15% (here [MASK]),\ntied to the token table", "head")
    mid = (layers.bottom + nsp.top) / 2
    arrow(ax, (cls.x, ffn.bottom), (cls.x, mid), (nsp.x, mid), (nsp.x, nsp.top))
    arrow(ax, (masked.x, ffn.bottom), (masked.x, mid), (mlm.x, mid), (mlm.x, mlm.top))
    is_next = label(ax, nsp.x, nsp.bottom - 0.45, "IsNext or NotNext")
    original = label(ax, mlm.x, mlm.bottom - 0.45, "bark: the original token")
    down(ax, nsp, is_next)
    down(ax, mlm, original)

    n_gpt, n_bert = 5, 7
    insets = ((gpt_x - 1.0, [[j <= i for j in range(n_gpt)] for i in range(n_gpt)],
               "causal mask: query i\nreads keys 0 … i"),
              (bert_x - 1.2, [[True] * n_bert for _ in range(n_bert)],
               "no causal mask: every\nquery reads every key"))
    for cx, allowed, text in insets:
        inset = mask(ax, cx, outputs[0].bottom - 1.25, allowed)
        label(ax, inset.x, inset.top + 0.15, "key →", SMALL, color=NOTE)
        label(ax, inset.left - 0.1, inset.y, "query\n↓", SMALL, color=NOTE, ha="right")
        label(ax, inset.right + 0.25, inset.y, text, SMALL, ha="left")
    return trimmed(fig)
