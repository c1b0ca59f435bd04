"""``pipeline("nmt-translation", model=OUT)``: `transformers` 4's translation pipeline, which version 5
removed (it refuses the task name ``translation`` itself, pointing to chat models).

Importing this module (``export.suite_model`` does) registers the task with `transformers`'
pipeline registry: a sentence (or a list) in, ``{"translation_text": ...}`` per sentence out,
as `transformers` 4's translation pipeline returned; ``generate``'s options (``num_beams``,
``max_new_tokens``, ...) pass through, the folder's ``generation_config.json`` gives the rest. It
serves every exported folder, native or in the suite's classes.
"""
from __future__ import annotations

from typing import Any

from transformers import AutoModelForSeq2SeqLM, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

TASK = "nmt-translation"  # "translation" is refused by name in transformers 5


class TranslationPipeline(Pipeline):
    """One sentence per call of the model: tokenized (eos appended), ``generate``, decoded without
    special tokens."""

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(self, **generate_kwargs: Any) -> tuple[dict, dict, dict]:
        return {}, generate_kwargs, {}

    def preprocess(self, text: str) -> dict:
        return self.tokenizer(text, return_tensors="pt")

    def _forward(self, inputs: dict, **generate_kwargs: Any) -> dict:
        return {"output_ids": self.model.generate(**inputs, **generate_kwargs)}

    def postprocess(self, outputs: dict) -> dict[str, str]:
        return {"translation_text": self.tokenizer.decode(outputs["output_ids"][0], skip_special_tokens=True)}


if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
    PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM)
