"""lab/data/preprocess_conll.py reads the three formats the project trains on into the same sentences."""

from __future__ import annotations


def test_conll2003_wnut17_and_conllu_give_words_tags_and_entities(tmp_path, script):
    pre = script("data.preprocess_conll")
    conll = tmp_path / "a.txt"
    conll.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n")
    assert pre.read_conll(conll) == [[[("EU", "NNP", "B-ORG"), ("rejects", "VBZ", "O")], [("Peter", "NNP", "B-PER")]]]
    wnut = tmp_path / "w.conll"
    wnut.write_text("@paul\tO\nLondon\tB-location\n\t\nhi\tO\n")
    assert pre.read_conll(wnut, "wnut17") == [
        [[("@paul", None, "O"), ("London", None, "B-location")], [("hi", None, "O")]]
    ]
    ud = tmp_path / "u.conllu"
    row = "{}\t{}\t_\t{}\t_\t_\t0\troot\t_\t_\n"
    ud.write_text(
        "# newdoc id = d1\n# sent_id = 1\n"
        + "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"  # a multiword token: its words follow
        + row.format(1, "do", "AUX")
        + row.format(2, "n't", "PART")
        + "2.1\tgo\t_\tVERB\t_\t_\t_\t_\t_\t_\n"  # an empty node: no word of the sentence
        + row.format(3, "10 000", "NUM")  # a FORM with a space stays one word
        + "\n# newdoc id = d2\n"
        + row.format(1, "Yes", "INTJ")
        + "\n"
    )
    assert pre.read_conll(ud, "conllu") == [
        [[("do", "AUX", "O"), ("n't", "PART", "O"), ("10 000", "NUM", "O")]],
        [[("Yes", "INTJ", "O")]],
    ]
