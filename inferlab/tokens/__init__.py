"""How text becomes tokens: the tokenizers (``tokenizers``, with the SentencePiece reader
``sentencepiece_bpe`` and the Hugging Face export ``hf_tokenizer``) and the token counts of
the book's texts (``token_counts``). The encodings ship in ``tiktoken_cache`` and
``tokenizer_data``.
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
