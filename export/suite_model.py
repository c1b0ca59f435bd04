"""Every scheme as a `transformers` model: the suite's Transformer behind ``PretrainedConfig`` /
``PreTrainedModel`` classes, registered with the Auto classes when this module is imported (no
``trust_remote_code``: the code is the installed suite's).

``config.json`` (``model_type`` ``nmt-suite``) holds the run's whole config tree, its vocabulary sizes
and ids and the suite version that wrote it; a folder naming a scheme this suite does not register,
or written by a newer suite, is refused in one line. Importing this module also registers
``pipeline("nmt-translation")`` (``export.pipeline``). ``generate`` decodes one token a step through
the suite's own key/value cache (``models.transformer.DecoderCache``, carried as the output's ``cache``,
reordered for beam search by ``_reorder_cache``), as the suite's search does; ``use_cache=False``
recomputes the decoder over the whole prefix each step. Where `transformers` copies each sentence's
encoder output for its beams (or samples), the cache holds the source once per sentence (its ``group``).
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import torch
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    GenerationMixin,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

import export.pipeline  # noqa: F401  registers pipeline("nmt-translation") (transformers 5 has no translation task)
from experiment.config import from_dict, own_tree
from models.positional import SCHEMES, scheme_parts
from models.transformer import DecoderCache, EncoderOutput, Transformer
from utils.errors import UserError

MODEL_TYPE = "nmt-suite"
SUITE_VERSION = "0.5.0"  # pyproject.toml's; a folder written by a newer suite is refused


def suite_version() -> str:
    try:
        return version("pe-nmt")
    except PackageNotFoundError:
        return SUITE_VERSION


def _newer(found: str, ours: str) -> bool:
    return tuple(int(p) for p in found.split(".")[:3]) > tuple(int(p) for p in ours.split(".")[:3])


class NmtSuiteConfig(PretrainedConfig):
    """The run's config tree (``suite``), vocabulary sizes and ids, and the suite version."""

    model_type = MODEL_TYPE

    def __init__(self, suite: dict | None = None, src_vocab_size: int = 0, tgt_vocab_size: int = 0,
                 joint_vocab: bool = True, suite_version: str = SUITE_VERSION, **kwargs):
        self.suite = suite or {}
        self.src_vocab_size, self.tgt_vocab_size, self.joint_vocab = src_vocab_size, tgt_vocab_size, joint_vocab
        self.suite_version = suite_version
        kwargs.setdefault("is_encoder_decoder", True)
        kwargs.setdefault("tie_word_embeddings", bool(self.suite.get("model", {}).get("tie_embeddings", True)))
        super().__init__(**kwargs)
        self.vocab_size = tgt_vocab_size


def check_loadable(config: NmtSuiteConfig) -> None:
    """One-line ``UserError`` unless this suite can build the folder's model: its schemes registered
    here, written by this suite's version or an older one."""
    if _newer(config.suite_version, suite_version()):
        raise UserError(f"this folder was written by suite {config.suite_version}, newer than the installed "
                        f"{suite_version()}: upgrade the suite to load it")
    name = config.suite.get("model", {}).get("positional", {}).get("name", "")
    unknown = [n for n in scheme_parts(name) if n not in SCHEMES]
    if unknown:
        raise UserError(f"this folder's scheme {', '.join(unknown)} is not registered in the installed suite "
                        f"(known: {', '.join(SCHEMES)})")


class NmtSuiteModel(PreTrainedModel, GenerationMixin):
    """The suite's Transformer as a seq2seq LM: ``forward`` gives the logits of ``decoder_input_ids``
    (B, T) over ``input_ids`` (B, S) or ``encoder_outputs``; ``generate`` works with any strategy."""

    config_class = NmtSuiteConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"

    def __init__(self, config: NmtSuiteConfig):
        check_loadable(config)
        super().__init__(config)
        cfg = from_dict(config.suite)
        self.model = Transformer(cfg.model, config.src_vocab_size, config.tgt_vocab_size, config.pad_token_id,
                                 joint_vocab=config.joint_vocab)
        ties = {}
        if self.model.tgt_embed is self.model.src_embed:
            ties["model.tgt_embed.weight"] = "model.src_embed.weight"
        if cfg.model.tie_embeddings:
            ties["model.output.weight"] = "model.tgt_embed.weight" if "model.tgt_embed.weight" not in ties \
                else "model.src_embed.weight"
        self._tied_weights_keys = ties or None
        self.post_init()

    def _init_weights(self, module):  # the weights come from the run; nothing to initialise
        pass

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`transformers`' loading, then the buffers no checkpoint holds (ALiBi's slopes, rotary
        frequencies, ...) computed again: it builds the model without running their initialisation."""
        model = super().from_pretrained(*args, **kwargs)
        model.restore_buffers()
        return model

    @torch.no_grad()
    def restore_buffers(self) -> None:
        """The non-persistent buffers of the suite's model, as a freshly built one computes them."""
        config = self.config
        fresh = Transformer(from_dict(config.suite).model, config.src_vocab_size, config.tgt_vocab_size,
                            config.pad_token_id, joint_vocab=config.joint_vocab)
        saved = set(self.model.state_dict())
        mine = dict(self.model.named_buffers())
        for name, buffer in fresh.named_buffers():
            if name not in saved and name in mine:
                owner, _, leaf = name.rpartition(".")
                self.model.get_submodule(owner).register_buffer(leaf, buffer.to(mine[name].device), persistent=False)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """No `transformers` cache object: the suite's own travels in the outputs (module doc)."""
        return False

    def get_encoder(self):
        return _Encoder(self)

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, encoder_outputs=None,
                labels=None, cache: DecoderCache | None = None, use_cache: bool | None = None,
                memory_group: int = 1, **kwargs) -> Seq2SeqLMOutput:
        """The logits (B, T, V) of ``decoder_input_ids`` (B, T): the whole target from position 0, or,
        with ``cache`` (the ``cache`` of the previous call's output), the T positions after the
        ``cache.length`` it holds. ``use_cache``: return the grown cache as the output's ``cache``.
        ``memory_group`` G: the encoder rows come in runs of G copies of one sentence (``generate``'s
        beams), held once each."""
        states = None
        if cache is None:
            if encoder_outputs is None:
                encoder_outputs = self.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
            states = encoder_outputs[0]
            padding = (attention_mask == 0) if attention_mask is not None else torch.zeros(
                states.shape[:2], dtype=torch.bool, device=states.device)
            cache = self.model.start_decoding(*_grouped(EncoderOutput(states, padding), memory_group))
        out = self.model.decode(decoder_input_ids, cache)
        return Seq2SeqLMOutput(logits=out.logits, cache=out.cache if use_cache else None,
                               encoder_last_hidden_state=states)

    def prepare_inputs_for_generation(self, decoder_input_ids, encoder_outputs=None, attention_mask=None,
                                      cache: DecoderCache | None = None, use_cache: bool | None = None,
                                      memory_group: int = 1, **kwargs):
        """With a cache, only the tokens it has not seen (the last one, in ``generate``)."""
        if cache is not None:
            decoder_input_ids = decoder_input_ids[:, cache.length:]
        return {"decoder_input_ids": decoder_input_ids, "encoder_outputs": encoder_outputs,
                "attention_mask": attention_mask, "cache": cache, "use_cache": use_cache,
                "memory_group": memory_group}

    def _expand_inputs_for_generation(self, expand_size: int = 1, is_encoder_decoder: bool = False,
                                      input_ids=None, **model_kwargs):
        """`transformers`' copies of each sentence's rows for its beams (or samples), and how many there
        are (``memory_group``), so that the cache holds each source once."""
        input_ids, model_kwargs = super()._expand_inputs_for_generation(expand_size, is_encoder_decoder, input_ids,
                                                                        **model_kwargs)
        return input_ids, {**model_kwargs, "memory_group": expand_size}

    def _reorder_cache(self, cache: DecoderCache, beam_idx: torch.Tensor) -> DecoderCache:
        """Beam search's surviving hypotheses (B * beams,): each stays among its sentence's rows, so a
        grouped cache keeps its sources as they are (``DecoderCache.reorder``)."""
        return cache.reorder(beam_idx)


def _grouped(memory: EncoderOutput, group: int) -> tuple[EncoderOutput, int]:
    """``memory`` (B, S, D) as one row per sentence and ``group``, where its rows are runs of ``group``
    copies; as it is, group 1, where they are not (a layout `transformers` did not make)."""
    if group <= 1 or memory.states.size(0) % group:
        return memory, 1
    once = EncoderOutput(memory.states[::group], memory.padding_mask[::group])
    if not (torch.equal(once.states.repeat_interleave(group, 0), memory.states)
            and torch.equal(once.padding_mask.repeat_interleave(group, 0), memory.padding_mask)):
        return memory, 1
    return once, group


class _Encoder(torch.nn.Module):
    """``get_encoder()``: the suite's encoder as `transformers` calls it (states as last_hidden_state)."""

    def __init__(self, owner: NmtSuiteModel):
        super().__init__()
        self.owner = [owner]  # not a submodule: its weights are the model's

    def forward(self, input_ids=None, attention_mask=None, **kwargs) -> BaseModelOutput:
        return BaseModelOutput(last_hidden_state=self.owner[0].model.encode(input_ids).states)


AutoConfig.register(MODEL_TYPE, NmtSuiteConfig)
AutoModelForSeq2SeqLM.register(NmtSuiteConfig, NmtSuiteModel)


def suite_config(run) -> NmtSuiteConfig:
    """The config.json of ``run`` (a ``TrainedRun``) in the suite's form."""
    tok = run.tokenizer
    return NmtSuiteConfig(suite=own_tree(run.cfg), src_vocab_size=tok.src_vocab_size, tgt_vocab_size=tok.tgt_vocab_size,
                          joint_vocab=tok.joint, suite_version=suite_version(), pad_token_id=tok.pad_id,
                          bos_token_id=tok.bos_id, eos_token_id=tok.eos_id, decoder_start_token_id=tok.bos_id)


def suite_model(run) -> NmtSuiteModel:
    """``run``'s model in the suite's `transformers` classes (eval mode, its weights)."""
    model = NmtSuiteModel(suite_config(run))
    model.model.load_state_dict(run.model.state_dict())
    return model.eval()
