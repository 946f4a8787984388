"""finetune.py: BERT's fine-tuning input and head, the comparison it prints, Ctrl-C and resume, the tasks it
reads (the shipped sentences, the downloads through a local server, your own file) and released weights."""

import hashlib
import io
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from common.errors import CourseError
from phase1_foundation.project3_contextual_embeddings import finetune, finetune_data, train
from phase1_foundation.project3_contextual_embeddings.finetune import BertClassifier, pair_input
from phase1_foundation.project3_contextual_embeddings.finetune_data import Example, Pinned
from phase1_foundation.project3_contextual_embeddings.hf_weights import from_hf
from phase1_foundation.project3_contextual_embeddings.model import BERT, BertConfig

CLS, SEP = 2, 3
QUICK = ["--FT_SEEDS=1,2", "--FT_FOLDS=2", "--FT_LEARNING_RATES=1e-3,1e-4", "--FT_EPOCHS=1"]


# --- the input and the head --------------------------------------------------------------------------------

def test_pairs_read_as_cls_a_sep_b_sep_with_segments():
    assert pair_input([7, 8], None, 16, CLS, SEP) == ([CLS, 7, 8, SEP], [0, 0, 0, 0])
    assert pair_input([7, 8], [9], 16, CLS, SEP) == ([CLS, 7, 8, SEP, 9, SEP], [0, 0, 0, 0, 1, 1])
    # too long: the longer text loses its last token, b on a tie, until [CLS] a [SEP] b [SEP] fits
    ids, segments = pair_input([10, 11, 12, 13], [20, 21, 22, 23, 24], 7, CLS, SEP)
    assert ids == [CLS, 10, 11, SEP, 20, 21, SEP] and segments == [0, 0, 0, 0, 1, 1, 1]
    ids, _ = pair_input([10, 11, 12], [20, 21, 22, 23], 8, CLS, SEP)  # 3 + 4 > 5: b, then b again on the tie
    assert ids == [CLS, 10, 11, 12, SEP, 20, 21, SEP]
    assert pair_input(list(range(10, 30)), None, 5, CLS, SEP)[0] == [CLS, 10, 11, 12, SEP]


def test_the_classifier_reads_the_pooled_cls_state():
    torch.manual_seed(0)
    bert = BERT(BertConfig(vocab_size=60, block_size=16, n_layer=1, n_head=2, n_embd=16, dropout=0.0))
    model = BertClassifier(bert, 3, dropout=0.1).eval()
    ids, segments, real = torch.randint(5, 60, (2, 9)), torch.zeros(2, 9, dtype=torch.long), torch.ones(2, 9)
    real[1, 5:] = 0
    h = bert.hidden_states(ids, segments, real)
    expected = model.classifier(torch.tanh(bert.pooler.dense(h[:, 0])))  # eval: no dropout
    torch.testing.assert_close(model(ids, segments, real), expected)
    changed = ids.clone()
    changed[1, 6:] = 7  # padding: no real token reads it, the scores stay
    torch.testing.assert_close(model(changed, segments, real), expected)
    segments[:, 4:] = 1  # sentence B: the scores change
    assert not torch.allclose(model(ids, segments, real), expected)


def test_a_frozen_encoder_leaves_bert_as_it_was(monkeypatch):
    torch.manual_seed(0)
    encoder = BERT(BertConfig(vocab_size=60, block_size=16, n_layer=1, n_head=2, n_embd=16, dropout=0.0))
    data = {"input_ids": torch.randint(5, 60, (8, 6)), "segment_ids": torch.zeros(8, 6, dtype=torch.long),
            "attention_mask": torch.ones(8, 6, dtype=torch.long), "labels": torch.tensor([0, 1] * 4)}
    cfg = finetune.load_config(finetune.config, ["--FT_LEARNING_RATES=1e-2", "--FT_EPOCHS=2",
                                                 "--FT_BATCH_SIZE=4"])
    captured = []
    monkeypatch.setattr(finetune, "label_scores",
                        lambda model, *args: captured.append(model) or torch.zeros(len(args[1]), 2))
    split = (torch.arange(4), torch.arange(4, 6), torch.arange(6, 8))
    for train_encoder in (False, True):
        finetune.one_run(encoder, "pretrained", 1, data, split, 2, cfg, torch.device("cpu"),
                         finetune.GracefulInterrupt(), SimpleBar(), train_encoder)
        model = captured[-1]
        same = [torch.equal(p, q) for p, q in zip(model.bert.parameters(), encoder.parameters(), strict=True)]
        assert all(same) if not train_encoder else not all(same)


class SimpleBar:
    def update(self):
        pass


def test_softmax_is_not_applied_twice():
    logits, labels = torch.tensor([[2.0, 0.0], [0.0, 3.0]]), torch.tensor([0, 1])
    expected = -(torch.log_softmax(logits, -1)[[0, 1], [0, 1]]).mean()
    torch.testing.assert_close(finetune.classifier_loss(logits, labels), expected)


# --- the splits and the rules without a model ------------------------------------------------------------

def test_folds_test_every_example_once_stratified_with_dev_held_out_of_training():
    examples = [Example(f"s{i}", None, "a" if i < 30 else "b") for i in range(50)]
    task = finetune_data.Task("t", "", examples, None)
    cfg = finetune.load_config(finetune.config, ["--FT_FOLDS=5", "--FT_DEV_FRACTION=0.25"])
    examples, parts = finetune.splits(task, cfg)
    tested = torch.cat([test for _, _, test in parts]).tolist()
    assert sorted(tested) == list(range(50))  # every example tested once
    for learn_from, dev, test in parts:
        assert not set(learn_from.tolist()) & set(dev.tolist())
        assert not set(learn_from.tolist() + dev.tolist()) & set(test.tolist())
        assert len(learn_from) + len(dev) + len(test) == 50 and len(dev) == 10
        assert sum(examples[i].label == "a" for i in test) == 6  # 30 of 50 are "a": 6 of each fold's 10


def test_a_task_with_a_test_split_keeps_only_the_training_examples_it_takes():
    train = [Example(f"s{i}", None, "ab"[i % 2]) for i in range(100)]
    task = finetune_data.Task("t", "", train, [Example("x", None, "a"), Example("y", None, "b")])
    cfg = finetune.load_config(finetune.config, ["--FT_TRAIN_EXAMPLES=20", "--FT_DEV_FRACTION=0.2"])
    examples, [(rows, dev, test)] = finetune.splits(task, cfg)
    assert len(examples) == 22 and len(rows) == 16 and len(dev) == 4
    assert [examples[i] for i in test] == task.test


def test_naive_bayes_counts_words_per_label_plus_one():
    train = [Example("good fun", None, "pos"), Example("good", None, "pos"), Example("dull fun", None, "neg")]
    # P(pos) 2/3, P(good|pos) = (2+1)/(3+3), P(dull|pos) = 1/6
    # P(neg) 1/3, P(good|neg) = (0+1)/(2+3), P(dull|neg) = 2/5
    # "good dull": pos 2/3 * 3/6 * 1/6 = 0.056 > neg 1/3 * 1/5 * 2/5 = 0.027
    # "dull dull": neg 1/3 * 2/5 * 2/5 = 0.053 > pos 0.019
    test = [Example("good dull", None, "?"), Example("dull dull unseen", None, "?")]
    assert finetune.naive_bayes(train, test, ["neg", "pos"]) == [1, 0]
    assert finetune.commoner_label(train, test, ["neg", "pos"]) == [1, 1]


def test_the_bootstrap_resamples_every_rule_alike():
    correct = {"a": torch.tensor([1.0, 0, 1, 0]).numpy(), "b": torch.tensor([1.0, 0, 1, 0]).numpy()}
    resampled = finetune.bootstrap(correct, seed=0)
    assert (resampled["a"] == resampled["b"]).all() and len(resampled["a"]) == finetune.RESAMPLES


@pytest.mark.parametrize("setting, message", [
    ("--FT_FROM=pretrained,finetuned", "--FT_FROM takes"), ("--FT_FOLDS=1", "--FT_FOLDS needs 2"),
    ("--FT_DEV_FRACTION=1", "between 0 and 1"), ("--FT_SEEDS=", "at least"),
])
def test_a_setting_that_cannot_work_is_one_line(setting, message):
    with pytest.raises(CourseError, match=message):
        finetune.main([setting])


# --- the comparison, end to end ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("finetune")
    train.main([*tiny, f"--OUT_DIR={out_dir}"])
    return [*tiny, f"--OUT_DIR={out_dir}"]


def test_finetune_scores_every_sentence_once_beside_the_baselines(trained, capsys):
    results = finetune.main([*trained, *QUICK])
    printed = capsys.readouterr().out
    for line in ("200 examples (2-fold cross-validation, every example tested once); neg 100, pos 100",
                 "commoner label (no model)", "naive Bayes, bag of words", "BERT from random weights",
                 "BERT pre-trained (step 20)", "pre-trained minus random weights",
                 "learning rate chosen on dev, pretrained"):
        assert line in printed
    assert results["commoner label"]["accuracy"] == 0.5  # stratified folds: a tie, every fold
    assert 0.5 < results["naive Bayes"]["accuracy"] < 0.8  # words carry sentiment, a little, at 100 examples
    for start in ("pretrained", "scratch"):
        assert len(results[start]["seeds"]) == 2 and sum(results[start]["learning_rates"].values()) == 4
        low, high = results[start]["interval"]
        assert low <= results[start]["accuracy"] <= high
    saved = json.loads((trained_dir(trained) / "finetune_polarity.json").read_text())
    assert len(saved["runs"]) == 8 and all(len(run["chosen"]) == 100 for run in saved["runs"].values())


def trained_dir(settings):
    from pathlib import Path
    return Path(next(s for s in settings if s.startswith("--OUT_DIR=")).split("=", 1)[1])


def test_ctrl_c_keeps_the_finished_runs_and_resume_ends_as_one_run(trained, tmp_path, monkeypatch, capsys,
                                                                   interrupt_at):
    whole = finetune.main([*trained, *QUICK])
    monkeypatch.setattr(finetune, "GracefulInterrupt", interrupt_at(15))
    with pytest.raises(SystemExit) as stop:
        finetune.main([*trained, *QUICK])
    assert stop.value.code == 0 and "--RESUME=latest" in capsys.readouterr().out
    saved = json.loads((trained_dir(trained) / "finetune_polarity.json").read_text())
    assert 0 < len(saved["runs"]) < 8
    monkeypatch.undo()
    assert finetune.main([*trained, *QUICK, "--RESUME=latest"]) == whole
    with pytest.raises(CourseError, match="other settings .*FT_EPOCHS"):
        finetune.main([*trained, *QUICK, "--RESUME=latest", "--FT_EPOCHS=2"])
    (trained_dir(trained) / "finetune_polarity.json").write_text("[1, 2]")
    with pytest.raises(CourseError, match="not a file finetune.py wrote"):
        finetune.main([*trained, *QUICK, "--RESUME=latest"])


def test_a_task_file_of_pairs_is_read_and_scored(trained, tmp_path):
    rows = [f"the cat sat {i}\tthe cat sat {i}\tsame" if i % 2 else f"a dog ran {i}\tthe sea is {i}\tother"
            for i in range(24)]
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    results = finetune.main([*trained, *QUICK, f"--TASK_FILE={tmp_path / 'pairs.tsv'}", "--FT_SEEDS=1"])
    assert results["naive Bayes"]["accuracy"] == 1.0  # the words give the label away
    assert (trained_dir(trained) / "finetune_pairs.json").exists()


def test_fine_tuning_learns_a_label_that_one_word_gives_away(trained, tmp_path):
    """A control: where a word decides the label, the classifier must find it, from random weights too."""
    rows = [f"{'a good' if i % 2 else 'a bad'} day number {i}\t{'yes' if i % 2 else 'no'}" for i in range(40)]
    (tmp_path / "word.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    results = finetune.main([*trained, f"--TASK_FILE={tmp_path / 'word.tsv'}", "--FT_SEEDS=1", "--FT_FOLDS=2",
                             "--FT_LEARNING_RATES=1e-3", "--FT_EPOCHS=30", "--FT_BATCH_SIZE=8"])
    assert results["scratch"]["accuracy"] > 0.9 and results["pretrained"]["accuracy"] > 0.9


@pytest.mark.parametrize("text, message", [
    ("a\tpos\nb\tneg\nc\n", "row 3 of .* has 1 tab-separated fields"),
    ("a\tpos\nb\tc\tneg\n", "row 2 of .* like the rows before it"),
    ("a\tpos\n\t neg\n", "row 2 of .* one of them empty"),
    ("sentence\tlabel\n" + "a\tpos\nb\tneg\n" * 5, "label 'label' .* row 1.* has 1 example.*header"),
    ("a\tpos\nb\tpos\n", "one label"),
])
def test_a_malformed_task_file_is_one_line_naming_the_row(tmp_path, text, message):
    path = tmp_path / "task.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CourseError, match=message):
        finetune_data.read_task_file(path, folds=5)


def test_the_offline_task_is_pang_and_lees_200_sentences():
    task = finetune_data.polarity()
    assert len(task.train) == 200 and task.test is None and task.labels == ["neg", "pos"]
    assert task.train[0] == Example("simplistic , silly and tedious .", None, "neg")
    assert any("—" in e.text for e in task.train)  # Windows-1252's em dash, read as one


# --- the downloads, through a local server -----------------------------------------------------------------

def sst2_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SST-2/train.tsv", "sentence\tlabel\nit 's a charming film \t1\na dull mess \t0\n")
        archive.writestr("SST-2/dev.tsv", "sentence\tlabel\nwonderful \t1\n")
    return buffer.getvalue()


MRPC = ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t1\t2\tHe said "yes" .\tHe agreed .\n0\t3\t4\tShares fell .\tIt rained .\n').encode()


@pytest.fixture
def server():
    files = {"/SST-2.zip": sst2_zip(), "/msr_paraphrase_train.txt": MRPC, "/msr_paraphrase_test.txt": MRPC}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path)
            if body is None:
                return self.send_error(404)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", files
    httpd.shutdown()


def pinned(url: str, body: bytes) -> Pinned:
    return Pinned(url, len(body), hashlib.sha256(body).hexdigest())


def test_sst2_and_mrpc_download_once_and_parse(server, tmp_path, monkeypatch):
    base, files = server
    for name, path in (("SST2_ZIP", "/SST-2.zip"), ("MRPC_TRAIN", "/msr_paraphrase_train.txt"),
                       ("MRPC_TEST", "/msr_paraphrase_test.txt")):
        monkeypatch.setattr(finetune_data, name, pinned(base + path, files[path]))
    sst2 = finetune_data.load_task("sst2", None, tmp_path, folds=5)
    assert sst2.train == [Example("it 's a charming film ", None, "positive"),
                          Example("a dull mess ", None, "negative")]
    assert sst2.test == [Example("wonderful ", None, "positive")]
    mrpc = finetune_data.load_task("mrpc", None, tmp_path, folds=5)
    assert mrpc.train[0] == Example('He said "yes" .', "He agreed .", "paraphrase")  # a quote is text
    assert mrpc.labels == ["different", "paraphrase"] and len(mrpc.test) == 2


@pytest.mark.parametrize("wrong", ["size", "sha256"])
def test_a_download_that_does_not_match_its_pin_leaves_nothing(server, tmp_path, monkeypatch, wrong):
    base, files = server
    body = files["/SST-2.zip"]
    pin = pinned(base + "/SST-2.zip", body)
    monkeypatch.setattr(finetune_data, "SST2_ZIP", pin._replace(**{wrong: pin.size + 1 if wrong == "size"
                                                                     else "0" * 64}))
    with pytest.raises(CourseError, match="error:"):
        finetune_data.load_task("sst2", None, tmp_path, folds=5)
    assert list(tmp_path.rglob("*")) == []


def test_the_pins_are_the_published_ones():
    """The sizes and sha256 tensorflow-datasets publishes (../shared/data/downstream_checksums.tsv)."""
    from common.files import REPO_ROOT

    published = REPO_ROOT.parent / "shared" / "data" / "downstream_checksums.tsv"
    if not published.exists():
        pytest.skip(f"{published} is not here: the pins cannot be compared")
    rows = {url: (int(size), sha) for url, size, sha, _ in
            (line.split("\t") for line in published.read_text().splitlines() if not line.startswith("#"))}
    for pin in (finetune_data.SST2_ZIP, finetune_data.MRPC_TRAIN, finetune_data.MRPC_TEST):
        assert rows[pin.url] == (pin.size, pin.sha256)


# --- released weights --------------------------------------------------------------------------------------

def test_a_transformers_bert_model_folder_is_fine_tuned(trained, tmp_path):
    """A small random BertModel (no pre-training heads) saved as transformers saves it, with a vocab.txt."""
    transformers = pytest.importorskip("transformers")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz.,'", "the", "film",
             "is", "good", "bad", "##s"]
    torch.manual_seed(0)
    hf = transformers.BertModel(transformers.BertConfig(
        vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)).eval()
    hf.save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    ours = from_hf(tmp_path, heads=False).eval()
    ids, segments = torch.tensor([[2, 30, 31, 3, 32, 33, 3]]), torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    expected = hf(input_ids=ids, token_type_ids=segments)
    torch.testing.assert_close(ours.hidden_states(ids, segments), expected.last_hidden_state,
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.pooler(ours.hidden_states(ids, segments)[:, 0]), expected.pooler_output,
                               atol=1e-5, rtol=1e-5)
    with pytest.raises(CourseError, match="cls.predictions"):
        from_hf(tmp_path)  # pre-training's heads are needed for MLM and NSP
    results = finetune.main([*trained, *QUICK, f"--HF_DIR={tmp_path}", "--FT_SEEDS=1"])
    assert "pretrained" in results and "scratch" in results
