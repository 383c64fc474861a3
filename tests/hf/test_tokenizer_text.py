"""Raw text in the HF face: split the way spaCy's tokenizer for the tokenizer's `lang` splits it;
pre-tokenized input is used as given; the real transformers pipeline sees spaCy's words."""

from __future__ import annotations

import numpy
import pytest
import spacy
import torch
from transformers import AutoTokenizer, pipeline

import spacy_elmo  # noqa: F401  (registers the Auto classes)
from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoTokenizer
from spacy_elmo.characters import batch_to_char_ids
from spacy_elmo.hf.tokenization_elmo import spacy_word_splitter


def _ids(words_batch, max_chars=50):
    return torch.from_numpy(batch_to_char_ids(words_batch, max_chars)[0])


def test_raw_text_is_split_like_spacy():
    tokenizer = ElmoTokenizer()
    text = "Don't stop: U.S. prices rose 3.5% (in 2024)!"
    words = [t.text for t in spacy.blank("en")(text)]
    assert len(words) > len(text.split())  # spaCy splits more than whitespace does
    assert tokenizer.tokenize(text) == words
    assert torch.equal(tokenizer(text)["input_ids"], _ids([words]))
    assert tokenizer("The cat sat.")["input_ids"].shape[:2] == (1, 4)
    assert tokenizer.tokenize("two  spaces\n") == ["two", "spaces"]  # whitespace tokens dropped


def test_list_of_strings_is_a_batch_unless_split_into_words():
    tokenizer = ElmoTokenizer()
    batch = tokenizer(["The cat sat.", "Hello!"])
    assert batch["attention_mask"].tolist() == [[True] * 4, [True, True, False, False]]
    one = tokenizer(["The", "cat", "sat."], is_split_into_words=True)
    assert torch.equal(one["input_ids"], _ids([["The", "cat", "sat."]]))  # "sat." not split
    lists = tokenizer([["The", "cat", "sat."], ["Hello!"]])
    assert torch.equal(lists["input_ids"], _ids([["The", "cat", "sat."], ["Hello!"]]))
    assert torch.equal(tokenizer([["a", "b"]], is_split_into_words=True)["input_ids"], _ids([["a", "b"]]))
    with pytest.raises(ValueError, match="is_split_into_words=True expects a list of words"):
        tokenizer("The cat", is_split_into_words=True)
    with pytest.raises(ValueError, match="item 1: a str in a batch of word lists"):
        tokenizer([["a"], "b c"])


def test_lang_is_saved_and_used(tmp_path):
    text = "我们喜欢北京。"
    zh = ElmoTokenizer(lang="zh")
    assert zh.tokenize(text) == [t.text for t in spacy.blank("zh")(text)]
    zh.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert isinstance(again, ElmoTokenizer) and again.lang == "zh"
    assert ElmoTokenizer().lang == "en"
    assert spacy_word_splitter("en") is spacy_word_splitter("en")  # built once
    with pytest.raises(ValueError, match="lang 'qq': not a language spaCy knows"):
        ElmoTokenizer(lang="qq")("text")


def test_transformers_feature_extraction_pipeline_gets_spacy_words(tiny_model_dir, tiny_model):
    extractor = pipeline("feature-extraction", model=str(tiny_model_dir))
    out = numpy.asarray(extractor("The cat sat."))
    assert out.shape == (1, 4, tiny_model.config.output_dim)
    with torch.no_grad():
        inputs = ElmoTokenizer()([["The", "cat", "sat", "."]])
        expected = tiny_model(**inputs).last_hidden_state
        exact = exact_copy(tiny_model)(**inputs).last_hidden_state
    assert_float32_error(exact, expected, out, terms=forward_terms(tiny_model.config))
    two = extractor(["The cat sat.", "Hello there!"])
    assert [numpy.asarray(o).shape[1] for o in two] == [4, 3]


def test_hf_arguments_are_honoured_or_refused():
    """padding="max_length" / truncation / max_length / pad_to_multiple_of / return_tensors act as in
    HF tokenizers; anything else is refused in one line instead of being ignored."""
    tokenizer = ElmoTokenizer()
    batch = [["a", "b", "c", "d"], ["e"]]
    padded = tokenizer(batch, padding="max_length", max_length=8)
    assert tuple(padded["input_ids"].shape) == (2, 8, 50) and padded["attention_mask"].sum().item() == 5
    cut = tokenizer(batch, truncation=True, max_length=3)
    assert tuple(cut["input_ids"].shape) == (2, 3, 50) and cut["attention_mask"].tolist() == [
        [True] * 3,
        [True, False, False],
    ]
    both = tokenizer(batch, truncation=True, padding="max_length", max_length=2)
    assert tuple(both["input_ids"].shape) == (2, 2, 50)
    assert tuple(tokenizer(batch, pad_to_multiple_of=8)["input_ids"].shape) == (2, 8, 50)
    numpy_batch = tokenizer(batch, return_tensors="np")
    assert isinstance(numpy_batch["input_ids"], numpy.ndarray)
    # padding does not change the real tokens' ids
    assert torch.equal(padded["input_ids"][:, :4], tokenizer(batch)["input_ids"])
    for kwargs, message in (
        ({"paddding": True}, r"unexpected argument\(s\) \['paddding'\]"),
        ({"padding": False}, "always pads"),
        ({"truncation": True}, "need max_length"),
        ({"max_length": 3}, "only with truncation=True or padding='max_length'"),
        ({"return_tensors": "tf"}, "return_tensors must be"),
        ({"pad_to_multiple_of": 0}, "pad_to_multiple_of must be a positive int"),
    ):
        with pytest.raises((TypeError, ValueError), match=message):
            tokenizer(batch, **kwargs)
