"""finetune.py's pieces: the §3.3 input transformation, the auxiliary language-modelling loss, and the
shared-rare-words baseline."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from common.data.tokenizers import CharTokenizer
from phase1_foundation.project1_gpt.download_data import SPECIAL_TOKENS, Question
from phase1_foundation.project1_gpt.finetune import (
    MultipleChoiceGPT,
    bigram_accuracy,
    chosen_accuracy,
    encode,
    lm_loss,
    rarity,
    trim,
    word_overlap_accuracy,
    word_overlap_choice,
    words,
    zero_shot_accuracy,
)
from phase1_foundation.project1_gpt.model import GPT, GPTConfig

TOKENIZER = CharTokenizer.train(["abcdefgh xyz."], SPECIAL_TOKENS)
START, DELIM, EXTRACT = (TOKENIZER.token_to_id(t) for t in ("<|start|>", "<|delim|>", "<|extract|>"))


def test_each_candidate_becomes_start_context_delim_candidate_extract():
    questions = [Question("abc", ["xy", "z."], 1), Question("de", ["f", "gh"], 0)]
    ids, extract_at, answers = encode(questions, TOKENIZER, block_size=32)
    assert ids.shape == (2, 2, 9) and answers.tolist() == [1, 0]  # (N, K, T): the longest is 9 tokens
    first = ids[0, 0, : extract_at[0, 0] + 1].tolist()
    assert first == [START, *TOKENIZER.encode("abc"), DELIM, *TOKENIZER.encode(" xy"), EXTRACT]
    assert extract_at.tolist() == [[8, 8], [6, 7]]
    assert (ids[1, 0, 7:] == 0).all()  # padded after <|extract|>
    assert trim(ids[1:], extract_at[1:]).shape == (1, 2, 8)  # a batch is cut to its own longest


def test_a_long_context_is_cut_from_the_left_so_the_ending_and_extract_survive():
    questions = [Question("abcdefgh" * 4, ["xyz."], 0)]
    ids, extract_at, _ = encode(questions, TOKENIZER, block_size=16)
    row = ids[0, 0].tolist()
    assert len(row) == 16 and extract_at.item() == 15
    assert row[0] == START and row[-1] == EXTRACT and row[-7] == DELIM
    assert TOKENIZER.decode(row[1:-7]) == ("abcdefgh" * 4)[-8:]  # the context's last 8 characters


def test_lm_loss_predicts_each_next_token_up_to_extract_and_ignores_the_padding():
    ids = torch.tensor([[[5, 6, 7, 8, 0, 0]], [[5, 6, 7, 8, 9, 7]]])  # (B=2, K=1, T=6)
    extract_at = torch.tensor([[3], [5]])
    logits = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(0))  # (B*K, T, V)
    expected = torch.cat([
        F.cross_entropy(logits[0, :3], ids[0, 0, 1:4], reduction="none"),  # 6, 7, 8: then <|extract|>
        F.cross_entropy(logits[1, :5], ids[1, 0, 1:6], reduction="none"),
    ]).mean()
    torch.testing.assert_close(lm_loss(logits, ids, extract_at), expected)
    garbage = ids.clone()
    garbage[0, 0, 4:] = 11  # what follows <|extract|> cannot change the loss
    torch.testing.assert_close(lm_loss(logits, garbage, extract_at), expected)


def test_the_head_reads_each_candidates_extract_state():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=8,
                        dropout=0.0))
    model = MultipleChoiceGPT(gpt, dropout=0.0).eval()
    ids, extract_at, _ = encode([Question("abc", ["xy", "z."], 1)], TOKENIZER, block_size=16)
    with torch.no_grad():
        scores, logits = model(ids, extract_at)  # (1, 2), (2, T, V)
        states = gpt.hidden_states(ids[0])  # (2, T, C)
        expected = model.head(states[torch.arange(2), extract_at[0]]).view(1, 2)
    torch.testing.assert_close(scores, expected)
    assert logits.shape == (2, ids.size(-1), TOKENIZER.vocab_size)


# Four training contexts: "the", "of" and "river" are common, "danube" and "vienna" appear in none.
TRAIN = [Question(text, ["", ""], 0) for text in (
    "The mouth of the river.", "The history of the city.", "The river of the north.", "The end of the war.")]


def test_words_are_lower_cased_and_counted_once():
    assert words("The Danube, the river; 1857.") == {"the", "danube", "river", "1857"}


def test_rarity_is_the_inverse_document_frequency_over_the_training_contexts():
    weight = rarity([q.context for q in TRAIN])
    assert weight("the") == weight("of") == 0.0  # in all 4 contexts: log(5 / 5)
    assert weight("river") == pytest.approx(math.log(5 / 3))  # in 2 of them
    assert weight("danube") == weight("vienna") == pytest.approx(math.log(5))  # in none: the rarest


def test_the_rule_counts_rare_shared_words_not_shared_words():
    weight = rarity([q.context for q in TRAIN])
    context = "The Danube is the river of Vienna."
    common = "The river of the south."  # shares three words: the, of (in every context), river (in half)
    rare = "Vienna lies on it."  # shares one word, but one no training context has
    assert word_overlap_choice(Question(context, [common, rare], 1), weight) == 1
    assert word_overlap_choice(Question(context, [rare, common], 0), weight) == 0


def test_a_tie_goes_to_the_first_candidate():
    weight = rarity([q.context for q in TRAIN])
    nothing_shared = Question("The Danube.", ["A cat.", "A dog."], 1)
    the_same_shared = Question("The Danube.", ["Danube!", "danube?"], 1)
    assert word_overlap_choice(nothing_shared, weight) == word_overlap_choice(the_same_shared, weight) == 0


def test_word_overlap_accuracy_scores_the_rule_on_the_given_questions():
    questions = [Question("The Danube in Vienna.", ["Vienna again.", "Something else."], 0),
                 Question("The Danube in Vienna.", ["Something else.", "The Danube again."], 1),
                 Question("The Danube in Vienna.", ["A cat.", "A dog."], 1)]  # a tie, so the first: wrong
    assert word_overlap_accuracy(questions, TRAIN) == pytest.approx(2 / 3)


def test_the_best_scored_candidate_is_chosen_and_a_tie_goes_to_the_first():
    questions = [Question("c", ["a", "b"], 0), Question("c", ["a", "b"], 1), Question("c", ["a", "b"], 1)]
    assert chosen_accuracy([[-1.0, -2.0], [-3.0, -1.0], [-1.0, -1.0]], questions) == pytest.approx(2 / 3)


def test_the_bigram_rule_picks_the_candidate_whose_pairs_the_training_text_holds():
    tokenizer = CharTokenizer.train(["abcdefgh xyz."], SPECIAL_TOKENS)
    train_tokens = np.array(tokenizer.encode("abcdefgh. " * 50))
    questions = [Question("x", [" abcd", " dcba"], 0), Question("x", [" hgfe", " efgh"], 1)]
    assert bigram_accuracy(questions, tokenizer, train_tokens, block_size=32) == 1.0
    reversed_answers = [Question(q.context, q.candidates, 1 - q.answer) for q in questions]
    assert bigram_accuracy(reversed_answers, tokenizer, train_tokens, block_size=32) == 0.0


def test_zero_shot_scores_each_candidate_by_its_mean_log_probability_after_the_context():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16,
                        dropout=0.0)).eval()
    question = Question("abc", ["de", "fgh"], 0)
    means = []
    for candidate in question.candidates:
        ids = torch.tensor([TOKENIZER.encode(question.context + " " + candidate)])
        n = len(TOKENIZER.encode(" " + candidate))
        targets = ids.clone()
        targets[:, : ids.size(1) - n] = -100  # only the candidate's own tokens are scored
        means.append(-gpt(ids[:, :-1], targets[:, 1:])[1].item())
    best = means.index(max(means))
    assert zero_shot_accuracy(gpt, [question], TOKENIZER, torch.device("cpu")) == float(best == 0)
    flipped = Question(question.context, question.candidates, 1)
    assert zero_shot_accuracy(gpt, [flipped], TOKENIZER, torch.device("cpu")) == float(best == 1)
