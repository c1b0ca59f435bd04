"""The report's references: each work it cites, with its year (a reading holds no digit, so the years
live here, and a work's key is its first author's name). ``{{cite KEY ...}}`` in a reading renders ``(Koehn 2004; Clark et al. 2011)``; the
``{{references}}`` directive lists every work cited in the report plus the papers of the registered
schemes (``models.positional.SCHEMES``), by author."""
from __future__ import annotations

from dataclasses import dataclass

from utils.errors import UserError


@dataclass(frozen=True)
class Work:
    authors: str  # as cited: "Koehn", "Clark et al."
    year: int
    title: str
    venue: str

    @property
    def cited(self) -> str:
        return f"{self.authors} {self.year}"


WORKS = {
    # the schemes' papers (keyed by the first author of the paper models.positional names)
    "vaswani": Work("Vaswani et al.", 2017, "Attention Is All You Need", "NeurIPS"),
    "devlin": Work("Devlin et al.", 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language "
                       "Understanding", "NAACL"),
    "su": Work("Su et al.", 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding", "arXiv"),
    "press": Work("Press et al.", 2022, "Train Short, Test Long: Attention with Linear Biases Enables Input "
                      "Length Extrapolation", "ICLR"),
    "raffel": Work("Raffel et al.", 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text "
                       "Transformer", "JMLR"),
    "shaw": Work("Shaw et al.", 2018, "Self-Attention with Relative Position Representations", "NAACL"),
    "dai": Work("Dai et al.", 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
                    "ACL"),
    "he": Work("He et al.", 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled Attention", "ICLR"),
    "wei": Work("Wei et al.", 2019, "NEZHA: Neural Contextualized Representation for Chinese Language "
                    "Understanding", "arXiv"),
    "sun": Work("Sun et al.", 2022, "A Length-Extrapolatable Transformer", "arXiv (ACL 2023)"),
    "li": Work("Li et al.", 2023, "Functional Interpolation for Relative Positions Improves Long Context "
                   "Transformers", "arXiv (ICLR 2024)"),
    "kiyono": Work("Kiyono et al.", 2021, "SHAPE: Shifted Absolute Position Embedding for Transformers", "EMNLP"),
    "likhomanenko": Work("Likhomanenko et al.", 2021, "CAPE: Encoding Relative Positions with Continuous "
                             "Augmented Positional Embeddings", "NeurIPS"),
    "chi": Work("Chi et al.", 2022, "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation",
                    "NeurIPS"),
    "ruoss": Work("Ruoss et al.", 2023, "Randomized Positional Encodings Boost Length Generalization of "
                      "Transformers", "ACL"),
    "kazemnejad": Work("Kazemnejad et al.", 2023, "The Impact of Positional Encoding on Length Generalization in "
                           "Transformers", "NeurIPS"),
    "barbero": Work("Barbero et al.", 2025, "Round and Round We Go! What Makes Rotary Positional Encodings "
                        "Useful?", "ICLR"),
    "gopalakrishnan": Work("Gopalakrishnan et al.", 2025, "Decoupling the \"What\" and \"Where\" With Polar "
                               "Coordinate Positional Embeddings", "arXiv"),
    "lin": Work("Lin et al.", 2025, "Forgetting Transformer: Softmax Attention with a Forget Gate", "ICLR"),
    "zheng": Work("Zheng et al.", 2024, "DAPE: Data-Adaptive Positional Encoding for Length Extrapolation",
                      "NeurIPS"),
    "hua": Work("Hua et al.", 2025, "Fourier Position Embedding: Enhancing Attention's Periodic Extension for Length "
                    "Generalization", "ICML"),
    "golovneva": Work("Golovneva et al.", 2024, "Contextual Position Encoding: Learning to Count What's "
                          "Important", "arXiv"),
    # methods, data and the studies the readings confront
    "koehn": Work("Koehn", 2004, "Statistical Significance Tests for Machine Translation Evaluation", "EMNLP"),
    "clark": Work("Clark et al.", 2011, "Better Hypothesis Testing for Statistical Machine Translation: "
                      "Controlling for Optimizer Instability", "ACL"),
    "holm": Work("Holm", 1979, "A Simple Sequentially Rejective Multiple Test Procedure",
                     "Scandinavian Journal of Statistics"),
    "piepho": Work("Piepho", 2004, "An Algorithm for a Letter-Based Representation of All-Pairwise "
                       "Comparisons", "Journal of Computational and Graphical Statistics"),
    "kendall": Work("Kendall", 1938, "A New Measure of Rank Correlation", "Biometrika"),
    "papineni": Work("Papineni et al.", 2002, "BLEU: a Method for Automatic Evaluation of Machine Translation",
                         "ACL"),
    "post": Work("Post", 2018, "A Call for Clarity in Reporting BLEU Scores", "WMT"),
    "popovic": Work("Popović", 2015, "chrF: character n-gram F-score for automatic MT evaluation", "WMT"),
    "popovic-pp": Work("Popović", 2017, "chrF++: words helping character n-grams", "WMT"),
    "snover": Work("Snover et al.", 2006, "A Study of Translation Edit Rate with Targeted Human Annotation",
                       "AMTA"),
    "elliott": Work("Elliott et al.", 2016, "Multi30K: Multilingual English-German Image Descriptions",
                        "Workshop on Vision and Language"),
    "cettolo": Work("Cettolo et al.", 2017, "Overview of the IWSLT 2017 Evaluation Campaign", "IWSLT"),
    "kudo": Work("Kudo and Richardson", 2018, "SentencePiece: A simple and language independent subword "
                     "tokenizer and detokenizer for Neural Text Processing", "EMNLP (demonstrations)"),
    "rosendahl": Work("Rosendahl et al.", 2019, "Analysis of Positional Encodings for Neural Machine Translation",
                          "IWSLT"),
    "neishi": Work("Neishi and Yoshinaga", 2019, "On the Relation between Position Information and Sentence "
                       "Length in Neural Machine Translation", "CoNLL"),
    "newman": Work("Newman et al.", 2020, "The EOS Decision and Length Extrapolation", "BlackboxNLP"),
    "chiang": Work("Chiang and Cholak", 2022, "Overcoming a Theoretical Limitation of Self-Attention", "ACL"),
    "chen": Work("Chen et al.", 2023, "Extending Context Window of Large Language Models via Positional Interpolation",
                 "arXiv"),
    "peng": Work("Peng et al.", 2023, "YaRN: Efficient Context Window Extension of Large Language Models",
                 "arXiv (ICLR 2024)"),
    "zhou": Work("Zhou et al.", 2024, "Transformers Can Achieve Length Generalization But Not Robustly", "arXiv"),
    "varis": Work("Varis and Bojar", 2021, "Sequence Length is a Domain: Length-based Overfitting in Transformer "
                      "Models", "EMNLP"),
}


def scheme_work(paper: str) -> str:
    """The key of a scheme's paper as the registry names it (``Vaswani et al. 2017`` -> ``vaswani``:
    keys hold no digit, as readings do not)."""
    key = paper.split()[0].lower()
    if key not in WORKS:
        raise UserError(f"the scheme paper '{paper}' has no entry in reporting.references.WORKS ({key})")
    return key


def cite(keys: list[str]) -> str:
    """``(Koehn 2004; Clark et al. 2011)`` for ``keys``; an unknown key is a one-line error."""
    unknown = [k for k in keys if k not in WORKS]
    if unknown or not keys:
        raise UserError(f"cite names unknown work '{unknown[0] if unknown else ''}' (known: {', '.join(WORKS)})")
    return "(" + "; ".join(WORKS[k].cited for k in keys) + ")"


def reference_list(keys: list[str]) -> str:
    """A Markdown list of the works ``keys`` (each once), by author then year."""
    chosen = sorted(dict.fromkeys(keys), key=lambda k: (WORKS[k].authors.lower(), WORKS[k].year))
    return "".join(f"- {WORKS[k].authors} ({WORKS[k].year}). {WORKS[k].title}. *{WORKS[k].venue}*.\n" for k in chosen)
