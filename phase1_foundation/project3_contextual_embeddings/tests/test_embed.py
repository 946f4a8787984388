"""embed.py's measurements: the sense test on a corpus built so that a trained model must pass it, the static
baseline at chance, and the untrained row being the very model training started from."""

import random

import pytest
import torch
import torch.nn.functional as F

from common.training.config import load_config
from common.training.device import seed_everything
from common.training.optim import adamw
from phase1_foundation.project3_contextual_embeddings import config, download_data, embed, train
from phase1_foundation.project3_contextual_embeddings.model import BERT, BertConfig
from phase1_foundation.project3_contextual_embeddings.pretraining_data import IGNORE, PAD_ID, mask_tokens
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer

CPU = torch.device("cpu")
NAMES = ["Anna", "Ben", "Clara", "David", "Emma", "Felix", "Grace", "Henry"]
# "record" in two senses, each always with neighbours of its own: a noun after "the", a verb after "to".
NOUN = ["{name} found the record in the old {place} .", "{name} read the record of the {place} aloud ."]
VERB = ["{name} wanted to record a new {song} today .", "{name} tried to record the {song} again ."]
PLACES = ["library", "museum", "archive", "office"]
SONGS = ["song", "album", "ballad", "tune"]


def synthetic_corpus(path, documents=40, sentences=12, seed=0):
    """Documents of sentences that use "record" as a noun or as a verb, and nothing else."""
    rng = random.Random(seed)
    text = []
    for _ in range(documents):
        lines = [rng.choice(rng.choice([NOUN, VERB])).format(name=rng.choice(NAMES), place=rng.choice(PLACES),
                                                             song=rng.choice(SONGS))
                 for _ in range(sentences)]
        text.append(" ".join(lines))
    path.write_text("\n\n\n".join(text), encoding="utf-8")  # two blank lines end a document
    return path


def train_tiny(sentences: list[embed.Sentence], vocab_size: int, steps: int, seed: int = 0) -> BERT:
    """A 2-layer, 32-wide BERT trained with the masked-LM loss alone on single sentences, seeded before it is
    built as train.py does (so embed.untrained_twin(model, seed) is its starting point)."""
    seed_everything(seed)
    width = max(len(s.ids) for s in sentences)
    model = BERT(BertConfig(vocab_size=vocab_size, block_size=width, n_layer=2, n_head=2, n_embd=32,
                            dropout=0.0, positions="rotary"))
    data = torch.full((len(sentences), width), PAD_ID)  # (S, T): [CLS] sentence [SEP] [PAD]...
    for row, s in zip(data, sentences, strict=True):
        row[: len(s.ids)] = torch.tensor(s.ids)
    optimizer = adamw(model, 3e-3, 0.01, (0.9, 0.999), CPU)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = data[torch.randint(len(data), (32,), generator=generator)]  # (32, T)
        ids, labels = mask_tokens(batch, vocab_size=vocab_size, generator=generator)  # (32, T) each
        chosen = labels != IGNORE  # (32, T)
        logits, _ = model(ids, attention_mask=(batch != PAD_ID).long(), chosen=chosen)  # (N, V)
        F.cross_entropy(logits, labels[chosen]).backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


@pytest.fixture
def records(tmp_path):
    """The synthetic corpus prepared as train.py would (its own tokenizer has a token for each word), and
    the occurrences of "record" grouped by embed.py's rule."""
    corpus = synthetic_corpus(tmp_path / "records.txt")
    data_dir = download_data.prepare(load_config(config, [f"--TEXT_FILE={corpus}", f"--DATA_DIR={tmp_path}",
                                                          "--VOCAB_SIZE=800"]))
    tokenizer = load_tokenizer(data_dir)
    sentences = embed.corpus_sentences(data_dir)
    return tokenizer, sentences, embed.sense_groups("record", sentences, tokenizer, block_size=64)


def test_trained_model_separates_senses_that_come_with_different_neighbours(records):
    tokenizer, _, groups = records
    assert int((~groups.verb).sum()) > 200 and int(groups.verb.sum()) > 200  # every sentence, one group each
    model = train_tiny([o.sentence for o in groups.occurrences], tokenizer.vocab_size, steps=300)
    trained = embed.separation(embed.contextual_vectors(model, groups.occurrences, CPU), groups.verb)
    untrained = embed.separation(
        embed.contextual_vectors(embed.untrained_twin(model, 0), groups.occurrences, CPU), groups.verb)
    # Even untrained, attention mixes the rest of the sentence in, and the two senses have different
    # sentences: within beats across by a few millionths. Training makes that a margin of several hundredths.
    assert trained["within"] - trained["across"] > 0.03
    assert trained["within"] - trained["across"] > 1000 * (untrained["within"] - untrained["across"]) > 0
    assert trained["nn_accuracy"] == 1.0 > trained["chance"]


def test_static_embedding_is_at_chance(records):
    _, sentences, groups = records
    word_vectors = embed.train_word2vec(sentences, seed=0)
    scores = embed.separation(embed.static_vectors(word_vectors, groups.occurrences), groups.verb)
    assert scores["within"] == pytest.approx(1) and scores["across"] == pytest.approx(1)
    assert scores["nn_accuracy"] == scores["chance"] == max(groups.verb.double().mean(),
                                                             1 - groups.verb.double().mean())
    same = torch.randn(100).expand(10, -1)  # one vector, ten occurrences
    for verbs, chance in ((3, 0.7), (5, 0.5), (7, 0.7)):  # equal groups too: not 0 by leaving one out
        group = torch.arange(10) < verbs
        scores = embed.separation(same, group)
        assert scores["nn_accuracy"] == scores["chance"] == chance


def test_untrained_row_is_the_model_training_started_from(tiny, tmp_path, monkeypatch):
    started = {}

    class Recorded(BERT):  # keeps the weights train.py builds, before the first step
        def __init__(self, model_config):
            super().__init__(model_config)
            started.update({name: t.clone() for name, t in self.state_dict().items()})

    monkeypatch.setattr(train, "BERT", Recorded)
    train.main([*tiny, f"--OUT_DIR={tmp_path}", "--MAX_ITERS=2", "--SEED=7"])
    model, _, _, seed, step = embed.load_model(load_config(config, [*tiny, f"--OUT_DIR={tmp_path}"]), CPU)
    assert seed == 7 and step == "step 2"  # the checkpoint's seed, not this command's (1337)
    twin = embed.untrained_twin(model, seed)
    assert twin.config == model.config and not twin.training
    assert started.keys() == twin.state_dict().keys()
    assert all(torch.equal(twin.state_dict()[name], t) for name, t in started.items())
    assert not torch.equal(model.state_dict()["blocks.0.attn.c_attn.weight"],
                           started["blocks.0.attn.c_attn.weight"])  # the trained row moved


def test_words_are_found_among_the_tokens_that_spell_them(tiny):
    tokenizer = load_tokenizer(download_data.main(tiny))
    sentence = embed.Sentence.read(tokenizer, 'The river\'s bank, "flooded" in 1927.', max_tokens=64)
    found = embed.words_in(sentence)
    assert [o.word for o in found] == ["The", "river", "s", "bank", "flooded", "in"]
    for o in found:
        assert tokenizer.decode(sentence.ids[o.tokens]).strip() == o.word
    assert sentence.tokens(1, 3) is None  # "Th" ends inside the token " The"
    mask = embed.special(tokenizer, "MASK")
    hidden = sentence.hide(found[3].tokens, mask)  # "bank" as [MASK], once for each of its tokens
    assert hidden.text == sentence.text and set(hidden.ids[found[3].tokens]) == {mask}
    assert hidden.ids[: found[3].tokens.start] == sentence.ids[: found[3].tokens.start]

    words = "one two three four five six seven eight nine ten".split()
    cut = embed.Sentence.read(tokenizer, " ".join(words), max_tokens=8)
    assert len(cut.ids) <= 8 and cut.text.split() == words[: len(cut.text.split())]  # cut between words
